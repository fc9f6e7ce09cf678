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
from typing import NamedTuple

import numpy as np

from bpparse.conll import CONLLU_FIELDS, FEATS_COL, UPOS_COL, XPOS_COL, with_tags
from bpparse.tagger import tag, train_tagger


class UposBeliefs(NamedTuple):
    """What a sentence's predicted UPOS came with: ``prob`` float64 (n+1,) p(UPOS_i = the tag
    written) and ``dist`` float64 (n+1, g) p(UPOS_i = t) over the tagger's UPOS tags
    (`Tagger.upos_tags` order); NaN (row) where the input's own UPOS was kept; entry / row 0
    unused."""

    prob: np.ndarray
    dist: np.ndarray


def missing(tagger, sentence):
    """{column: list of n+1 bools (entry 0 False)}: the values of the columns ``tagger`` predicts
    that ``sentence`` lacks (see the module docstring)."""
    columns = sentence.word_columns()
    upos = [False] + [v == "_" for v in columns[UPOS_COL]]
    blank = all(x == "_" and f == "_" for x, f in zip(columns[XPOS_COL], columns[FEATS_COL]))
    out = {}
    for name in tagger.columns:
        out[name] = upos if name == "upos" else [False] + [
            blank or (u and v == "_") for u, v in zip(upos[1:], columns[CONLLU_FIELDS.index(name)])]
    return out


def needs_tags(tagger, sentence):
    """True when ``sentence`` lacks a value of a column ``tagger`` predicts."""
    return any(any(m) for m in missing(tagger, sentence).values())


def fill_tags(tagger, sentences, retag=False):
    """Tag the sentences that need it; returns (sentences, beliefs): the sentences with their
    missing (or, with ``retag``, all) predicted columns filled in, and per sentence None (nothing
    predicted) or the `UposBeliefs` of the UPOS chain's marginals."""
    sentences = list(sentences)
    todo = [k for k, s in enumerate(sentences) if retag or needs_tags(tagger, s)]
    beliefs = [None] * len(sentences)
    if not todo:
        return sentences, beliefs
    index = {t: k for k, t in enumerate(tagger.upos_tags)}
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
        upos = new.get("upos")
        dist = np.full((s.n + 1, len(index)), np.nan)
        prob = np.full(s.n + 1, np.nan)
        for i in range(1, s.n + 1):
            if upos[i] is not None:
                dist[i] = tagged.upos_prob[i - 1]
                prob[i] = dist[i, index[upos[i]]]
        beliefs[k] = UposBeliefs(prob, dist)
        sentences[k] = with_tags(s, **new)
    return sentences, beliefs


def jackknife_taggers(sentences, folds, say=None, **train_options):
    """Yield (held, tagger) for k = 1..``folds``: fold k (sentences k, k + folds, ...) and a
    tagger trained on the other folds (``train_options`` as for `bpparse.tagger.train_tagger`)."""
    sentences = list(sentences)
    for k in range(folds):
        rest = [s for j, s in enumerate(sentences) if j % folds != k]
        if say:
            say(f"jackknife: tagger {k + 1}/{folds} on {len(rest)} sentences")
        yield sentences[k::folds], train_tagger(rest, **train_options)


def jackknife_tags(sentences, folds, say=None, **train_options):
    """The sentences with every predicted column replaced by the tags of a tagger that did not see
    them (`jackknife_taggers`). This is what the parser must be trained on to read predicted tags
    at parse time."""
    sentences = list(sentences)
    out = list(sentences)
    for k, (held, tagger) in enumerate(jackknife_taggers(sentences, folds, say, **train_options)):
        out[k::folds] = fill_tags(tagger, held, retag=True)[0]
    return out


def strip_tags(sentence):
    """A copy of ``sentence`` with UPOS, XPOS and FEATS set to ``_`` (untagged input)."""
    blank = [None] + ["_"] * sentence.n
    return with_tags(sentence, blank, blank, blank)


def apply_joint_tags(tagger, raw, filled, upos, dist, retag=False):
    """The sentence ``filled`` (``raw`` after `fill_tags`) with the UPOS of joint inference
    (``upos``: n tag ids; ``dist`` float64 (n, g) the joint tag beliefs) where the tagger predicts
    UPOS (all words with ``retag``, else those ``raw`` lacks), XPOS / FEATS re-predicted by the
    cascade from those UPOS where they are predicted. Returns (sentence, `UposBeliefs`)."""
    names = tagger.upos_tags
    lacks = {name: [True] * (raw.n + 1) for name in tagger.columns} if retag else missing(tagger, raw)
    new_upos = [None] + [names[u] if m else None for m, u in zip(lacks["upos"][1:], upos)]
    full = np.full((raw.n + 1, len(names)), np.nan)
    prob = np.full(raw.n + 1, np.nan)
    for i in range(1, raw.n + 1):
        if lacks["upos"][i]:
            full[i] = dist[i - 1]
            prob[i] = dist[i - 1, upos[i - 1]]
    beliefs = UposBeliefs(prob, full)
    if all(n is None or n == old for n, old in zip(new_upos[1:], filled.upos[1:])):
        return filled, beliefs
    current = [n if n is not None else old for n, old in zip(new_upos[1:], filled.upos[1:])]
    cascade = tag(tagger, [filled], marginals=False, upos=[current])[0]
    new = {"upos": new_upos}
    for name in ("xpos", "feats"):
        predicted = getattr(cascade, name)
        if predicted is not None:
            new[name] = [None] + [p if m else None for m, p in zip(lacks[name][1:], predicted)]
    return with_tags(filled, **new), beliefs
