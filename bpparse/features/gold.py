"""The gold-feature mask: features seen on gold structures (McDonald et al. 2005)."""
import numpy as np

from bpparse.features.childseq import mark_childseq_features
from bpparse.features.cross import cross_features
from bpparse.features.layout import MAX_FIXED_LINK_FEATURES
from bpparse.features.link import arc_between_tags, between_capacity, link_features
from bpparse.features.pairs import grand_features, sib_features
from bpparse.jit import njit


@njit(cache=True)
def mark_gold_features(attrs, layout, heads, second_order, nocross, childseq, mask):
    """Set the mask bits of every LINK (and, if asked, GRAND/SIB/NOCROSS/CHILDSEQ) feature of a
    gold tree.

    heads: int64 (n+1,) gold heads; mask: uint64 bit array over the LINK+SECOND regions, updated in
    place. Features are enumerated with an empty mask, i.e. unfiltered.
    """
    n1 = attrs.shape[1] - 2
    nomask = np.empty(0, dtype=np.uint64)
    cap = between_capacity(attrs)
    out = np.empty(MAX_FIXED_LINK_FEATURES + 2 * cap, dtype=np.int64)
    keys = np.empty(MAX_FIXED_LINK_FEATURES // 2 + cap, dtype=np.uint64)
    between = np.empty(cap, dtype=np.int64)
    one = np.uint64(1)
    for m in range(1, n1):
        h = heads[m]
        if h < 0:
            continue
        nb = arc_between_tags(attrs, layout, h, m, between)
        k = link_features(attrs, layout, nomask, h, m, between, nb, out, keys)
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
    if childseq:
        mark_childseq_features(attrs, layout, heads, mask)
