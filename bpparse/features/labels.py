"""Label templates: one hashed key selects a block of R label weights (docs/design.md §4)."""
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
from bpparse.features.store import add_blocks
from bpparse.jit import njit


@njit(cache=True)
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


@njit(cache=True)
def label_scores(attrs, weights):
    """float64 (n+1, n+1, R) label scores w . f_label(h, m, r) (w: the `Weights` record; 0 on the
    diagonal and in column 0)."""
    n1 = attrs.shape[1] - 2
    layout = weights.layout
    R = layout[LY_NLAB]
    out = np.empty(MAX_LABEL_TEMPLATES, dtype=np.int64)
    ls = np.zeros((n1, n1, R))
    dense, codes, codebook = weights.dense, weights.codes, weights.codebook
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
        for m in range(1, n1):
            if m == h:
                continue
            row = ls[h, m]
            if by_child:
                row[:] = child_rows[m, 1 if m > h else 0]
            k = label_blocks(attrs, layout, h, m, out, part)
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
