"""Second-stage re-attachment: each non-punctuation word's head chosen again from the labelled tree.

BP's factors are unlabelled and at most second order, so the parser cannot see that a verb already
has a subject or that a noun has its own preposition. After the parser and the labeler,
`train_reattach` fits an averaged perceptron over the templates of `features.reattach` on the gold
trees of the training data (each word choosing among the K heads the parser's marginals rank
highest for it on the training set, and its gold head); parsing then re-attaches each word to the
candidate maximising log mu[h, m] + scale * w . f (`reattach_tree`, called by the parse kernels
after the labeler, before the punctuation stage). ``scale`` is chosen on dev from the parser's own
dev trees and marginals; the stage is dropped when no scale beats the parser's heads on dev.
"""
import time
from typing import NamedTuple

import numpy as np

from bpparse.encode import UPOS, pack
from bpparse.features.attributes import sentence_attributes
from bpparse.features.reattach import (
    VERSION,
    Reattacher,
    no_reattach_stage,
    rank_heads,
    reattach_train_pass,
    reattach_tree,
)
from bpparse.features.store import SparseTable
from bpparse.punct import choose_scale, fit_perceptron, punct_from_arrays, punct_tag

DEFAULT_SCALE = 0.1
SCALES = (0.02, 0.05, 0.1, 0.2, 0.3, 0.5)
VERB_TAGS = ("VERB", "AUX")
EXTRA_RANKED = 4  # training heads ranked beyond K: room for those below the word in the gold tree


class ReattachStage(NamedTuple):
    """A trained re-attachment stage: ``table`` its averaged-perceptron weights (float16
    precision) as a `features.store.SparseTable` of 2^hash_bits slots, ``scale`` their weight
    against the parser's log-marginals, ``info`` how it was trained (JSON-able;
    ``info["candidates"]`` is K, ``info["version"]`` the templates,
    `features.reattach.VERSION`; absent in files of the first stage: 1)."""

    hash_bits: int
    table: SparseTable
    scale: float
    info: dict

    def record(self, vocabs):
        """The `features.reattach.Reattacher` the kernels read, for a model's vocabularies."""
        return Reattacher(*self.table, float(self.scale), int(self.info["candidates"]),
                          punct_tag(vocabs), verb_tags(vocabs), int(self.info.get("version", 1)))


def verb_tags(vocabs):
    """int64: the UPOS ids of `VERB_TAGS` that ``vocabs`` knows."""
    index = vocabs[UPOS].index
    return np.array([index[t] for t in VERB_TAGS if t in index], dtype=np.int64)


def reattach_record(stage, vocabs):
    """The `Reattacher` of ``stage`` (None: no stage, the parser's heads stay)."""
    return no_reattach_stage() if stage is None else stage.record(vocabs)


def heads_accuracy(model, encoded, parsed, record=None):
    """UAS (percent, every word) of the trees ``parsed`` ((heads, labels, mu) per sentence) against
    the gold trees of ``encoded``, after the `Reattacher` ``record`` (None: as parsed) with
    ``model``'s labeler."""
    labeler = model.labeler_record
    right = total = 0
    for e, (heads, labels, mu) in zip(encoded, parsed):
        heads = np.array(heads, dtype=np.int64)
        if record is not None:
            reattach_tree(sentence_attributes(e.tokens, model.fine_tags), record, labeler, mu,
                          heads, np.asarray(labels, dtype=np.int64), np.zeros(heads.shape[0]),
                          model.projective)
        gold = np.asarray(e.heads)
        known = gold[1:] >= 0
        right += int((heads[1:] == gold[1:])[known].sum())
        total += int(known.sum())
    return 100.0 * right / max(total, 1)


def train_reattach(model, encoded, marginals, dev=None, epochs=3, hash_bits=20, candidates=4,
                   seed=0, say=None):
    """A `ReattachStage` for ``model`` trained on the gold trees of ``encoded`` (`EncodedSentence`
    list) with ``marginals`` (the parser's arc marginals float64 (n+1, n+1) per sentence: they
    rank each word's candidate heads), ``epochs`` passes in a seeded order; None when (with
    ``dev``) it does not improve the parser's dev UAS. ``dev``: (encoded gold dev sentences, the
    parser's dev trees as (heads, labels, mu) per sentence, this stage off)."""
    say = say or (lambda msg: None)
    if not 8 <= hash_bits <= 24 or not 1 <= candidates <= 16:
        raise ValueError(f"reattach hash_bits must be in 8..24 and candidates in 1..16, not "
                         f"{hash_bits} and {candidates}")
    train = pack(encoded, [np.asarray(e.heads, dtype=np.int64) for e in encoded])
    ranked = np.concatenate([rank_heads(mu, candidates + EXTRA_RANKED) for mu in marginals])
    labels = train.labels.astype(np.int64)
    record = no_reattach_stage()._replace(candidates=candidates, punct_tag=punct_tag(model.vocabs),
                                          verb_tags=verb_tags(model.vocabs))
    labeler = model.labeler_record
    t0 = time.time()
    averaged = fit_perceptron(
        lambda order, weights, acc, step: reattach_train_pass(
            train, labels, ranked, order, model.fine_tags, record, labeler, weights, acc, step),
        len(encoded), hash_bits, epochs, seed, "re-attachment stage", say)
    info = {"epochs": epochs, "candidates": candidates, "version": VERSION,
            "nonzero": int(averaged.values.shape[0])}
    scale = DEFAULT_SCALE
    if dev is not None:
        dev_encoded, parsed = dev
        base = heads_accuracy(model, dev_encoded, parsed)
        best, scale = choose_scale(lambda s: heads_accuracy(
            model, dev_encoded, parsed, ReattachStage(hash_bits, averaged, s, info).record(
                model.vocabs)), SCALES)
        say(f"re-attachment stage: dev UAS {base:.2f} by the parser, {best:.2f} with the stage "
            f"(scale {scale})")
        if best <= base:
            say("re-attachment stage: no better than the parser on dev, not kept")
            return None
        info.update(dev_parser=round(base, 2), dev_stage=round(best, 2))
    info["seconds"] = round(time.time() - t0, 1)
    return ReattachStage(hash_bits, averaged, float(scale), info)


def reattach_from_arrays(meta, deltas, values):
    """The `ReattachStage` stored by `punct.punct_to_arrays` (the two stages are stored alike);
    ValueError where it does not fit."""
    candidates = int(meta.get("candidates", 0))
    if not 1 <= candidates <= 16:
        raise ValueError(f"re-attachment stage of {candidates} candidates is not valid")
    if int(meta.get("version", 1)) not in (1, VERSION):
        raise ValueError(f"re-attachment stage templates version {meta['version']} is not known "
                         f"to this bpparse (1..{VERSION}): a newer bpparse wrote it")
    stage = punct_from_arrays(meta, deltas, values)
    return ReattachStage(*stage)

