"""Second-order projective DP (arcs + head automata) against enumeration (tests/oracle_factor_graph.py),
first-order Eisner, and its own derivatives past enumeration."""
import numpy as np
import pytest
from oracle import is_projective, is_tree
from oracle_factor_graph import childseq_transitions, exact_childseq, tree_log_score

from bpparse.kernels.eisner import eisner_decode, eisner_marginals
from bpparse.kernels.sibling_dp import sibling_decode, sibling_inside_outside


def random_model(rng, n, scale=1.5):
    return rng.normal(0.0, scale, (n + 1, n + 1)), rng.normal(0.0, scale, (n + 1,) * 3)


def score(heads, arc, seq):
    """The model's score of one tree, from the oracle's definitions."""
    return tree_log_score(heads, arc) + sum(seq[x] for x in childseq_transitions(heads))


def check_against_oracle(arc, seq, single_root, atol=1e-9):
    mu, log_z, seq_marg = sibling_inside_outside(arc, seq, single_root)
    mu_ref, log_z_ref, seq_ref, best_ref = exact_childseq(arc, seq, projective=True,
                                                          single_root=single_root)
    np.testing.assert_allclose(mu, mu_ref, rtol=0, atol=atol)
    np.testing.assert_allclose(seq_marg, seq_ref, rtol=0, atol=atol)
    assert log_z == pytest.approx(log_z_ref, rel=1e-12, abs=1e-9)
    heads, best = sibling_decode(arc, seq, single_root)
    assert heads[0] == -1 and is_tree(heads) and is_projective(heads)
    assert best == pytest.approx(score(best_ref, arc, seq), rel=1e-12, abs=1e-9)
    assert best == pytest.approx(score(heads, arc, seq), rel=1e-12, abs=1e-9)
    return mu, log_z, seq_marg, heads


@pytest.mark.parametrize("single_root", [True, False])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
def test_matches_enumeration(n, single_root):
    rng = np.random.default_rng(100 * n + single_root)
    for scale in (1.0, 2.0, 2.0):
        arc, seq = random_model(rng, n, scale)
        mu, _, _, heads = check_against_oracle(arc, seq, single_root)
        np.testing.assert_allclose(mu[:, 1:].sum(axis=0), 1.0, atol=1e-12)
        assert not mu[:, 0].any() and not np.diag(mu).any()
        if single_root:
            assert (heads == 0).sum() == 1


@pytest.mark.parametrize("single_root", [True, False])
def test_forbidden_arcs(single_root):
    rng = np.random.default_rng(7)
    n = 6
    for _ in range(3):
        arc, seq = random_model(rng, n)
        forbidden = rng.random((n + 1, n + 1)) < 0.35
        forbidden[np.arange(n), np.arange(1, n + 1)] = False  # the chain 0 -> 1 -> ... -> n stays
        arc[forbidden] = -np.inf
        mu, _, _, heads = check_against_oracle(arc, seq, single_root)
        off = forbidden.copy()
        off[:, 0] = False
        assert not mu[off].any()
        assert np.isfinite(arc[heads[1:], np.arange(1, n + 1)]).all()


@pytest.mark.parametrize("single_root", [True, False])
def test_no_possible_tree(single_root):
    rng = np.random.default_rng(8)
    n = 5
    arc, seq = random_model(rng, n)
    arc[:, 3] = -np.inf  # word 3 can have no head
    mu, log_z, seq_marg = sibling_inside_outside(arc, seq, single_root)
    assert log_z == -np.inf and not mu.any() and not seq_marg.any()
    heads, best = sibling_decode(arc, seq, single_root)
    assert best == -np.inf
    assert heads[0] == -1 and is_tree(heads) and is_projective(heads)


@pytest.mark.parametrize("single_root", [True, False])
def test_large_scores_match_enumeration(single_root):
    """Scores x1000: log space neither overflows nor loses the small marginals."""
    rng = np.random.default_rng(9)
    for n in (3, 6):
        arc, seq = random_model(rng, n, 1000.0)
        mu, log_z, seq_marg, _ = check_against_oracle(arc, seq, single_root)
        assert np.isfinite(log_z) and np.isfinite(seq_marg).all()
        np.testing.assert_allclose(mu[:, 1:].sum(axis=0), 1.0, atol=1e-12)


def test_long_sentence_huge_scores():
    """n = 250 with |scores| ~ 1e4: finite, normalised, and log Z within log(#trees) of the max."""
    rng = np.random.default_rng(10)
    n = 250
    arc, seq = random_model(rng, n, 1e4)
    mu, log_z, seq_marg = sibling_inside_outside(arc, seq, False)
    heads, best = sibling_decode(arc, seq, False)
    assert np.isfinite(log_z) and np.isfinite(mu).all() and np.isfinite(seq_marg).all()
    np.testing.assert_allclose(mu[:, 1:].sum(axis=0), 1.0, atol=1e-9)
    assert best <= log_z <= best + n * np.log(8.0)  # fewer than 8^n projective trees
    assert best == pytest.approx(score(heads, arc, seq), rel=1e-12)


@pytest.mark.parametrize("single_root", [True, False])
def test_zero_seq_is_first_order_eisner(single_root):
    rng = np.random.default_rng(11)
    for n in (1, 2, 5, 12, 30):
        arc = rng.normal(0.0, 2.0, (n + 1, n + 1))
        seq = np.zeros((n + 1,) * 3)
        mu, log_z, _ = sibling_inside_outside(arc, seq, single_root)
        mu_ref, log_z_ref = eisner_marginals(arc, single_root)
        np.testing.assert_allclose(mu, mu_ref, rtol=0, atol=1e-9)
        assert log_z == pytest.approx(log_z_ref, rel=1e-12, abs=1e-9)
        heads, best = sibling_decode(arc, seq, single_root)
        np.testing.assert_array_equal(heads, eisner_decode(arc, single_root))
        assert best == pytest.approx(arc[heads[1:], np.arange(1, n + 1)].sum(), rel=1e-12)


def log_z_shifted(arc, seq, single_root, index, delta):
    """log Z after adding delta to arc[index] (2 indices) or seq[index] (3 indices)."""
    arc, seq = arc.copy(), seq.copy()
    (arc if len(index) == 2 else seq)[index] += delta
    return sibling_inside_outside(arc, seq, single_root)[1]


@pytest.mark.parametrize("single_root", [True, False])
def test_past_enumeration_derivatives_and_counts(single_root):
    """n = 25: marginals and transition counts are ∂ log Z (central differences), every child has
    one transition into it and one out of it, and the max semiring is the zero-temperature limit."""
    rng = np.random.default_rng(12)
    n = 25
    arc, seq = random_model(rng, n, 1.0)
    mu, _, seq_marg = sibling_inside_outside(arc, seq, single_root)
    likely = np.argsort(seq_marg, axis=None)[-3:]  # transitions with large counts, and a few others
    indices = [np.unravel_index(i, seq.shape) for i in likely]
    indices += [(0, 7), (3, 4), (20, 2), (9, 25), (5, 5, 8), (12, 10, 7), (4, 9, 4), (0, 3, 0)]
    eps = 1e-5
    for index in indices:
        grad = (mu if len(index) == 2 else seq_marg)[index]
        up = log_z_shifted(arc, seq, single_root, index, eps)
        down = log_z_shifted(arc, seq, single_root, index, -eps)
        assert (up - down) / (2 * eps) == pytest.approx(grad, abs=1e-6), index
    for h in range(n + 1):
        for m in range(1, n + 1):
            if h == m:  # [m, :, m] and [m, m, :] are m's own stop and start transitions
                continue
            assert seq_marg[h, :, m].sum() == pytest.approx(mu[h, m], abs=1e-10)
            assert seq_marg[h, m, :].sum() == pytest.approx(mu[h, m], abs=1e-10)
    best = sibling_decode(arc, seq, single_root)[1]
    beta = 1e6
    cold = sibling_inside_outside(arc * beta, seq * beta, single_root)[1] / beta
    assert cold == pytest.approx(best, abs=1e-9)
