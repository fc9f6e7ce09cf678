"""Public API (bpparse.tree_marginals, decode_tree and their batched forms) and batch kernels:
validation, and agreement with the single-sentence kernels and brute-force enumeration."""
import numpy as np
import pytest

from oracle import brute_force_table

import bpparse
from bpparse.kernels.batch import batch_decode, batch_offsets, batch_tree_marginals
from bpparse.kernels.cle import mst_decode
from bpparse.kernels.eisner import eisner_decode, eisner_marginals
from bpparse.kernels.matrix_tree import matrix_tree_marginals

VARIANTS = [(False, False), (False, True), (True, False), (True, True)]


def sentences(rng, lengths, scale=2.0):
    out = []
    for n in lengths:
        s = rng.normal(size=(n + 1, n + 1)) * scale
        s[rng.random(s.shape) < 0.1] = -np.inf
        for m in range(1, n + 1):
            s[m - 1, m] = rng.normal()  # keep a chain tree possible
        out.append(s)
    return out


@pytest.mark.parametrize("projective,single_root", VARIANTS)
def test_public_functions_match_enumeration(projective, single_root):
    rng = np.random.default_rng(31)
    for n in [1, 3, 5]:
        s = rng.normal(size=(n + 1, n + 1))
        marg, log_z = bpparse.tree_marginals(s, projective=projective, single_root=single_root)
        heads = bpparse.decode_tree(s, projective=projective, single_root=single_root)
        bm, blz, bh, _ = brute_force_table(s, projective, single_root)
        assert isinstance(log_z, float) and abs(log_z - blz) < 1e-9
        np.testing.assert_allclose(marg, bm, rtol=0, atol=1e-9)
        assert heads.dtype == np.int64 and (heads == bh).all()


def test_defaults_are_non_projective_single_root():
    s = np.random.default_rng(1).normal(size=(5, 5))
    assert bpparse.tree_marginals(s)[1] == matrix_tree_marginals(s, True)[1]
    assert (bpparse.decode_tree(s) == mst_decode(s, True)).all()


@pytest.mark.slow
@pytest.mark.parametrize("projective,single_root", VARIANTS)
def test_batch_is_identical_to_single_calls(projective, single_root):
    rng = np.random.default_rng(32)
    lengths = [1, 7, 2, 30, 12, 1, 45]
    batch = sentences(rng, lengths)
    margs, log_z = bpparse.tree_marginals_batch(batch, projective=projective, single_root=single_root)
    heads = bpparse.decode_tree_batch(batch, projective=projective, single_root=single_root)
    assert len(margs) == len(heads) == len(lengths) and log_z.shape == (len(lengths),)
    for s, m, lz, h in zip(batch, margs, log_z, heads):
        if projective:
            m1, lz1 = eisner_marginals(s, single_root)
            h1 = eisner_decode(s, single_root)
        else:
            m1, lz1 = matrix_tree_marginals(s, single_root)
            h1 = mst_decode(s, single_root)
        assert lz == lz1 and (m == m1).all() and (h == h1).all()


def test_batch_kernels_write_preallocated_buffers():
    rng = np.random.default_rng(33)
    lengths = np.array([3, 1, 6], dtype=np.int64)
    offsets, head_offsets = batch_offsets(lengths)
    assert offsets.tolist() == [0, 16, 20, 69] and head_offsets.tolist() == [0, 4, 6, 13]
    flat = np.concatenate([s.ravel() for s in sentences(rng, lengths)])
    out = np.full_like(flat, np.nan)
    log_z = np.full(3, np.nan)
    batch_tree_marginals(flat, offsets, False, True, out, log_z)
    assert np.isfinite(out).all() and np.isfinite(log_z).all()
    for b, n in enumerate(lengths):
        block = out[offsets[b]:offsets[b + 1]].reshape(n + 1, n + 1)
        np.testing.assert_allclose(block[:, 1:].sum(axis=0), 1.0, atol=1e-12)
    heads = np.full(head_offsets[-1], -7, dtype=np.int64)
    batch_decode(flat, offsets, True, False, heads, head_offsets)
    assert (heads[head_offsets[:-1]] == -1).all() and (heads >= -1).all()


def test_empty_batch():
    margs, log_z = bpparse.tree_marginals_batch([])
    assert margs == [] and log_z.shape == (0,)
    assert bpparse.decode_tree_batch([]) == []


@pytest.mark.parametrize("bad, message", [
    (np.zeros((3, 3), dtype=np.int64), "float"),
    (np.zeros((3, 3), dtype=bool), "float"),
    (np.zeros((3, 4)), "square"),
    (np.zeros(9), "square"),
    (np.zeros((1, 1)), "at least 2x2"),
    (np.array([[0.0, np.nan], [0.0, 0.0]]), "NaN"),
    (np.array([[0.0, 0.0, np.inf], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]), r"\+inf"),
])
def test_validation(bad, message):
    with pytest.raises(ValueError, match=message):
        bpparse.tree_marginals(bad)
    with pytest.raises(ValueError, match=message):
        bpparse.decode_tree(bad)
    with pytest.raises(ValueError, match=r"scores\[1\]"):
        bpparse.decode_tree_batch([np.zeros((2, 2)), bad])


def test_ignored_entries_are_not_validated_and_float32_is_accepted():
    s = np.array([[np.nan, 0.5, 0.1], [np.inf, np.nan, 0.3], [np.nan, 0.2, np.nan]])
    marg, log_z = bpparse.tree_marginals(s, single_root=False)
    assert np.isfinite(log_z) and np.isfinite(marg).all()
    s32 = np.random.default_rng(2).normal(size=(4, 4)).astype(np.float32)
    assert (bpparse.decode_tree(s32) == mst_decode(s32.astype(np.float64), True)).all()
    assert bpparse.decode_tree([[0.0, 1.0], [0.0, 0.0]]).tolist() == [-1, 0]
