"""The compact weight index (features.store) reads exactly the weights of the dense layout."""
import numpy as np
import pytest
from numba import njit

from bpparse import features as F


@njit
def _read_every_slot(weights, size):
    out = np.empty(size)
    for i in range(size):
        out[i] = F.weight_at(weights, i)
    return out


def _sparse_weights(rng, size, density):
    theta = np.where(rng.random(size) < density, rng.normal(size=size), 0.0)
    return theta.astype(np.float16).astype(np.float64)  # what model files hold


def _layout(label_off, size):
    layout = np.zeros(F.LAYOUT_LEN, dtype=np.int64)
    layout[F.LY_LAB_OFF], layout[F.LY_SIZE] = label_off, size
    return layout


def _compact(theta, label_off, mask):
    """Compact `Weights` of ``theta`` from (deltas, values) as a model file stores them."""
    nz = np.flatnonzero(theta)
    return F.compact_weights(False, _layout(label_off, theta.shape[0]), mask,
                             np.diff(nz, prepend=0).astype(np.uint32), theta[nz].astype(np.float16))


def test_compact_weights_read_every_finite_float16_value_exactly():
    """The stored float16 weights are decoded bit by bit in the kernel (numba has no float16):
    every finite nonzero half-precision number, subnormals included, must come out as numpy's."""
    halves = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    halves = halves[np.isfinite(halves) & (halves != 0)]
    n = halves.shape[0]
    compact = F.compact_weights(False, _layout(n + 64, n + 64), np.empty(0, dtype=np.uint64),
                                np.ones(n, dtype=np.uint32), halves)
    assert np.array_equal(compact.values, halves.astype(np.float32))


def test_compact_index_returns_every_kept_weight_and_zero_elsewhere():
    rng = np.random.default_rng(7)
    label_off, size = 64 * 300 + 17, 64 * 300 + 17 + 51 * 40  # a LINK+SECOND end inside a word
    for density in (0.0, 0.02, 0.5, 1.0):
        theta = _sparse_weights(rng, size, density)
        every = np.empty(0, dtype=np.uint64)
        compact = _compact(theta, label_off, every)
        assert compact.values.dtype == np.float32
        assert compact.values.shape[0] == np.count_nonzero(theta[:label_off])
        assert np.array_equal(_read_every_slot(compact, size), theta)
        dense = F.dense_weights(False, _layout(label_off, size), every, theta)
        assert np.array_equal(_read_every_slot(dense, size), theta)
        assert np.array_equal(F.dense_vector(compact), theta)


def test_compact_index_leaves_out_what_the_gold_feature_mask_hides():
    rng = np.random.default_rng(8)
    label_off, size = 64 * 50, 64 * 50 + 30 * 8
    theta = _sparse_weights(rng, size, 0.4)
    mask = rng.integers(0, 2**63, size=(label_off >> 6) + 1, dtype=np.uint64)
    compact = _compact(theta, label_off, mask)
    slots = np.arange(size)
    bits = (mask[np.minimum(slots >> 6, mask.shape[0] - 1)] >> (slots & 63).astype(np.uint64)) & np.uint64(1)
    expected = np.where((bits == 1) | (slots >= label_off), theta, 0.0)
    assert 0 < np.count_nonzero(expected) < np.count_nonzero(theta)
    assert np.array_equal(_read_every_slot(compact, size), expected)


def test_compact_index_refuses_repeated_or_out_of_range_positions():
    values = np.ones(3, dtype=np.float16)
    empty = np.empty(0, dtype=np.uint64)
    for deltas in ([1, 0, 2], [1, 2, 200]):
        with pytest.raises(ValueError, match="out of range"):
            F.compact_weights(False, _layout(64, 128), empty, np.array(deltas, dtype=np.uint32), values)
