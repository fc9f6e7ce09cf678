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
    """Random weights on at most F.MAX_LEVELS levels, as a model file holds them."""
    levels = np.linspace(-3.0, 3.0, F.MAX_LEVELS).astype(np.float16).astype(np.float64)
    return np.where(rng.random(size) < density, rng.choice(levels[levels != 0], size=size), 0.0)


def _layout(label_off, size):
    layout = np.zeros(F.LAYOUT_LEN, dtype=np.int64)
    layout[F.LY_LAB_OFF], layout[F.LY_SIZE] = label_off, size
    return layout


def _compact(theta, label_off, mask):
    """Compact `Weights` of ``theta`` from (deltas, codes, codebook) as a model file stores them."""
    nz = np.flatnonzero(theta)
    codebook, codes = F.quantize_values(theta[nz])
    assert np.array_equal(codebook[codes].astype(np.float64), theta[nz])  # at most 255 levels: exact
    return F.compact_weights(False, _layout(label_off, theta.shape[0]), mask, F.delta_code(nz), codes,
                             codebook)


def test_compact_weights_read_every_codebook_level_exactly():
    """Every float16 level a codebook may hold, subnormals and the extremes included, reads back
    as numpy's float64 of it (codes 0..254 of a full codebook, in 257 codebooks)."""
    halves = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    halves = np.unique(halves[np.isfinite(halves) & (halves != 0)])
    for lo in range(0, halves.shape[0], F.MAX_LEVELS):
        codebook = halves[lo:lo + F.MAX_LEVELS]
        n = codebook.shape[0]
        codes = np.arange(n, dtype=np.uint8)
        compact = F.compact_weights(False, _layout(n + 64, n + 64), np.empty(0, dtype=np.uint64),
                                    np.ones(n, dtype=np.uint32), codes, codebook)
        read = _read_every_slot(compact, n + 64)
        assert np.array_equal(read[1:n + 1], codebook.astype(np.float64))
        assert not read[0] and not read[n + 1:].any()


def test_compact_index_returns_every_kept_weight_and_zero_elsewhere():
    rng = np.random.default_rng(7)
    label_off, size = 64 * 300 + 17, 64 * 300 + 17 + 51 * 40  # a LINK+SECOND end inside a word
    for density in (0.0, 0.02, 0.5, 1.0):
        theta = _sparse_weights(rng, size, density)
        every = np.empty(0, dtype=np.uint64)
        compact = _compact(theta, label_off, every)
        assert compact.values.dtype == np.uint8 and compact.labels.dtype == np.uint8
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


def test_compact_index_refuses_repeated_or_out_of_range_positions_and_codes():
    codes, codebook = np.zeros(3, dtype=np.uint8), np.ones(1, dtype=np.float16)
    empty = np.empty(0, dtype=np.uint64)
    for deltas in ([1, 0, 2], [1, 2, 200]):
        with pytest.raises(ValueError, match="out of range"):
            F.compact_weights(False, _layout(64, 128), empty, np.array(deltas, dtype=np.uint32), codes,
                              codebook)
    with pytest.raises(ValueError, match="codebook of 1 levels"):
        F.compact_weights(False, _layout(64, 128), empty, np.array([1, 2, 3], dtype=np.uint32),
                          codes + 1, codebook)


def test_delta_code_takes_the_narrowest_unsigned_type_and_round_trips():
    for positions, dtype in (([3, 10, 400, 65_000], np.uint16), ([0, 70_000], np.uint32),
                             ([5, 2**33], np.uint64), ([], np.uint16)):
        positions = np.array(positions, dtype=np.int64)
        deltas = F.delta_code(positions)
        assert deltas.dtype == dtype
        assert np.array_equal(F.delta_decode(deltas, 2**34), positions)
