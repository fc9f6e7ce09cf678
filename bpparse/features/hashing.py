"""Feature-key hashing (FNV-1a over 64-bit words with a splitmix64 finaliser; never Python's
salted ``hash``) and the emission of a key's block slots into an index buffer."""
import numpy as np
from numba import njit

from bpparse.features.layout import BLOCK

_FNV_SEED = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_SM1 = np.uint64(0xBF58476D1CE4E5B9)
_SM2 = np.uint64(0x94D049BB133111EB)
_S27 = np.uint64(27)
_S30 = np.uint64(30)
_S31 = np.uint64(31)


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


@njit(cache=True, inline="always")
def _slot(h, nblocks):
    """Block number of key hash ``h`` among ``nblocks`` (a power of two, as every layout region
    is: a mask, not a 64-bit division, which cost a third of feature extraction)."""
    return np.int64(_fin(h) & (np.uint64(nblocks) - np.uint64(1)))


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
    base = off + _slot(h, nblocks) * BLOCK
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
    base = off + _slot(h, nblocks) * BLOCK
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
