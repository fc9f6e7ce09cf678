"""TAGLINK templates: features of an arc h -> m together with candidate tags a of h and b of m
(tag ids of the tagger's UPOS column, ROOT = -1), hashed into their own weight table of 2^bits
float64 weights (blocks of BLOCK: slot 0 plain, slot ``code`` conjoined with direction and binned
distance, as for LINK). The templates pair the two tags with each other and with the other word's
form and suffix: what the arc says about the tags that the pipeline tags cannot."""
import numpy as np

from bpparse.features.attributes import link_distance_bin
from bpparse.features.hashing import _emit, _h0, _hc
from bpparse.features.layout import A_SUFFIX, A_WORD, BLOCK
from bpparse.jit import njit

N_TEMPLATES = 8


@njit(cache=True, nogil=True)
def taglink_features(attrs, nblocks, h, m, a, b, out):
    """Indices into the TAGLINK table (of ``nblocks`` blocks) of the features of arc h -> m with
    T_h = a, T_m = b; ``out`` int64 of at least 2 * N_TEMPLATES; returns how many were written."""
    right = m > h
    d = m - h if right else h - m
    code = 1 + (7 if right else 0) + link_distance_bin(d)
    H = h + 1
    M = m + 1
    ta = a + 1
    tb = b + 1
    hw = attrs[A_WORD, H]
    cw = attrs[A_WORD, M]
    hs = attrs[A_SUFFIX, H]
    cs = attrs[A_SUFFIX, M]
    mask = np.zeros(0, dtype=np.uint64)  # every feature, by slot
    ranked = False
    k = 0
    k = _emit(out, k, _hc(_hc(_h0(1501), ta), tb), 0, nblocks, code, mask, ranked)
    k = _emit(out, k, _hc(_hc(_h0(1502), hw), tb), 0, nblocks, code, mask, ranked)
    k = _emit(out, k, _hc(_hc(_h0(1503), ta), cw), 0, nblocks, code, mask, ranked)
    k = _emit(out, k, _hc(_hc(_hc(_h0(1504), hw), ta), tb), 0, nblocks, code, mask, ranked)
    k = _emit(out, k, _hc(_hc(_hc(_h0(1505), ta), cw), tb), 0, nblocks, code, mask, ranked)
    k = _emit(out, k, _hc(_hc(_hc(_h0(1506), hs), ta), tb), 0, nblocks, code, mask, ranked)
    k = _emit(out, k, _hc(_hc(_hc(_h0(1507), ta), cs), tb), 0, nblocks, code, mask, ranked)
    k = _emit(out, k, _hc(_hc(_hc(_hc(_h0(1508), hw), ta), cw), tb), 0, nblocks, code, mask, ranked)
    return k


@njit(cache=True, nogil=True)
def _sweep(attrs, table, arcs, cand, cnt, coef):
    """Every (arc f, i-th candidate of h, j-th of m): with ``coef`` empty, φ float64 (F, C, C) of
    the weights ``table``; else table[x] += coef[f, i, j] at each of its features (gradient
    scatter into ``table``), returning an empty array. One enumeration for both."""
    n1 = cand.shape[0]
    C = cand.shape[1]
    nblocks = table.shape[0] // BLOCK
    scoring = coef.shape[0] == 0
    phi = np.zeros((arcs.shape[0] if scoring else 0, C, C))
    out = np.empty(2 * N_TEMPLATES, dtype=np.int64)
    for f in range(arcs.shape[0]):
        h = arcs[f] // n1
        m = arcs[f] % n1
        for i in range(cnt[h]):
            for j in range(cnt[m]):
                if not scoring and coef[f, i, j] == 0.0:
                    continue
                k = taglink_features(attrs, nblocks, h, m, cand[h, i], cand[m, j], out)
                for t in range(k):
                    if scoring:
                        phi[f, i, j] += table[out[t]]
                    else:
                        table[out[t]] += coef[f, i, j]
    return phi


@njit(cache=True, nogil=True)
def taglink_scores(attrs, table, arcs, cand, cnt):
    """φ float64 (F, C, C): φ[f, i, j] = table · features of arc ``arcs[f]`` (h*(n+1) + m) with
    the i-th candidate of h and the j-th of m (``cand`` int64 (n+1, C), ``cnt`` (n+1,))."""
    return _sweep(attrs, table, arcs, cand, cnt, np.zeros((0, 0, 0)))


@njit(cache=True, nogil=True)
def taglink_scatter(attrs, grad, arcs, cand, cnt, coef):
    """grad[x] += coef[f, i, j] at every feature x of (arc f, i-th candidate of h, j-th of m)."""
    _sweep(attrs, grad, arcs, cand, cnt, coef)
