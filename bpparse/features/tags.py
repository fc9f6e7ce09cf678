"""Hashed per-token tagger features (TAG factor, shared DESIGN §7): one key = one block of g weights.

Strings become stable 63-bit ids in Python once per word type (`string_id`: two CRC-32s of the
UTF-8 bytes, never Python's salted ``hash``), so unknown words keep their affix and shape features.
A token's attributes (`word_attributes`, columns ``T_*``) are the ids of its form, lower-cased form,
lower-cased prefixes and suffixes of 1-4 characters, collapsed shape (``Xx``, ``d``, ``x-x``),
orthographic flags, for cascade stages its UPOS and, with a tagger's lexicon (`fill_lexicon`), the
ambiguity class and most frequent UPOS of its lower-cased form in the training data (Ratnaparkhi
1996's tag dictionary as features, as in most feature-based taggers: EWT dev UPOS +0.3).
`tag_bases` (numba) hashes each template key
(template id, attribute ids; `bpparse.features.hashing` mix) to the start of a block of g
contiguous weights, so the unary score row of a token is Σ_k theta[base_k : base_k + g].
"""
import zlib

import numpy as np

from bpparse.features.hashing import _fin, _h0, _hc
from bpparse.jit import njit

T_FORM, T_LOWER = 0, 1
T_P1 = 2  # prefixes of length 1..4: columns T_P1 .. T_P1 + 3
T_S1 = 6  # suffixes of length 1..4: columns T_S1 .. T_S1 + 3
T_SHAPE, T_FLAGS, T_UPOS = 10, 11, 12
T_AMB, T_TOP = 13, 14  # lexicon: ambiguity class, most frequent tag (UNKNOWN: not in the lexicon)
N_TATTR = 15

F_DIGIT, F_HYPHEN, F_CAP, F_ALLCAPS, F_ALLDIGIT, F_NOALPHA = 1, 2, 4, 8, 16, 32

N_BASE_KEYS = 24
N_LEXICON_KEYS = 10
N_UPOS_KEYS = 8

BOS = 1  # attribute value before the first token
EOS = 2  # attribute value after the last token
UNKNOWN = 3  # lexicon attributes of a word the lexicon does not have


def string_id(s):
    """Stable int in [0, 2^63) for a string: CRC-32 of its UTF-8 bytes (two seeds) combined."""
    b = s.encode("utf-8", "surrogatepass")
    return (zlib.crc32(b) << 31) ^ zlib.crc32(b, 0x9E3779B9)


def word_shape(form):
    """Collapsed word shape: upper → X, lower → x, digit → d, other characters kept, runs of the
    same symbol collapsed to one ("Mr." → "Xx.", "1,234" → "d,d", "e-mail" → "x-x")."""
    out = []
    last = ""
    for ch in form:
        if ch.isupper():
            c = "X"
        elif ch.islower():
            c = "x"
        elif ch.isdigit():
            c = "d"
        elif ch.isalpha():
            c = "a"
        else:
            c = ch
        if c != last:
            out.append(c)
            last = c
    return "".join(out)


def word_flags(form):
    """Bit set of orthographic flags (F_DIGIT, F_HYPHEN, F_CAP, F_ALLCAPS, F_ALLDIGIT, F_NOALPHA)."""
    f = 0
    if any(ch.isdigit() for ch in form):
        f |= F_DIGIT
    if "-" in form:
        f |= F_HYPHEN
    if form[:1].isupper():
        f |= F_CAP
    if form.isupper() and len(form) > 1:
        f |= F_ALLCAPS
    if form.isdigit():
        f |= F_ALLDIGIT
    if not any(ch.isalpha() for ch in form):
        f |= F_NOALPHA
    return f


_CACHE = {}
_CACHE_MAX = 2_000_000


def word_attributes(form):
    """Tuple of the N_TATTR - 1 attribute ids (columns T_FORM .. T_FLAGS) of one word form, cached
    per form (the cache is cleared when it exceeds 2M forms)."""
    r = _CACHE.get(form)
    if r is not None:
        return r
    low = form.lower()
    sid = string_id
    r = (sid(form), sid(low),
         sid(low[:1]), sid(low[:2]), sid(low[:3]), sid(low[:4]),
         sid(low[-1:]), sid(low[-2:]), sid(low[-3:]), sid(low[-4:]),
         sid(word_shape(form)), word_flags(form))
    if len(_CACHE) >= _CACHE_MAX:
        _CACHE.clear()
    _CACHE[form] = r
    return r


def token_attributes(sentences):
    """Attributes of every token of ``sentences`` (conll.Sentence, ROOT entry skipped), concatenated.

    Returns (attrs int64 (N, N_TATTR) with columns T_UPOS, T_AMB, T_TOP = 0, starts int64 (S+1,)
    token offsets of the sentences).
    """
    forms = []
    starts = np.zeros(len(sentences) + 1, dtype=np.int64)
    for k, s in enumerate(sentences):
        f = s.forms
        forms.extend(f[1:])
        starts[k + 1] = starts[k] + len(f) - 1
    attrs = np.zeros((len(forms), N_TATTR), dtype=np.int64)
    if forms:
        attrs[:, :T_UPOS] = np.array([word_attributes(f) for f in forms], dtype=np.int64)
    return attrs, starts


def fill_lexicon(attrs, forms, amb, top):
    """Set columns T_AMB / T_TOP of ``attrs`` from a lexicon: ``forms`` int64 (W >= 1,) sorted
    string ids of lower-cased forms, ``amb`` / ``top`` int64 (W,) their values; UNKNOWN for other
    words."""
    low = attrs[:, T_LOWER]
    idx = np.searchsorted(forms, low).clip(0, len(forms) - 1)
    found = forms[idx] == low
    attrs[:, T_AMB] = np.where(found, amb[idx], UNKNOWN)
    attrs[:, T_TOP] = np.where(found, top[idx], UNKNOWN)


@njit(cache=True, nogil=True)
def _at(attrs, starts_s, end_s, i, col):
    """attrs[i, col] inside the sentence [starts_s, end_s), BOS / EOS outside."""
    if i < starts_s:
        return BOS
    if i >= end_s:
        return EOS
    return attrs[i, col]


@njit(cache=True, nogil=True)
def tag_bases(attrs, starts, use_upos, use_lexicon, nblocks, g):
    """int64 (N, K) block starts into theta (K = N_BASE_KEYS, + N_LEXICON_KEYS with
    ``use_lexicon``, + N_UPOS_KEYS with ``use_upos``): base = (fin(hash(template, values)) mod
    nblocks) · g, so theta[base + t] is the weight of the key for tag t. ``attrs``/``starts`` from
    `token_attributes` (T_UPOS filled when use_upos, T_AMB / T_TOP by `fill_lexicon` when
    use_lexicon)."""
    N = attrs.shape[0]
    K = N_BASE_KEYS + (N_LEXICON_KEYS if use_lexicon else 0) + (N_UPOS_KEYS if use_upos else 0)
    out = np.empty((N, K), dtype=np.int64)
    key = np.empty(K, dtype=np.uint64)
    nb = np.uint64(nblocks)
    for s in range(starts.shape[0] - 1):
        a = starts[s]
        e = starts[s + 1]
        for i in range(a, e):
            low = attrs[i, T_LOWER]
            lm1 = _at(attrs, a, e, i - 1, T_LOWER)
            lp1 = _at(attrs, a, e, i + 1, T_LOWER)
            shape = attrs[i, T_SHAPE]
            flags = attrs[i, T_FLAGS]
            key[0] = _h0(2000)
            key[1] = _hc(_h0(2001), attrs[i, T_FORM])
            key[2] = _hc(_h0(2002), low)
            for j in range(4):
                key[3 + j] = _hc(_h0(2003 + j), attrs[i, T_P1 + j])
                key[7 + j] = _hc(_h0(2007 + j), attrs[i, T_S1 + j])
            key[11] = _hc(_h0(2011), shape)
            key[12] = _hc(_h0(2012), flags)
            key[13] = _hc(_hc(_h0(2013), 1 if i == a else 0), flags)
            key[14] = _hc(_h0(2014), lm1)
            key[15] = _hc(_h0(2015), lp1)
            key[16] = _hc(_h0(2016), _at(attrs, a, e, i - 2, T_LOWER))
            key[17] = _hc(_h0(2017), _at(attrs, a, e, i + 2, T_LOWER))
            key[18] = _hc(_h0(2018), _at(attrs, a, e, i - 1, T_S1 + 2))
            key[19] = _hc(_h0(2019), _at(attrs, a, e, i + 1, T_S1 + 2))
            key[20] = _hc(_hc(_h0(2020), lm1), low)
            key[21] = _hc(_hc(_h0(2021), low), lp1)
            key[22] = _hc(_hc(_hc(_h0(2022), _at(attrs, a, e, i - 1, T_SHAPE)), shape),
                          _at(attrs, a, e, i + 1, T_SHAPE))
            key[23] = _hc(_hc(_h0(2023), lm1), lp1)
            b = N_BASE_KEYS
            if use_lexicon:
                c = attrs[i, T_AMB]
                cm1 = _at(attrs, a, e, i - 1, T_AMB)
                cp1 = _at(attrs, a, e, i + 1, T_AMB)
                key[b] = _hc(_h0(2040), c)
                key[b + 1] = _hc(_h0(2041), cm1)
                key[b + 2] = _hc(_h0(2042), cp1)
                key[b + 3] = _hc(_hc(_h0(2043), cm1), c)
                key[b + 4] = _hc(_hc(_h0(2044), c), cp1)
                key[b + 5] = _hc(_hc(_hc(_h0(2045), cm1), c), cp1)
                key[b + 6] = _hc(_h0(2046), _at(attrs, a, e, i - 1, T_TOP))
                key[b + 7] = _hc(_h0(2047), _at(attrs, a, e, i + 1, T_TOP))
                key[b + 8] = _hc(_hc(_h0(2048), _at(attrs, a, e, i - 2, T_AMB)), cm1)
                key[b + 9] = _hc(_hc(_h0(2049), cp1), _at(attrs, a, e, i + 2, T_AMB))
                b += N_LEXICON_KEYS
            if use_upos:
                u = attrs[i, T_UPOS]
                um1 = _at(attrs, a, e, i - 1, T_UPOS)
                up1 = _at(attrs, a, e, i + 1, T_UPOS)
                key[b] = _hc(_h0(2030), u)
                key[b + 1] = _hc(_hc(_h0(2031), um1), u)
                key[b + 2] = _hc(_hc(_h0(2032), u), up1)
                key[b + 3] = _hc(_hc(_h0(2033), u), low)
                key[b + 4] = _hc(_hc(_h0(2034), u), attrs[i, T_S1 + 2])
                key[b + 5] = _hc(_hc(_h0(2035), u), attrs[i, T_S1 + 1])
                key[b + 6] = _hc(_hc(_hc(_h0(2036), um1), u), up1)
                key[b + 7] = _hc(_hc(_h0(2037), u), attrs[i, T_S1])
            for k in range(K):
                out[i, k] = np.int64(_fin(key[k]) % nb) * g
    return out
