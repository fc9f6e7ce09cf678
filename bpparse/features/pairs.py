"""GRAND and SIB templates (Smith & Eisner 2008 §8.2): tag triples and pairs with direction and
binned distance, tabled per sentence; scores and gradient scatter."""
import numpy as np

from bpparse.features.attributes import second_distance_bin
from bpparse.features.hashing import (
    _block_entry,
    _emit,
    _emit2,
    _h0,
    _hc,
    _index,
    _slot,
    prefetch_words,
)
from bpparse.features.layout import (
    LY_RANKED,
    A_FTAG,
    A_UTAG,
    A_WORD,
    BLOCK,
    DIRTY_SHIFT,
    LY_FINE,
    LY_SEC_BLOCKS,
    LY_SEC_OFF,
    LY_SECOND_WORDS,
    MAX_PAIR_FEATURES,
)
from bpparse.features.store import (
    block_groups,
    scatter_block_groups,
    sum_block_groups,
    sum_weights,
)
from bpparse.jit import LEAF, njit


@njit(cache=True)
def grand_features(attrs, layout, mask, g, h, m, out):
    """Indices into theta of the GRAND g -> h -> m features (SE08 §8.2); returns the count.

    Tag triples and grandparent/child pairs (coarse and fine), conjoined with the pair of directions
    and with direction and binned distance of h -> m; plus indicators that g lies between h and m.
    """
    ranked = layout[LY_RANKED] != 0
    off = layout[LY_SEC_OFF]
    nb = layout[LY_SEC_BLOCKS]
    dirs, code2 = _grand_codes(g, h, m)
    G = g + 1
    H = h + 1
    M = m + 1
    k = 0
    n_kinds = 2 if layout[LY_FINE] != 0 else 1
    for kind in range(n_kinds):
        row = A_UTAG if kind == 0 else A_FTAG
        t = 700 + 10 * kind
        gt = attrs[row, G]
        ht = attrs[row, H]
        mt = attrs[row, M]
        k = _emit2(out, k, _hc(_hc(_hc(_h0(t + 1), gt), ht), mt), off, nb, dirs, code2, mask, ranked)
        k = _emit2(out, k, _hc(_hc(_h0(t + 2), gt), mt), off, nb, dirs, code2, mask, ranked)
    if (h < g < m) or (m < g < h):
        k = _emit(out, k, _h0(731), off, nb, dirs, mask, ranked)
        hk = _hc(_hc(_h0(732), attrs[A_UTAG, H]), attrs[A_UTAG, M])
        k = _emit(out, k, hk, off, nb, dirs, mask, ranked)
    if layout[LY_SECOND_WORDS] != 0:
        for key in _word_keys(attrs, 750, g, h, m):
            k = _emit2(out, k, key, off, nb, dirs, code2, mask, ranked)
    return k


@njit(cache=True, inline="always")
def _word_keys(attrs, template, a, b, c):
    """Key hashes of the lexicalised second-order templates of tokens a, b, c (GRAND g, h, m or SIB
    h, m, s): one word with the other two coarse tags, for each position, and the a-c word pair
    (Koo & Collins 2010-style; ``features.second_order_words``)."""
    A, B, C = a + 1, b + 1, c + 1
    aw, bw, cw = attrs[A_WORD, A], attrs[A_WORD, B], attrs[A_WORD, C]
    at, bt, ct = attrs[A_UTAG, A], attrs[A_UTAG, B], attrs[A_UTAG, C]
    return (_hc(_hc(_hc(_h0(template + 1), aw), bt), ct),
            _hc(_hc(_hc(_h0(template + 2), at), bw), ct),
            _hc(_hc(_hc(_h0(template + 3), at), bt), cw),
            _hc(_hc(_h0(template + 4), aw), cw))


@njit(cache=True, inline="always")
def _grand_codes(g, h, m):
    """(directions, distance code) of GRAND g -> h -> m: slot 1 + 2·[g < h] + [h < m] for the pair
    of directions, and the direction and binned length of h -> m."""
    r2 = 1 if m > h else 0
    d = m - h if r2 == 1 else h - m
    return 1 + (2 if h > g else 0) + r2, 5 + r2 * 5 + second_distance_bin(d)


@njit(cache=True, inline="always")
def _sib_side_code(h, m, s):
    """(side, distance code) of SIB h -> {m, s}, m < s: side 0 = both right of h, 1 = both left,
    2 = one each side; the code is the direction and binned length of the farther sibling's link."""
    if h < m:
        side = 0
        far = s
    elif s < h:
        side = 1
        far = m
    else:
        side = 2
        far = m if h - m > s - h else s
    right = far > h
    d = far - h if right else h - far
    return side, 4 + (5 if right else 0) + second_distance_bin(d)


@njit(cache=True)
def sib_features(attrs, layout, mask, h, m, s, out):
    """Indices into theta of the SIB h -> {m, s} (m < s) features (SE08 §8.2); returns the count.

    Parent-sibling-sibling tag triples and sibling tag pairs (coarse and fine), conjoined with the
    sides of the siblings and with the signed binned length of the farther sibling's link.
    """
    ranked = layout[LY_RANKED] != 0
    off = layout[LY_SEC_OFF]
    nb = layout[LY_SEC_BLOCKS]
    side, code2 = _sib_side_code(h, m, s)
    H = h + 1
    M = m + 1
    S = s + 1
    k = 0
    n_kinds = 2 if layout[LY_FINE] != 0 else 1
    for kind in range(n_kinds):
        row = A_UTAG if kind == 0 else A_FTAG
        t = 800 + 10 * kind
        ht = attrs[row, H]
        mt = attrs[row, M]
        st = attrs[row, S]
        k = _emit2(out, k, _hc(_hc(_hc(_h0(t + 1), ht), mt), st), off, nb, 1 + side, code2, mask, ranked)
        k = _emit2(out, k, _hc(_hc(_h0(t + 2), mt), st), off, nb, 1 + side, code2, mask, ranked)
    if layout[LY_SECOND_WORDS] != 0:
        for key in _word_keys(attrs, 850, h, m, s):
            k = _emit2(out, k, key, off, nb, 1 + side, code2, mask, ranked)
    return k




# Second-order templates are functions of tags, so a sentence has few distinct keys: the block of every
# (tag, tag, tag) key is looked up once per sentence (`pair_tables`) instead of hashing per factor.

@njit(cache=True)
def _local_tags(attrs, row, loc, kind):
    """Map each token's tag in ``row`` to a sentence-local index; returns (values, count)."""
    n1 = attrs.shape[1] - 2
    vals = np.empty(n1, dtype=np.int64)
    u = 0
    for i in range(n1):
        v = attrs[row, i + 1]
        j = 0
        while j < u and vals[j] != v:
            j += 1
        if j == u:
            vals[u] = v
            u += 1
        loc[kind, i] = j
    return vals[:u], u


@njit(cache=True)
def pair_tables(attrs, layout):
    """Block start indices of every GRAND / SIB template key that can occur in one sentence.

    Returns (loc, g3, g2, x2, x1, s3, s2): loc int64 (2, n+1) local tag index of each token per kind
    (0 coarse, 1 fine); g3 (2, U, U, U) GRAND tag triples [g, h, m]; g2 (2, U, U) GRAND [g, m];
    x2 (U, U) crossing indicator with coarse tags [h, m]; x1 the plain crossing indicator's block;
    s3 (2, U, U, U) SIB [h, m, s]; s2 (2, U, U) SIB [m, s]. The keys are those of `grand_features`
    and `sib_features`, so `pair_features_tabled` enumerates exactly the same indices.
    """
    n1 = attrs.shape[1] - 2
    off = layout[LY_SEC_OFF]
    nb = np.uint64(layout[LY_SEC_BLOCKS])
    n_kinds = 2 if layout[LY_FINE] != 0 else 1
    loc = np.zeros((2, n1), dtype=np.int64)
    v0, u0 = _local_tags(attrs, np.int64(A_UTAG), loc, np.int64(0))
    if n_kinds == 2:
        v1, u1 = _local_tags(attrs, np.int64(A_FTAG), loc, np.int64(1))
    else:
        v1, u1 = v0, 0
    U = max(u0, u1)
    g3 = np.zeros((2, U, U, U), dtype=np.int64)
    g2 = np.zeros((2, U, U), dtype=np.int64)
    s3 = np.zeros((2, U, U, U), dtype=np.int64)
    s2 = np.zeros((2, U, U), dtype=np.int64)
    x2 = np.zeros((U, U), dtype=np.int64)
    for kind in range(n_kinds):
        vals = v0 if kind == 0 else v1
        u = u0 if kind == 0 else u1
        tg = 700 + 10 * kind
        ts = 800 + 10 * kind
        for i in range(u):
            for j in range(u):
                g2[kind, i, j] = off + _slot(_hc(_hc(_h0(tg + 2), vals[i]), vals[j]), nb) * BLOCK
                s2[kind, i, j] = off + _slot(_hc(_hc(_h0(ts + 2), vals[i]), vals[j]), nb) * BLOCK
                for k in range(u):
                    key = _hc(_hc(_hc(_h0(tg + 1), vals[i]), vals[j]), vals[k])
                    g3[kind, i, j, k] = off + _slot(key, nb) * BLOCK
                    key = _hc(_hc(_hc(_h0(ts + 1), vals[i]), vals[j]), vals[k])
                    s3[kind, i, j, k] = off + _slot(key, nb) * BLOCK
    for i in range(u0):
        for j in range(u0):
            x2[i, j] = off + _slot(_hc(_hc(_h0(732), v0[i]), v0[j]), nb) * BLOCK
    x1 = off + _slot(_h0(731), nb) * BLOCK
    return loc, g3, g2, x2, x1, s3, s2


@njit(cache=True, inline="always")
def _put3(out, k, base, c1, c2, mask, ranked, blocks):
    if blocks:  # one block entry (`store.BlockGroups`)
        out[k] = _block_entry(base, c1, c2)
        return k + 1
    if mask.shape[0] == 0:  # every slot, no test
        out[k] = base
        out[k + 1] = base + c1
        if c2 > 0:
            out[k + 2] = base + c2
            return k + 3
        return k + 2
    j = _index(mask, ranked, base)
    if j >= 0:
        out[k] = j
        k += 1
    j = _index(mask, ranked, base + c1)
    if j >= 0:
        out[k] = j
        k += 1
    if c2 > 0:
        j = _index(mask, ranked, base + c2)
        if j >= 0:
            out[k] = j
            k += 1
    return k


@njit(cache=True, **LEAF)
def pair_features_tabled(attrs, layout, mask, tables, a, b, n1, is_grand, out, blocks=False):
    """`grand_features` / `sib_features` of the pair (a, b) from ``tables`` = `pair_tables`: same
    indices; with ``blocks`` one block entry per key (`hashing._block_entry`), ``mask`` unread:
    the rank words are read afterwards (`store.BlockGroups`)."""
    ranked = layout[LY_RANKED] != 0
    loc, g3, g2, x2, x1, s3, s2 = tables
    n_kinds = 2 if layout[LY_FINE] != 0 else 1
    words = layout[LY_SECOND_WORDS] != 0
    off = layout[LY_SEC_OFF]
    nb = np.uint64(layout[LY_SEC_BLOCKS])
    k = 0
    if is_grand:
        g = a // n1
        h = a % n1
        m = b % n1
        dirs, code2 = _grand_codes(g, h, m)
        for kind in range(n_kinds):
            lg = loc[kind, g]
            lh = loc[kind, h]
            lm = loc[kind, m]
            k = _put3(out, k, g3[kind, lg, lh, lm], dirs, code2, mask, ranked, blocks)
            k = _put3(out, k, g2[kind, lg, lm], dirs, code2, mask, ranked, blocks)
        if (h < g < m) or (m < g < h):
            k = _put3(out, k, x1, dirs, 0, mask, ranked, blocks)
            k = _put3(out, k, x2[loc[0, h], loc[0, m]], dirs, 0, mask, ranked, blocks)
        if words:
            for key in _word_keys(attrs, 750, g, h, m):
                k = _put3(out, k, off + _slot(key, nb) * BLOCK, dirs, code2, mask, ranked, blocks)
        return k
    h = a // n1
    m = a % n1
    s = b % n1
    side, code2 = _sib_side_code(h, m, s)
    for kind in range(n_kinds):
        lh = loc[kind, h]
        lm = loc[kind, m]
        ls = loc[kind, s]
        k = _put3(out, k, s3[kind, lh, lm, ls], 1 + side, code2, mask, ranked, blocks)
        k = _put3(out, k, s2[kind, lm, ls], 1 + side, code2, mask, ranked, blocks)
    if words:
        for key in _word_keys(attrs, 850, h, m, s):
            k = _put3(out, k, off + _slot(key, nb) * BLOCK, 1 + side, code2, mask, ranked, blocks)
    return k


PAIR_CHUNK = 64  # factors whose block entries are gathered before their weights are read


@njit(cache=True)
def pair_scores(attrs, weights, pair_a, pair_b, n_grand):
    """float64 (n_pairs,) log-potentials of pairwise factors (GRAND first, then SIB).

    pair_a, pair_b: int64 arc indices a = h*(n+1)+m (GRAND g->h->m: a = (g,h), b = (h,m);
    SIB h->{m,s}, m<s: a = (h,m), b = (h,s)); the first n_grand pairs are GRAND. Sums the
    `Weights` over the indices `pair_features_tabled` enumerates (as `pair_scatter` does), the
    feature keys of the sentence's tags hashed once in `pair_tables`; with training's
    `CompactSpace` (rank words) PAIR_CHUNK factors at a time (`sum_block_groups`).
    """
    n1 = attrs.shape[1] - 2
    layout, mask = weights.layout, weights.mask
    tables = pair_tables(attrs, layout)
    P = pair_a.shape[0]
    w = np.zeros(P)
    if layout[LY_RANKED] == 0:
        out = np.empty(MAX_PAIR_FEATURES, dtype=np.int64)
        for p in range(P):
            k = pair_features_tabled(attrs, layout, mask, tables, pair_a[p], pair_b[p], n1,
                                     p < n_grand, out)
            w[p] = sum_weights(weights, out, k)
        return w
    groups = block_groups(PAIR_CHUNK * MAX_PAIR_FEATURES, PAIR_CHUNK)
    for c0 in range(0, P, PAIR_CHUNK):
        n = min(P - c0, PAIR_CHUNK)
        k = 0
        for p in range(n):
            groups.start[p] = k
            k0 = k
            k += pair_features_tabled(attrs, layout, mask, tables, pair_a[c0 + p], pair_b[c0 + p],
                                      n1, c0 + p < n_grand, groups.entries[k:], True)
            prefetch_words(mask, groups.entries, k0, k)
        groups.start[n] = k
        sum_block_groups(weights, groups, n, w[c0:])
    return w


@njit(cache=True)
def pair_scatter(attrs, layout, mask, pair_a, pair_b, n_grand, coef, grad, dirty, min_coef):
    """grad[f] += coef[p] for every feature f of pairwise factor p with |coef[p]| > min_coef
    (touched pages flagged in ``dirty`` unless it is empty); with a rank mask (training's
    `CompactSpace`) PAIR_CHUNK factors at a time (`scatter_block_groups`)."""
    n1 = attrs.shape[1] - 2
    tables = pair_tables(attrs, layout)
    if layout[LY_RANKED] == 0:
        out = np.empty(MAX_PAIR_FEATURES, dtype=np.int64)
        for p in range(pair_a.shape[0]):
            c = coef[p]
            if abs(c) <= min_coef:
                continue
            k = pair_features_tabled(attrs, layout, mask, tables, pair_a[p], pair_b[p], n1,
                                     p < n_grand, out)
            for i in range(k):
                grad[out[i]] += c
                if dirty.shape[0] > 0:
                    dirty[out[i] >> DIRTY_SHIFT] = 1
        return
    groups = block_groups(PAIR_CHUNK * MAX_PAIR_FEATURES, PAIR_CHUNK)
    coefs = np.empty(PAIR_CHUNK)
    n = 0
    k = 0
    for p in range(pair_a.shape[0]):
        c = coef[p]
        if abs(c) > min_coef:
            groups.start[n] = k
            coefs[n] = c
            k += pair_features_tabled(attrs, layout, mask, tables, pair_a[p], pair_b[p], n1,
                                      p < n_grand, groups.entries[k:], True)
            n += 1
        if n > 0 and (n == PAIR_CHUNK or p == pair_a.shape[0] - 1):
            groups.start[n] = k
            scatter_block_groups(mask, groups, n, coefs, grad, dirty)
            n = 0
            k = 0
