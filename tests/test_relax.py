"""Relaxed marginal inference (issue 7): gains, selection and KL bounds against exact enumeration."""
import itertools

import numpy as np
import pytest

from oracle_relax import TreeModel, arcs_cross, grand_sib_pairs, kl

from bpparse.kernels.relax_kernels import (
    crossing_probs,
    factor_gain,
    factor_gains,
    kl_bounds,
    pair_firing_probs,
    select_min_divergence,
    select_min_joint,
    select_min_size,
)


def random_model(rng, n, scale=1.0, projective=False, single_root=True):
    pair_a, pair_b, n_grand = grand_sib_pairs(n)
    model = TreeModel(n, pair_a, pair_b, projective, single_root)
    link = rng.normal(size=(n + 1, n + 1))
    pair_w = scale * rng.normal(size=pair_a.shape[0])
    cross_w = np.triu(scale * rng.normal(size=(n + 1, n + 1)), 1)
    cross_w[0, :] = 0.0
    return model, link, pair_a, pair_b, pair_w, cross_w


# --- the gain function -------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(4))
def test_gain_equals_brute_force_kl_for_one_added_factor(seed):
    rng = np.random.default_rng(seed)
    n = 4 if seed % 2 else 5
    model, link, pair_a, pair_b, pair_w, cross_w = random_model(rng, n, scale=1.5)
    k = pair_a.shape[0]
    in_g = rng.random(k) < 0.3
    cross_in = np.triu(rng.random((n + 1, n + 1)) < 0.3, 1)
    lw_g = model.log_weights(link, pair_w, in_g, cross_w, cross_in)
    p_g = model.probs(lw_g)
    # pairwise candidates: exact μ under p_G, gain vs enumerated KL(p_G ‖ p_G+i)
    for i in rng.choice(np.nonzero(~in_g)[0], size=8, replace=False):
        mu = float(p_g @ model.pair_fire[:, i])
        with_i = in_g.copy()
        with_i[i] = True
        p_gi = model.probs(model.log_weights(link, pair_w, with_i, cross_w, cross_in))
        assert factor_gain(mu, pair_w[i]) == pytest.approx(kl(p_g, p_gi), rel=1e-9, abs=1e-13)
    # NOCROSS groups are one binary factor each (at most one crossing pair fires in a tree)
    for j, (m, l) in enumerate(model.groups):
        if cross_in[m, l]:
            continue
        mu = float(p_g @ model.cross_fire[:, j])
        with_j = cross_in.copy()
        with_j[m, l] = True
        p_gj = model.probs(model.log_weights(link, pair_w, in_g, cross_w, with_j))
        assert factor_gain(mu, cross_w[m, l]) == pytest.approx(kl(p_g, p_gj), rel=1e-9, abs=1e-13)


def test_gain_limits_and_large_weights():
    assert factor_gain(0.0, 3.0) == 0.0
    assert factor_gain(1.0, -3.0) == 0.0
    assert factor_gain(0.4, 0.0) == 0.0
    # above the exp() switch both branches agree with the closed form in extended precision
    for theta in (29.0, 31.0, -31.0, 200.0):
        for mu in (1e-12, 0.3, 0.999):
            exact = float(np.logaddexp(np.log1p(-mu), np.log(mu) + theta) - mu * theta)
            assert factor_gain(mu, theta) == pytest.approx(exact, rel=1e-9, abs=1e-12)
    mu = np.linspace(0.0, 1.0, 11)
    theta = np.linspace(-5.0, 5.0, 11)
    g = factor_gains(mu, theta)
    assert np.all(g >= 0.0)
    assert g[3] == pytest.approx(np.log(1 - mu[3] + mu[3] * np.exp(theta[3])) - mu[3] * theta[3])


# --- firing-probability approximations ---------------------------------------------------------

def test_crossing_probs_matches_pairwise_sum():
    rng = np.random.default_rng(7)
    n = 6
    marg = rng.random((n + 1, n + 1))
    np.fill_diagonal(marg, 0.0)
    marg[:, 0] = 0.0
    got = crossing_probs(marg)
    want = np.zeros_like(marg)
    for m in range(1, n + 1):
        for l in range(m + 1, n + 1):
            for h in range(n + 1):
                for k in range(n + 1):
                    if h != m and k != l and arcs_cross(h, m, k, l):
                        want[m, l] += marg[h, m] * marg[k, l]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def test_group_firing_is_sum_of_exact_pair_probabilities():
    # the product approximation replaces each P(h→m, k→l) by μ[h,m]·μ[k,l]; with the exact joint
    # probabilities in its place the sum is the exact firing probability of the group
    rng = np.random.default_rng(3)
    n = 5
    model, link, pair_a, pair_b, pair_w, cross_w = random_model(rng, n)
    p = model.probs(model.log_weights(link, pair_w))
    n1 = n + 1
    for j, (m, l) in enumerate(model.groups):
        total = 0.0
        for h in range(n1):
            for k in range(n1):
                if h != m and k != l and arcs_cross(h, m, k, l):
                    total += p @ (model.arcs[:, h * n1 + m] & model.arcs[:, k * n1 + l])
        assert total == pytest.approx(p @ model.cross_fire[:, j], abs=1e-12)
    marg = model.arc_marginals(p)
    mu_pair = pair_firing_probs(marg.ravel(), pair_a, pair_b)
    np.testing.assert_allclose(mu_pair, marg.ravel()[pair_a] * marg.ravel()[pair_b])


# --- selection ---------------------------------------------------------------------------------

def _subsets(items):
    for r in range(len(items) + 1):
        yield from itertools.combinations(items, r)


@pytest.mark.parametrize("seed", range(5))
def test_selection_objectives_are_optimal_by_enumeration(seed):
    rng = np.random.default_rng(seed)
    f = 10
    gains = rng.exponential(0.01, size=f)
    gains[rng.random(f) < 0.2] = 0.0
    candidate = rng.random(f) < 0.8
    cands = list(np.nonzero(candidate)[0])
    gamma = 0.008
    chosen = select_min_joint(gains, candidate, gamma)
    np.testing.assert_array_equal(chosen, candidate & (gains >= gamma))
    # MinJoint minimises Σ_{not added} (g − γ): check against every subset
    best = min(sum(gains[i] - gamma for i in cands if i not in s) for s in _subsets(cands))
    assert sum(gains[i] - gamma for i in cands if not chosen[i]) == pytest.approx(best)
    # MinSize: fewest added factors with Σ of the discarded gains ≤ ε
    eps = float(np.sum(gains[candidate]) * rng.uniform(0.1, 0.9))
    chosen = select_min_size(gains, candidate, eps)
    assert not np.any(chosen & ~candidate)
    assert np.sum(gains[candidate & ~chosen]) <= eps + 1e-15
    fewest = min(len(s) for s in _subsets(cands) if sum(gains[i] for i in cands if i not in s) <= eps)
    assert chosen.sum() == fewest
    # MinDivergence: the m highest gains minimise the summed gain left out
    for m in (0, 3, len(cands), len(cands) + 2):
        chosen = select_min_divergence(gains, candidate, m)
        assert chosen.sum() == min(m, len(cands)) and not np.any(chosen & ~candidate)
        least = min(sum(gains[i] for i in cands if i not in s)
                    for s in itertools.combinations(cands, min(m, len(cands))))
        assert np.sum(gains[candidate & ~chosen]) == pytest.approx(least)


def test_selection_at_zero_and_infinite_thresholds():
    gains = np.array([0.0, 1e-9, 0.5, 0.0])
    candidate = np.array([True, True, True, False])
    np.testing.assert_array_equal(select_min_joint(gains, candidate, 0.0), candidate)
    assert not select_min_joint(gains, candidate, np.inf).any()
    np.testing.assert_array_equal(select_min_size(gains, candidate, -1.0), candidate)
    assert not select_min_size(gains, candidate, np.inf).any()


# --- KL bounds ---------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(6))
def test_bounds_dominate_brute_force_kl_for_random_subsets(seed):
    rng = np.random.default_rng(100 + seed)
    n = 4 if seed % 2 else 5
    model, link, pair_a, pair_b, pair_w, cross_w = random_model(rng, n, scale=0.7)
    p_full = model.probs(model.log_weights(link, pair_w, None, cross_w, None))
    cross_vec = np.array([cross_w[m, l] for (m, l) in model.groups])
    theta = np.concatenate([pair_w, cross_vec])
    fire = np.concatenate([model.pair_fire, model.cross_fire], axis=1).astype(float)
    for frac in (0.0, 0.05, 0.3, 0.9):
        keep = rng.random(theta.shape[0]) < frac
        cross_on = model.cross_matrix(keep[pair_w.shape[0]:]).astype(bool)
        p_sub = model.probs(model.log_weights(link, pair_w, keep[:pair_w.shape[0]], cross_w, cross_on))
        mu = p_sub @ fire
        eta, tight = kl_bounds(mu, theta, ~keep)
        d = kl(p_sub, p_full)
        assert d <= tight + 1e-10
        assert tight <= eta + 1e-12
        flipped = np.where(theta >= 0, theta * (1 - mu), -theta * mu)
        assert eta == pytest.approx(flipped[~keep].sum())


def test_tight_bound_is_exact_for_one_remaining_factor():
    rng = np.random.default_rng(11)
    n = 4
    model, link, pair_a, pair_b, pair_w, cross_w = random_model(rng, n, scale=2.0)
    k = pair_a.shape[0]
    for i in rng.choice(k, size=6, replace=False):
        keep = np.ones(k, dtype=bool)
        keep[i] = False
        p_sub = model.probs(model.log_weights(link, pair_w, keep))
        p_full = model.probs(model.log_weights(link, pair_w))
        mu = p_sub @ model.pair_fire.astype(float)
        eta, tight = kl_bounds(mu, pair_w, ~keep)
        # KL(p_sub ‖ p_sub+i) is the gain of i; the comonotone bound attains it
        assert tight == pytest.approx(kl(p_sub, p_full), rel=1e-9, abs=1e-13)
        assert tight == pytest.approx(factor_gain(mu[i], pair_w[i]), rel=1e-9, abs=1e-13)
        assert eta >= tight


def test_bounds_of_empty_rest_are_zero():
    eta, tight = kl_bounds(np.array([0.3]), np.array([1.0]), np.array([False]))
    assert eta == 0.0 and tight == 0.0
