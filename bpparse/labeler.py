"""Second-stage labeler: each arc's label chosen from the decoded tree around it.

The parser scores labels inside its arcs (marginalised, docs/design.md §4), so its labels cannot
see the rest of the tree. After the parser is trained, `train_labeler` fits a log-linear model
p(r | h -> m, tree) on the gold trees of the training data: the parser's label templates plus the
tree-context templates of `features.context` (m's dependents, h's other dependents, h's head),
with AdaGrad and weight averaging (the epoch best on dev label accuracy is kept when there is a
dev set). Parsing then labels each decoded tree with it (`features.relabel_tree`, called by the
parse kernels); ``LabelProb`` is its probability. On Bosque dev (second-order parser) it lifts the
labels of correctly attached words from 94.0% to about 97% (docs/experiments.md).

Its weights are a (2^hash_bits, R) table of which training sets about one entry in twenty
(``min_update``): a loaded labeler keeps only those, by row (float32 values, `ContextLabeler`),
and the file stores them at float16 precision; the trained table is rounded the same way, so a
stored labeler labels exactly as the trained one.
"""
import time
from typing import NamedTuple

import numpy as np

from bpparse.encode import pack
from bpparse.features.context import ContextLabeler, labeler_train_pass, relabel_corpus
from bpparse.features.layout import LY_FEATS, LY_LEMMA, LY_MORPH
from bpparse.features.store import csr_rows, delta_code, delta_decode

MAX_HASH_BITS = 24


class Labeler(NamedTuple):
    """A trained labeler: the nonzero weights of its (2^hash_bits, n_labels) table by row, as the
    kernels read them (`ContextLabeler`: ``starts``, ``columns``, float32 ``values``);
    ``templates``: which optional label templates it reads (``{"feats", "morph", "lemma"}`` ->
    bool); ``info``: how it was trained (JSON-able)."""

    hash_bits: int
    n_labels: int
    starts: np.ndarray
    columns: np.ndarray
    values: np.ndarray
    templates: dict
    info: dict

    def record(self, model_layout):
        """The `ContextLabeler` the kernels read, over a model's ``model_layout``."""
        return ContextLabeler(self.starts, self.columns, self.values, self.n_labels,
                              labeler_layout(model_layout, self.templates))

    @property
    def positions(self):
        """int64 (nonzero,) flat positions row · n_labels + label of the weights, increasing."""
        rows = np.repeat(np.arange(self.starts.shape[0] - 1), np.diff(self.starts))
        return rows * self.n_labels + self.columns

    def dense(self):
        """The float32 (2^hash_bits, n_labels) weight table."""
        table = np.zeros((1 << self.hash_bits) * self.n_labels, dtype=np.float32)
        table[self.positions] = self.values
        return table.reshape(1 << self.hash_bits, self.n_labels)


def _labeler(bits, n_labels, positions, values, templates, info):
    """The `Labeler` of the nonzero weights at increasing flat ``positions`` (int64)."""
    if n_labels > np.iinfo(np.uint16).max or positions.shape[0] > np.iinfo(np.int32).max:
        raise ValueError(f"a labeler of {n_labels} labels and {positions.shape[0]} weights is "
                         f"larger than bpparse can hold")
    starts, columns = csr_rows(positions, n_labels, 1 << bits)
    return Labeler(bits, n_labels, starts.astype(np.int32), columns.astype(np.uint16),
                   values.astype(np.float32), dict(templates), dict(info))


def sparse_labeler(table, templates, info):
    """The `Labeler` of a dense (2^hash_bits, R) table (its nonzero entries, as float32)."""
    flat = table.ravel()
    positions = np.flatnonzero(flat)
    return _labeler(int(table.shape[0]).bit_length() - 1, int(table.shape[1]), positions,
                    flat[positions], templates, info)


def labeler_layout(model_layout, templates):
    """``model_layout`` with the template switches ``templates`` (what `label_keys` reads)."""
    layout = np.array(model_layout, dtype=np.int64)
    for field, key in ((LY_FEATS, "feats"), (LY_MORPH, "morph"), (LY_LEMMA, "lemma")):
        layout[field] = int(bool(templates[key]))
    return layout


def no_labeler(model_layout, n_labels):
    """The `ContextLabeler` of "no labeler" (no rows): labels stay the parser's."""
    return ContextLabeler(np.zeros(1, dtype=np.int32), np.zeros(0, dtype=np.uint16),
                          np.zeros(0, dtype=np.float32), int(n_labels),
                          np.asarray(model_layout, dtype=np.int64))


def pack_trees(encoded):
    """The `encode.Corpus` of sentences with their own trees (``e.heads``, ``e.labels``)."""
    return pack(encoded, [np.asarray(e.heads, dtype=np.int64) for e in encoded])


def label_accuracy(model, labeler, corpus):
    """Percent of the words with a known gold label that the `ContextLabeler` labels right on the
    gold trees of ``corpus`` (`pack_trees`)."""
    gold = corpus.labels
    predicted = np.full(gold.shape[0], -1, dtype=np.int64)
    relabel_corpus(corpus, model.fine_tags, labeler, predicted, np.zeros(gold.shape[0]))
    known = gold >= 0
    known[corpus.offsets[:-1]] = False
    return 100.0 * float(np.mean(predicted[known] == gold[known])) if known.any() else 0.0


def train_labeler(model, encoded, dev=None, epochs=5, hash_bits=18, learning_rate=0.1, seed=0,
                  lemma=False, min_update=0.05, say=None):
    """A `Labeler` for ``model`` (its hashing, fine tags and labels) trained on the gold trees of
    ``encoded`` (`EncodedSentence` list, complete trees), ``epochs`` passes in a seeded order; with
    ``dev`` (encoded gold trees) the epoch best on dev label accuracy is kept. It reads FEATS (whole
    and split into attributes) and, with ``lemma``, lemmas, whatever the parser's templates read.
    Gradients of at most ``min_update`` are not applied (`labeler_train_pass`): a sparse table."""
    say = say or (lambda msg: None)
    if not 8 <= hash_bits <= MAX_HASH_BITS:
        raise ValueError(f"labeler hash_bits must be in 8..{MAX_HASH_BITS}, not {hash_bits}")
    n_labels = len(model.labels)
    train = pack_trees(encoded)
    held = pack_trees(dev) if dev else None
    templates = {"feats": True, "morph": True, "lemma": bool(lemma)}
    layout = labeler_layout(model.layout, templates)
    shape = (1 << hash_bits, n_labels)
    table, sq, acc = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    step = 0
    best, best_epoch, kept = -1.0, 0, None
    rng = np.random.default_rng(seed)
    for epoch in range(1, epochs + 1):
        t0 = time.time()
        order = rng.permutation(len(encoded)).astype(np.int64)
        step, loglik = labeler_train_pass(train, order, model.fine_tags, layout, table, sq, acc,
                                          float(step), float(learning_rate), 1e-6,
                                          float(min_update))
        averaged = sparse_labeler((table - acc / max(step, 1.0)).astype(np.float16), templates, {})
        message = f"labeler epoch {epoch}: log-likelihood {loglik / max(step / epoch, 1):.4f}/arc"
        score = label_accuracy(model, averaged.record(model.layout), held) if held else None
        if score is None or score > best:
            best, best_epoch, kept = (score if score is not None else best), epoch, averaged
        if score is not None:
            message += f", dev label accuracy {score:.2f} (gold trees)"
        say(f"{message}, {time.time() - t0:.0f}s")
    info = {"epochs": epochs, "best_epoch": best_epoch, "hash_bits": hash_bits,
            "learning_rate": learning_rate, "min_update": min_update,
            "nonzero": int(kept.values.shape[0]),
            "dev_label_accuracy": round(best, 2) if held else None}
    return kept._replace(info=info)


def fit_labeler(model, encoded, dev=None, say=None):
    """`train_labeler` with the settings of the model's config ``[labeler]`` (seed: train.seed;
    lemma templates when the parser reads lemmas)."""
    b = model.config.labeler
    return train_labeler(model, encoded, dev, epochs=b.epochs, hash_bits=b.hash_bits,
                         learning_rate=b.learning_rate, seed=model.config.train.seed,
                         lemma=bool(model.config.features.lemma), min_update=b.min_update, say=say)


def labeler_to_arrays(labeler):
    """(header dict, {name: array}) of a labeler, as the model file stores it: the nonzero table
    entries as delta-coded positions and float16 values."""
    meta = dict(labeler.info, hash_bits=labeler.hash_bits, labels=labeler.n_labels,
                templates=labeler.templates)
    return meta, {"deltas": delta_code(labeler.positions),
                  "values": labeler.values.astype(np.float16)}


def labeler_from_arrays(meta, deltas, values, n_labels):
    """The `Labeler` of `labeler_to_arrays`' output; raises ValueError where sizes do not fit."""
    bits = int(meta["hash_bits"])
    if not 8 <= bits <= MAX_HASH_BITS or int(meta["labels"]) != n_labels:
        raise ValueError(f"labeler of {meta['labels']} labels and {bits} hash bits does not fit a "
                         f"model of {n_labels} labels")
    size = (1 << bits) * n_labels
    if deltas.shape != values.shape or deltas.ndim != 1 or deltas.shape[0] > size:
        raise ValueError("labeler payload arrays do not fit its table")
    positions = delta_decode(deltas, size)
    templates = {key: bool(meta["templates"][key]) for key in ("feats", "morph", "lemma")}
    return _labeler(bits, n_labels, positions, values, templates, meta)
