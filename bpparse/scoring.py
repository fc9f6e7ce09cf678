"""Scoring: weights × features → the log-potentials of one sentence's factor graph (no inference).

LINK scores carry the labels marginalised inside the arc, s[h, m] = logsumexp_r s[h, m, r]
(docs/design.md §4); GRAND / SIB factors are enumerated over the arcs that pruning keeps
(`kept_arcs`: first-order marginal ≥ ``prune``, each word's best head, gold arcs in training);
CHILDSEQ head automata run over the same kept arcs (a pruned arc is outside every automaton);
NOCROSS log-potentials are one (n+1, n+1) array. Kernels read a model through the `Weights` record
and the families and pruning through `bpparse.config.InferenceSettings`.
"""
from typing import NamedTuple

import numpy as np

from bpparse import features as F
from bpparse.jit import LEAF, njit
from bpparse.kernels.factors.childseq import ChildSeqFactors, childseq_segments
from bpparse.kernels.factors.tree import tree_marginals


class SentenceScores(NamedTuple):
    """Log-potentials of one sentence's factor graph.

    arc: float64 (n+1, n+1) LINK log-odds s[h, m] = logsumexp_r s[h, m, r] (-inf on the diagonal and
    column 0); label_logp: float64 (n+1, n+1, R) log p(r | h -> m) (R = 0 without labels);
    pair_a, pair_b: int64 arc indices of the GRAND (first n_grand) and SIB factors, pair_w: float64
    their log-potentials (empty without second-order factors); cross_w: float64 (n+1, n+1) NOCROSS
    log-potentials at [m, l], m < l (shape (0, 0) without NOCROSS); first_mu: float64 (n+1, n+1)
    the first-order marginals of arc that pruning computed (`first_order_marginals`), which are
    also the TREE factor's first propagation in BP, or shape (0, 0).
    """

    arc: np.ndarray
    label_logp: np.ndarray
    pair_a: np.ndarray
    pair_b: np.ndarray
    pair_w: np.ndarray
    n_grand: int
    cross_w: np.ndarray
    seq: ChildSeqFactors
    first_mu: np.ndarray


@njit(cache=True)
def marginalise_labels(link, ls, lists, upos):
    """Labeled arc scores -> (arc, label_logp).

    link: float64 (n+1, n+1) unlabeled scores (-inf where no arc); ls: float64 (n+1, n+1, R) label
    scores (-inf: a label the label filter leaves out), overwritten by label_logp (a sentence of 80
    words has 2.7 MB of them: one array, not two); lists, upos: the filter's
    `Weights.label_lists` (`NO_LABEL_FILTER`: every label) and the UPOS ids int64 (n+1,) of ROOT
    and the words, so that an arc reads only its kept labels (the others stay -inf).
    arc[h, m] = link[h, m] + logsumexp_r ls[h, m, r]; label_logp[h, m, r] = log p(r | h, m), 0 where
    there is no arc.
    """
    n1 = link.shape[0]
    R = ls.shape[2]
    filtered = lists.shape[0] > 0
    every = np.empty(R + 1, dtype=np.int16)  # no filter: the list of every label
    every[0] = R
    every[1:] = np.arange(R)
    arc = link.copy()
    for h in range(n1):
        for m in range(1, n1):  # column 0 (no arc into ROOT) is 0 in ``ls`` already
            if link[h, m] == -np.inf:
                ls[h, m, :] = 0.0
                continue
            kept = lists[upos[h], upos[m], 1 if m > h else 0] if filtered else every
            row = ls[h, m]
            top = -np.inf
            for j in range(1, kept[0] + 1):
                top = max(top, row[kept[j]])
            z = 0.0  # in increasing label order, as over every label: the same sum
            for j in range(1, kept[0] + 1):
                z += np.exp(row[kept[j]] - top)
            lz = top + np.log(z)
            arc[h, m] += lz
            for j in range(1, kept[0] + 1):
                row[kept[j]] -= lz
    return arc, ls


@njit(cache=True)
def arc_scores(attrs, weights):
    """(arc, label_logp): float64 (n+1, n+1) arc log-potentials (labels summed out) and float64
    (n+1, n+1, R) log p(label | arc) (R = 0 without labels)."""
    n1 = attrs.shape[1] - 2
    link = F.link_scores(attrs, weights)
    if weights.layout[F.LY_NLAB] > 0:
        return marginalise_labels(link, F.label_scores(attrs, weights), weights.label_lists,
                                  attrs[F.A_UTAG, 1:n1 + 1])
    return link, np.zeros((n1, n1, 0))


@njit(cache=True)
def first_order_marginals(arc, single_root):
    """(mu, ok): the non-projective first-order marginals float64 (n+1, n+1) of the arc scores
    ``arc`` (Koo & Collins 2010-style pruning reads them) by `tree.tree_marginals`, the kernel BP's
    TREE factor runs, so that BP can take them as its first propagation; ok False (mu all 0) when
    no tree exists."""
    mu, ok = tree_marginals(arc, False, single_root)
    if not ok:
        mu = np.zeros_like(arc)
    return mu, ok


@njit(cache=True)
def kept_arcs(arc, threshold, single_root, heads):
    """Arcs that may carry second-order factors: bool (n+1, n+1), True where the first-order
    marginal of ``arc`` is at least ``threshold``, plus each word's most probable head and the arcs
    of ``heads`` (int64 (n+1,), gold tree in training; empty = none), so that gold pairs are never
    pruned."""
    return arcs_above(first_order_marginals(arc, single_root)[0], threshold, heads)


@njit(cache=True)
def arcs_above(mu, threshold, heads):
    """`kept_arcs` from the first-order marginals ``mu``."""
    n1 = mu.shape[0]
    keep = np.zeros((n1, n1), dtype=np.bool_)
    for m in range(1, n1):
        best = -1
        for h in range(n1):
            if h == m:
                continue
            if mu[h, m] >= threshold:
                keep[h, m] = True
            if best < 0 or mu[h, m] > mu[best, m]:
                best = h
        keep[best, m] = True
        if heads.shape[0] == n1 and heads[m] >= 0:
            keep[heads[m], m] = True
    return keep


@njit(cache=True, **LEAF)
def _fill_kept_pairs(keep, use_grand, use_sib, single_root, pa, pb):
    """Enumerate the pairs of `kept_pairs` into pa / pb (empty arrays: count only); returns
    (count, n_grand)."""
    n1 = keep.shape[0]
    fill = pa.shape[0] > 0
    i = 0
    if use_grand:
        for h in range(1, n1):
            for g in range(n1):
                if not keep[g, h]:
                    continue
                for m in range(1, n1):
                    if m != g and keep[h, m]:
                        if fill:
                            pa[i] = g * n1 + h
                            pb[i] = h * n1 + m
                        i += 1
    n_grand = i
    if use_sib:
        for h in range(1 if single_root else 0, n1):
            for m in range(1, n1):
                if not keep[h, m]:
                    continue
                for s in range(m + 1, n1):
                    if keep[h, s]:
                        if fill:
                            pa[i] = h * n1 + m
                            pb[i] = h * n1 + s
                        i += 1
    return i, n_grand


@njit(cache=True)
def kept_pairs(keep, use_grand, use_sib, single_root):
    """The GRAND / SIB factors both of whose arcs are in ``keep`` (bool (n+1, n+1), False on the
    diagonal and column 0), in
    `bpparse.graph.all_pairs` order: (pair_a, pair_b, n_grand). With ``single_root`` the SIB factors
    of ROOT are left out: two children of ROOT never co-occur in a tree, and BP would only count that
    constraint a second time next to TREE (which made second-order training diverge)."""
    empty = np.empty(0, dtype=np.int64)
    count, n_grand = _fill_kept_pairs(keep, use_grand, use_sib, single_root, empty, empty)
    pa = np.empty(count, dtype=np.int64)
    pb = np.empty(count, dtype=np.int64)
    if count > 0:
        _fill_kept_pairs(keep, use_grand, use_sib, single_root, pa, pb)
    return pa, pb, n_grand


@njit(cache=True)
def sentence_scores(attrs, weights, settings, heads):
    """All log-potentials of one sentence: a `SentenceScores` record.

    ``attrs``: `features.sentence_attributes`; ``weights``: `features.Weights`; ``settings``:
    `bpparse.config.InferenceSettings` (families, ``single_root``, ``prune``: GRAND / SIB / CHILDSEQ
    only on `kept_arcs`, 0 = every arc); ``heads``: int64 (n+1,) arcs always kept (the gold tree in
    training), or empty. With ``single_root`` ROOT has no SIB or CHILDSEQ factors (see `kept_pairs`).
    """
    use_grand, use_sib, use_cross = settings.use_grand, settings.use_sib, settings.use_cross
    use_seq = settings.use_childseq
    single_root, prune = settings.single_root, settings.prune
    n1 = attrs.shape[1] - 2
    arc, label_logp = arc_scores(attrs, weights)
    first_mu = np.zeros((0, 0))
    if prune > 0.0 and (use_grand or use_sib or use_seq):
        mu, ok = first_order_marginals(arc, single_root)
        keep = arcs_above(mu, prune, heads)
        if ok:
            first_mu = mu
    else:
        keep = np.ones((n1, n1), dtype=np.bool_)
        for h in range(n1):
            keep[h, h] = False
            keep[h, 0] = False
    pa, pb, n_grand = kept_pairs(keep, use_grand, use_sib, single_root)
    pw = F.pair_scores(attrs, weights, pa, pb, n_grand)
    if use_seq:
        seq_head, start, child, w_start = childseq_segments(keep, single_root)
    else:
        seq_head = child = np.zeros(0, np.int64)
        start = w_start = np.zeros(1, np.int64)
    seq_w = F.childseq_scores(attrs, weights, seq_head, start, child, w_start)
    seq = ChildSeqFactors(seq_head, start, child, w_start, seq_w, np.zeros(child.shape[0]))
    if use_cross:
        cross_w = F.cross_scores(attrs, weights)
    else:
        cross_w = np.zeros((0, 0))
    return SentenceScores(arc, label_logp, pa, pb, pw, n_grand, cross_w, seq, first_mu)


def encoded_scores(model, encoded, settings=None, heads=None):
    """`SentenceScores` of an `EncodedSentence` under a model's weights (``settings``: default the
    model's parse settings; ``heads``: arcs pruning must keep)."""
    settings = settings or model.config.inference_settings("parse")
    heads = np.empty(0, dtype=np.int64) if heads is None else np.asarray(heads, dtype=np.int64)
    attrs = F.sentence_attributes(encoded.tokens, model.fine_tags)
    return sentence_scores(attrs, model.weights, settings, heads)
