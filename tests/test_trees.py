"""First-order inference and decoding kernels against brute-force enumeration (docs/design.md §3).

Every kernel is compared with tests/oracle.py for every n in 1..6; past enumeration, exact methods
are compared with each other (single-root Z as a sum over ROOT's child, linear vs log-space pass).
"""
import numpy as np
import pytest

from oracle import brute_force_table, is_projective, is_tree, tree_score, tree_table

from bpparse.kernels.cle import mst_decode
from bpparse.kernels.eisner import _eisner_log, _workspace, eisner_decode, eisner_log_z, eisner_marginals
from bpparse.kernels.matrix_tree import (_gth_reverse_mode, _matrix_tree_log, _normalised_weights,
                                         matrix_tree_log_z, matrix_tree_marginals,
                                         matrix_tree_marginals_fast)

VARIANTS = [(False, False), (False, True), (True, False), (True, True)]  # (projective, single_root)


def random_scores(rng, n, scale=2.0, forbid=0.0):
    s = rng.normal(size=(n + 1, n + 1)) * scale
    if forbid:
        s[rng.random(s.shape) < forbid] = -np.inf
    s[:, 0] = rng.normal(size=n + 1) * 100  # column 0 and the diagonal must be ignored
    np.fill_diagonal(s, np.nan)
    return s


def marginals_of(scores, projective, single_root):
    if projective:
        return eisner_marginals(scores, single_root)
    return matrix_tree_marginals(scores, single_root)


def log_space_pass(scores, projective, single_root):
    n = scores.shape[0] - 1
    marg = np.zeros((n + 1, n + 1))
    if projective:
        log_z = _eisner_log(scores, single_root, _workspace(n), marg)
    else:
        log_z = _matrix_tree_log(scores, single_root, marg)
    return marg, log_z


def assert_marginals_valid(marg, n):
    assert marg.shape == (n + 1, n + 1)
    assert np.isfinite(marg).all()
    assert (marg >= 0).all()
    assert (marg[:, 0] == 0).all() and (np.diag(marg) == 0).all()
    np.testing.assert_allclose(marg[:, 1:].sum(axis=0), 1.0, rtol=0, atol=1e-9)


@pytest.mark.parametrize("projective,single_root", VARIANTS)
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
def test_marginals_and_log_z_match_enumeration(n, projective, single_root):
    rng = np.random.default_rng(100 * n + 10 * projective + single_root)
    for scale, forbid in [(1.0, 0.0), (3.0, 0.0), (2.0, 0.25)]:
        s = random_scores(rng, n, scale, forbid)
        marg, log_z = marginals_of(s, projective, single_root)
        bm, blz, _, _ = brute_force_table(s, projective, single_root)
        if blz == -np.inf:
            assert log_z == -np.inf and not marg.any()
            continue
        assert abs(log_z - blz) < 1e-9
        np.testing.assert_allclose(marg, bm, rtol=0, atol=1e-9)
        assert_marginals_valid(marg, n)
        assert (marg[np.isneginf(s)] == 0).all()


@pytest.mark.parametrize("projective,single_root", VARIANTS)
def test_log_space_pass_matches_enumeration(projective, single_root):
    rng = np.random.default_rng(7)
    for n in range(1, 7):
        s = random_scores(rng, n, 2.0, 0.2 if n > 2 else 0.0)
        marg, log_z = log_space_pass(s, projective, single_root)
        bm, blz, _, _ = brute_force_table(s, projective, single_root)
        assert log_z == blz == -np.inf or abs(log_z - blz) < 1e-9
        np.testing.assert_allclose(marg, bm, rtol=0, atol=1e-9)


@pytest.mark.parametrize("single_root", [False, True])
def test_fast_path_matches_enumeration_within_its_bounds(single_root):
    # The Gauss-Jordan fast path of TREE messages: when it accepts a sentence, every marginal is
    # within its floor (absolute bound, <= 1e-12) or 1e-7 relative of the exact one, and it refuses
    # (ok False) the sentences it cannot represent (tight cycles at ±50, no tree).
    rng = np.random.default_rng(5)
    accepted = 0
    for n in range(1, 7):
        for scale in [1.0, 4.0, 12.0]:
            s = random_scores(rng, n, scale, forbid=0.1 if n > 2 else 0.0)
            bm, log_z = brute_force_table(s, False, single_root)[:2]
            if not np.isfinite(log_z):
                assert not matrix_tree_marginals_fast(s, single_root)[2]
                continue
            marg, floor, ok = matrix_tree_marginals_fast(s, single_root)
            if not ok:
                continue
            accepted += 1
            assert_marginals_valid(marg, n)
            assert (floor <= np.maximum(1e-12, 1e-7 * bm) + 1e-300).all()
            assert (np.abs(marg - bm) <= np.maximum(2 * floor, 1e-7 * bm) + 1e-15).all()
    assert accepted >= 12
    s = np.full((5, 5), -50.0)
    s[1, 2] = s[2, 1] = s[3, 4] = s[4, 3] = 50.0
    assert not matrix_tree_marginals_fast(s, single_root)[2]


@pytest.mark.parametrize("projective,single_root", VARIANTS)
def test_tight_cycles_keep_precision(projective, single_root):
    # Two 2-cycles at +50 with every other arc at -50: trees weigh e^-200 of the column maxima.
    # The textbook Laplacian (diagonal 1 + e^-100) loses the answer entirely; the GTH pivots keep it.
    for scale in [1.0, 20.0]:  # ±50 runs in the linear pass, ±1000 in log space
        s = np.full((5, 5), -50.0 * scale)
        s[1, 2] = s[2, 1] = s[3, 4] = s[4, 3] = 50.0 * scale
        marg, log_z = marginals_of(s, projective, single_root)
        bm, blz, _, _ = brute_force_table(s, projective, single_root)
        assert abs(log_z - blz) < 1e-9 * max(1.0, abs(blz))
        np.testing.assert_allclose(marg, bm, rtol=0, atol=1e-12)


@pytest.mark.parametrize("projective,single_root", VARIANTS)
def test_tiny_marginals_keep_relative_precision(projective, single_root):
    # The BP engine takes log μ and log Σ_{h'≠h} μ[h', m]: tiny marginals must be right relatively.
    rng = np.random.default_rng(17)
    smallest = 1.0
    for n in [4, 6]:
        for _ in range(8):
            s = np.clip(rng.normal(size=(n + 1, n + 1)) * 20, -50, 50)
            marg, _ = marginals_of(s, projective, single_root)
            bm, _, _, _ = brute_force_table(s, projective, single_root)
            pos = bm > 0
            smallest = min(smallest, bm[pos].min())
            np.testing.assert_allclose(marg[pos], bm[pos], rtol=1e-10, atol=0)
            assert (marg[~pos] == 0).all()
    assert smallest < 1e-30  # the test does reach tiny marginals


@pytest.mark.parametrize("single_root", [False, True])
def test_reverse_mode_fallback_matches_enumeration(single_root):
    # the pass used when some walk cannot reach a word; here called directly on ordinary inputs
    rng = np.random.default_rng(19)
    for n in range(1, 7):
        s = random_scores(rng, n, 2.0, 0.2 if n > 2 else 0.0)
        x, e, shift, status = _normalised_weights(s, single_root)
        bm, blz, _, _ = brute_force_table(s, False, single_root)
        if status == 1:
            assert blz == -np.inf
            continue
        marg = np.zeros((n + 1, n + 1))
        log_z = shift + _gth_reverse_mode(x, e, single_root, marg)
        assert abs(log_z - blz) < 1e-9
        np.testing.assert_allclose(marg, bm, rtol=0, atol=1e-9)


@pytest.mark.parametrize("projective,single_root", VARIANTS)
def test_extreme_scores_stay_finite_and_exact(projective, single_root):
    rng = np.random.default_rng(11)
    for n in [3, 5, 6]:
        for scale in [1e3, 1e4]:
            s = rng.uniform(-scale, scale, size=(n + 1, n + 1))
            s[rng.random(s.shape) < 0.2] = -np.inf
            for m in range(1, n + 1):  # keep at least one tree
                s[m - 1, m] = rng.uniform(-scale, scale)
            marg, log_z = marginals_of(s, projective, single_root)
            bm, blz, _, _ = brute_force_table(s, projective, single_root)
            assert np.isfinite(log_z)
            assert abs(log_z - blz) < 1e-12 * abs(blz) + 1e-9
            assert_marginals_valid(marg, n)
            np.testing.assert_allclose(marg, bm, rtol=0, atol=1e-9)


@pytest.mark.parametrize("projective,single_root", VARIANTS)
def test_large_sentences_stay_finite(projective, single_root):
    rng = np.random.default_rng(5)
    for n, scale in [(250, 50.0), (250, 1e4), (60, 1e3)]:
        s = rng.uniform(-scale, scale, size=(n + 1, n + 1))
        marg, log_z = marginals_of(s, projective, single_root)
        assert np.isfinite(log_z)
        assert_marginals_valid(marg, n)


@pytest.mark.parametrize("projective,single_root", VARIANTS)
def test_linear_and_log_passes_agree_past_enumeration(projective, single_root):
    rng = np.random.default_rng(3)
    for n in [12, 40, 120]:
        s = random_scores(rng, n, 3.0, 0.3)
        marg, log_z = marginals_of(s, projective, single_root)
        marg_log, log_z_log = log_space_pass(s, projective, single_root)
        assert abs(log_z - log_z_log) < 1e-10 * abs(log_z)
        np.testing.assert_allclose(marg, marg_log, rtol=0, atol=1e-11)
        log_z_only = eisner_log_z(s, single_root) if projective else matrix_tree_log_z(s, single_root)
        assert abs(log_z_only - log_z) < 1e-12 * abs(log_z)


@pytest.mark.parametrize("projective,single_root", VARIANTS)
def test_word_reachable_only_from_root(projective, single_root):
    # word 3 can only attach to ROOT: single root must eliminate it last (pivot reordering); both
    # the linear and the log-space pass must handle it
    rng = np.random.default_rng(13)
    for n in [4, 6]:
        s = random_scores(rng, n, 1.5)
        s[1:, 3] = -np.inf
        bm, blz, _, _ = brute_force_table(s, projective, single_root)
        for marg, log_z in [marginals_of(s, projective, single_root), log_space_pass(s, projective, single_root)]:
            assert abs(log_z - blz) < 1e-9
            np.testing.assert_allclose(marg, bm, rtol=0, atol=1e-9)
        if single_root:
            assert marginals_of(s, projective, single_root)[0][0, 3] == pytest.approx(1.0, abs=1e-12)


def test_single_root_is_a_sum_over_roots_child():
    # Z_single = Σ_r Z_multi(only 0->r allowed among root arcs), and marginals mix likewise
    rng = np.random.default_rng(4)
    n = 25
    s = random_scores(rng, n, 2.0, 0.1)
    marg, log_z = matrix_tree_marginals(s, True)
    parts, margs = [], []
    for r in range(1, n + 1):
        sr = s.copy()
        sr[0, 1:] = -np.inf
        sr[0, r] = s[0, r]
        mr, lr = matrix_tree_marginals(sr, False)
        parts.append(lr)
        margs.append(mr)
    parts = np.array(parts)
    assert abs(np.logaddexp.reduce(parts) - log_z) < 1e-10 * abs(log_z)
    w = np.exp(parts - log_z)
    np.testing.assert_allclose(np.tensordot(w, np.array(margs), axes=1), marg, rtol=0, atol=1e-10)


@pytest.mark.parametrize("projective,single_root", VARIANTS)
def test_gradient_of_log_z_is_marginals(projective, single_root):
    rng = np.random.default_rng(9)
    n = 5
    s = random_scores(rng, n, 1.5)
    marg, log_z = marginals_of(s, projective, single_root)
    eps = 1e-6
    for h in range(n + 1):
        for m in range(1, n + 1):
            if h == m:
                continue
            sp, sm = s.copy(), s.copy()
            sp[h, m] += eps
            sm[h, m] -= eps
            fd = (marginals_of(sp, projective, single_root)[1] - marginals_of(sm, projective, single_root)[1]) / (2 * eps)
            assert abs(fd - marg[h, m]) < 1e-7


@pytest.mark.parametrize("projective,single_root", VARIANTS)
def test_chain_with_one_tree_gives_exact_zero_one(projective, single_root):
    n = 6
    s = np.full((n + 1, n + 1), -np.inf)
    for m in range(1, n + 1):
        s[m - 1, m] = 0.7 * m
    marg, log_z = marginals_of(s, projective, single_root)
    expected = np.zeros_like(s)
    for m in range(1, n + 1):
        expected[m - 1, m] = 1.0
    assert (marg == expected).all()
    assert abs(log_z - 0.7 * n * (n + 1) / 2) < 1e-12


@pytest.mark.parametrize("projective,single_root", VARIANTS)
def test_small_edge_cases(projective, single_root):
    s = np.array([[0.0, 1.3], [0.0, 0.0]])
    marg, log_z = marginals_of(s, projective, single_root)
    assert log_z == pytest.approx(1.3, abs=1e-15)
    assert marg[0, 1] == 1.0 and marg.sum() == 1.0
    s = np.array([[0.0, 0.2, -0.4], [0.0, 0.0, 1.1], [0.0, 0.5, 0.0]])
    marg, log_z = marginals_of(s, projective, single_root)
    bm, blz, _, _ = brute_force_table(s, projective, single_root)
    assert abs(log_z - blz) < 1e-12
    np.testing.assert_allclose(marg, bm, rtol=0, atol=1e-12)


@pytest.mark.parametrize("projective,single_root", VARIANTS)
def test_no_tree_possible(projective, single_root):
    s = np.zeros((4, 4))
    s[:, 2] = -np.inf  # word 2 can have no head
    marg, log_z = marginals_of(s, projective, single_root)
    assert log_z == -np.inf and not marg.any()
    s = np.zeros((4, 4))
    s[0, :] = -np.inf  # no root arc at all
    marg, log_z = marginals_of(s, projective, single_root)
    assert log_z == -np.inf and not marg.any()
    if single_root:
        s = np.zeros((4, 4))
        s[:, 1] = s[:, 2] = -np.inf
        s[0, 1] = s[0, 2] = 0.0  # words 1 and 2 can only attach to ROOT: no single-root tree
        marg, log_z = marginals_of(s, projective, single_root)
        assert log_z == -np.inf and not marg.any()
    if projective:
        # trees exist, but none is projective: 1 -> 3 and 2 -> 4 are the only arcs into 3 and 4
        s = np.full((5, 5), -np.inf)
        s[0, 1] = s[1, 2] = s[1, 3] = s[2, 4] = 0.0
        assert np.isfinite(matrix_tree_marginals(s, single_root)[1])
        marg, log_z = marginals_of(s, projective, single_root)
        assert log_z == -np.inf and not marg.any()


def test_projective_trees_are_a_subset():
    # Z over projective trees <= Z over all trees, with equality for n <= 2 (every tree is projective)
    rng = np.random.default_rng(12)
    for n in [2, 8, 30]:
        for single_root in [False, True]:
            s = random_scores(rng, n, 2.0)
            lp = eisner_marginals(s, single_root)[1]
            ln = matrix_tree_marginals(s, single_root)[1]
            assert lp <= ln + 1e-12
            if n <= 2:
                assert abs(lp - ln) < 1e-12


def decode_with(scores, projective, single_root):
    return eisner_decode(scores, single_root) if projective else mst_decode(scores, single_root)


def assert_valid_tree(heads, n, projective, single_root):
    assert heads.dtype == np.int64 and heads.shape == (n + 1,) and heads[0] == -1
    assert is_tree(heads)
    if projective:
        assert is_projective(heads)
    if single_root:
        assert (heads[1:] == 0).sum() == 1


@pytest.mark.parametrize("projective,single_root", VARIANTS)
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
def test_decode_matches_enumeration(n, projective, single_root):
    rng = np.random.default_rng(1000 + 100 * n + 10 * projective + single_root)
    for rep in range(40):
        kind = rep % 4
        if kind == 0:  # continuous: the best tree is unique
            s = random_scores(rng, n, 1.0)
        elif kind == 1:  # small integers: many ties, compare scores
            s = rng.integers(-2, 3, size=(n + 1, n + 1)).astype(np.float64)
        elif kind == 2:  # forbidden arcs
            s = random_scores(rng, n, 1.0, 0.4)
        else:  # marginals as MBR scores
            s = marginals_of(random_scores(rng, n, 2.0), False, single_root)[0]
        heads = decode_with(s, projective, single_root)
        _, _, best_heads, best_score = brute_force_table(s, projective, single_root)
        assert_valid_tree(heads, n, projective, single_root)
        score = tree_score(s, heads)
        if best_score == -np.inf:
            assert score == -np.inf
        else:
            assert abs(score - best_score) < 1e-9
        if kind == 0:
            assert (heads == best_heads).all()


@pytest.mark.parametrize("projective,single_root", VARIANTS)
def test_decode_uses_as_few_forbidden_arcs_as_possible(projective, single_root):
    rng = np.random.default_rng(21)
    n = 5
    trees = tree_table(n, projective, single_root)
    for _ in range(20):
        s = random_scores(rng, n, 1.0, 0.75)
        heads = decode_with(s, projective, single_root)
        assert_valid_tree(heads, n, projective, single_root)
        forbidden = np.isneginf(s[trees[:, 1:], np.arange(1, n + 1)]).sum(axis=1)
        used = sum(np.isneginf(s[heads[m], m]) for m in range(1, n + 1))
        if projective:
            assert used == 0 or forbidden.min() > 0  # Eisner: any tree when all are -inf
        else:
            assert used == forbidden.min()


@pytest.mark.parametrize("single_root", [False, True])
def test_eisner_max_equals_cle_when_cle_tree_is_projective(single_root):
    rng = np.random.default_rng(8)
    agreed = 0
    for n in [10, 20, 40]:
        for _ in range(10):
            s = random_scores(rng, n, 1.0)
            # a bonus on the arcs of some projective tree makes the overall best tree projective often
            planted = eisner_decode(random_scores(rng, n, 1.0), single_root)
            s[planted[1:], np.arange(1, n + 1)] += rng.choice([1.5, 4.0])
            cle = mst_decode(s, single_root)
            eis = eisner_decode(s, single_root)
            assert_valid_tree(cle, n, False, single_root)
            assert_valid_tree(eis, n, True, single_root)
            assert tree_score(s, eis) <= tree_score(s, cle) + 1e-9
            if is_projective(cle):
                agreed += 1
                assert (cle == eis).all()
    assert agreed >= 5


@pytest.mark.parametrize("projective,single_root", VARIANTS)
def test_decode_edge_cases_and_determinism(projective, single_root):
    heads = decode_with(np.array([[0.0, -3.0], [0.0, 0.0]]), projective, single_root)
    assert heads.tolist() == [-1, 0]
    s = np.zeros((4, 4))  # all ties
    h1 = decode_with(s, projective, single_root)
    assert_valid_tree(h1, 3, projective, single_root)
    assert (decode_with(s.copy(), projective, single_root) == h1).all()
    s = np.full((3, 3), -np.inf)  # every tree forbidden: still a tree
    assert_valid_tree(decode_with(s, projective, single_root), 2, projective, single_root)


def test_single_root_decode_is_exact_not_greedy():
    # Multi-root optimum has two ROOT children; the best single-root tree is not obtained by keeping
    # the better root arc of the multi-root tree (the re-run heuristic would need n runs).
    s = np.full((4, 4), -10.0)
    s[0, 1], s[0, 2], s[0, 3] = 5.0, 4.9, 0.0
    s[1, 2], s[2, 1] = -3.0, -0.5
    s[2, 3], s[1, 3] = 1.0, 0.0
    multi = mst_decode(s, False)
    single = mst_decode(s, True)
    _, _, best, best_score = brute_force_table(s, False, True)
    assert (multi[1:] == 0).sum() > 1
    assert (single == best).all() and tree_score(s, single) == best_score


def test_oracle_table_counts():
    # Cayley: n^(n-1) single-root trees over n words, (n+1)^(n-1) multi-root ones
    for n in range(1, 7):
        assert len(tree_table(n, False, True)) == n ** (n - 1)
        assert len(tree_table(n, False, False)) == (n + 1) ** (n - 1)
