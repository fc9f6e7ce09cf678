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
        assert compact.codes.dtype == np.uint8 and compact.codes.shape == (size,)
        assert np.count_nonzero(compact.codes[:label_off]) == np.count_nonzero(theta[:label_off])
        assert np.array_equal(_read_every_slot(compact, size), theta)
        dense = F.dense_weights(False, _layout(label_off, size), every, theta, F.NO_LABEL_FILTER)
        assert np.array_equal(_read_every_slot(dense, size), theta)
        assert np.array_equal(F.dense_vector(compact), theta)


def test_held_codes_are_expanded_to_their_slots():
    """`expand_held` puts the k-th code at the k-th set bit of the held words, every bit position
    of a word included, and leaves every other slot 0."""
    from bpparse.features.store import expand_held

    rng = np.random.default_rng(12)
    for density in (0.0, 0.03, 0.5, 1.0):
        flags = rng.random(64 * 40) < density
        held = np.packbits(flags, bitorder="little").view(np.uint64)
        codes = rng.integers(1, 256, size=int(flags.sum()), dtype=np.uint8)
        out = np.zeros(64 * 40 + 5, dtype=np.uint8)
        expand_held(held, codes, out)
        expected = np.zeros_like(out)
        expected[np.flatnonzero(flags)] = codes
        assert np.array_equal(out, expected)


def test_a_sparse_stage_table_sums_exactly_the_weights_of_the_dense_one():
    """A second stage's `SparseTable` gives every hashed key the dense table's weight (0 where
    unset), in the same order of additions, and round-trips through its positions."""
    from bpparse.features.punct import keys_score
    from bpparse.features.store import SparseTable, sparse_table, sparse_table_of

    rng = np.random.default_rng(11)
    for bits, density in ((6, 1.0), (10, 0.0), (10, 0.1), (12, 0.5)):
        dense = (rng.normal(size=1 << bits) * (rng.random(1 << bits) < density)).astype(np.float32)
        table = sparse_table_of(dense)
        assert table.size == dense.shape[0] and table.values.shape[0] == np.count_nonzero(dense)
        assert np.array_equal(table.dense(), dense)
        assert all(np.array_equal(a, b) for a, b in zip(
            sparse_table(table.positions(), table.values, table.size), table))
        for _ in range(50):
            keys = rng.integers(0, 2**63, size=12, dtype=np.uint64)
            keys[rng.random(12) < 0.2] = 0  # 0: no key
            expected = keys_score(np.empty(0, dtype=np.uint64), dense, keys, 12)
            assert keys_score(table.index, table.values, keys, 12) == expected
    assert isinstance(table, SparseTable)


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


@njit
def _sum_slots_of_entries(weights, entries):
    """`sum_weights` over the slots the block entries name (base, then its conjunction slots)."""
    slots = np.empty(3 * entries.shape[0], dtype=np.int64)
    k = 0
    for e in entries:
        base = e >> 8
        slots[k] = base
        k += 1
        for c in ((e >> 4) & 15, e & 15):
            if c > 0:
                slots[k] = base + c
                k += 1
    return F.sum_weights(weights, slots, k)


@njit
def _grouped(weights, entries, start, coefs, size):
    """`sum_block_groups` and `scatter_block_groups` of the groups entries[start[g]:start[g + 1]]
    for dense weights in a `CompactSpace` (``weights.mask`` its rank mask): (sums, grad (size,),
    dirty)."""
    n = start.shape[0] - 1
    groups = F.block_groups(entries.shape[0], n)
    groups.entries[:] = entries
    groups.start[:] = start
    sums = np.empty(n)
    F.sum_block_groups(weights, groups, n, sums)
    grad = np.zeros(size)
    dirty = np.zeros((size >> F.DIRTY_SHIFT) + 1, dtype=np.uint8)
    F.scatter_block_groups(weights.mask, groups, n, coefs, grad, dirty)
    return sums, grad, dirty


def test_block_entries_sum_and_scatter_the_weights_of_their_slots():
    """A block entry (a key's block with up to two conjunction slots) reads one rank word for all
    its slots, and groups of entries are resolved after all their words are read. Each group's
    sum, from the dense weights of a `CompactSpace` (training), is bit for bit the sum of its slots
    one by one in a compact store; scattering adds each group's coefficient at exactly the
    held slots, in the same order (blocks at every position of a word, every pair of codes, 0 =
    none, groups of every size, empty ones too)."""
    rng = np.random.default_rng(9)
    label_off = 64 * 400
    theta = _sparse_weights(rng, label_off + 64, 0.3)
    compact = _compact(theta, label_off, np.empty(0, dtype=np.uint64))
    held = theta[:label_off] != 0
    mask = np.packbits(np.concatenate([held, np.zeros(64, bool)]), bitorder="little").view(np.uint64)
    space = F.compact_space(_layout(label_off, theta.shape[0]), mask)
    dense = F.dense_weights(False, space.layout, space.rank, theta[space.positions], F.NO_LABEL_FILTER)
    bases = np.arange(0, label_off, F.BLOCK)
    for _ in range(50):
        base = rng.choice(bases, size=40)
        c1, c2 = rng.integers(0, F.BLOCK, size=(2, 40))
        entries = (base << 8) | (c1 << 4) | c2
        start = np.concatenate([[0], np.sort(rng.integers(0, 41, size=5)), [40]])
        coefs = rng.normal(size=start.shape[0] - 1)
        expected = np.zeros(space.size)
        for g in range(start.shape[0] - 1):
            for e in entries[start[g]:start[g + 1]]:
                for slot in [e >> 8] + [(e >> 8) + c for c in ((e >> 4) & 15, e & 15) if c]:
                    if held[slot]:
                        expected[np.searchsorted(space.positions, slot)] += coefs[g]
        sums, grad, dirty = _grouped(dense, entries, start, coefs, space.size)
        for g in range(start.shape[0] - 1):
            group = entries[start[g]:start[g + 1]]
            assert sums[g] == _sum_slots_of_entries(compact, group)
            assert sums[g] == pytest.approx(sum(
                theta[e >> 8] + (theta[(e >> 8) + ((e >> 4) & 15)] if (e >> 4) & 15 else 0.0)
                + (theta[(e >> 8) + (e & 15)] if e & 15 else 0.0) for e in group), abs=1e-9)
        assert np.array_equal(grad, expected) and np.count_nonzero(grad) > 0
        assert np.all(dirty[np.flatnonzero(expected) >> F.DIRTY_SHIFT] == 1)


def test_a_compact_store_scores_arcs_and_pairs_as_the_dense_weights(tmp_path):
    """LINK, label, GRAND / SIB and CHILDSEQ scores of a saved and loaded model (a compact store
    read by block entries) and of training's dense weights in a `CompactSpace` (ranked) equal
    those of its dense weights exactly: same slots, same order."""
    from conftest import TINY

    from bpparse.config import load_config
    from bpparse.conll import read_conll
    from bpparse.encode import Vocabularies
    from bpparse.graph import all_pairs
    from bpparse.kernels.factors.childseq import childseq_segments
    from bpparse.model import Model, load_model, save_model

    small = {"features.hash_bits": 14, "features.second_order_hash_bits": 12,
             "features.label_hash_bits": 10, "features.fine_tags": True,
             "features.second_order_words": True, "features.context_words": True,
             "features.morph": False, "features.lemma": False, "features.gold_only": False}
    sentences = list(read_conll(TINY))[:20]
    model = Model(load_config("childseq", small), Vocabularies.build(sentences))
    rng = np.random.default_rng(4)
    model.theta = _sparse_weights(rng, model.theta.shape[0], 0.5)
    save_model(model, tmp_path / "m.bpm")
    loaded = load_model(tmp_path / "m.bpm")
    assert loaded.weights.dense.shape[0] == 0 and model.weights.dense.shape[0] > 0
    space = F.compact_space(model.layout, model.mask)
    ranked = F.dense_weights(model.fine_tags, space.layout, space.rank,
                             loaded.theta[space.positions.astype(np.int64)], loaded.weights.label_lists)
    checked = 0
    for sentence in sentences:
        attrs = F.sentence_attributes(model.encode(sentence).tokens, model.fine_tags)
        n1 = attrs.shape[1] - 2
        pa, pb, n_grand = all_pairs(n1 - 1)
        seq = childseq_segments(np.ones((n1, n1), dtype=bool), True)
        expected = (F.link_scores(attrs, model.weights), F.label_scores(attrs, model.weights),
                    F.pair_scores(attrs, model.weights, pa, pb, n_grand),
                    F.childseq_scores(attrs, model.weights, *seq))
        for weights in (loaded.weights, ranked):
            got = (F.link_scores(attrs, weights), F.label_scores(attrs, weights),
                   F.pair_scores(attrs, weights, pa, pb, n_grand),
                   F.childseq_scores(attrs, weights, *seq))
            assert all(np.array_equal(a, b) for a, b in zip(got, expected))
        checked += sum(np.count_nonzero(a) for a in expected[1:])
    assert checked > 1000
