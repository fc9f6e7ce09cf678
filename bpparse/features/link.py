"""LINK templates (McDonald et al. 2005): enumeration, scores and gradient scatter."""
import numpy as np

from bpparse.features.attributes import link_distance_bin
from bpparse.features.hashing import (
    _block_entry,
    _emit,
    _h0,
    _hc,
    _prefetch,
    _slot,
    prefetch_words,
)
from bpparse.features.layout import (
    ALL_KEYS,
    ARC_KEYS,
    BLOCK,
    CHILD_KEYS,
    HEAD_KEYS,
    LY_RANKED,
    A_FEATS,
    A_FTAG,
    A_LEMMA,
    A_MORPH,
    A_PREFIX,
    A_SUFFIX,
    A_UTAG,
    A_WORD,
    DIRTY_SHIFT,
    LY_CONTEXT_WORDS,
    LY_FEATS,
    LY_FINE,
    LY_LEMMA,
    LY_LINK_BLOCKS,
    LY_LINK_OFF,
    LY_MORPH,
    MAX_FIXED_LINK_FEATURES,
    M_CASE,
    M_NUMBER,
    M_NUMBER_PSOR,
    M_PERSON,
    M_PERSON_PSOR,
    N_MORPH,
)
from bpparse.features.store import (
    add_blocks,
    arc_allowed,
    block_groups,
    dense_weights,
    scatter_block_groups,
    sum_block_groups,
    sum_weights,
)
from bpparse.jit import LEAF, njit


@njit(cache=True, inline="always")
def link_code(h, m):
    """The conjunction slot (1..14 of a key's BLOCK) of arc h -> m: direction and distance bin."""
    right = m > h
    return 1 + (7 if right else 0) + link_distance_bin(m - h if right else h - m)


@njit(cache=True, **LEAF)
def link_features(attrs, layout, mask, h, m, between, n_between, out, keys, blocks=False,
                  part=ALL_KEYS):
    """Indices into theta of the LINK features of arc h -> m; returns how many were written.
    With ``blocks`` one block entry per key instead (`hashing._block_entry`: the plain and the
    conjoined slot), ``mask`` unread: the rank words are read afterwards (`store.BlockGroups`).

    attrs: int64 (NUM_ATTRS, n+3) from sentence_attributes; between: int64 codes tag*2 + kind
    (kind 0 = coarse, 1 = fine) of the distinct tags strictly between h and m, first n_between used;
    out: int64 buffer of at least MAX_FIXED_LINK_FEATURES + 2 * n_between; keys: uint64 scratch of at
    least MAX_FIXED_LINK_FEATURES / 2 + n_between. Every template is emitted plain and conjoined with
    direction and binned distance (McDonald et al. 2005, Table 1). The template keys are hashed
    first and emitted in one loop: one copy of the emission code instead of ninety (compiling this
    kernel took 45 s of the first run when each template had its own).
    ``part``: which keys (`ALL_KEYS`; `HEAD_KEYS` / `CHILD_KEYS`, those of one end's word alone,
    whose sums `word_link_sums` takes once per word; `ARC_KEYS`, the others), in the same order.
    """
    ranked = layout[LY_RANKED] != 0
    off = layout[LY_LINK_OFF]
    nb = layout[LY_LINK_BLOCKS]
    fine = layout[LY_FINE] != 0
    code = link_code(h, m)
    H = h + 1
    M = m + 1
    hw = attrs[A_WORD, H]
    cw = attrs[A_WORD, M]
    hpre = attrs[A_PREFIX, H]
    cpre = attrs[A_PREFIX, M]
    hf = attrs[A_FTAG, H]
    cf = attrs[A_FTAG, M]
    head = part == ALL_KEYS or part == HEAD_KEYS
    child = part == ALL_KEYS or part == CHILD_KEYS
    arc = part == ALL_KEYS or part == ARC_KEYS
    nk = 0
    # words, prefixes and word bigrams (kind independent)
    if head:
        nk = _key(keys, nk, _hc(_h0(1), hw))
    if child:
        nk = _key(keys, nk, _hc(_h0(2), cw))
    if head:
        nk = _key(keys, nk, _hc(_h0(3), hpre))
    if child:
        nk = _key(keys, nk, _hc(_h0(4), cpre))
    if arc:
        nk = _key(keys, nk, _hc(_hc(_h0(5), hw), cw))
        nk = _key(keys, nk, _hc(_hc(_h0(6), hpre), cpre))
        # word/fine-tag bigrams (fine tag = UPOS when the treebank has no XPOS)
        nk = _key(keys, nk, _hc(_hc(_hc(_hc(_h0(7), hw), hf), cw), cf))
        nk = _key(keys, nk, _hc(_hc(_hc(_h0(8), hw), cw), cf))
        nk = _key(keys, nk, _hc(_hc(_hc(_h0(9), hw), hf), cw))
        nk = _key(keys, nk, _hc(_hc(_h0(10), hpre), cf))
        nk = _key(keys, nk, _hc(_hc(_h0(11), hf), cpre))
    n_kinds = 2 if fine else 1
    for kind in range(n_kinds):
        row = A_UTAG if kind == 0 else A_FTAG
        t = 100 * (kind + 1)
        ht = attrs[row, H]
        ct = attrs[row, M]
        if head:
            nk = _key(keys, nk, _hc(_hc(_h0(t + 1), hw), ht))
            nk = _key(keys, nk, _hc(_h0(t + 2), ht))
        if child:
            nk = _key(keys, nk, _hc(_hc(_h0(t + 3), cw), ct))
            nk = _key(keys, nk, _hc(_h0(t + 4), ct))
        if not arc:
            continue
        nk = _key(keys, nk, _hc(_hc(_hc(_h0(t + 5), ht), cw), ct))
        nk = _key(keys, nk, _hc(_hc(_hc(_h0(t + 6), hw), ht), ct))
        nk = _key(keys, nk, _hc(_hc(_h0(t + 7), ht), ct))
        hl = attrs[row, H - 1]
        hr = attrs[row, H + 1]
        cl = attrs[row, M - 1]
        cr = attrs[row, M + 1]
        nk = _key(keys, nk, _hc(_hc(_hc(_hc(_h0(t + 8), ht), hr), cl), ct))
        nk = _key(keys, nk, _hc(_hc(_hc(_hc(_h0(t + 9), hl), ht), cl), ct))
        nk = _key(keys, nk, _hc(_hc(_hc(_hc(_h0(t + 10), ht), hr), ct), cr))
        nk = _key(keys, nk, _hc(_hc(_hc(_hc(_h0(t + 11), hl), ht), ct), cr))
        # 3-tag back-offs of the surrounding templates
        nk = _key(keys, nk, _hc(_hc(_hc(_h0(t + 12), ht), hr), ct))
        nk = _key(keys, nk, _hc(_hc(_hc(_h0(t + 13), ht), cl), ct))
        nk = _key(keys, nk, _hc(_hc(_hc(_h0(t + 14), hl), ht), ct))
        nk = _key(keys, nk, _hc(_hc(_hc(_h0(t + 15), ht), ct), cr))
    for i in range(n_between if arc else 0):
        b = between[i]
        kind = b & 1
        row = A_UTAG if kind == 0 else A_FTAG
        nk = _key(keys, nk, _hc(_hc(_hc(_h0(300 + kind), attrs[row, H]), b >> 1), attrs[row, M]))
    if arc and layout[LY_CONTEXT_WORDS] != 0:
        # the word just before / after each end with both UPOS: a child's preposition or
        # article (its own dependent in UD) tells a first-order model where the child goes
        hu = attrs[A_UTAG, H]
        cu = attrs[A_UTAG, M]
        for p, t in ((M - 1, 601), (M + 1, 602), (H - 1, 603), (H + 1, 604)):
            nk = _key(keys, nk, _hc(_hc(_hc(_h0(t), hu), cu), attrs[A_WORD, p]))
    if layout[LY_LEMMA] != 0:
        hlem = attrs[A_LEMMA, H]
        clem = attrs[A_LEMMA, M]
        if head:
            nk = _key(keys, nk, _hc(_h0(401), hlem))
        if child:
            nk = _key(keys, nk, _hc(_h0(402), clem))
        if arc:
            nk = _key(keys, nk, _hc(_hc(_h0(403), hlem), clem))
            nk = _key(keys, nk, _hc(_hc(_h0(404), hlem), cf))
            nk = _key(keys, nk, _hc(_hc(_h0(405), hf), clem))
    if layout[LY_FEATS] != 0:
        hx = attrs[A_FEATS, H]
        cx = attrs[A_FEATS, M]
        hu = attrs[A_UTAG, H]
        cu = attrs[A_UTAG, M]
        if head:
            nk = _key(keys, nk, _hc(_hc(_h0(501), hx), hu))
        if child:
            nk = _key(keys, nk, _hc(_hc(_h0(502), cx), cu))
        if arc:
            nk = _key(keys, nk, _hc(_hc(_hc(_h0(503), hx), cx), cu))
            nk = _key(keys, nk, _hc(_hc(_hc(_h0(504), hu), hx), cx))
            nk = _key(keys, nk, _hc(_hc(_hc(_hc(_h0(505), hu), hx), cu), cx))
    if arc and layout[LY_MORPH] != 0:
        nk = _morph_keys(attrs, H, M, keys, nk)
    k = 0
    if blocks:
        for j in range(nk):
            out[j] = _block_entry(off + _slot(keys[j], nb) * BLOCK, code, 0)
        return nk
    if mask.shape[0] == 0:  # every slot, no test
        for j in range(nk):
            base = off + _slot(keys[j], nb) * BLOCK
            out[k] = base
            out[k + 1] = base + code
            k += 2
        return k
    for j in range(nk):
        k = _emit(out, k, keys[j], off, nb, code, mask, ranked)
    return k


@njit(cache=True, inline="always")
def _morph_keys(attrs, H, M, keys, nk):
    """Morphology templates of an arc (columns H, M of ``attrs``): suffixes with the other word's
    UPOS; for each attribute (`encode.MORPH_ATTRS`) the child's value with the head's UPOS, the
    head's value with the child's UPOS, and whether both share it (agreement), with both UPOS."""
    hu = attrs[A_UTAG, H]
    cu = attrs[A_UTAG, M]
    hs = attrs[A_SUFFIX, H]
    cs = attrs[A_SUFFIX, M]
    nk = _key(keys, nk, _hc(_hc(_h0(1301), hs), cu))
    nk = _key(keys, nk, _hc(_hc(_h0(1302), hu), cs))
    nk = _key(keys, nk, _hc(_hc(_hc(_h0(1303), hs), cs), cu))
    # possessive agreement (genitive child of a possessed head: Turkish, Hungarian, ...)
    hpp = attrs[A_MORPH + M_PERSON_PSOR, H]
    if hpp > 0:
        nk = _key(keys, nk, _hc(_hc(_hc(_hc(_h0(1304), attrs[A_MORPH + M_CASE, M]), hpp), hu), cu))
        nk = _key(keys, nk, _hc(_hc(_hc(_hc(_h0(1305), attrs[A_MORPH + M_PERSON, M]), hpp),
                                    attrs[A_MORPH + M_NUMBER, M]), attrs[A_MORPH + M_NUMBER_PSOR, H]))
    for a in range(N_MORPH):
        hv = attrs[A_MORPH + a, H]
        cv = attrs[A_MORPH + a, M]
        if cv > 0:
            nk = _key(keys, nk, _hc(_hc(_hc(_h0(1000 + a), cv), hu), cu))
        if hv > 0:
            nk = _key(keys, nk, _hc(_hc(_hc(_h0(1100 + a), hv), hu), cu))
        if hv > 0 and cv > 0:
            same = 1 if hv == cv else 0
            nk = _key(keys, nk, _hc(_hc(_hc(_h0(1200 + a), same), hu), cu))
    return nk


@njit(cache=True, inline="always")
def _key(keys, nk, h):
    keys[nk] = h
    return nk + 1


@njit(cache=True, inline="always")
def _add_between(attrs, pos, fine, seen, between, nb):
    """Add the tags of token ``pos`` to the distinct between-tag list (seen: presence flags)."""
    c = attrs[A_UTAG, pos + 1] * 2
    if seen[c] == 0:
        seen[c] = 1
        between[nb] = c
        nb += 1
    if fine:
        f = attrs[A_FTAG, pos + 1] * 2 + 1
        if seen[f] == 0:
            seen[f] = 1
            between[nb] = f
            nb += 1
    return nb


@njit(cache=True)
def between_capacity(attrs):
    """Size of the between-tag code space of a sentence (bounds the distinct between tags)."""
    top = 0
    n1 = attrs.shape[1] - 2
    for i in range(n1):
        top = max(top, attrs[A_UTAG, i + 1], attrs[A_FTAG, i + 1])
    return 2 * top + 2


@njit(cache=True)
def arc_between_tags(attrs, layout, h, m, between):
    """Distinct between-tag codes of arc h -> m by a direct scan (for single arcs); returns count."""
    fine = layout[LY_FINE] != 0
    seen = np.zeros(between_capacity(attrs), dtype=np.uint8)
    nb = 0
    for p in range(min(h, m) + 1, max(h, m)):
        nb = _add_between(attrs, p, fine, seen, between, nb)
    return nb


@njit(cache=True)
def word_link_sums(attrs, weights, part):
    """float64 (n+1, BLOCK), for a compact store (``weights``): [p, c] = the sum over the LINK keys
    of word p alone (``part`` `HEAD_KEYS`: p as head; `CHILD_KEYS`: as child) of the weight of
    slot c of the key's block. Every arc of p has those keys, so it adds [p, 0] + [p, code]
    (`link_code`) for them instead of looking them up again: 14 of an EWT arc's ~55 keys. A
    compact store's weights are float16 levels, whose float64 sums are exact in any order (all are
    multiples of 2^-24 below 2^16), so the scores stay the same, bit for bit."""
    n1 = attrs.shape[1] - 2
    dense, codes, codebook = weights.dense, weights.codes, weights.codebook
    entries = np.empty(MAX_FIXED_LINK_FEATURES, dtype=np.int64)
    keys = np.empty(MAX_FIXED_LINK_FEATURES // 2, dtype=np.uint64)
    between = np.empty(0, dtype=np.int64)
    sums = np.zeros((n1, BLOCK))
    for p in range(n1):
        k = link_features(attrs, weights.layout, weights.mask, p, p, between, 0, entries, keys,
                          True, part)
        for j in range(k):
            entries[j] >>= 8  # a block entry's key block start (`hashing._block_entry`)
        add_blocks(dense, codes, codebook, entries, k, sums[p])
    return sums


LINK_CHUNK = 8  # arcs whose block entries are gathered before their weights are read


@njit(cache=True)
def link_sweep(attrs, weights, coef, grad, dirty, min_coef):
    """All arcs of one sentence: scores (coef empty) or gradient scatter (coef given).

    Scoring: returns float64 (n+1, n+1) s[h, m] = w . f_link(h, m) (w: the
    `Weights` record ``weights``); diagonal, column 0 and the arcs its arc filter leaves out
    (`arc_allowed`) -inf.
    Scatter: adds coef[h, m] to grad at every LINK feature of arc h -> m whose |coef| > min_coef and
    flags the touched 16-weight pages in ``dirty`` (uint8, len(weights) >> DIRTY_SHIFT, or empty);
    returns an empty array. The between-tag sets are grown incrementally as m moves away from h.
    With training's `CompactSpace` (rank words) the block entries of LINK_CHUNK arcs of one head
    and side are gathered before their weights are read (`sum_block_groups`,
    `scatter_block_groups`); with a compact store the keys of one end's word alone are summed once
    per word (`word_link_sums`).
    """
    n1 = attrs.shape[1] - 2
    layout, mask = weights.layout, weights.mask
    fine = layout[LY_FINE] != 0
    scoring = coef.shape[0] == 0
    grouped = layout[LY_RANKED] != 0
    by_word = scoring and weights.codes.shape[0] > 0
    part = ARC_KEYS if by_word else ALL_KEYS
    if scoring:
        scores = np.full((n1, n1), -np.inf)
    else:
        scores = np.empty((0, 0))
    if by_word:
        head_sums = word_link_sums(attrs, weights, HEAD_KEYS)
        child_sums = word_link_sums(attrs, weights, CHILD_KEYS)
    cap = between_capacity(attrs)
    per_arc = MAX_FIXED_LINK_FEATURES + 2 * cap
    groups = block_groups(per_arc * LINK_CHUNK if grouped else 0, LINK_CHUNK)
    children = np.empty(LINK_CHUNK, dtype=np.int64)
    sums = np.empty(LINK_CHUNK)
    out = np.empty(0 if grouped else per_arc * LINK_CHUNK, dtype=np.int64)
    bounds = np.empty(LINK_CHUNK + 1, dtype=np.int64)
    codes = weights.codes
    limits, utag = weights.arc_limits, attrs[A_UTAG]
    keys = np.empty(MAX_FIXED_LINK_FEATURES // 2 + cap, dtype=np.uint64)
    between = np.empty(cap, dtype=np.int64)
    seen = np.zeros(cap, dtype=np.uint8)
    for h in range(n1):
        for side in range(2):
            nb = 0
            if side == 0:
                start, stop, step = h + 1, n1, 1
            else:
                start, stop, step = h - 1, 0, -1
            k = 0
            g = 0  # arcs gathered
            for m in range(start, stop, step):
                if m != start:
                    nb = _add_between(attrs, m - step, fine, seen, between, nb)
                if grouped:
                    if arc_allowed(limits, utag, h, m) if scoring else abs(coef[h, m]) > min_coef:
                        groups.start[g] = k
                        children[g] = m
                        k0 = k
                        k += link_features(attrs, layout, mask, h, m, between, nb,
                                           groups.entries[k:], keys, True, part)
                        prefetch_words(mask, groups.entries, k0, k)
                        g += 1
                    if g > 0 and (g == LINK_CHUNK or m == stop - step):
                        groups.start[g] = k
                        if scoring:
                            sum_block_groups(weights, groups, g, sums)
                            for q in range(g):
                                scores[h, children[q]] = sums[q]
                        else:
                            for q in range(g):
                                sums[q] = coef[h, children[q]]
                            scatter_block_groups(mask, groups, g, sums, grad, dirty)
                        k = 0
                        g = 0
                elif scoring:
                    if arc_allowed(limits, utag, h, m):
                        bounds[g] = k
                        children[g] = m
                        k0 = k
                        k += link_features(attrs, layout, mask, h, m, between, nb, out[k:], keys,
                                           False, part)
                        if by_word:
                            for j in range(k0, k):
                                _prefetch(codes, out[j])
                        g += 1
                    if g > 0 and (g == LINK_CHUNK or m == stop - step):
                        bounds[g] = k
                        for q in range(g):
                            c = children[q]
                            s = sum_weights(weights, out[bounds[q]:], bounds[q + 1] - bounds[q])
                            if by_word:
                                code = link_code(h, c)
                                s += (head_sums[h, 0] + head_sums[h, code] + child_sums[c, 0]
                                      + child_sums[c, code])
                            scores[h, c] = s
                        k = 0
                        g = 0
                else:
                    c = coef[h, m]
                    if abs(c) > min_coef:
                        k = link_features(attrs, layout, mask, h, m, between, nb, out, keys)
                        for i in range(k):
                            grad[out[i]] += c
                        if dirty.shape[0] > 0:
                            for i in range(k):
                                dirty[out[i] >> DIRTY_SHIFT] = 1
            for i in range(nb):
                seen[between[i]] = 0
    return scores


@njit(cache=True)
def link_scores(attrs, weights):
    """float64 (n+1, n+1) unlabeled LINK scores w . f(h, m) (w: the `Weights` record); -inf on the
    diagonal and column 0."""
    return link_sweep(attrs, weights, np.empty((0, 0)), np.empty(0),
                      np.empty(0, dtype=np.uint8), 0.0)


@njit(cache=True)
def link_scatter(attrs, layout, mask, coef, grad, dirty, min_coef):
    """grad[f] += coef[h, m] for every LINK feature f of every arc with |coef[h, m]| > min_coef;
    touched pages are flagged in ``dirty`` (or nothing when it is empty)."""
    # `NO_LABEL_FILTER` made here: a global array is a read-only constant in a kernel, which
    # would give `link_sweep` a `Weights` record of another type to compile for (and the scatter
    # reads no arc filter: `dense_weights` gives none)
    no_filter = np.zeros((0, 0, 2, 1), dtype=np.int16)
    no_weights = dense_weights(False, layout, mask, np.empty(0), no_filter)
    link_sweep(attrs, no_weights, coef, grad, dirty, min_coef)
