"""NOCROSS templates: features of a group (m, l), scores and gradient scatter."""
import numpy as np

from bpparse.features.attributes import second_distance_bin
from bpparse.features.hashing import _emit, _h0, _hc
from bpparse.features.layout import (
    LY_RANKED,
    A_FTAG,
    A_UTAG,
    DIRTY_SHIFT,
    LY_FINE,
    LY_SEC_BLOCKS,
    LY_SEC_OFF,
    MAX_PAIR_FEATURES,
)
from bpparse.features.store import sum_weights
from bpparse.jit import njit


@njit(cache=True)
def cross_features(attrs, layout, mask, m, l, out):
    """Indices into theta of the NOCROSS m, l (m < l) features: tags of the two children separately
    and jointly (coarse and fine; SE08 §8.2), each also conjoined with the binned distance l - m."""
    ranked = layout[LY_RANKED] != 0
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
        k = _emit(out, k, _hc(_hc(_h0(t + 1), mt), lt), off, nb, code, mask, ranked)
        k = _emit(out, k, _hc(_h0(t + 2), mt), off, nb, code, mask, ranked)
        k = _emit(out, k, _hc(_h0(t + 3), lt), off, nb, code, mask, ranked)
    return k


@njit(cache=True)
def cross_scores(attrs, weights):
    """float64 (n+1, n+1) NOCROSS log-potentials w[m, l] for groups 1 <= m < l <= n (0 elsewhere)."""
    layout, mask = weights.layout, weights.mask
    n1 = attrs.shape[1] - 2
    out = np.empty(MAX_PAIR_FEATURES, dtype=np.int64)
    w = np.zeros((n1, n1))
    for m in range(1, n1):
        for l in range(m + 1, n1):
            k = cross_features(attrs, layout, mask, m, l, out)
            w[m, l] = sum_weights(weights, out, k)
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
