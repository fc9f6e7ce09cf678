"""The `Weights` record kernels read: a dense vector (training) or a compact rank index (parsing).

A trained model's LINK and SECOND regions are mostly zero (the bundled EWT model: 3.2 M weights set
of 34.6 M slots), while its LABEL region is dense. The compact layout keeps

* ``index`` uint64 (2·W,): for each 64-slot word w of LINK+SECOND, ``index[2w]`` the bits of the
  slots that hold a weight and ``index[2w+1]`` how many are set in the words before it (its rank),
  side by side so that a lookup touches one cache line for both;
* ``values`` float32: the set weights of LINK+SECOND in slot order; slot i's weight is
  ``values[rank + popcount(bits below i)]`` (a succinct rank dictionary: no probing, no misses);
* ``labels`` float32: the LABEL region as it is (slot ``label_off + j`` is ``labels[j]``).

About 35 MB instead of 303 MB of float64 for the bundled model, and every value exact: models store
float16 weights, which float32 holds without rounding, and scores are still summed in float64 in the
same order, so a compact model scores bit for bit like the dense one. An unset slot reads 0, which is
also what the gold-feature mask would have skipped, so parsing with a compact store needs no mask (and
`compact_weights` drops any weight the mask hides).
"""
from typing import NamedTuple

import numpy as np
from numba import njit, types
from numba.extending import intrinsic

from bpparse.features.hashing import _bit
from bpparse.features.layout import LY_LAB_OFF, LY_SIZE


class Weights(NamedTuple):
    """A model's weights as kernels read them (through `weight_at`): ``fine`` (XPOS templates on),
    ``layout`` int64 (`features.LAYOUT_LEN`,), ``mask`` uint64 gold-feature bits (empty = every
    feature); ``dense`` float64 every slot (training; empty when compact), else the compact
    ``index`` uint64 (2·W,), ``values`` float32, ``labels`` float32 and ``label_off`` (first LABEL
    slot) of the module docstring. One flat record: numba's parallel loops take no nested one."""

    fine: bool
    layout: np.ndarray
    mask: np.ndarray
    dense: np.ndarray
    index: np.ndarray
    values: np.ndarray
    labels: np.ndarray
    label_off: int


@intrinsic
def _popcount(typingctx, x):
    """Number of set bits of a uint64 (the CPU's popcnt)."""
    sig = types.uint64(types.uint64)

    def codegen(context, builder, signature, args):
        return builder.ctpop(args[0])

    return sig, codegen


@njit(cache=True, inline="always")
def weight_at(weights, i):
    """The weight of slot ``i`` (float64; 0 for a slot the compact index does not hold)."""
    if weights.dense.shape[0] > 0:
        return weights.dense[i]
    if i >= weights.label_off:
        return np.float64(weights.labels[i - weights.label_off])
    w = i >> 6
    bits = weights.index[2 * w]
    below = np.uint64(1) << np.uint64(i & 63)
    if bits & below == 0:
        return 0.0
    return np.float64(weights.values[weights.index[2 * w + 1] + _popcount(bits & (below - np.uint64(1)))])


@njit(cache=True, inline="always")
def sum_weights(weights, slots, k):
    """Σ of the weights of ``slots[:k]`` (int64 slot indices), in order: the score of one arc's
    or factor's features."""
    s = 0.0
    for i in range(k):
        s += weight_at(weights, slots[i])
    return s


@njit(cache=True)
def dense_weights(fine, layout, mask, theta):
    """`Weights` reading the float64 vector ``theta`` itself (training, tests; an empty ``theta``
    for the gradient sweeps, which read no weights)."""
    return Weights(fine, layout, mask, theta, np.empty(0, dtype=np.uint64),
                   np.empty(0, dtype=np.float32), np.empty(0, dtype=np.float32), 0)


@njit(cache=True, inline="always")
def _next_slot(deltas, j, pos, size):
    """Slot j of the delta-coded ``deltas`` (first slot, then gaps) after slot ``pos``, or -1 when
    it repeats one or lies past ``size``."""
    step = np.int64(deltas[j])
    if j > 0 and step == 0:
        return np.int64(-1)
    slot = step if j == 0 else pos + step
    return slot if slot < size else np.int64(-1)


@njit(cache=True, inline="always")
def _half(bits):
    """The float32 value of the IEEE half-precision number with the bits ``bits`` (uint16): numba
    has no float16, and converting the stored weights here spares a float32 copy of them all."""
    exponent = (bits >> 10) & 0x1F
    mantissa = np.float64(bits & 0x3FF)
    if exponent == 0:  # zero or subnormal
        v = mantissa * 2.0 ** -24
    elif exponent == 31:
        v = np.inf if mantissa == 0 else np.nan
    else:
        v = (1024.0 + mantissa) * 2.0 ** (np.int64(exponent) - 25)
    return np.float32(-v if bits >> 15 else v)


@njit(cache=True)
def _fill_compact(deltas, values, mask, size, index, kept, labels):
    """Decode delta-coded positions and float16 ``values`` (their uint16 bits) straight into the
    compact arrays (no int64 position vector, no float32 copy: loading stays small); returns how
    many LINK+SECOND weights ``kept`` received, or -1 when a position repeats or falls outside
    [0, size)."""
    label_off = size - labels.shape[0]
    pos = np.int64(-1)
    k = 0
    for j in range(deltas.shape[0]):
        pos = _next_slot(deltas, j, pos, size)
        if pos < 0:
            return -1
        if pos >= label_off:
            labels[pos - label_off] = _half(values[j])
        elif _bit(mask, pos):
            index[2 * (pos >> 6)] |= np.uint64(1) << np.uint64(pos & 63)
            kept[k] = _half(values[j])
            k += 1
    rank = np.uint64(0)
    for w in range(index.shape[0] // 2):
        index[2 * w + 1] = rank
        rank += _popcount(index[2 * w])
    return k


def compact_weights(fine, layout, mask, deltas, values):
    """Compact `Weights` (no mask) of the float16 weights ``values`` at the slots that the
    delta-coded ``deltas`` (unsigned ints: first slot, then gaps) give in ``layout``. Weights the
    gold-feature ``mask`` (uint64 bits over LINK+SECOND, empty = all) leaves out are dropped, so
    they read exactly what masked dense scoring reads. Raises ValueError for repeated or
    out-of-range positions."""
    label_off, size = int(layout[LY_LAB_OFF]), int(layout[LY_SIZE])
    index = np.zeros(2 * ((label_off + 63) >> 6), dtype=np.uint64)
    kept = np.empty(values.shape[0], dtype=np.float32)
    labels = np.zeros(size - label_off, dtype=np.float32)
    k = _fill_compact(deltas, np.asarray(values, dtype=np.float16).view(np.uint16), mask, size,
                      index, kept, labels)
    if k < 0:
        raise ValueError("weight positions out of range (past the weight vector, or repeated)")
    kept.resize(k, refcheck=False)  # in place: no second copy of the kept weights
    return Weights(fine, layout, np.empty(0, dtype=np.uint64), np.empty(0), index, kept, labels,
                   label_off)


def quantize_values(values, levels=256, iterations=30):
    """(codebook float16 (k,) increasing, k <= ``levels``; codes uint8 (N,)) such that
    ``codebook[codes]`` is ``values`` rounded to the nearest of k levels: how model files store the
    parser's weights (one byte each instead of float16's two; the bundled model's file 25 -> 19 MB).

    Values with at most ``levels`` distinct float16 roundings are kept exactly (so quantizing a
    quantized vector changes nothing: a saved model reloads bit for bit). Otherwise the levels are
    a 1-D k-means (Lloyd) of the values, which minimises the summed squared error, i.e. the
    perturbation of an arc's score summed over its features; started at equal-mass quantiles and
    run over the distinct float16 values with their counts, so it costs O(levels · log N) per
    iteration after one sort."""
    if levels > 256:
        raise ValueError("at most 256 levels fit a uint8 code")
    half = np.asarray(values, dtype=np.float16)
    distinct, inverse, counts = np.unique(half, return_inverse=True, return_counts=True)
    if distinct.shape[0] <= levels:
        return distinct, inverse.astype(np.uint8)
    x = distinct.astype(np.float64)
    mass = np.cumsum(counts, dtype=np.float64)
    total = np.cumsum(counts * x)
    # half the levels at equal-mass quantiles, half evenly over the range: started from quantiles
    # alone, Lloyd leaves the few large weights (the most telling features) on far-off levels
    q = levels // 2
    centers = np.unique(np.concatenate([
        x[np.searchsorted(mass, (np.arange(q) + 0.5) * (mass[-1] / q))],
        np.linspace(x[0], x[-1], levels - q).astype(np.float16)]).astype(np.float64))
    for _ in range(iterations):
        ends = np.searchsorted(x, 0.5 * (centers[:-1] + centers[1:]))  # segment k: [ends[k-1], ends[k])
        ends = np.concatenate([ends, [x.shape[0]]])
        before = np.concatenate([[0.0], mass])[np.concatenate([[0], ends[:-1]])]
        n = mass[ends - 1] - before
        keep = n > 0
        s = total[ends - 1] - np.concatenate([[0.0], total])[np.concatenate([[0], ends[:-1]])]
        updated = np.unique((s[keep] / n[keep]).astype(np.float16).astype(np.float64))
        if updated.shape[0] == centers.shape[0] and np.array_equal(updated, centers):
            break
        centers = updated
    codebook = centers.astype(np.float16)
    codes = np.searchsorted(0.5 * (centers[:-1] + centers[1:]), half.astype(np.float64))
    return codebook, codes.astype(np.uint8)


def delta_code(positions):
    """Delta-coded unsigned ints (the first position, then the gaps) of increasing int64
    ``positions``: how model files store where their sparse weights are."""
    wide = positions.shape[0] > 0 and positions[-1] >= 2**32
    return np.diff(positions, prepend=0).astype(np.uint64 if wide else np.uint32)


def delta_decode(deltas, size):
    """The increasing int64 positions of delta-coded ``deltas`` (`delta_code`); raises ValueError
    when one repeats or lies outside [0, size)."""
    positions = np.cumsum(np.asarray(deltas, dtype=np.int64))
    if positions.shape[0] and (positions[0] < 0 or positions[-1] >= size
                               or np.any(np.diff(positions) <= 0)):
        raise ValueError("weight positions out of range or repeated")
    return positions


def csr_rows(positions, width, n_rows):
    """(starts int64 (n_rows+1,), columns int64) of the entries at increasing flat ``positions``
    (row · width + column) of an (n_rows, width) table: row r's entries are
    columns[starts[r]:starts[r+1]], in the order of ``positions``."""
    starts = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(positions // width, minlength=n_rows), out=starts[1:])
    return starts, positions % width


def dense_vector(weights):
    """The float64 vector (layout size) that ``weights`` read (dense weights: their own)."""
    if weights.dense.shape[0] > 0:
        return weights.dense
    theta = np.zeros(int(weights.layout[LY_SIZE]))
    bits = np.ascontiguousarray(weights.index[0::2]).view(np.uint8)
    held = np.flatnonzero(np.unpackbits(bits, bitorder="little"))
    theta[held] = weights.values
    theta[weights.label_off:] = weights.labels
    return theta
