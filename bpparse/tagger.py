"""Built-in POS / morphology tagger: a cascade of hashed log-linear column models (issue 13).

UPOS is a bigram CRF (`bpparse.kernels.chain`) over the token features of `bpparse.features.tags`,
including a lexicon of the training words' UPOS (`Lexicon`: a word's ambiguity class and most
frequent tag, and its neighbours'; jackknifed over the training data, so that the features of
training tokens look like those of new text).
XPOS and FEATS, when the training data has them (not all ``_``), read the UPOS of the token and its
neighbours as extra features (gold UPOS in training, predicted when tagging) and are restricted to
the values seen with the token's UPOS in training: XPOS is a bigram CRF when it has at most
`MAX_CHAIN_TAGS` values, else a per-token classifier (order 0); FEATS is a per-token classifier.
Each column is trained on its conditional log-likelihood with AdaGrad and weight averaging; with a
dev set the best epoch (dev accuracy) is kept. Weights are rounded to float16 after training, which
is what `tagger_to_arrays` stores, so a stored tagger predicts exactly as the trained one.
"""
import io
import time
from functools import partial
from typing import NamedTuple

import numpy as np

from bpparse.errors import ModelFileError
from bpparse.features import tags as FT
from bpparse.features.store import csr_rows, delta_code, delta_decode
from bpparse.kernels.chain import (
    AdaGrad,
    ColumnData,
    ColumnParams,
    column_predict,
    column_train_pass,
    column_unary,
)

COLUMNS = ("upos", "xpos", "feats")
MAX_CHAIN_TAGS = 64
FORMAT_VERSION = 2  # 2: the lexicon (version 1 files load: no lexicon)
# a word's ambiguity class: the UPOS tags of at least this share of its training tokens (EWT dev
# UPOS, mean of seeds: 0.01 95.23 (2 seeds), 0.05 95.30, 0.1 95.37 (3); no lexicon 95.08)
LEXICON_SHARE = 0.1
LEXICON_FOLDS = 10  # the training tokens' lexicon features come from the other folds' words


class Lexicon(NamedTuple):
    """The training data's UPOS by word: ``forms`` int64 (W,) sorted `features.tags.string_id` of
    the lower-cased forms; ``amb`` int64 (W,) their ambiguity classes (one value per set of tags,
    the tags of at least LEXICON_SHARE of the word's tokens); ``top`` int64 (W,) their most
    frequent tags (one value per tag)."""

    forms: np.ndarray
    amb: np.ndarray
    top: np.ndarray


def _lexicon_values(counts, tags):
    """(amb, top) int64 (W,) of words with tag counts int64 (W, g); UNKNOWN for a zero row."""
    amb_ids = np.array([FT.string_id("AMB=" + t) for t in tags], dtype=np.int64)
    top_ids = np.array([FT.string_id("TOP=" + t) for t in tags], dtype=np.int64)
    total = counts.sum(axis=1)
    inclass = (counts > 0) & (counts >= LEXICON_SHARE * total[:, None])
    amb = np.bitwise_xor.reduce(np.where(inclass, amb_ids, 0), axis=1)
    top = top_ids[counts.argmax(axis=1)]
    return np.where(total > 0, amb, FT.UNKNOWN), np.where(total > 0, top, FT.UNKNOWN)


def _train_lexicon(attrs, starts, gold, tags):
    """The `Lexicon` of the tokens in ``attrs`` (gold UPOS ids ``gold``), and their lexicon
    columns filled as new text would see them: a token of sentence j reads the lexicon of the
    sentences not in its fold (j mod LEXICON_FOLDS)."""
    forms, word = np.unique(attrs[:, FT.T_LOWER], return_inverse=True)
    counts = np.zeros((len(forms), len(tags)), dtype=np.int64)
    np.add.at(counts, (word, gold), 1)
    fold = np.repeat(np.arange(len(starts) - 1) % LEXICON_FOLDS, np.diff(starts))
    for k in range(LEXICON_FOLDS):
        held = np.flatnonzero(fold == k)
        own = np.zeros_like(counts)
        np.add.at(own, (word[held], gold[held]), 1)
        amb, top = _lexicon_values(counts[word[held]] - own[word[held]], tags)
        attrs[held, FT.T_AMB], attrs[held, FT.T_TOP] = amb, top
    return Lexicon(forms, *_lexicon_values(counts, tags))


class TagLink(NamedTuple):
    """The joint model's TAGLINK part: ``table`` float64 (2^hash_bits,) weights; candidate tags per
    word: at most ``max_candidates`` with chain marginal ≥ ``min_prob``; TAGLINK factors on the
    arcs of first-order marginal ≥ ``prune``; BP runs at most ``iterations`` sweeps."""

    table: np.ndarray
    max_candidates: int
    min_prob: float
    prune: float
    iterations: int


def new_taglink(hash_bits=20, max_candidates=3, min_prob=1e-3, prune=1e-3, iterations=10):
    """A TagLink with zero weights."""
    return TagLink(np.zeros(1 << hash_bits), int(max_candidates), float(min_prob), float(prune),
                   int(iterations))


class ColumnModel:
    """One predicted column: ``tags`` (list of str, id = position), ``order`` (1 bigram chain,
    0 per token), ``use_upos`` (UPOS features on), ``use_lexicon`` (the lexicon's features on),
    ``allowed`` bool (n_upos, g) tags seen with each UPOS (None: no restriction), ``hash_bits``
    (2^hash_bits weight blocks of g), and ``stored``: a function returning the positions (int64,
    increasing) of its nonzero weights in the dense vector (2^hash_bits · g feature weights, then
    the (g+1)² transitions) and their float16 values, called on first use (a loaded model
    decompresses its tagger only when some input lacks tags; training sets it by `hold_nonzero`).
    It tags with compact `ColumnParams` (only those weights, about 1/20 of the dense table's
    memory) and builds the dense ``theta`` only when asked."""

    def __init__(self, name, tags, order, use_upos, allowed, hash_bits, use_lexicon=False,
                 stored=None):
        self.name = name
        self.tags = list(tags)
        self.order = int(order)
        self.use_upos = bool(use_upos)
        self.use_lexicon = bool(use_lexicon)
        self.allowed = allowed
        self.hash_bits = int(hash_bits)
        self._theta = None
        self._stored = stored
        self._compact = None

    @property
    def size(self):
        """Length of the dense weight vector: the feature blocks, then the transitions."""
        return self.nblocks * self.g + (self.g + 1) ** 2

    @property
    def theta(self):
        """The dense weight vector, float32 (float16 values: nothing lost)."""
        if self._theta is None:
            pos, values = self._stored()
            self._theta = np.zeros(self.size, dtype=np.float32)
            self._theta[pos] = values
        return self._theta

    @property
    def g(self):
        return len(self.tags)

    @property
    def nblocks(self):
        return 1 << self.hash_bits

    def params(self):
        """The compact `ColumnParams` of the column's weights."""
        if self._compact is None:
            self._compact = _compact_params(*self._stored(), self.nblocks, self.g, self.order)
        return self._compact

    def nonzero(self):
        """(positions int64 increasing, values float16) of the column's nonzero weights: what a
        model file stores."""
        return self._stored()

    def hold_nonzero(self, pos, values):
        """Hold the weights as a loaded column does: the nonzero ones only, at increasing int64
        positions ``pos`` of the dense vector, float16 ``values``."""
        self._theta, self._stored, self._compact = None, lambda: (pos, values), None

    def __repr__(self):
        return (f"<ColumnModel {self.name} g={self.g} order={self.order} use_upos={self.use_upos} "
                f"use_lexicon={self.use_lexicon} bits={self.hash_bits}>")


_NO_ROWS = np.empty(0, dtype=np.int32)
_NO_TAGS = np.empty(0, dtype=np.int16)
_NO_VALUES = np.empty(0, dtype=np.float32)


def _compact_params(pos, values, nblocks, g, order):
    """Compact `ColumnParams` of the nonzero weights at increasing positions ``pos`` (int64) of
    the dense vector (nblocks·g feature weights, then the (g+1)² transitions)."""
    features = nblocks * g
    k = int(np.searchsorted(pos, features))
    starts, tags = csr_rows(pos[:k], g, nblocks)
    trans = np.zeros((g + 1) ** 2)
    trans[pos[k:] - features] = values[k:]
    return ColumnParams(trans, g, order, starts.astype(np.int32), tags.astype(np.int16),
                        values[:k].astype(np.float32))


class Tagger:
    """The tagger: ``columns`` dict name → ColumnModel in cascade order ("upos" first, then "xpos"
    and "feats" when trained); ``upos_tags`` the UPOS tag list (column order of the marginals);
    ``taglink``: the TAGLINK weights of joint tagging and parsing (`bpparse.joint`), or None;
    ``lexicon``: the `Lexicon` the columns with ``use_lexicon`` read (or a function returning it,
    called on first use: a loaded model reads it only when some input lacks tags), or None."""

    def __init__(self, columns, taglink=None, lexicon=None):
        self.columns = dict(columns)
        self.taglink = taglink  # `bpparse.tagger.TagLink` of a joint model, or None
        self._lexicon = lexicon

    @property
    def lexicon(self):
        if callable(self._lexicon):
            self._lexicon = self._lexicon()
        return self._lexicon

    @property
    def upos_tags(self):
        return self.columns["upos"].tags

    def __repr__(self):
        return f"<Tagger {list(self.columns.values())}>"


class Tagged(NamedTuple):
    """Tags of one sentence (n words, ROOT excluded): upos / xpos / feats lists of str (None for a
    column the tagger does not predict); upos_prob float64 (n, g_upos) marginals p(UPOS_i = t)."""

    upos: list
    xpos: list
    feats: list
    upos_prob: np.ndarray


def _column_values(sentences, col):
    out = []
    for s in sentences:
        out.extend(getattr(s, col)[1:])
    return out


def _has_column(values):
    return any(v != "_" for v in values)


def _ids(values, tags):
    index = {t: k for k, t in enumerate(tags)}
    return np.array([index.get(v, -1) for v in values], dtype=np.int64)


def _set_upos(attrs, upos_strings):
    attrs[:, FT.T_UPOS] = np.array([FT.string_id("UPOS=" + u) for u in upos_strings], dtype=np.int64)


def _attributes(sentences, lexicon):
    """`features.tags.token_attributes` of ``sentences`` with the columns of ``lexicon`` (a
    `Lexicon` or None) filled."""
    attrs, starts = FT.token_attributes(sentences)
    if lexicon is not None:
        FT.fill_lexicon(attrs, *lexicon)
    return attrs, starts


def _column_data(model, attrs, starts, gold, cond):
    bases = FT.tag_bases(attrs, starts, model.use_upos, model.use_lexicon, model.nblocks, model.g)
    allowed = model.allowed if model.allowed is not None else np.ones((1, model.g), dtype=np.bool_)
    if model.allowed is None:
        cond = np.full(attrs.shape[0], -1, dtype=np.int64)
    tag_starts, tag_list = csr_rows(np.flatnonzero(allowed), model.g, allowed.shape[0])
    return ColumnData(bases, starts, gold, cond, allowed, tag_starts, tag_list)


_ROWS = 1 << 15  # tokens a step of the passes over a column's bases (bounds their temporaries)


def _block_counts(bases, g, nblocks):
    """int64 (nblocks,): how many of ``bases`` (int64 (N, K), block · g, negative = off) fall in
    each weight block."""
    counts = np.zeros(nblocks, dtype=np.int64)
    for a in range(0, bases.shape[0], _ROWS):
        b = bases[a:a + _ROWS]
        counts += np.bincount(b[b >= 0] // g, minlength=nblocks)
    return counts


def _renumber(bases, g, new_block):
    """Replace in place each base of ``bases`` by new_block[its block] · g (new_block int64, -1:
    switched off)."""
    for a in range(0, bases.shape[0], _ROWS):
        b = bases[a:a + _ROWS]
        new = new_block[np.maximum(b, 0) // g]
        b[...] = np.where((b >= 0) & (new >= 0), new * g, -1)


def _touched_blocks(data, dev_data, g, nblocks, min_count, compact):
    """(blocks int64 increasing, dev_data): the weight blocks a column trains, and the training
    data renumbered for them, in place, in one pass: the blocks used by fewer than ``min_count``
    training tokens are switched off (base -1: rare keys get no weights; at tagging time they read
    whatever block they hash to, usually an untrained one). With ``compact`` the column trains
    only the blocks left (EWT's XPOS: 35% of its 2^19, so its training vectors take a third of
    the dense ones' memory), and a copy of ``dev_data`` is renumbered too (a base of another
    block, whose weights stay 0, is switched off, which scores the same); else all ``nblocks``."""
    touched = np.flatnonzero(_block_counts(data.bases, g, nblocks) >= max(min_count, 1))
    new_block = np.full(nblocks, -1, dtype=np.int64)
    new_block[touched] = np.arange(touched.shape[0]) if compact else touched
    _renumber(data.bases, g, new_block)
    if not compact:
        return np.arange(nblocks), dev_data
    if dev_data is not None:
        dev_data = dev_data._replace(bases=dev_data.bases.copy())
        _renumber(dev_data.bases, g, new_block)
    return touched, dev_data


def _accuracy(pred, gold):
    return float(np.mean(pred == gold)) if len(gold) else 0.0


def _train_column(model, data, dev_data, dev_gold, epochs, seed, lr, l2, prune, progress,
                  min_update=0.0, min_count=1, compact=True):
    """AdaGrad passes on ``data`` (weights moved only by gradients above ``min_update``), over the
    weight blocks at least ``min_count`` training tokens touch (`_touched_blocks`, which renumbers
    ``data``; ``compact`` False: every block, the same weights); the column ends holding the
    nonzero averaged weights of the best dev epoch (the last epoch without dev), rounded to
    float16 precision."""
    g = model.g
    blocks, dev_data = _touched_blocks(data, dev_data, g, model.nblocks, min_count, compact)
    theta = np.zeros(blocks.shape[0] * g + (g + 1) * (g + 1))
    opt = AdaGrad(np.zeros_like(theta), np.zeros_like(theta), lr, 1e-8, l2, float(min_update))
    rng = np.random.default_rng(seed)
    S = data.starts.shape[0] - 1
    c = 1.0
    # the averaged weights are computed in one buffer, and the best epoch's kept at the float16
    # precision the column ends with
    avg, best, best_acc = np.empty_like(theta), None, -1.0
    params = partial(ColumnParams, g=g, order=model.order, row_starts=_NO_ROWS, row_tags=_NO_TAGS,
                     row_values=_NO_VALUES)
    for ep in range(epochs):
        t0 = time.perf_counter()
        c, ll = column_train_pass(data, params(theta), opt, rng.permutation(S).astype(np.int64), c)
        np.divide(opt.u, c, out=avg)
        np.subtract(theta, avg, out=avg)
        msg = f"tagger {model.name} epoch {ep + 1}/{epochs}: train loglik {ll:.1f}"
        if dev_data is not None:
            acc = _accuracy(column_predict(dev_data, params(avg), np.zeros((0, 0))), dev_gold)
            msg += f", dev acc {100 * acc:.2f}"
            if acc > best_acc:
                best, best_acc = avg.astype(np.float16), acc
        else:
            best = avg.astype(np.float16)
        if progress is not None:
            progress(msg + f" ({time.perf_counter() - t0:.1f} s)")
    del avg, opt, theta
    best[np.abs(best, dtype=np.float64) < prune] = 0.0
    nz = np.flatnonzero(best)
    features = blocks.shape[0] * g
    k = int(np.searchsorted(nz, features))
    pos = np.concatenate([blocks[nz[:k] // g] * g + nz[:k] % g, nz[k:] - features + model.nblocks * g])
    model.hold_nonzero(pos, best[nz])
    return best_acc


def train_tagger(sentences, epochs=10, hash_bits=18, seed=0, dev=None, progress=None, lr=0.2,
                 l2=0.0, prune=0.0, min_count=1, columns=COLUMNS, feats_bits=None, min_update=0.0,
                 lexicon=("upos",)):
    """Train the tagger cascade on ``sentences`` (conll.Sentence list).

    Columns among ``columns`` that are all ``_`` in the training data are not predicted (UPOS must
    be present). ``hash_bits``: log2 of the number of weight blocks a column (feats_bits for
    FEATS, default hash_bits - 2); ``dev``: sentences for choosing the best epoch a column (with
    predicted UPOS as the cascade features); ``progress``: callable(str) or None; ``min_update``:
    gradients of at most this magnitude leave a weight unchanged (sparser, smaller taggers);
    ``lexicon``: the columns that read the UPOS lexicon's features (none: no lexicon is built;
    EWT test with UPOS only: UPOS / XPOS / FEATS 95.62 / 94.93 / 95.72, with all three 95.62 /
    94.92 / 95.68, without 95.40 / 94.71 / 95.51).
    Deterministic for a seed. Returns a `Tagger`.
    """
    sentences = [s for s in sentences if s.n > 0]
    upos_vals = _column_values(sentences, "upos")
    if not _has_column(upos_vals):
        raise ValueError("the training data has no UPOS column")
    attrs, starts = FT.token_attributes(sentences)
    _set_upos(attrs, upos_vals)
    upos_tags = sorted(set(upos_vals))
    upos_gold = _ids(upos_vals, upos_tags)
    lex = _train_lexicon(attrs, starts, upos_gold, upos_tags) if set(lexicon) & set(columns) else None
    if dev is not None:
        dev = [s for s in dev if s.n > 0]
        dattrs, dstarts = _attributes(dev, lex)
    dev_upos = None  # the dev tokens' predicted UPOS, which the later columns read

    def train_column(k, name):
        """(ColumnModel, dev ColumnData) of column ``name``, trained; None when the data lacks it."""
        vals = upos_vals if name == "upos" else _column_values(sentences, name)
        if not _has_column(vals):
            return None
        tags = sorted(set(vals))
        g = len(tags)
        gold = upos_gold if name == "upos" else _ids(vals, tags)
        if name == "upos":
            order, use_upos, allowed, bits = 1, False, None, hash_bits
        else:
            allowed = np.zeros((len(upos_tags), g), dtype=np.bool_)
            allowed[upos_gold, gold] = True
            order = 1 if (name == "xpos" and g <= MAX_CHAIN_TAGS) else 0
            use_upos = True
            bits = hash_bits if name == "xpos" else (feats_bits or max(hash_bits - 2, 10))
        model = ColumnModel(name, tags, order, use_upos, allowed, bits,
                            use_lexicon=lex is not None and name in lexicon)
        data = _column_data(model, attrs, starts, gold, upos_gold)
        dev_data = dev_gold = None
        if dev is not None:
            dev_gold = _ids(_column_values(dev, name), tags)
            dcond = _ids(dev_upos, upos_tags) if use_upos else np.full(len(dev_gold), -1, dtype=np.int64)
            dev_data = _column_data(model, dattrs, dstarts, dev_gold, dcond)
        _train_column(model, data, dev_data, dev_gold, epochs, seed + k, lr, l2, prune, progress,
                      min_update, min_count)
        return model, dev_data

    upos, dev_data = train_column(0, "upos")
    models = {"upos": upos}
    if dev is not None:
        dev_upos = [upos_tags[t] for t in column_predict(dev_data, upos.params(), np.zeros((0, 0)))]
        _set_upos(dattrs, dev_upos)
    del dev_data
    # one column at a time: side by side (threads) EWT's XPOS and FEATS took 11 s less but 0.35 GB
    # more, above the 1.5 GB that training the bundled model may take
    for k, name in enumerate(COLUMNS[1:], 1):
        trained = train_column(k, name) if name in columns else None
        if trained is not None:
            models[name] = trained[0]
    return Tagger(models, lexicon=lex)


def upos_potentials(tagger, sentences):
    """The UPOS chain of ``sentences`` (only FORM is read): per sentence its unary log-potentials
    float64 (n, g_upos), and the chain's transitions float64 (g_upos+1, g_upos+1) (`kernels.chain`)."""
    attrs, starts = _attributes(sentences, tagger.lexicon)
    um = tagger.columns["upos"]
    data = _column_data(um, attrs, starts, np.zeros(attrs.shape[0], dtype=np.int64), None)
    params = um.params()
    unary = [column_unary(data, params, s) for s in range(len(sentences))]
    g = um.g
    return unary, params.theta[-(g + 1) * (g + 1):].reshape(g + 1, g + 1).copy()


def tag(tagger, sentences, marginals=True, upos=None):
    """Tag ``sentences`` (conll.Sentence list; only FORM is read). Returns one `Tagged` a sentence
    (UPOS by Viterbi, XPOS / FEATS by the cascade given the predicted UPOS; upos_prob the UPOS
    chain's marginals, float64 (n, g_upos), or None when ``marginals`` is False). ``upos``: per
    sentence n UPOS strings to run the cascade on instead of the chain's (joint tagging)."""
    attrs, starts = _attributes(sentences, tagger.lexicon)
    N = attrs.shape[0]
    um = tagger.columns["upos"]
    no_gold = np.zeros(N, dtype=np.int64)
    marg = np.zeros((N, um.g)) if marginals else np.zeros((0, 0))
    if upos is None:
        up = column_predict(_column_data(um, attrs, starts, no_gold, None), um.params(), marg)
        upos = [um.tags[t] for t in up]
    else:
        upos = [t for tags in upos for t in tags]
        up = _ids(upos, um.tags)
    out = {"upos": upos}
    if len(tagger.columns) > 1:
        _set_upos(attrs, upos)
        for name, m in tagger.columns.items():
            if name == "upos":
                continue
            pred = column_predict(_column_data(m, attrs, starts, no_gold, up), m.params(), np.zeros((0, 0)))
            out[name] = [m.tags[t] for t in pred]
    res = []
    for s in range(len(sentences)):
        a, e = int(starts[s]), int(starts[s + 1])
        res.append(Tagged(upos[a:e],
                          out["xpos"][a:e] if "xpos" in out else None,
                          out["feats"][a:e] if "feats" in out else None,
                          marg[a:e] if marginals else None))
    return res


def tagger_to_arrays(tagger):
    """(meta, arrays) for storing a tagger: meta a JSON-able dict (format version, per column
    its tags, order, use_upos, use_lexicon, hash_bits, and the lexicon's number of words);
    arrays a dict of numpy arrays, per column ``<name>.deltas`` delta-coded positions of the
    nonzero float16 weights, ``<name>.values`` float16 those weights and ``<name>.allowed`` bool
    (n_upos, g) (absent for UPOS), and ``lexicon.forms`` / ``.amb`` / ``.top`` (`Lexicon`)."""
    meta = {"version": FORMAT_VERSION, "columns": []}
    arrays = {}
    for name, m in tagger.columns.items():
        meta["columns"].append({"name": name, "tags": m.tags, "order": m.order,
                                "use_upos": m.use_upos, "use_lexicon": m.use_lexicon,
                                "hash_bits": m.hash_bits, "size": m.size})
        nz, values = m.nonzero()
        arrays[f"{name}.deltas"] = delta_code(nz)
        arrays[f"{name}.values"] = values
        if m.allowed is not None:
            arrays[f"{name}.allowed"] = m.allowed.astype(np.bool_)
    if tagger.lexicon is not None:
        meta["lexicon"] = len(tagger.lexicon.forms)
        arrays.update({f"lexicon.{k}": v for k, v in tagger.lexicon._asdict().items()})
    if tagger.taglink is not None:
        tl = tagger.taglink
        meta["taglink"] = {"hash_bits": int(tl.table.shape[0]).bit_length() - 1,
                           "max_candidates": tl.max_candidates, "min_prob": tl.min_prob,
                           "prune": tl.prune, "iterations": tl.iterations}
        h = tl.table.astype(np.float16)
        nz = np.flatnonzero(h)
        arrays["taglink.deltas"] = delta_code(nz)
        arrays["taglink.values"] = h[nz]
    return meta, arrays


def tagger_from_arrays(meta, arrays, source="tagger"):
    """The `Tagger` that `tagger_to_arrays` stored as (meta, arrays); ``arrays`` may be a lazy
    mapping (an open npz archive): each column's weights are read on first use, and a malformed
    column then raises ModelFileError naming ``source``."""
    if meta.get("version") not in (1, FORMAT_VERSION):
        raise ValueError(f"unsupported tagger format version {meta.get('version')!r}")
    models = {}
    lexicon = partial(_stored_lexicon, arrays, meta["lexicon"], source) if "lexicon" in meta else None
    for c in meta["columns"]:
        name = c["name"]
        allowed = arrays.get(f"{name}.allowed")
        if allowed is not None:
            allowed = np.asarray(allowed, dtype=np.bool_)
        use_lexicon = bool(c.get("use_lexicon", False))
        if use_lexicon and lexicon is None:
            raise ModelFileError(f"{source}: malformed model file: tagger column {name} reads a "
                                 "lexicon the file does not have")
        m = ColumnModel(name, c["tags"], c["order"], c["use_upos"], allowed, c["hash_bits"],
                        use_lexicon)
        if int(c["size"]) != m.size:
            raise ModelFileError(f"{source}: malformed model file: tagger column {name}: "
                                 f"{c['size']} weights for {m.nblocks} blocks of {m.g} tags")
        m._stored = partial(_stored_weights, arrays, name, m.size, source)
        models[name] = m
    taglink = None
    if "taglink" in meta:
        t = meta["taglink"]
        size = 1 << int(t["hash_bits"])
        pos, values = _stored_weights(arrays, "taglink", size, source)
        table = np.zeros(size)
        table[pos] = values
        taglink = TagLink(table, int(t["max_candidates"]), float(t["min_prob"]),
                          float(t["prune"]), int(t["iterations"]))
    return Tagger(models, taglink, lexicon)


def _stored_lexicon(arrays, n_words, source):
    """The stored `Lexicon` of ``n_words`` words, checked."""
    lexicon = Lexicon(*(np.asarray(arrays[f"lexicon.{k}"]) for k in Lexicon._fields))
    if n_words < 1 or any(a.shape != (n_words,) or a.dtype != np.int64 for a in lexicon) or \
            np.any(np.diff(lexicon.forms) <= 0):
        raise ModelFileError(f"{source}: malformed model file: the tagger's lexicon is not "
                             f"{n_words} sorted words")
    return lexicon


def _stored_weights(arrays, name, size, source):
    """Positions (int64, increasing, < size) and float16 values of the nonzero weights of tagger
    column ``name`` (or of "taglink") from its stored deltas and values."""
    deltas, values = arrays[f"{name}.deltas"], np.asarray(arrays[f"{name}.values"])
    try:
        if deltas.shape != values.shape:
            raise ValueError(f"{deltas.shape[0]} positions for {values.shape[0]} weights")
        return delta_decode(deltas, size), values
    except ValueError as e:
        raise ModelFileError(f"{source}: malformed model file: tagger column {name}: {e}") from None


def tagger_nbytes(tagger, compressed=True):
    """Bytes the stored arrays of ``tagger`` take (in an ``np.savez_compressed`` archive, or raw)."""
    arrays = tagger_to_arrays(tagger)[1]
    if not compressed:
        return sum(a.nbytes for a in arrays.values())
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.tell()
