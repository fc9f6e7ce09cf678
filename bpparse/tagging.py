"""Tags for the parser: fill in what the input lacks with a model's tagger, and jackknifed tags for
training a parser that will read predicted tags.

What is missing: a word's UPOS when it is ``_`` (UD has no empty UPOS); its XPOS and FEATS when
they are ``_`` and its UPOS is missing too; and XPOS and FEATS of a whole sentence when both are
``_`` for every word (``_`` is also a real FEATS value, "no features", and the XPOS of treebanks
without XPOS, so a tagged sentence that happens to have no features is left alone). A sentence is
tagged when something is missing (or always, with ``retag``), and only what is missing is replaced
unless ``retag``: tags the user gave are kept, so mixed files (some sentences tagged, some not, or
only UPOS given) work.
"""
import numpy as np

from bpparse.conll import with_tags
from bpparse.tagger import tag, train_tagger


def missing(tagger, sentence):
    """{column: list of n+1 bools (entry 0 False)}: the values of the columns ``tagger`` predicts
    that ``sentence`` lacks (see the module docstring)."""
    upos = [False] + [v == "_" for v in sentence.upos[1:]]
    blank = all(x == "_" and f == "_" for x, f in zip(sentence.xpos[1:], sentence.feats[1:]))
    out = {}
    for name in tagger.columns:
        values = getattr(sentence, name)
        out[name] = upos if name == "upos" else [False] + [
            blank or (u and v == "_") for u, v in zip(upos[1:], values[1:])]
    return out


def needs_tags(tagger, sentence):
    """True when ``sentence`` lacks a value of a column ``tagger`` predicts."""
    return any(any(m) for m in missing(tagger, sentence).values())


def fill_tags(tagger, sentences, retag=False):
    """Tag the sentences that need it; returns (sentences, upos_probs): the sentences with their
    missing (or, with ``retag``, all) predicted columns filled in, and per sentence None (nothing
    predicted) or a float64 (n+1,) array of p(UPOS_i = the predicted tag) from the UPOS chain's
    marginals, NaN where the input's own UPOS was kept (entry 0 unused)."""
    sentences = list(sentences)
    todo = [k for k, s in enumerate(sentences) if retag or needs_tags(tagger, s)]
    probs = [None] * len(sentences)
    if not todo:
        return sentences, probs
    upos_tags = tagger.upos_tags
    index = {t: k for k, t in enumerate(upos_tags)}
    for k, tagged in zip(todo, tag(tagger, [sentences[k] for k in todo], marginals=True), strict=True):
        s = sentences[k]
        lacks = None if retag else missing(tagger, s)
        new = {}
        for name in ("upos", "xpos", "feats"):
            predicted = getattr(tagged, name)
            if predicted is None:
                continue
            if retag:
                new[name] = [None, *predicted]
            else:
                new[name] = [None] + [p if m else None for m, p in zip(lacks[name][1:], predicted)]
        p = np.full(s.n + 1, np.nan)
        upos = new.get("upos")
        for i in range(1, s.n + 1):
            if upos[i] is not None:
                p[i] = tagged.upos_prob[i - 1, index[upos[i]]]
        probs[k] = p
        sentences[k] = with_tags(s, **new)
    return sentences, probs


def jackknife_tags(sentences, folds, say=None, **train_options):
    """The sentences with every predicted column replaced by the tags of a tagger that did not see
    them: fold k (sentences k, k + folds, ...) is tagged by a tagger trained on the other folds
    (``train_options`` as for `bpparse.tagger.train_tagger`). This is what the parser must be
    trained on to read predicted tags at parse time."""
    sentences = list(sentences)
    out = list(sentences)
    for k in range(folds):
        held = list(range(k, len(sentences), folds))
        rest = [s for j, s in enumerate(sentences) if j % folds != k]
        if say:
            say(f"jackknife: tagger {k + 1}/{folds} on {len(rest)} sentences")
        tagger = train_tagger(rest, **train_options)
        tagged, _ = fill_tags(tagger, [sentences[j] for j in held], retag=True)
        for j, s in zip(held, tagged, strict=True):
            out[j] = s
    return out
