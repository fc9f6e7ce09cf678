"""CHILDSEQ templates: the adjacent-sibling features of McDonald & Pereira (2006) on the head
automata's transitions (SE08 §3; docs/design.md §8), scores and gradient scatter.

A transition (h, a, b) of head h on one side: a = h is the start (#), b = h the stop (#), else a, b
are adjacent children, b the farther from h. Templates, with # as its own tag and word value:
(head tag, a tag, b tag) and (a tag, b tag), coarse and fine; with ``second_order_words`` also one
word of h, a, b with the other two tags, and the a-b word pair. Each is conjoined (block slots)
with the side and with side × the binned distance |b − a| (start: |b − h|, stop: |a − h|).
"""
import numpy as np

from bpparse.features.attributes import second_distance_bin
from bpparse.features.hashing import _block_entry, _emit2, _h0, _hc, _slot, prefetch_words
from bpparse.features.layout import (
    BLOCK,
    LY_RANKED,
    A_FTAG,
    A_UTAG,
    A_WORD,
    DIRTY_SHIFT,
    LY_FINE,
    LY_SEC_BLOCKS,
    LY_SEC_OFF,
    LY_SECOND_WORDS,
    MAX_PAIR_FEATURES,
)
from bpparse.features.store import (block_groups, sum_block_groups,
                                    sum_weights)
from bpparse.jit import LEAF, njit

SEQ_MARK = -4  # tag and word value of # (start or stop of a child sequence)
SEQ_CHUNK = 32  # transitions whose block entries are gathered before their weights are read


@njit(cache=True, inline="always")
def _value(attrs, row, h, x):
    return SEQ_MARK if x == h else attrs[row, x + 1]


@njit(cache=True, **LEAF)
def childseq_features(attrs, layout, mask, h, a, b, out, blocks=False):
    """Indices into theta of the features of CHILDSEQ transition (h, a, b) (module doc); returns
    the count written to ``out``. With ``blocks`` one block entry per key instead
    (`hashing._block_entry`: slots 0, code1 and code2), ``mask`` unread."""
    ranked = layout[LY_RANKED] != 0
    off = layout[LY_SEC_OFF]
    nb = layout[LY_SEC_BLOCKS]
    far = a if b == h else b
    side = 1 if far > h else 0
    near = h if (a == h or b == h) else a
    code2 = 3 + 5 * side + second_distance_bin(abs(far - near))
    code1 = 1 + side
    k = 0
    n_kinds = 2 if layout[LY_FINE] != 0 else 1
    for kind in range(n_kinds):
        row = A_UTAG if kind == 0 else A_FTAG
        t = 900 + 10 * kind
        at = _value(attrs, row, h, a)
        bt = _value(attrs, row, h, b)
        k = _put(out, k, _hc(_hc(_hc(_h0(t + 1), attrs[row, h + 1]), at), bt), off, nb, code1,
                 code2, mask, ranked, blocks)
        k = _put(out, k, _hc(_hc(_h0(t + 2), at), bt), off, nb, code1, code2, mask, ranked, blocks)
    if layout[LY_SECOND_WORDS] != 0:
        ht, at, bt = attrs[A_UTAG, h + 1], _value(attrs, A_UTAG, h, a), _value(attrs, A_UTAG, h, b)
        hw, aw, bw = attrs[A_WORD, h + 1], _value(attrs, A_WORD, h, a), _value(attrs, A_WORD, h, b)
        for key in (_hc(_hc(_hc(_h0(951), hw), at), bt), _hc(_hc(_hc(_h0(952), ht), aw), bt),
                    _hc(_hc(_hc(_h0(953), ht), at), bw), _hc(_hc(_h0(954), aw), bw)):
            k = _put(out, k, key, off, nb, code1, code2, mask, ranked, blocks)
    return k


@njit(cache=True, inline="always")
def _put(out, k, key, off, nb, code1, code2, mask, ranked, blocks):
    if blocks:
        out[k] = _block_entry(off + _slot(key, nb) * BLOCK, code1, code2)
        return k + 1
    return _emit2(out, k, key, off, nb, code1, code2, mask, ranked)


@njit(cache=True, inline="always")
def _endpoint(seq_head, start, child, s, j):
    """Token at position j (0 = #, the head itself) of segment s."""
    return seq_head[s] if j == 0 else child[start[s] + j - 1]


@njit(cache=True)
def childseq_scores(attrs, weights, seq_head, start, child, w_start):
    """float64 log-potentials of every transition of the segments (`ChildSeqFactors` layout:
    segment s's flat (c+1, c+1) matrix at ``w[w_start[s]:w_start[s+1]]``; unused entries 0).
    With training's `CompactSpace` (rank words) SEQ_CHUNK transitions at a time
    (`sum_block_groups`: the same sums, their cache misses overlapped)."""
    layout, mask = weights.layout, weights.mask
    grouped = layout[LY_RANKED] != 0
    out = np.empty(0 if grouped else MAX_PAIR_FEATURES, dtype=np.int64)
    groups = block_groups(SEQ_CHUNK * MAX_PAIR_FEATURES if grouped else 0, SEQ_CHUNK)
    at = np.empty(SEQ_CHUNK, dtype=np.int64)  # where each gathered transition's score goes
    sums = np.empty(SEQ_CHUNK)
    w = np.zeros(w_start[-1])
    g = k = 0
    for s in range(seq_head.shape[0]):
        h = seq_head[s]
        d = start[s + 1] - start[s] + 1
        for j in range(d):
            a = _endpoint(seq_head, start, child, s, j)
            for l in range(1 if j == 0 else 0, d):
                if 0 < l <= j:
                    continue
                b = _endpoint(seq_head, start, child, s, l)
                if not grouped:
                    w[w_start[s] + j * d + l] = sum_weights(
                        weights, out, childseq_features(attrs, layout, mask, h, a, b, out))
                    continue
                groups.start[g] = k
                k0 = k
                k += childseq_features(attrs, layout, mask, h, a, b, groups.entries[k:], True)
                prefetch_words(mask, groups.entries, k0, k)
                at[g] = w_start[s] + j * d + l
                g += 1
                if g == SEQ_CHUNK:
                    _add_group_sums(weights, groups, g, k, sums, at, w)
                    g = k = 0
    if g > 0:
        _add_group_sums(weights, groups, g, k, sums, at, w)
    return w


@njit(cache=True, inline="always")
def _add_group_sums(weights, groups, g, k, sums, at, w):
    """w[at[q]] = the sum of gathered transition q's weights, q < g (k entries gathered)."""
    groups.start[g] = k
    sum_block_groups(weights, groups, g, sums)
    for q in range(g):
        w[at[q]] = sums[q]


@njit(cache=True)
def childseq_scatter(attrs, layout, mask, seq_head, start, child, w_start, coef, grad, dirty,
                     min_coef):
    """grad[f] += coef[e] for every feature f of transition e (aligned with the segments' flat
    log-potentials) with |coef[e]| > min_coef; touched pages flagged in ``dirty`` unless empty."""
    out = np.empty(MAX_PAIR_FEATURES, dtype=np.int64)
    for s in range(seq_head.shape[0]):
        h = seq_head[s]
        d = start[s + 1] - start[s] + 1
        for j in range(d):
            a = _endpoint(seq_head, start, child, s, j)
            for l in range(1 if j == 0 else 0, d):
                c = coef[w_start[s] + j * d + l]
                if (0 < l <= j) or abs(c) <= min_coef:
                    continue
                k = childseq_features(attrs, layout, mask, h, a,
                                      _endpoint(seq_head, start, child, s, l), out)
                for i in range(k):
                    grad[out[i]] += c
                    if dirty.shape[0] > 0:
                        dirty[out[i] >> DIRTY_SHIFT] = 1


@njit(cache=True)
def mark_childseq_features(attrs, layout, heads, mask):
    """Set the mask bits of the CHILDSEQ features of every transition of the gold tree ``heads``."""
    n1 = attrs.shape[1] - 2
    nomask = np.empty(0, dtype=np.uint64)
    out = np.empty(MAX_PAIR_FEATURES, dtype=np.int64)
    one = np.uint64(1)
    for h in range(n1):
        for side in range(2):
            prev = h
            m = h - 1 if side == 0 else h + 1
            while 0 < m < n1:
                if heads[m] == h:
                    k = childseq_features(attrs, layout, nomask, h, prev, m, out)
                    for i in range(k):
                        mask[out[i] >> 6] |= one << np.uint64(out[i] & 63)
                    prev = m
                m += -1 if side == 0 else 1
            if prev != h:
                k = childseq_features(attrs, layout, nomask, h, prev, h, out)
                for i in range(k):
                    mask[out[i] >> 6] |= one << np.uint64(out[i] & 63)
