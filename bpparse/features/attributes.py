"""Per-sentence attribute table and distance bins shared by every template family."""
import numpy as np

from bpparse.features.layout import (
    _E_FEATS,
    _E_LEMMA,
    _E_LOWER,
    _E_MORPH,
    _E_PREFIX,
    _E_SUFFIX,
    _E_UPOS,
    _E_XPOS,
    A_FEATS,
    A_FTAG,
    A_LEMMA,
    A_MORPH,
    A_PREFIX,
    A_SUFFIX,
    A_UTAG,
    A_WORD,
    AFTER,
    BEFORE,
    N_MORPH,
    NUM_ATTRS,
)
from bpparse.jit import njit


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
        attrs[A_SUFFIX, i + 1] = tokens[_E_SUFFIX, i]
        for a in range(N_MORPH):
            attrs[A_MORPH + a, i + 1] = tokens[_E_MORPH + a, i]
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
