"""Label templates: one hashed key selects a block of R label weights (docs/design.md §4).

The label filter (TurboParser's label pruning): when parsing, an arc scores only the labels that
some training arc with the same head UPOS, child UPOS and direction had (`label_filter`). An arc
of EWT test keeps 7.6 of the 51 labels on average, which cuts label scoring and the labels'
log-sum-exp to about a fifth; on the same weights it moves 30 of EWT test's 25,094 heads
(docs/benchmarks.md).

The arc filter (`arc_limits`) prunes before any scoring: an arc is scored (LINK and labels) only
when a training arc had its head UPOS, child UPOS and direction, and only up to ARC_SLACK times the
longest such arc. On EWT it keeps 67.8% of test's arcs and loses 11 of its 25,094 gold arcs
(docs/benchmarks.md, "A tag-pair arc filter").
"""
import numpy as np

from bpparse.features.attributes import link_distance_bin
from bpparse.features.hashing import _h0, _hc, _slot
from bpparse.features.layout import (
    ALL_KEYS,
    ARC_KEYS,
    CHILD_KEYS,
    A_FEATS,
    A_FTAG,
    A_LEMMA,
    A_MORPH,
    A_SUFFIX,
    A_UTAG,
    A_WORD,
    DIRTY_SHIFT,
    LY_FEATS,
    LY_LAB_BLOCKS,
    LY_LAB_OFF,
    LY_LEMMA,
    LY_MORPH,
    LY_NLAB,
    MAX_LABEL_TEMPLATES,
    M_CASE,
    M_VERBFORM,
    N_MORPH,
)
from bpparse.features.store import add_blocks, arc_allowed, _prefetch
from bpparse.jit import LEAF, njit


@njit(cache=True, **LEAF)
def label_blocks(attrs, layout, h, m, out, part=ALL_KEYS):
    """Start indices into theta of the label weight blocks (R contiguous weights) of arc h -> m
    (``part``: which, as for `label_keys`)."""
    off = layout[LY_LAB_OFF]
    nblk = np.uint64(layout[LY_LAB_BLOCKS])
    R = layout[LY_NLAB]
    k = label_keys(attrs, layout, h, m, out, part)
    for i in range(k):
        out[i] = off + _slot(np.uint64(out[i]), nblk) * R
    return k


@njit(cache=True, inline="always")
def label_keys(attrs, layout, h, m, out, part=ALL_KEYS):
    """The label template keys (unslotted 64-bit hashes, stored as int64) of arc h -> m into
    ``out``; returns their number (at most MAX_LABEL_TEMPLATES). ``layout`` says which optional
    templates are on (LY_FEATS, LY_LEMMA, LY_MORPH). ``part``: `ALL_KEYS`, or `CHILD_KEYS` (those
    of the direction and the child alone) or `ARC_KEYS` (the others), in the same order."""
    right = m > h
    d = m - h if right else h - m
    dr = 1 if right else 0
    db = link_distance_bin(d)
    H = h + 1
    M = m + 1
    hw = attrs[A_WORD, H]
    cw = attrs[A_WORD, M]
    hu = attrs[A_UTAG, H]
    cu = attrs[A_UTAG, M]
    hf = attrs[A_FTAG, H]
    cf = attrs[A_FTAG, M]
    child = part != ARC_KEYS
    arc = part != CHILD_KEYS
    k = 0
    if child:
        out[k] = _hc(_hc(_h0(601), dr), cf)
        k += 1
    if arc:
        out[k] = _hc(_hc(_hc(_h0(602), dr), hf), cf)
        k += 1
        out[k] = _hc(_hc(_hc(_h0(603), dr), hw), cf)
        k += 1
        out[k] = _hc(_hc(_hc(_h0(604), dr), hf), cw)
        k += 1
    if child:
        out[k] = _hc(_hc(_h0(605), dr), cw)
        k += 1
    if arc:
        out[k] = _hc(_hc(_hc(_h0(606), dr), db), cu)
        k += 1
        out[k] = _hc(_hc(_hc(_hc(_h0(607), dr), hu), cu), attrs[A_UTAG, M + 1])
        k += 1
        out[k] = _hc(_hc(_hc(_hc(_h0(608), dr), hu), attrs[A_UTAG, M - 1]), cu)
        k += 1
        out[k] = _hc(_hc(_hc(_h0(609), dr), hw), cw)
        k += 1
    if child and layout[LY_FEATS] != 0:
        out[k] = _hc(_hc(_hc(_h0(610), dr), cu), attrs[A_FEATS, M])
        k += 1
    if child and layout[LY_LEMMA] != 0:
        out[k] = _hc(_hc(_hc(_h0(611), dr), cu), attrs[A_LEMMA, M])
        k += 1
    if layout[LY_MORPH] != 0:
        for a in range(N_MORPH if arc else 0):
            cv = attrs[A_MORPH + a, M]
            if cv > 0:
                out[k] = _hc(_hc(_hc(_hc(_h0(1400 + a), dr), cu), hu), cv)
                k += 1
        if child:
            out[k] = _hc(_hc(_hc(_h0(1420), dr), cu), attrs[A_SUFFIX, M])
            k += 1
        if not arc:
            return k
        # what tells subject from object from oblique when the tags agree: the child's case with the
        # head's verb form, the child's whole FEATS, suffix and form with the head's UPOS, distance
        out[k] = _hc(_hc(_hc(_hc(_hc(_h0(1421), dr), hu), cu), attrs[A_MORPH + M_CASE, M]),
                     attrs[A_MORPH + M_VERBFORM, H])
        k += 1
        out[k] = _hc(_hc(_hc(_hc(_h0(1422), dr), hu), cu), attrs[A_FEATS, M])
        k += 1
        out[k] = _hc(_hc(_hc(_h0(1423), dr), hu), attrs[A_SUFFIX, M])
        k += 1
        out[k] = _hc(_hc(_hc(_h0(1424), dr), hu), cw)
        k += 1
        out[k] = _hc(_hc(_hc(_hc(_h0(1425), dr), db), hu), cu)
        k += 1
        if layout[LY_LEMMA] != 0:
            hlem = attrs[A_LEMMA, H]
            out[k] = _hc(_hc(_hc(_h0(1426), dr), hlem), cu)
            k += 1
            out[k] = _hc(_hc(_hc(_h0(1427), dr), hlem), attrs[A_MORPH + M_CASE, M])
            k += 1
    return k


def label_filter(upos, heads, labels, n_upos, n_labels):
    """bool (U, U, 2, R): may an arc from a head of UPOS id a to a child of UPOS id b, the child on
    the right (1) or left (0), carry label r? Yes when a training arc with those tags and direction
    had it. Tags and direction never seen together allow what a child of UPOS b in that direction
    had, and a child UPOS never seen in that direction every label (so every arc keeps a label).

    upos, heads, labels: per training sentence int arrays (n+1,) as `bpparse.encode` gives them
    (UPOS ids, gold heads, label ids; -1 = unknown, skipped).
    """
    seen = np.zeros((n_upos, n_upos, 2, n_labels), dtype=np.bool_)
    for tags, head, label in zip(upos, heads, labels):
        m = np.arange(1, len(head))
        h, r, tags = np.asarray(head[1:]), np.asarray(label[1:]), np.asarray(tags)
        ok = (h >= 0) & (r >= 0)
        seen[tags[h[ok]], tags[m[ok]], (m[ok] > h[ok]).astype(np.int64), r[ok]] = True
    by_child = seen.any(axis=0)
    by_child[~by_child.any(axis=2)] = True
    empty = ~seen.any(axis=3)
    seen[empty] = np.broadcast_to(by_child, seen.shape)[empty]
    return seen


ARC_SLACK = 2  # an arc filter's limit: this many times the longest training arc of its class
NO_LIMIT = np.iinfo(np.int32).max


def arc_limits(upos, heads, n_upos):
    """int32 (U, U, 2): the `Weights.arc_limits` of an arc filter, [a, b, right] = ARC_SLACK times
    the longest training arc from a head of UPOS id a to a child of UPOS id b on its right (1) or
    left (0), 0 where there was none; `<root>` and `<unk>` rows and columns have no limit (an arc
    from ROOT, or with an unknown tag, is always scored).

    upos, heads: per training sentence int arrays (n+1,) as `bpparse.encode` gives them (UPOS ids,
    gold heads; -1 = unknown, skipped).
    """
    from bpparse.encode import ROOT_ID, UNK_ID

    longest = np.zeros((n_upos, n_upos, 2), dtype=np.int64)
    for tags, head in zip(upos, heads):
        h, tags = np.asarray(head[1:]), np.asarray(tags)
        m = np.arange(1, len(head))[h >= 0]
        h = h[h >= 0]
        np.maximum.at(longest, (tags[h], tags[m], (m > h).astype(np.int64)), np.abs(m - h))
    limits = np.minimum(ARC_SLACK * longest, NO_LIMIT).astype(np.int32)
    limits[[ROOT_ID, UNK_ID]] = NO_LIMIT
    limits[:, [ROOT_ID, UNK_ID]] = NO_LIMIT
    return limits


def label_lists(allowed):
    """The `Weights.label_lists` of a `label_filter` table: int16 (U, U, 2, R+1), the number of
    allowed labels, then their ids in increasing order (the others after them, never read)."""
    lists = np.empty(allowed.shape[:3] + (allowed.shape[3] + 1,), dtype=np.int16)
    lists[..., 0] = allowed.sum(axis=3)
    lists[..., 1:] = np.argsort(~allowed, axis=3, kind="stable")
    return lists


@njit(cache=True)
def label_scores(attrs, weights):
    """float64 (n+1, n+1, R) label scores w . f_label(h, m, r) (w: the `Weights` record; 0 on the
    diagonal, in column 0 and on the arcs its ``arc_limits`` leave out, -inf for the labels its
    ``label_lists`` leave out)."""
    n1 = attrs.shape[1] - 2
    layout = weights.layout
    R = layout[LY_NLAB]
    out = np.empty(MAX_LABEL_TEMPLATES, dtype=np.int64)
    ls = np.empty((n1, n1, R))  # each row written once (zeroing it all first: 2% of a parse)
    dense, codes, codebook = weights.dense, weights.codes, weights.codebook
    lists, limits, utag = weights.label_lists, weights.arc_limits, attrs[A_UTAG]
    filtered = lists.shape[0] > 0
    # a compact store: the blocks of the child and direction alone summed once per child and
    # direction (float16 levels: exact sums in any order, so the same scores, bit for bit)
    by_child = dense.shape[0] == 0
    part = ARC_KEYS if by_child else ALL_KEYS
    if by_child:
        child_rows = np.zeros((n1, 2, R))
        for m in range(1, n1):
            for right in range(2):
                k = label_blocks(attrs, layout, m - 1 if right else m + 1, m, out, CHILD_KEYS)
                add_blocks(dense, codes, codebook, out, k, child_rows[m, right])
    for h in range(n1):
        ls[h, 0, :] = 0.0
        for m in range(1, n1):
            row = ls[h, m]
            if m == h or not arc_allowed(limits, utag, h, m):
                row[:] = 0.0
                continue
            right = 1 if m > h else 0
            k = label_blocks(attrs, layout, h, m, out, part)
            if filtered:
                # each allowed label summed over the blocks in block order, as add_blocks does
                allowed = lists[attrs[A_UTAG, h + 1], attrs[A_UTAG, m + 1], right]
                row[:] = -np.inf
                if by_child:
                    for i in range(k):
                        _prefetch(codes, out[i])
                for j in range(1, allowed[0] + 1):
                    r = allowed[j]
                    v = child_rows[m, right, r] if by_child else 0.0
                    for i in range(k):
                        v += codebook[codes[out[i] + r]] if by_child else dense[out[i] + r]
                    row[r] = v
                continue
            if by_child:
                row[:] = child_rows[m, right]
            else:
                row[:] = 0.0
            add_blocks(dense, codes, codebook, out, k, row)
    return ls


@njit(cache=True)
def label_scatter(attrs, layout, coef, grad, dirty, arc_weight, min_coef):
    """grad[block + r] += coef[h, m, r] for every label template block of arcs with
    |arc_weight[h, m]| > min_coef (arc_weight: float64 (n+1, n+1), e.g. the arc marginal)."""
    n1 = attrs.shape[1] - 2
    R = layout[LY_NLAB]
    out = np.empty(MAX_LABEL_TEMPLATES, dtype=np.int64)
    for h in range(n1):
        for m in range(1, n1):
            if m == h or abs(arc_weight[h, m]) <= min_coef:
                continue
            k = label_blocks(attrs, layout, h, m, out)
            for i in range(k):
                b = out[i]
                for r in range(R):
                    grad[b + r] += coef[h, m, r]
                if dirty.shape[0] > 0:
                    for q in range(b >> DIRTY_SHIFT, ((b + R - 1) >> DIRTY_SHIFT) + 1):
                        dirty[q] = 1
