"""Training the joint model's TAGLINK weights (`bpparse.joint`, issue 13): jackknifed tags and
chain potentials for the training sentences, online AdaGrad on the joint conditional likelihood
with BP's gradients (`joint.taglink_train_pass`), the epoch chosen by joint parsing of stripped dev
sentences."""
import time

import numpy as np

from bpparse.joint import JointCorpus, taglink_train_pass
from bpparse.parse import parse_sentences
from bpparse.tagger import new_taglink, upos_potentials
from bpparse.tagging import fill_tags, jackknife_taggers, strip_tags


def joint_corpus(model, sentences, gold_upos, potentials, trans, fold):
    """Pack training sentences (carrying the tags the parser will read, and their gold trees) into
    a `JointCorpus`: ``gold_upos`` per sentence a list of n gold UPOS strings, ``potentials`` per
    sentence its chain's unary float64 (n, g), ``trans`` the K fold taggers' transitions,
    ``fold`` per sentence which of them."""
    encoded = [model.vocabs.encode(s) for s in sentences]
    sizes = np.array([e.tokens.shape[1] for e in encoded], dtype=np.int64)
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    total = int(offsets[-1])
    tokens = np.ascontiguousarray(np.concatenate([e.tokens for e in encoded], axis=1))
    heads = np.concatenate([np.asarray(e.heads, dtype=np.int64) for e in encoded])
    index = {t: k for k, t in enumerate(model.tagger.upos_tags)}
    unary = np.zeros((total, len(index)))
    gold = np.full(total, -1, dtype=np.int64)
    for s, (tags, pot) in enumerate(zip(gold_upos, potentials, strict=True)):
        a = offsets[s] + 1
        unary[a:a + len(tags)] = pot
        gold[a:a + len(tags)] = [index.get(t, -1) for t in tags]
    return JointCorpus(tokens, offsets, heads, unary, np.ascontiguousarray(np.stack(trans)),
                       np.asarray(fold, dtype=np.int64), gold)


def train_taglink(model, sentences, dev=None, folds=4, epochs=3, hash_bits=20, lr=0.1, seed=1,
                  say=print, tagger_options=None, **taglink_options):
    """Fit a `TagLink` table for ``model`` (parser + tagger, both kept fixed) on gold
    ``sentences`` (conll.Sentence with trees and UPOS). The sentences are tagged by ``folds``
    jackknifed taggers (`tagging.jackknife_taggers`, ``tagger_options`` as for
    `tagger.train_tagger`), which also give their chain potentials. Returns the TagLink with the
    averaged weights of the best dev epoch (UAS + UPOS accuracy of joint parsing of ``dev`` with
    its tags stripped), or of the last epoch without dev; float16-rounded, as stored."""
    t0 = time.time()
    tagged, gold_upos, potentials, trans, fold = [], [], [], [], []
    for k, (held, tagger_k) in enumerate(jackknife_taggers(sentences, folds, say,
                                                           **(tagger_options or {}))):
        pots, tr = upos_potentials(tagger_k, held)
        tagged.extend(fill_tags(tagger_k, held, retag=True)[0])
        gold_upos.extend(list(s.upos[1:]) for s in held)
        potentials.extend(pots)
        trans.append(tr)
        fold.extend([k] * len(held))
    say(f"joint: sentences tagged by {folds} jackknifed taggers in {time.time() - t0:.0f} s")
    corpus = joint_corpus(model, tagged, gold_upos, potentials, trans, fold)
    settings = model.config.inference_settings("parse")
    taglink = new_taglink(hash_bits, **taglink_options)
    g2 = np.zeros_like(taglink.table)
    u = np.zeros_like(taglink.table)
    c = 1.0
    rng = np.random.default_rng(seed)
    best, best_score = None, -np.inf
    for ep in range(epochs):
        t1 = time.time()
        order = rng.permutation(len(tagged)).astype(np.int64)
        c, obj = taglink_train_pass(corpus, model.weights, settings, taglink, order, g2, u, c, lr)
        avg = taglink._replace(table=(taglink.table - u / c).astype(np.float16).astype(np.float64))
        msg = f"joint epoch {ep + 1}/{epochs}: objective {obj:.1f} ({time.time() - t1:.0f} s)"
        if dev is not None:
            scores = joint_accuracy(model, avg, dev)
            msg += f"; dev, tags stripped: UAS {scores['uas']:.2f}, UPOS {scores['upos']:.2f}"
            if scores["uas"] + scores["upos"] > best_score:
                best, best_score = avg, scores["uas"] + scores["upos"]
        else:
            best = avg
        say(msg)
    return best


def joint_accuracy(model, taglink, sentences):
    """UAS and UPOS accuracy (percent, punctuation counted) of joint parsing of gold ``sentences``
    with their tags stripped (`bpparse.tagging.strip_tags`), by ``model`` with ``taglink``."""
    saved = model.taglink
    model.taglink = taglink
    try:
        parsed = parse_sentences(model, [strip_tags(s) for s in sentences], tagging="joint")
    finally:
        model.taglink = saved
    words = heads = tags = 0
    for gold, p in zip(sentences, parsed, strict=True):
        words += gold.n
        heads += sum(int(p.heads[i]) == gold.heads[i] for i in range(1, gold.n + 1))
        tags += sum(p.sentence.upos[i] == gold.upos[i] for i in range(1, gold.n + 1))
    return {"uas": 100.0 * heads / max(words, 1), "upos": 100.0 * tags / max(words, 1)}
