"""Hashed feature templates for LINK, GRAND, SIB, NOCROSS and labels (numba kernels).

One weight vector ``theta`` (float64) holds every family; ``layout`` (int64 array, fields ``LY_*``)
says where each region starts and how large it is:

* LINK region: the first-order templates of McDonald et al. (2005) (word/tag unigrams and bigrams of
  head and child, tags between, tags around head and child). Coarse tags are UPOS, fine tags XPOS
  (only when the treebank has them); words are lower-cased forms and 5-character prefixes; lemma and
  FEATS templates are optional.
* SECOND region (smaller, so that it stays in cache): GRAND, SIB and NOCROSS tag templates
  (Smith & Eisner 2008 §8.2): coarse and fine tag triples / pairs, conjoined with direction(s) and
  binned distances, and the "grandparent between parent and child" indicator.
* LABEL region: blocks of R (number of labels) weights; one hashed label template fetches the R
  label weights of one arc as one contiguous run, so labeled scores s[h,m,r] cost one lookup per
  template (DESIGN §4: labels marginalised inside the arc).

Every LINK / SECOND template key (template id, attribute values) is hashed with a fixed 64-bit mix
(FNV-1a over 64-bit words, splitmix64 finaliser; never Python's salted ``hash``) to a block of
``BLOCK`` = 16 weights: slot 0 is the plain feature, the other slots the same feature conjoined with
direction and binned distance. Both usually share a cache line pair, so a conjoined template costs
one cache miss instead of two.

The same enumeration (``*_features`` kernels filling an index buffer) serves scoring (sum of
weights) and gradients (add a coefficient at each index), so scores and updates cannot disagree.
An optional bitmask over the LINK+SECOND regions keeps only features seen on gold structures
(McDonald et al. 2005 keep only features that occur in gold trees); an empty mask keeps everything.
"""
import numpy as np
from numba import njit

BLOCK = 16
DIRTY_SHIFT = 4  # gradient buffers flag touched pages of 2**DIRTY_SHIFT weights

# rows of the padded per-sentence attribute table (see sentence_attributes)
A_WORD, A_PREFIX, A_UTAG, A_FTAG, A_LEMMA, A_FEATS = 0, 1, 2, 3, 4, 5
NUM_ATTRS = 6
BEFORE = -2  # attribute value of the position before the first word
AFTER = -3  # ... and after the last word

# fields of the layout array
LY_LINK_OFF, LY_LINK_BLOCKS, LY_SEC_OFF, LY_SEC_BLOCKS = 0, 1, 2, 3
LY_LAB_OFF, LY_LAB_BLOCKS, LY_NLAB, LY_SIZE = 4, 5, 6, 7
LY_FINE, LY_LEMMA, LY_FEATS, LY_SECOND_WORDS = 8, 9, 10, 11
LAYOUT_LEN = 12

# encoder field rows (bpparse.encode): FORM, LOWER, PREFIX, SUFFIX, UPOS, XPOS, LEMMA, FEATS
_E_LOWER, _E_PREFIX, _E_UPOS, _E_XPOS, _E_LEMMA, _E_FEATS = 1, 2, 4, 5, 6, 7

_FNV_SEED = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_SM1 = np.uint64(0xBF58476D1CE4E5B9)
_SM2 = np.uint64(0x94D049BB133111EB)
_S27 = np.uint64(27)
_S30 = np.uint64(30)
_S31 = np.uint64(31)

MAX_FIXED_LINK_FEATURES = 128  # per arc, without the between-tag features (2 per distinct tag)
MAX_PAIR_FEATURES = 32
MAX_LABEL_TEMPLATES = 16


def make_layout(link_bits, second_bits, label_bits, n_labels, fine_tags, lemma, feats,
                second_words=False):
    """Region layout as an int64 array of length LAYOUT_LEN; sizes are powers of two (in weights)."""
    for bits in (link_bits, second_bits, label_bits):
        if not 8 <= bits <= 30:
            raise ValueError(f"hash bits must be in 8..30, got {bits}")
    layout = np.zeros(LAYOUT_LEN, dtype=np.int64)
    link_size = 1 << link_bits
    sec_size = 1 << second_bits
    layout[LY_LINK_OFF] = 0
    layout[LY_LINK_BLOCKS] = link_size // BLOCK
    layout[LY_SEC_OFF] = link_size
    layout[LY_SEC_BLOCKS] = sec_size // BLOCK
    layout[LY_LAB_OFF] = link_size + sec_size
    layout[LY_LAB_BLOCKS] = (1 << label_bits) if n_labels > 0 else 0
    layout[LY_NLAB] = n_labels
    layout[LY_SIZE] = link_size + sec_size + layout[LY_LAB_BLOCKS] * n_labels
    layout[LY_FINE] = int(bool(fine_tags))
    layout[LY_LEMMA] = int(bool(lemma))
    layout[LY_FEATS] = int(bool(feats))
    layout[LY_SECOND_WORDS] = int(bool(second_words))
    return layout


# ---------------------------------------------------------------- hashing

@njit(cache=True, inline="always")
def _h0(template):
    return (_FNV_SEED ^ np.uint64(template)) * _FNV_PRIME


@njit(cache=True, inline="always")
def _hc(h, value):
    return (h ^ np.uint64(value)) * _FNV_PRIME


@njit(cache=True, inline="always")
def _fin(h):
    z = h
    z = (z ^ (z >> _S30)) * _SM1
    z = (z ^ (z >> _S27)) * _SM2
    return z ^ (z >> _S31)


@njit(cache=True)
def hash_key(values):
    """Hash an int64 key (template id first) to a uint64; the reference for the inlined hashing."""
    h = _h0(values[0])
    for i in range(1, values.shape[0]):
        h = _hc(h, values[i])
    return _fin(h)


@njit(cache=True, inline="always")
def _bit(mask, i):
    if mask.shape[0] == 0:
        return True
    return (mask[i >> 6] >> np.uint64(i & 63)) & np.uint64(1) != np.uint64(0)


@njit(cache=True, inline="always")
def _emit(out, k, h, off, nblocks, code, mask):
    """Emit slot 0 and slot ``code`` (0 = none) of the block that key hash ``h`` selects."""
    base = off + np.int64(_fin(h) % np.uint64(nblocks)) * BLOCK
    if _bit(mask, base):
        out[k] = base
        k += 1
    if code > 0 and _bit(mask, base + code):
        out[k] = base + code
        k += 1
    return k


@njit(cache=True, inline="always")
def _emit2(out, k, h, off, nblocks, code1, code2, mask):
    """Emit slots 0, ``code1`` and ``code2`` (two different conjunctions) of one key's block."""
    base = off + np.int64(_fin(h) % np.uint64(nblocks)) * BLOCK
    if _bit(mask, base):
        out[k] = base
        k += 1
    if _bit(mask, base + code1):
        out[k] = base + code1
        k += 1
    if _bit(mask, base + code2):
        out[k] = base + code2
        k += 1
    return k


# ---------------------------------------------------------------- attributes and bins

@njit(cache=True)
def sentence_attributes(tokens, fine_tags):
    """Per-token attribute table of one encoded sentence.

    tokens: int32 (NUM_FIELDS, n+1) from bpparse.encode (column 0 = ROOT).
    Returns int64 (NUM_ATTRS, n+3): column i+1 holds token i for i in -1..n+1, where -1 and n+1 are
    the BEFORE / AFTER padding. The fine tag row is XPOS when ``fine_tags`` else UPOS.
    """
    n1 = tokens.shape[1]
    attrs = np.empty((NUM_ATTRS, n1 + 2), dtype=np.int64)
    for r in range(NUM_ATTRS):
        attrs[r, 0] = BEFORE
        attrs[r, n1 + 1] = AFTER
    for i in range(n1):
        attrs[A_WORD, i + 1] = tokens[_E_LOWER, i]
        attrs[A_PREFIX, i + 1] = tokens[_E_PREFIX, i]
        attrs[A_UTAG, i + 1] = tokens[_E_UPOS, i]
        attrs[A_FTAG, i + 1] = tokens[_E_XPOS, i] if fine_tags else tokens[_E_UPOS, i]
        attrs[A_LEMMA, i + 1] = tokens[_E_LEMMA, i]
        attrs[A_FEATS, i + 1] = tokens[_E_FEATS, i]
    return attrs


@njit(cache=True, inline="always")
def link_distance_bin(d):
    """McDonald et al. (2005) bins of |h - m|: 1..5 exact, 6..10, > 10 -> 0..6."""
    if d <= 5:
        return d - 1
    if d <= 10:
        return 5
    return 6


@njit(cache=True, inline="always")
def second_distance_bin(d):
    """Coarser bins for second-order templates: 1, 2, 3-5, 6-10, > 10 -> 0..4."""
    if d <= 2:
        return d - 1
    if d <= 5:
        return 2
    if d <= 10:
        return 3
    return 4


# ---------------------------------------------------------------- LINK

@njit(cache=True)
def link_features(attrs, layout, mask, h, m, between, n_between, out):
    """Indices into theta of the LINK features of arc h -> m; returns how many were written.

    attrs: int64 (NUM_ATTRS, n+3) from sentence_attributes; between: int64 codes tag*2 + kind
    (kind 0 = coarse, 1 = fine) of the distinct tags strictly between h and m, first n_between used;
    out: int64 buffer of at least MAX_FIXED_LINK_FEATURES + 2 * n_between. Every template is emitted plain and conjoined
    with direction and binned distance (McDonald et al. 2005, Table 1).
    """
    off = layout[LY_LINK_OFF]
    nb = layout[LY_LINK_BLOCKS]
    fine = layout[LY_FINE] != 0
    right = m > h
    d = m - h if right else h - m
    code = 1 + (7 if right else 0) + link_distance_bin(d)
    H = h + 1
    M = m + 1
    hw = attrs[A_WORD, H]
    cw = attrs[A_WORD, M]
    hpre = attrs[A_PREFIX, H]
    cpre = attrs[A_PREFIX, M]
    hf = attrs[A_FTAG, H]
    cf = attrs[A_FTAG, M]
    k = 0
    # words, prefixes and word bigrams (kind independent)
    k = _emit(out, k, _hc(_h0(1), hw), off, nb, code, mask)
    k = _emit(out, k, _hc(_h0(2), cw), off, nb, code, mask)
    k = _emit(out, k, _hc(_h0(3), hpre), off, nb, code, mask)
    k = _emit(out, k, _hc(_h0(4), cpre), off, nb, code, mask)
    k = _emit(out, k, _hc(_hc(_h0(5), hw), cw), off, nb, code, mask)
    k = _emit(out, k, _hc(_hc(_h0(6), hpre), cpre), off, nb, code, mask)
    # word/fine-tag bigrams (fine tag = UPOS when the treebank has no XPOS)
    k = _emit(out, k, _hc(_hc(_hc(_hc(_h0(7), hw), hf), cw), cf), off, nb, code, mask)
    k = _emit(out, k, _hc(_hc(_hc(_h0(8), hw), cw), cf), off, nb, code, mask)
    k = _emit(out, k, _hc(_hc(_hc(_h0(9), hw), hf), cw), off, nb, code, mask)
    k = _emit(out, k, _hc(_hc(_h0(10), hpre), cf), off, nb, code, mask)
    k = _emit(out, k, _hc(_hc(_h0(11), hf), cpre), off, nb, code, mask)
    n_kinds = 2 if fine else 1
    for kind in range(n_kinds):
        row = A_UTAG if kind == 0 else A_FTAG
        t = 100 * (kind + 1)
        ht = attrs[row, H]
        ct = attrs[row, M]
        k = _emit(out, k, _hc(_hc(_h0(t + 1), hw), ht), off, nb, code, mask)
        k = _emit(out, k, _hc(_h0(t + 2), ht), off, nb, code, mask)
        k = _emit(out, k, _hc(_hc(_h0(t + 3), cw), ct), off, nb, code, mask)
        k = _emit(out, k, _hc(_h0(t + 4), ct), off, nb, code, mask)
        k = _emit(out, k, _hc(_hc(_hc(_h0(t + 5), ht), cw), ct), off, nb, code, mask)
        k = _emit(out, k, _hc(_hc(_hc(_h0(t + 6), hw), ht), ct), off, nb, code, mask)
        k = _emit(out, k, _hc(_hc(_h0(t + 7), ht), ct), off, nb, code, mask)
        hl = attrs[row, H - 1]
        hr = attrs[row, H + 1]
        cl = attrs[row, M - 1]
        cr = attrs[row, M + 1]
        k = _emit(out, k, _hc(_hc(_hc(_hc(_h0(t + 8), ht), hr), cl), ct), off, nb, code, mask)
        k = _emit(out, k, _hc(_hc(_hc(_hc(_h0(t + 9), hl), ht), cl), ct), off, nb, code, mask)
        k = _emit(out, k, _hc(_hc(_hc(_hc(_h0(t + 10), ht), hr), ct), cr), off, nb, code, mask)
        k = _emit(out, k, _hc(_hc(_hc(_hc(_h0(t + 11), hl), ht), ct), cr), off, nb, code, mask)
        # 3-tag back-offs of the surrounding templates
        k = _emit(out, k, _hc(_hc(_hc(_h0(t + 12), ht), hr), ct), off, nb, code, mask)
        k = _emit(out, k, _hc(_hc(_hc(_h0(t + 13), ht), cl), ct), off, nb, code, mask)
        k = _emit(out, k, _hc(_hc(_hc(_h0(t + 14), hl), ht), ct), off, nb, code, mask)
        k = _emit(out, k, _hc(_hc(_hc(_h0(t + 15), ht), ct), cr), off, nb, code, mask)
    for i in range(n_between):
        b = between[i]
        kind = b & 1
        row = A_UTAG if kind == 0 else A_FTAG
        k = _emit(out, k, _hc(_hc(_hc(_h0(300 + kind), attrs[row, H]), b >> 1), attrs[row, M]),
                  off, nb, code, mask)
    if layout[LY_LEMMA] != 0:
        hlem = attrs[A_LEMMA, H]
        clem = attrs[A_LEMMA, M]
        k = _emit(out, k, _hc(_h0(401), hlem), off, nb, code, mask)
        k = _emit(out, k, _hc(_h0(402), clem), off, nb, code, mask)
        k = _emit(out, k, _hc(_hc(_h0(403), hlem), clem), off, nb, code, mask)
        k = _emit(out, k, _hc(_hc(_h0(404), hlem), cf), off, nb, code, mask)
        k = _emit(out, k, _hc(_hc(_h0(405), hf), clem), off, nb, code, mask)
    if layout[LY_FEATS] != 0:
        hx = attrs[A_FEATS, H]
        cx = attrs[A_FEATS, M]
        hu = attrs[A_UTAG, H]
        cu = attrs[A_UTAG, M]
        k = _emit(out, k, _hc(_hc(_h0(501), hx), hu), off, nb, code, mask)
        k = _emit(out, k, _hc(_hc(_h0(502), cx), cu), off, nb, code, mask)
        k = _emit(out, k, _hc(_hc(_hc(_h0(503), hx), cx), cu), off, nb, code, mask)
        k = _emit(out, k, _hc(_hc(_hc(_h0(504), hu), hx), cx), off, nb, code, mask)
        k = _emit(out, k, _hc(_hc(_hc(_hc(_h0(505), hu), hx), cu), cx), off, nb, code, mask)
    return k


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
def link_sweep(attrs, layout, mask, theta, coef, grad, dirty, min_coef):
    """All arcs of one sentence: scores (coef empty) or gradient scatter (coef given).

    Scoring: returns float64 (n+1, n+1) s[h, m] = theta . f_link(h, m); diagonal and column 0 -inf.
    Scatter: adds coef[h, m] to grad at every LINK feature of arc h -> m whose |coef| > min_coef and
    flags the touched 16-weight pages in ``dirty`` (uint8, len(theta) >> DIRTY_SHIFT, or empty);
    returns an empty array. The between-tag sets are grown incrementally as m moves away from h.
    """
    n1 = attrs.shape[1] - 2
    fine = layout[LY_FINE] != 0
    scoring = coef.shape[0] == 0
    if scoring:
        scores = np.full((n1, n1), -np.inf)
    else:
        scores = np.empty((0, 0))
    cap = between_capacity(attrs)
    out = np.empty(MAX_FIXED_LINK_FEATURES + 2 * cap, dtype=np.int64)
    between = np.empty(cap, dtype=np.int64)
    seen = np.zeros(cap, dtype=np.uint8)
    for h in range(n1):
        for side in range(2):
            nb = 0
            if side == 0:
                start, stop, step = h + 1, n1, 1
            else:
                start, stop, step = h - 1, 0, -1
            for m in range(start, stop, step):
                if m != start:
                    nb = _add_between(attrs, m - step, fine, seen, between, nb)
                if scoring:
                    k = link_features(attrs, layout, mask, h, m, between, nb, out)
                    s = 0.0
                    for i in range(k):
                        s += theta[out[i]]
                    scores[h, m] = s
                else:
                    c = coef[h, m]
                    if abs(c) > min_coef:
                        k = link_features(attrs, layout, mask, h, m, between, nb, out)
                        for i in range(k):
                            grad[out[i]] += c
                        if dirty.shape[0] > 0:
                            for i in range(k):
                                dirty[out[i] >> DIRTY_SHIFT] = 1
            for i in range(nb):
                seen[between[i]] = 0
    return scores


@njit(cache=True)
def link_scores(attrs, layout, mask, theta):
    """float64 (n+1, n+1) unlabeled LINK scores theta . f(h, m); -inf on the diagonal and column 0."""
    return link_sweep(attrs, layout, mask, theta, np.empty((0, 0)), np.empty(0),
                      np.empty(0, dtype=np.uint8), 0.0)


@njit(cache=True)
def link_scatter(attrs, layout, mask, coef, grad, dirty, min_coef):
    """grad[f] += coef[h, m] for every LINK feature f of every arc with |coef[h, m]| > min_coef;
    touched pages are flagged in ``dirty`` (or nothing when it is empty)."""
    link_sweep(attrs, layout, mask, np.empty(0), coef, grad, dirty, min_coef)


# ---------------------------------------------------------------- labels

@njit(cache=True)
def label_blocks(attrs, layout, h, m, out):
    """Start indices into theta of the label weight blocks (R contiguous weights) of arc h -> m."""
    off = layout[LY_LAB_OFF]
    nblk = np.uint64(layout[LY_LAB_BLOCKS])
    R = layout[LY_NLAB]
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
    k = 0
    out[k] = _hc(_hc(_h0(601), dr), cf)
    k += 1
    out[k] = _hc(_hc(_hc(_h0(602), dr), hf), cf)
    k += 1
    out[k] = _hc(_hc(_hc(_h0(603), dr), hw), cf)
    k += 1
    out[k] = _hc(_hc(_hc(_h0(604), dr), hf), cw)
    k += 1
    out[k] = _hc(_hc(_h0(605), dr), cw)
    k += 1
    out[k] = _hc(_hc(_hc(_h0(606), dr), db), cu)
    k += 1
    out[k] = _hc(_hc(_hc(_hc(_h0(607), dr), hu), cu), attrs[A_UTAG, M + 1])
    k += 1
    out[k] = _hc(_hc(_hc(_hc(_h0(608), dr), hu), attrs[A_UTAG, M - 1]), cu)
    k += 1
    out[k] = _hc(_hc(_hc(_h0(609), dr), hw), cw)
    k += 1
    if layout[LY_FEATS] != 0:
        out[k] = _hc(_hc(_hc(_h0(610), dr), cu), attrs[A_FEATS, M])
        k += 1
    if layout[LY_LEMMA] != 0:
        out[k] = _hc(_hc(_hc(_h0(611), dr), cu), attrs[A_LEMMA, M])
        k += 1
    for i in range(k):
        out[i] = off + np.int64(_fin(np.uint64(out[i])) % nblk) * R
    return k


@njit(cache=True)
def label_scores(attrs, layout, theta):
    """float64 (n+1, n+1, R) label scores theta . f_label(h, m, r) (0 on the diagonal, column 0)."""
    n1 = attrs.shape[1] - 2
    R = layout[LY_NLAB]
    out = np.empty(MAX_LABEL_TEMPLATES, dtype=np.int64)
    ls = np.zeros((n1, n1, R))
    for h in range(n1):
        for m in range(1, n1):
            if m == h:
                continue
            k = label_blocks(attrs, layout, h, m, out)
            for i in range(k):
                b = out[i]
                for r in range(R):
                    ls[h, m, r] += theta[b + r]
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


# ---------------------------------------------------------------- GRAND, SIB, NOCROSS

@njit(cache=True)
def grand_features(attrs, layout, mask, g, h, m, out):
    """Indices into theta of the GRAND g -> h -> m features (SE08 §8.2); returns the count.

    Tag triples and grandparent/child pairs (coarse and fine), conjoined with the pair of directions
    and with direction and binned distance of h -> m; plus indicators that g lies between h and m.
    """
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
        k = _emit2(out, k, _hc(_hc(_hc(_h0(t + 1), gt), ht), mt), off, nb, dirs, code2, mask)
        k = _emit2(out, k, _hc(_hc(_h0(t + 2), gt), mt), off, nb, dirs, code2, mask)
    if (h < g < m) or (m < g < h):
        k = _emit(out, k, _h0(731), off, nb, dirs, mask)
        hk = _hc(_hc(_h0(732), attrs[A_UTAG, H]), attrs[A_UTAG, M])
        k = _emit(out, k, hk, off, nb, dirs, mask)
    if layout[LY_SECOND_WORDS] != 0:
        for key in _word_keys(attrs, 750, g, h, m):
            k = _emit2(out, k, key, off, nb, dirs, code2, mask)
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
        k = _emit2(out, k, _hc(_hc(_hc(_h0(t + 1), ht), mt), st), off, nb, 1 + side, code2, mask)
        k = _emit2(out, k, _hc(_hc(_h0(t + 2), mt), st), off, nb, 1 + side, code2, mask)
    if layout[LY_SECOND_WORDS] != 0:
        for key in _word_keys(attrs, 850, h, m, s):
            k = _emit2(out, k, key, off, nb, 1 + side, code2, mask)
    return k


@njit(cache=True)
def cross_features(attrs, layout, mask, m, l, out):
    """Indices into theta of the NOCROSS m, l (m < l) features: tags of the two children separately
    and jointly (coarse and fine; SE08 §8.2), each also conjoined with the binned distance l - m."""
    off = layout[LY_SEC_OFF]
    nb = layout[LY_SEC_BLOCKS]
    code = 1 + second_distance_bin(l - m)
    M = m + 1
    L = l + 1
    k = 0
    n_kinds = 2 if layout[LY_FINE] != 0 else 1
    for kind in range(n_kinds):
        row = A_UTAG if kind == 0 else A_FTAG
        t = 900 + 10 * kind
        mt = attrs[row, M]
        lt = attrs[row, L]
        k = _emit(out, k, _hc(_hc(_h0(t + 1), mt), lt), off, nb, code, mask)
        k = _emit(out, k, _hc(_h0(t + 2), mt), off, nb, code, mask)
        k = _emit(out, k, _hc(_h0(t + 3), lt), off, nb, code, mask)
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
    v0, u0 = _local_tags(attrs, A_UTAG, loc, 0)
    if n_kinds == 2:
        v1, u1 = _local_tags(attrs, A_FTAG, loc, 1)
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
                g2[kind, i, j] = off + np.int64(_fin(_hc(_hc(_h0(tg + 2), vals[i]), vals[j])) % nb) * BLOCK
                s2[kind, i, j] = off + np.int64(_fin(_hc(_hc(_h0(ts + 2), vals[i]), vals[j])) % nb) * BLOCK
                for k in range(u):
                    g3[kind, i, j, k] = off + np.int64(
                        _fin(_hc(_hc(_hc(_h0(tg + 1), vals[i]), vals[j]), vals[k])) % nb) * BLOCK
                    s3[kind, i, j, k] = off + np.int64(
                        _fin(_hc(_hc(_hc(_h0(ts + 1), vals[i]), vals[j]), vals[k])) % nb) * BLOCK
    for i in range(u0):
        for j in range(u0):
            x2[i, j] = off + np.int64(_fin(_hc(_hc(_h0(732), v0[i]), v0[j])) % nb) * BLOCK
    x1 = off + np.int64(_fin(_h0(731)) % nb) * BLOCK
    return loc, g3, g2, x2, x1, s3, s2


@njit(cache=True, inline="always")
def _put3(out, k, base, c1, c2, mask):
    if _bit(mask, base):
        out[k] = base
        k += 1
    if _bit(mask, base + c1):
        out[k] = base + c1
        k += 1
    if c2 > 0 and _bit(mask, base + c2):
        out[k] = base + c2
        k += 1
    return k


@njit(cache=True, inline="always")
def pair_features_tabled(attrs, layout, mask, loc, g3, g2, x2, x1, s3, s2, a, b, n1, is_grand, out):
    """`grand_features` / `sib_features` of the pair (a, b) from `pair_tables`: same indices."""
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
            k = _put3(out, k, g3[kind, lg, lh, lm], dirs, code2, mask)
            k = _put3(out, k, g2[kind, lg, lm], dirs, code2, mask)
        if (h < g < m) or (m < g < h):
            k = _put3(out, k, x1, dirs, 0, mask)
            k = _put3(out, k, x2[loc[0, h], loc[0, m]], dirs, 0, mask)
        if words:
            for key in _word_keys(attrs, 750, g, h, m):
                k = _put3(out, k, off + np.int64(_fin(key) % nb) * BLOCK, dirs, code2, mask)
        return k
    h = a // n1
    m = a % n1
    s = b % n1
    side, code2 = _sib_side_code(h, m, s)
    for kind in range(n_kinds):
        lh = loc[kind, h]
        lm = loc[kind, m]
        ls = loc[kind, s]
        k = _put3(out, k, s3[kind, lh, lm, ls], 1 + side, code2, mask)
        k = _put3(out, k, s2[kind, lm, ls], 1 + side, code2, mask)
    if words:
        for key in _word_keys(attrs, 850, h, m, s):
            k = _put3(out, k, off + np.int64(_fin(key) % nb) * BLOCK, 1 + side, code2, mask)
    return k


@njit(cache=True, inline="always")
def _val(theta, mask, i):
    if _bit(mask, i):
        return theta[i]
    return 0.0


@njit(cache=True, inline="always")
def _sum3(theta, mask, base, c1, c2):
    s = _val(theta, mask, base) + _val(theta, mask, base + c1)
    if c2 > 0:
        s += _val(theta, mask, base + c2)
    return s


@njit(cache=True)
def pair_scores(attrs, layout, mask, theta, pair_a, pair_b, n_grand):
    """float64 (n_pairs,) log-potentials of pairwise factors (GRAND first, then SIB).

    pair_a, pair_b: int64 arc indices a = h*(n+1)+m (GRAND g->h->m: a = (g,h), b = (h,m);
    SIB h->{m,s}, m<s: a = (h,m), b = (h,s)); the first n_grand pairs are GRAND. Sums theta over
    the indices `pair_features_tabled` enumerates, without materialising them (the hot loop of
    second-order scoring; `pair_scatter` uses the enumeration and tests tie the two together).
    """
    n1 = attrs.shape[1] - 2
    loc, g3, g2, x2, x1, s3, s2 = pair_tables(attrs, layout)
    n_kinds = 2 if layout[LY_FINE] != 0 else 1
    words = layout[LY_SECOND_WORDS] != 0
    off = layout[LY_SEC_OFF]
    nb = np.uint64(layout[LY_SEC_BLOCKS])
    w = np.zeros(pair_a.shape[0])
    for p in range(pair_a.shape[0]):
        a = pair_a[p]
        b = pair_b[p]
        total = 0.0
        if p < n_grand:
            g = a // n1
            h = a - g * n1
            m = b - h * n1
            dirs, code2 = _grand_codes(g, h, m)
            for kind in range(n_kinds):
                lg = loc[kind, g]
                lm = loc[kind, m]
                total += _sum3(theta, mask, g3[kind, lg, loc[kind, h], lm], dirs, code2)
                total += _sum3(theta, mask, g2[kind, lg, lm], dirs, code2)
            if (h < g < m) or (m < g < h):
                total += _sum3(theta, mask, x1, dirs, 0)
                total += _sum3(theta, mask, x2[loc[0, h], loc[0, m]], dirs, 0)
            if words:
                for key in _word_keys(attrs, 750, g, h, m):
                    total += _sum3(theta, mask, off + np.int64(_fin(key) % nb) * BLOCK, dirs, code2)
        else:
            h = a // n1
            m = a - h * n1
            sb = b - h * n1
            side, code2 = _sib_side_code(h, m, sb)
            for kind in range(n_kinds):
                lm = loc[kind, m]
                ls = loc[kind, sb]
                total += _sum3(theta, mask, s3[kind, loc[kind, h], lm, ls], 1 + side, code2)
                total += _sum3(theta, mask, s2[kind, lm, ls], 1 + side, code2)
            if words:
                for key in _word_keys(attrs, 850, h, m, sb):
                    total += _sum3(theta, mask, off + np.int64(_fin(key) % nb) * BLOCK, 1 + side,
                                   code2)
        w[p] = total
    return w


@njit(cache=True)
def pair_scatter(attrs, layout, mask, pair_a, pair_b, n_grand, coef, grad, dirty, min_coef):
    """grad[f] += coef[p] for every feature f of pairwise factor p with |coef[p]| > min_coef
    (touched pages flagged in ``dirty`` unless it is empty)."""
    n1 = attrs.shape[1] - 2
    loc, g3, g2, x2, x1, s3, s2 = pair_tables(attrs, layout)
    out = np.empty(MAX_PAIR_FEATURES, dtype=np.int64)
    for p in range(pair_a.shape[0]):
        c = coef[p]
        if abs(c) <= min_coef:
            continue
        k = pair_features_tabled(attrs, layout, mask, loc, g3, g2, x2, x1, s3, s2, pair_a[p], pair_b[p], n1,
                                 p < n_grand, out)
        for i in range(k):
            grad[out[i]] += c
            if dirty.shape[0] > 0:
                dirty[out[i] >> DIRTY_SHIFT] = 1


@njit(cache=True)
def cross_scores(attrs, layout, mask, theta):
    """float64 (n+1, n+1) NOCROSS log-potentials w[m, l] for groups 1 <= m < l <= n (0 elsewhere)."""
    n1 = attrs.shape[1] - 2
    out = np.empty(MAX_PAIR_FEATURES, dtype=np.int64)
    w = np.zeros((n1, n1))
    for m in range(1, n1):
        for l in range(m + 1, n1):
            k = cross_features(attrs, layout, mask, m, l, out)
            s = 0.0
            for i in range(k):
                s += theta[out[i]]
            w[m, l] = s
    return w


@njit(cache=True)
def cross_scatter(attrs, layout, mask, coef, grad, dirty, min_coef):
    """grad[f] += coef[m, l] for every NOCROSS feature f of group m < l with |coef| > min_coef."""
    n1 = attrs.shape[1] - 2
    out = np.empty(MAX_PAIR_FEATURES, dtype=np.int64)
    for m in range(1, n1):
        for l in range(m + 1, n1):
            c = coef[m, l]
            if abs(c) <= min_coef:
                continue
            k = cross_features(attrs, layout, mask, m, l, out)
            for i in range(k):
                grad[out[i]] += c
                if dirty.shape[0] > 0:
                    dirty[out[i] >> DIRTY_SHIFT] = 1


# ---------------------------------------------------------------- gold feature mask

@njit(cache=True)
def mark_gold_features(attrs, layout, heads, second_order, nocross, mask):
    """Set the mask bits of every LINK (and, if asked, GRAND/SIB/NOCROSS) feature of a gold tree.

    heads: int64 (n+1,) gold heads; mask: uint64 bit array over the LINK+SECOND regions, updated in
    place. Features are enumerated with an empty mask, i.e. unfiltered.
    """
    n1 = attrs.shape[1] - 2
    nomask = np.empty(0, dtype=np.uint64)
    cap = between_capacity(attrs)
    out = np.empty(MAX_FIXED_LINK_FEATURES + 2 * cap, dtype=np.int64)
    between = np.empty(cap, dtype=np.int64)
    one = np.uint64(1)
    for m in range(1, n1):
        h = heads[m]
        if h < 0:
            continue
        nb = arc_between_tags(attrs, layout, h, m, between)
        k = link_features(attrs, layout, nomask, h, m, between, nb, out)
        for i in range(k):
            mask[out[i] >> 6] |= one << np.uint64(out[i] & 63)
        if second_order:
            g = heads[h] if h > 0 else -1
            if g >= 0:
                k = grand_features(attrs, layout, nomask, g, h, m, out)
                for i in range(k):
                    mask[out[i] >> 6] |= one << np.uint64(out[i] & 63)
            for s in range(m + 1, n1):
                if heads[s] == h:
                    k = sib_features(attrs, layout, nomask, h, m, s, out)
                    for i in range(k):
                        mask[out[i] >> 6] |= one << np.uint64(out[i] & 63)
        if nocross:
            for l in range(m + 1, n1):
                k = cross_features(attrs, layout, nomask, m, l, out)
                for i in range(k):
                    mask[out[i] >> 6] |= one << np.uint64(out[i] & 63)
