"""Second-stage punctuation attachment: each punctuation word's head chosen from the decoded tree.

UD attaches a comma, a quote or a bracket to the head of the phrase or clause it delimits, without
crossing that phrase's arcs; an arc-factored score cannot see phrases, and punctuation is where
bpparse lost most to UDPipe 1 on Portuguese Bosque (a quarter of its PUNCT words attached wrong).
After the parser is trained, `train_punct` fits an averaged perceptron over the tree-reading
templates of `features.punct` on the gold trees of the training data; parsing then re-attaches
each punctuation word to the head that maximises log mu[h, p] + scale * w . f (`attach_punct`,
called by the parse kernels after the labeler). ``scale`` is chosen on dev from the parser's own
dev trees and marginals; the stage is dropped when no scale beats the parser's own punctuation
heads on dev (it must never cost accuracy). Without dev, scale = `DEFAULT_SCALE`, the best on
Bosque and EWT dev (docs/experiments.md).
"""
import time
from typing import NamedTuple

import numpy as np

from bpparse.encode import LOWER, UPOS, pack
from bpparse.features.attributes import sentence_attributes
from bpparse.features.punct import (
    PunctAttacher,
    attach_punct,
    no_punct_stage,
    punct_mask,
    punct_train_pass,
)
from bpparse.features.store import (
    SparseTable,
    delta_code,
    delta_decode,
    sparse_table,
    sparse_table_of,
)

MAX_HASH_BITS = 24
DEFAULT_SCALE = 0.1
SCALES = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0)
PUNCT = "PUNCT"
# marks that come in pairs (opening, closing): UD attaches both to the same word
PAIRS = (("(", ")"), ("[", "]"), ("{", "}"), ("«", "»"), ("“", "”"), ("‘", "’"), ('"', '"'),
         ("'", "'"))


class PunctStage(NamedTuple):
    """A trained punctuation stage: ``table`` its averaged-perceptron weights (float16 precision) as
    a `features.store.SparseTable` of 2^hash_bits slots, ``scale`` their weight against the
    parser's log-marginals, ``info`` how it was trained (JSON-able)."""

    hash_bits: int
    table: SparseTable
    scale: float
    info: dict

    def record(self, vocabs):
        """The `features.punct.PunctAttacher` the kernels read, for a model's vocabularies."""
        return PunctAttacher(*self.table, float(self.scale), punct_tag(vocabs), len(vocabs.labels),
                             punct_pairs(vocabs))


def punct_tag(vocabs):
    """The UPOS id of PUNCT in ``vocabs`` (-1: the model has never seen it)."""
    return vocabs[UPOS].index.get(PUNCT, -1)


def punct_pairs(vocabs):
    """int64 (k, 2): the lower-cased form ids of the `PAIRS` whose marks ``vocabs`` knows."""
    index = vocabs[LOWER].index
    known = [(index[a], index[b]) for a, b in PAIRS if a in index and b in index]
    return np.array(known, dtype=np.int64).reshape(-1, 2)


def punct_record(stage, vocabs):
    """The `PunctAttacher` of ``stage`` (None: no stage, the parser's heads stay)."""
    return no_punct_stage(len(vocabs.labels)) if stage is None else stage.record(vocabs)


def punct_accuracy(model, record, encoded, parsed):
    """Percent of the punctuation words of ``encoded`` (gold trees) whose head is right in the
    trees ``parsed`` ((heads, labels, mu) per sentence) after ``model``'s `PunctAttacher`
    ``record`` (None: as parsed), and how many there are."""
    tag = punct_tag(model.vocabs)
    right = total = 0
    for e, (heads, labels, mu) in zip(encoded, parsed):
        attrs = sentence_attributes(e.tokens, False)
        is_punct = punct_mask(attrs, heads.shape[0], tag)
        if not is_punct.any():
            continue
        heads = np.array(heads, dtype=np.int64)
        if record is not None:
            attach_punct(attrs, record, mu, heads, np.asarray(labels, dtype=np.int64),
                         np.zeros(heads.shape[0]), model.projective)
        right += int((heads[is_punct] == np.asarray(e.heads)[is_punct]).sum())
        total += int(is_punct.sum())
    return 100.0 * right / max(total, 1), total


def fit_perceptron(run_pass, n_sentences, hash_bits, epochs, seed, name, say):
    """Averaged-perceptron weights, a `SparseTable` of 2^hash_bits slots at float16 precision,
    from ``epochs`` calls of ``run_pass(order, weights, acc, step) -> (step, mistakes, words)``
    (a stage's train pass over the sentences ``order``, a seeded permutation of
    ``n_sentences``; averaged weights = weights - acc / step); ``name`` begins each epoch's
    progress line."""
    weights, acc = np.zeros(1 << hash_bits), np.zeros(1 << hash_bits)
    step = 0.0
    rng = np.random.default_rng(seed)
    for epoch in range(1, epochs + 1):
        order = rng.permutation(n_sentences).astype(np.int64)
        step, mistakes, words = run_pass(order, weights, acc, step)
        say(f"{name} epoch {epoch}: {100.0 * (1 - mistakes / max(words, 1)):.2f}% of {words} "
            f"training words right on gold trees")
    return sparse_table_of((weights - acc / max(step, 1.0)).astype(np.float16))


def choose_scale(accuracy, scales):
    """(best accuracy, its scale) over ``scales`` (ties: the smaller scale); ``accuracy(scale)``
    scores the dev trees with the stage at that scale."""
    return max(((accuracy(s), s) for s in scales), key=lambda x: (x[0], -x[1]))


def train_punct(model, encoded, dev=None, epochs=5, hash_bits=18, seed=0, say=None):
    """A `PunctStage` for ``model`` trained on the gold trees of ``encoded`` (`EncodedSentence`
    list), ``epochs`` passes in a seeded order, or None when the training data has no PUNCT words
    or (with ``dev``) when it does not improve the parser's punctuation heads on dev. ``dev``:
    (encoded gold dev sentences, the parser's dev trees as (heads, labels, mu) per sentence, the
    punctuation stage off)."""
    say = say or (lambda msg: None)
    if not 8 <= hash_bits <= MAX_HASH_BITS:
        raise ValueError(f"punct hash_bits must be in 8..{MAX_HASH_BITS}, not {hash_bits}")
    tag = punct_tag(model.vocabs)
    if tag < 0:
        say("punctuation stage: no PUNCT words in the training data, none trained")
        return None
    train = pack(encoded, [np.asarray(e.heads, dtype=np.int64) for e in encoded])
    labels = train.labels.astype(np.int64)
    n_labels, pairs = len(model.labels), punct_pairs(model.vocabs)
    t0 = time.time()
    averaged = fit_perceptron(
        lambda order, weights, acc, step: punct_train_pass(train, labels, order, tag, n_labels,
                                                           pairs, weights, acc, step),
        len(encoded), hash_bits, epochs, seed, "punctuation stage", say)
    info = {"epochs": epochs, "hash_bits": hash_bits, "nonzero": int(averaged.values.shape[0])}
    scale = DEFAULT_SCALE
    if dev is not None:
        dev_encoded, parsed = dev
        base, words = punct_accuracy(model, None, dev_encoded, parsed)
        best, scale = choose_scale(lambda s: punct_accuracy(model, PunctStage(
            hash_bits, averaged, s, {}).record(model.vocabs), dev_encoded, parsed)[0], SCALES)
        say(f"punctuation stage: dev punctuation heads {base:.2f}% by the parser, {best:.2f}% with "
            f"the stage (scale {scale}; {words} words)")
        if best <= base:
            say("punctuation stage: no better than the parser on dev, not kept")
            return None
        info.update(dev_parser=round(base, 2), dev_stage=round(best, 2), dev_words=words)
    info["seconds"] = round(time.time() - t0, 1)
    return PunctStage(hash_bits, averaged, float(scale), info)


def punct_to_arrays(stage):
    """(header dict, {name: array}) of a stage as the model file stores it: the nonzero weights as
    delta-coded positions and float16 values."""
    meta = dict(stage.info, hash_bits=stage.hash_bits, scale=stage.scale)
    return meta, {"deltas": delta_code(stage.table.positions()),
                  "values": stage.table.values.astype(np.float16)}


def punct_from_arrays(meta, deltas, values):
    """The `PunctStage` of `punct_to_arrays`' output; raises ValueError where sizes do not fit."""
    bits = int(meta["hash_bits"])
    scale = float(meta["scale"])
    if not 8 <= bits <= MAX_HASH_BITS or not np.isfinite(scale):
        raise ValueError(f"punctuation stage of {bits} hash bits and scale {scale} is not valid")
    if deltas.shape != values.shape or deltas.ndim != 1 or deltas.shape[0] > 1 << bits:
        raise ValueError("punctuation stage payload arrays do not fit its table")
    table = sparse_table(delta_decode(deltas, 1 << bits), values, 1 << bits)
    info = {k: v for k, v in meta.items() if k not in ("hash_bits", "scale")}
    return PunctStage(bits, table, scale, info)
