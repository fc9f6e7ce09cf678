"""Second-order projective DP (arcs + grandparents) against enumeration (tests/oracle_factor_graph.py),
first-order Eisner, and its own derivatives past enumeration."""
import numpy as np
import pytest
from oracle import is_projective, is_tree
from oracle_factor_graph import (
    exact_second_order,
    tree_log_score,
    tree_log_scores,
    tree_table,
)

from bpparse.kernels.eisner import eisner_decode, eisner_marginals
from bpparse.kernels.grand_dp import grand_decode, grand_inside_outside


def random_model(rng, n, scale=1.5):
    return rng.normal(0.0, scale, (n + 1, n + 1)), rng.normal(0.0, scale, (n + 1,) * 3)


def score(heads, arc, grand):
    """The model's score of one tree, from the oracle's definitions."""
    return tree_log_score(heads, arc, grand=grand)


def exact_grand_pairs(arc, grand, single_root):
    """By enumeration: (expected [g, h, m] pair counts, P(g -> h and h -> m), h >= 1; best heads)."""
    n = arc.shape[0] - 1
    trees = tree_table(n, True, single_root)
    scores = tree_log_scores(trees, arc, grand=grand)
    probs = np.exp(scores - np.logaddexp.reduce(scores))
    counts = np.zeros((n + 1,) * 3)
    rows = np.arange(len(trees))
    for m in range(1, n + 1):
        h = trees[:, m]
        g = trees[rows, h]
        has = h != 0
        np.add.at(counts, (g[has], h[has], m), probs[has])
    return counts, trees[int(np.argmax(scores))]


def check_against_oracle(arc, grand, single_root, atol=1e-9):
    mu, log_z, grand_marg = grand_inside_outside(arc, grand, single_root)
    mu_ref, log_z_ref, _ = exact_second_order(arc, grand=grand, sib=None, cross=None, projective=True,
                                              single_root=single_root)
    grand_ref, best_ref = exact_grand_pairs(arc, grand, single_root)
    np.testing.assert_allclose(mu, mu_ref, rtol=0, atol=atol)
    np.testing.assert_allclose(grand_marg, grand_ref, rtol=0, atol=atol)
    assert log_z == pytest.approx(log_z_ref, rel=1e-12, abs=1e-9)
    heads, best = grand_decode(arc, grand, single_root)
    assert heads[0] == -1 and is_tree(heads) and is_projective(heads)
    assert best == pytest.approx(score(best_ref, arc, grand), rel=1e-12, abs=1e-9)
    assert best == pytest.approx(score(heads, arc, grand), rel=1e-12, abs=1e-9)
    np.testing.assert_array_equal(heads, best_ref)  # continuous random scores: no ties
    return mu, log_z, grand_marg, heads


@pytest.mark.parametrize("single_root", [True, False])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
def test_matches_enumeration(n, single_root):
    rng = np.random.default_rng(100 * n + single_root)
    for scale in (1.0, 2.0, 2.0):
        arc, grand = random_model(rng, n, scale)
        mu, _, grand_marg, heads = check_against_oracle(arc, grand, single_root)
        np.testing.assert_allclose(mu[:, 1:].sum(axis=0), 1.0, atol=1e-12)
        assert not mu[:, 0].any() and not np.diag(mu).any()
        assert not grand_marg[:, 0, :].any() and not grand_marg[:, :, 0].any()
        # every arc h -> m (h >= 1) has exactly one grandparent
        np.testing.assert_allclose(grand_marg.sum(axis=0)[1:], mu[1:], rtol=0, atol=1e-12)
        if single_root:
            assert (heads == 0).sum() == 1


@pytest.mark.parametrize("single_root", [True, False])
def test_unused_grand_entries_are_never_read(single_root):
    """grand[g, 0, m] and entries with repeated indices are no factor: NaN there changes nothing."""
    rng = np.random.default_rng(6)
    n = 5
    arc, grand = random_model(rng, n)
    idx = np.arange(n + 1)
    poisoned = grand.copy()
    poisoned[:, 0, :] = np.nan
    poisoned[:, :, 0] = np.nan
    poisoned[idx, idx, :] = np.nan
    poisoned[:, idx, idx] = np.nan
    poisoned[idx, :, idx] = np.nan
    mu, log_z, grand_marg = grand_inside_outside(arc, poisoned, single_root)
    mu_ref, log_z_ref, grand_ref = grand_inside_outside(arc, np.nan_to_num(poisoned), single_root)
    np.testing.assert_array_equal(mu, mu_ref)
    np.testing.assert_array_equal(grand_marg, grand_ref)
    assert log_z == log_z_ref
    np.testing.assert_array_equal(grand_decode(arc, poisoned, single_root)[0],
                                  grand_decode(arc, np.nan_to_num(poisoned), single_root)[0])


@pytest.mark.parametrize("single_root", [True, False])
def test_forbidden_arcs(single_root):
    rng = np.random.default_rng(7)
    n = 6
    for _ in range(3):
        arc, grand = random_model(rng, n)
        forbidden = rng.random((n + 1, n + 1)) < 0.35
        forbidden[np.arange(n), np.arange(1, n + 1)] = False  # the chain 0 -> 1 -> ... -> n stays
        arc[forbidden] = -np.inf
        mu, _, grand_marg, heads = check_against_oracle(arc, grand, single_root)
        off = forbidden.copy()
        off[:, 0] = False
        assert not mu[off].any()
        assert not grand_marg[:, off].any() and not grand_marg[off, :].any()
        assert np.isfinite(arc[heads[1:], np.arange(1, n + 1)]).all()


@pytest.mark.parametrize("single_root", [True, False])
def test_no_possible_tree(single_root):
    rng = np.random.default_rng(8)
    n = 5
    arc, grand = random_model(rng, n)
    arc[:, 3] = -np.inf  # word 3 can have no head
    mu, log_z, grand_marg = grand_inside_outside(arc, grand, single_root)
    assert log_z == -np.inf and not mu.any() and not grand_marg.any()
    heads, best = grand_decode(arc, grand, single_root)
    assert best == -np.inf
    assert heads[0] == -1 and is_tree(heads) and is_projective(heads)


@pytest.mark.parametrize("single_root", [True, False])
def test_large_scores_match_enumeration(single_root):
    """Scores x1000: log space neither overflows nor loses the small marginals."""
    rng = np.random.default_rng(9)
    for n in (3, 6):
        arc, grand = random_model(rng, n, 1000.0)
        mu, log_z, grand_marg, _ = check_against_oracle(arc, grand, single_root)
        assert np.isfinite(log_z) and np.isfinite(grand_marg).all()
        np.testing.assert_allclose(mu[:, 1:].sum(axis=0), 1.0, atol=1e-12)


@pytest.mark.parametrize("single_root", [True, False])
def test_long_sentence_huge_scores(single_root):
    """n = 60 with |scores| ~ 1e4: finite, normalised, and log Z within log(#trees) of the max."""
    rng = np.random.default_rng(10)
    n = 60
    arc, grand = random_model(rng, n, 1e4)
    mu, log_z, grand_marg = grand_inside_outside(arc, grand, single_root)
    heads, best = grand_decode(arc, grand, single_root)
    assert np.isfinite(log_z) and np.isfinite(mu).all() and np.isfinite(grand_marg).all()
    np.testing.assert_allclose(mu[:, 1:].sum(axis=0), 1.0, atol=1e-9)
    np.testing.assert_allclose(grand_marg.sum(axis=0)[1:], mu[1:], rtol=0, atol=1e-9)
    assert best <= log_z <= best + n * np.log(8.0)  # fewer than 8^n projective trees
    assert best == pytest.approx(score(heads, arc, grand), rel=1e-12)
    assert is_tree(heads) and is_projective(heads)
    if single_root:
        assert (heads == 0).sum() == 1


@pytest.mark.parametrize("single_root", [True, False])
def test_zero_grand_is_first_order_eisner(single_root):
    rng = np.random.default_rng(11)
    for n in (1, 2, 5, 12, 30):
        arc = rng.normal(0.0, 2.0, (n + 1, n + 1))
        grand = np.zeros((n + 1,) * 3)
        mu, log_z, _ = grand_inside_outside(arc, grand, single_root)
        mu_ref, log_z_ref = eisner_marginals(arc, single_root)
        np.testing.assert_allclose(mu, mu_ref, rtol=0, atol=1e-9)
        assert log_z == pytest.approx(log_z_ref, rel=1e-12, abs=1e-9)
        heads, best = grand_decode(arc, grand, single_root)
        np.testing.assert_array_equal(heads, eisner_decode(arc, single_root))
        assert best == pytest.approx(arc[heads[1:], np.arange(1, n + 1)].sum(), rel=1e-12)


def log_z_shifted(arc, grand, single_root, index, delta):
    """log Z after adding delta to arc[index] (2 indices) or grand[index] (3 indices)."""
    arc, grand = arc.copy(), grand.copy()
    (arc if len(index) == 2 else grand)[index] += delta
    return grand_inside_outside(arc, grand, single_root)[1]


@pytest.mark.parametrize("single_root", [True, False])
def test_past_enumeration_derivatives(single_root):
    """n = 20: marginals and pair marginals are ∂ log Z (central differences), and the max semiring
    is the zero-temperature limit."""
    rng = np.random.default_rng(12)
    n = 20
    arc, grand = random_model(rng, n, 1.0)
    mu, _, grand_marg = grand_inside_outside(arc, grand, single_root)
    likely = np.argsort(grand_marg, axis=None)[-3:]  # pairs with large marginals, and a few others
    indices = [np.unravel_index(i, grand.shape) for i in likely]
    indices += [(0, 7), (3, 4), (20, 2), (9, 20), (0, 5, 8), (12, 10, 7), (4, 9, 3), (15, 2, 1)]
    eps = 1e-5
    for index in indices:
        grad = (mu if len(index) == 2 else grand_marg)[index]
        up = log_z_shifted(arc, grand, single_root, index, eps)
        down = log_z_shifted(arc, grand, single_root, index, -eps)
        assert (up - down) / (2 * eps) == pytest.approx(grad, abs=1e-6), index
    best = grand_decode(arc, grand, single_root)[1]
    beta = 1e6
    cold = grand_inside_outside(arc * beta, grand * beta, single_root)[1] / beta
    assert cold == pytest.approx(best, abs=1e-9)
