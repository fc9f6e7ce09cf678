"""Factor-level tests: every family's messages against a brute-force sum over the factor's own
assignments (tests/oracle_factor_graph.py), for random incoming messages."""
import itertools

import numpy as np
import pytest

from bpparse.graph import (all_pairs, build_graph, cross_from_dense, grand_count, pairs_from_dense,
                           parse_constraint, scatter_pair_values, sib_count)
from bpparse.kernels.factors.hard import (atmost1_messages, exactly1_messages, no2cycle_pairs,
                                          not2_pairs)
from bpparse.kernels.factors.nocross import (EXACTLY1, GROUPED, crossing_products, crossing_sums,
                                             exactly1_group_messages, grouped_group_messages,
                                             nocross_expected_crossings, nocross_update,
                                             nocross_update_listed, nocross_update_odds,
                                             parent_lists)
from bpparse.kernels.factors.pairwise import (EXP_BELIEF_CAP, LOG1P_SERIES, pair_belief,
                                              pair_beliefs, pair_message, pairwise_update)
from oracle_factor_graph import arcs_cross, factor_messages_by_enumeration

CLIP = 200.0


def softplus(x):
    return np.logaddexp(0.0, x)


def column_q(rng, n, absent=0.2, scale=2.0):
    """Random incoming messages (n+1, n+1) with -inf on the diagonal, column 0 and some arcs."""
    q = rng.normal(0.0, scale, (n + 1, n + 1))
    q[:, 0] = -np.inf
    np.fill_diagonal(q, -np.inf)
    q[rng.random((n + 1, n + 1)) < absent] = -np.inf
    return q


# ---------------------------------------------------------------- pairwise (GRAND / SIB / NAND)

def test_pair_message_equals_softplus_form():
    for w in (-3.0, -0.2, 0.0, 0.7, 5.0, 40.0):
        for q in (-60.0, -8.0, -0.3, 0.0, 0.4, 9.0, 60.0):
            expected = softplus(w + q) - softplus(q)
            assert pair_message(q, np.exp(w)) == pytest.approx(expected, abs=1e-12)
    for q in (-60.0, -1.0, 0.0, 2.0, 60.0):  # NAND: -softplus(q), no cancellation at large q
        assert pair_message(q, 0.0) == pytest.approx(-softplus(q), rel=1e-12)
    assert pair_message(-np.inf, 3.0) == 0.0


def test_pair_message_of_an_unlikely_arc_keeps_full_relative_precision():
    """Where x = (e^w - 1) σ(q) is small (most arcs, through NOCROSS's every crossing parent) the
    message is log1p(x) to an ulp, also where log(1 - σ + e^w σ) would round x away (q = -60)."""
    import math

    small = 0
    for w in (-5.0, -0.4, 0.3, 2.0, 5.0):
        for q in np.linspace(-60.0, -4.0, 57):
            x = math.expm1(w) / (1.0 + math.exp(-q))
            rel = 1e-15 if abs(x) < LOG1P_SERIES else 1e-11
            assert pair_message(q, math.exp(w)) == pytest.approx(math.log1p(x), rel=rel, abs=0.0)
            small += abs(x) < LOG1P_SERIES
    assert small > 200  # the series' range is what this tests


def run_pairwise(bel, pa, pb, w, active, msg_a, msg_b, damping, clip=CLIP):
    """pairwise_update on log-odds messages (converted to odds and back, as the engine does);
    returns (residual, summed new messages per arc)."""
    size2 = bel.shape[0]
    odds_a, odds_b = np.exp(msg_a), np.exp(msg_b)
    new_odds = np.ones(size2)
    new_log = np.zeros(size2)
    res = pairwise_update(bel, np.exp(np.minimum(bel, EXP_BELIEF_CAP)), pa, pb, np.exp(w), active,
                          odds_a, odds_b, new_odds, new_log, damping, clip)
    msg_a[active] = np.log(odds_a[active])
    msg_b[active] = np.log(odds_b[active])
    return res, new_log + np.log(new_odds)


@pytest.mark.parametrize("damping", [0.0, 0.3])
def test_pairwise_update_matches_enumeration(damping):
    rng = np.random.default_rng(1)
    n = 4
    size = n + 1
    pa, pb, _ = all_pairs(n)
    k_all = pa.shape[0]
    w = rng.normal(0.0, 1.5, k_all)
    w[rng.random(k_all) < 0.15] = -np.inf  # some NAND factors
    bel = rng.normal(0.0, 3.0, size * size)
    bel[rng.random(size * size) < 0.1] = -np.inf  # absent arcs
    msg_a = rng.normal(0.0, 1.0, k_all)
    msg_b = rng.normal(0.0, 1.0, k_all)
    active = np.sort(rng.choice(k_all, k_all // 2, replace=False)).astype(np.int64)
    old_a, old_b = msg_a.copy(), msg_b.copy()
    residual, summed = run_pairwise(bel, pa, pb, w, active, msg_a, msg_b, damping)
    expected_bel = np.zeros(size * size)
    largest = 0.0
    for k in active:
        a, b = pa[k], pb[k]
        q = np.array([bel[a] - old_a[k], bel[b] - old_b[k]])
        r, _ = factor_messages_by_enumeration(
            q, lambda bits: np.exp(w[k]) if bits[0] and bits[1] else 1.0)
        for arc, r_new, old, got in ((a, r[0], old_a[k], msg_a[k]), (b, r[1], old_b[k], msg_b[k])):
            if bel[arc] == -np.inf:
                r_new = 0.0
            largest = max(largest, abs(r_new - old))
            want = (1 - damping) * r_new + damping * old
            assert got == pytest.approx(want, abs=1e-10)
            expected_bel[arc] += want
    inactive = np.setdiff1d(np.arange(k_all), active)
    assert np.array_equal(msg_a[inactive], old_a[inactive])
    assert np.array_equal(msg_b[inactive], old_b[inactive])
    assert np.allclose(summed, expected_bel, atol=1e-10)
    assert residual == pytest.approx(largest, abs=1e-10)


def test_pairwise_update_extreme_values_stay_finite():
    # beliefs far beyond the exp() range, huge weights, NAND with certain partners: clipped, no NaN
    pa = np.array([0, 1, 2, 3], np.int64)
    pb = np.array([4, 5, 6, 7], np.int64)
    w = np.array([-np.inf, 150.0, -250.0, -np.inf])
    bel = np.array([900.0, -900.0, 5.0, -np.inf, 1e4, 800.0, -1e4, 3.0])
    msg_a = np.zeros(4)
    msg_b = np.zeros(4)
    res, summed = run_pairwise(bel, pa, pb, w, np.arange(4), msg_a, msg_b, 0.0)
    assert np.isfinite(res) and np.all(np.isfinite(summed))
    assert np.all(np.isfinite(msg_a)) and np.all(np.isfinite(msg_b))
    assert np.all(np.abs(msg_a) <= CLIP + 1e-9) and np.all(np.abs(msg_b) <= CLIP + 1e-9)
    assert msg_a[0] == pytest.approx(-CLIP)  # NAND whose partner is certainly on
    assert msg_b[3] == 0.0  # partner absent: nothing said
    assert msg_a[1] == pytest.approx(150.0)  # partner certainly on: r = w
    assert msg_a[2] == pytest.approx(0.0, abs=1e-300)  # partner certainly off
    assert msg_b[2] == pytest.approx(-softplus(5.0), rel=1e-12)  # w = -250 acts as NAND


def test_pairwise_update_many_messages_into_one_arc():
    # 400 NAND factors all pushing arc 0 down by ~8 each: the product of odds is folded into logs
    k = 400
    pa = np.zeros(k, np.int64)
    pb = np.arange(1, k + 1, dtype=np.int64)
    bel = np.full(k + 1, 8.0)
    msg_a = np.zeros(k)
    msg_b = np.zeros(k)
    _, summed = run_pairwise(bel, pa, pb, np.full(k, -np.inf), np.arange(k), msg_a, msg_b, 0.0)
    assert summed[0] == pytest.approx(-k * softplus(8.0), rel=1e-12)


def test_pair_beliefs_match_enumeration():
    rng = np.random.default_rng(2)
    n = 3
    size = n + 1
    pa, pb, _ = all_pairs(n)
    k_all = pa.shape[0]
    w = rng.normal(0.0, 2.0, k_all)
    bel = rng.normal(0.0, 2.0, size * size)
    msg_a = rng.normal(0.0, 1.0, k_all)
    msg_b = rng.normal(0.0, 1.0, k_all)
    active = np.arange(0, k_all, 2, dtype=np.int64)
    got = pair_beliefs(bel, pa, pb, np.exp(w), active, msg_a, msg_b)
    for k in range(k_all):
        if k % 2:
            assert got[k] == 0.0
            continue
        q = np.array([bel[pa[k]] - msg_a[k], bel[pb[k]] - msg_b[k]])
        _, table = factor_messages_by_enumeration(
            q, lambda bits: np.exp(w[k]) if bits[0] and bits[1] else 1.0)
        z = sum(v for _, v in table)
        both = sum(v for bits, v in table if bits == (1, 1))
        assert got[k] == pytest.approx(both / z, abs=1e-12)
        assert pair_belief(q[0], q[1], np.exp(w[k])) == pytest.approx(both / z, abs=1e-12)


# ---------------------------------------------------------------- TREE / PTREE

@pytest.mark.parametrize("projective", [False, True])
@pytest.mark.parametrize("single_root", [True, False])
def test_tree_messages_match_enumeration(projective, single_root):
    # r[h,m] = log Σ_{trees ∋ h→m} Π_{other arcs} e^q − log Σ_{trees ∌ h→m} Π e^q
    from bpparse.kernels.factors.tree import tree_messages
    from oracle import all_trees
    rng = np.random.default_rng(12)
    n = 4
    q = column_q(rng, n, absent=0.1, scale=3.0)
    q[0, 1] = -np.inf
    trees = all_trees(n, projective, single_root)
    weights = np.array([sum(q[t[m], m] for m in range(1, n + 1)) for t in trees])
    r = tree_messages(q, projective, single_root, CLIP)
    for m in range(1, n + 1):
        for h in range(n + 1):
            if q[h, m] == -np.inf:
                assert r[h, m] == 0.0
                continue
            has = np.array([t[m] == h for t in trees])
            on = np.logaddexp.reduce(weights[has] - q[h, m])
            off = np.logaddexp.reduce(weights[~has])
            assert r[h, m] == pytest.approx(np.clip(on - off, -CLIP, CLIP), abs=1e-9)


@pytest.mark.parametrize("single_root", [True, False])
def test_tree_messages_at_large_scores_give_exact_marginals(single_root):
    # TREE's fast path (Gauss-Jordan inverse, floored tiny marginals) and its exact fallback: the
    # belief σ(q + r) of every arc equals the enumerated first-order marginal to 1e-12 absolute,
    # and the message itself to 1e-6 wherever that marginal is not tiny.
    from bpparse.kernels.factors.tree import tree_messages
    from oracle import brute_force_table
    rng = np.random.default_rng(21)
    for n in (4, 5, 6):
        for scale in (6.0, 15.0):
            q = column_q(rng, n, absent=0.1, scale=scale)
            bm = brute_force_table(q, False, single_root)[0]
            r = tree_messages(q, False, single_root, CLIP)
            finite = np.isfinite(q)
            b = np.where(finite, q + r, -np.inf)
            np.testing.assert_allclose(1.0 / (1.0 + np.exp(-b)), bm, rtol=0, atol=1e-12)
            big = finite & (bm > 1e-6) & (bm < 1 - 1e-6)
            exact = np.log(bm[big]) - np.log1p(-bm[big]) - q[big]
            np.testing.assert_allclose(r[big], exact, rtol=0, atol=1e-6)


@pytest.mark.parametrize("projective", [False, True])
@pytest.mark.parametrize("single_root", [True, False])
def test_cached_weights_give_the_marginals_of_the_changed_scores(projective, single_root):
    # sparse BP keeps e^(q - shift) per arc and updates only the listed arcs: the marginals must be
    # those of the new q, also when an arc rises past the column's e^600 limit or a column had no
    # possible head when the weights were formed
    from bpparse.kernels.factors.tree import tree_marginals, tree_marginals_cached
    from bpparse.kernels.matrix_tree import (column_weights, matrix_tree_marginals_fast,
                                             matrix_tree_marginals_weights)
    from oracle import brute_force_table
    rng = np.random.default_rng(22)
    n = 6
    size = n + 1
    for trial in range(6):
        q = column_q(rng, n, absent=0.1, scale=3.0)
        weights = np.zeros((size, size))
        shift = np.zeros(size)
        for m in range(1, size):
            column_weights(q, weights, shift, m)
        # the weights path from any per-column scale equals the scores path
        fast = matrix_tree_marginals_fast(q, single_root)
        scaled = matrix_tree_marginals_weights(weights * rng.uniform(0.1, 10.0, size), single_root)
        assert fast[2] and scaled[2]
        np.testing.assert_allclose(scaled[0], fast[0], rtol=1e-12, atol=1e-15)
        q[:, 4] = -np.inf
        column_weights(q, weights, shift, 4)
        assert shift[4] == -np.inf and not weights[:, 4].any()
        q[0, 4] = rng.normal()
        q[2, 4] = rng.normal()
        listed = [(h, m) for m in range(1, size) for h in range(size)
                  if h != m and rng.random() < 0.3] + [(0, 4), (2, 4)]
        listed = sorted(set(listed), key=lambda a: (a[1], a[0]))
        for h, m in listed:
            if m != 4:
                q[h, m] += rng.normal(0.0, 2.0)
        if trial % 2:
            h, m = listed[0]
            q[h, m] = shift[m] + 700.0
        cols = np.array(sorted({m for _, m in listed}), dtype=np.int64)
        heads = np.array([h for _, h in sorted((m, h) for h, m in listed)], dtype=np.int64)
        col_start = np.searchsorted([m for _, m in listed], cols).astype(np.int64)
        col_start = np.append(col_start, len(listed)).astype(np.int64)
        mu, ok = tree_marginals_cached(q, weights, shift, cols, col_start, heads, projective,
                                       single_root)
        want, ok_want = tree_marginals(q, projective, single_root)
        assert ok and ok_want
        np.testing.assert_allclose(mu, want, rtol=0, atol=1e-12)
        np.testing.assert_allclose(mu, brute_force_table(q, projective, single_root)[0], rtol=0,
                                   atol=1e-9)


# ---------------------------------------------------------------- EXACTLY1 / ATMOST1 / NAND lists

@pytest.mark.parametrize("kind", ["exactly1", "atmost1"])
def test_hard_per_child_messages_match_enumeration(kind):
    rng = np.random.default_rng(3)
    n = 5
    kernel = exactly1_messages if kind == "exactly1" else atmost1_messages
    for _ in range(3):
        q = column_q(rng, n)
        q[:, 2] = -np.inf
        q[4, 2] = 0.3  # child 2 has a single possible parent
        r = kernel(q, CLIP)
        for m in range(1, n + 1):
            heads = [h for h in range(n + 1) if q[h, m] > -np.inf]
            if not heads:
                assert np.all(r[:, m] == 0.0)
                continue
            qm = np.array([q[h, m] for h in heads])

            def potential(bits):
                count = sum(bits)
                return 1.0 if count == 1 or (kind == "atmost1" and count == 0) else 0.0

            want, _ = factor_messages_by_enumeration(qm, potential)
            want = np.clip(want, -CLIP, CLIP)
            assert np.allclose(r[heads, m], want, atol=1e-10)
            absent = [h for h in range(n + 1) if q[h, m] == -np.inf]
            assert np.all(r[absent, m] == 0.0)
        assert r[4, 2] == (CLIP if kind == "exactly1" else 0.0)


def test_nand_pair_lists():
    n = 5
    size = n + 1
    pa, pb = not2_pairs(n)
    got = {(int(a), int(b)) for a, b in zip(pa, pb)}
    want = {(h * size + m, k * size + m) for m in range(1, size) for h in range(size)
            for k in range(h + 1, size) if m not in (h, k)}
    assert got == want and len(pa) == len(want)
    pa, pb = no2cycle_pairs(n)
    got = {(int(a), int(b)) for a, b in zip(pa, pb)}
    want = {(h * size + m, m * size + h) for h in range(1, size) for m in range(h + 1, size)}
    assert got == want and len(pa) == len(want)


# ---------------------------------------------------------------- NOCROSS

def test_crossing_sums_match_definition():
    rng = np.random.default_rng(4)
    n = 7
    prefix = np.empty(n + 2)
    out = np.empty(n + 1)
    for m, l in itertools.permutations(range(1, n + 1), 2):
        f = rng.normal(size=n + 1)
        f[l] = 0.0
        crossing_sums(f, m, l, prefix, out)
        for h in range(n + 1):
            want = 0.0 if h == m else sum(f[k] for k in range(n + 1)
                                          if k != l and arcs_cross(h, m, k, l))
            assert out[h] == pytest.approx(want, abs=1e-12)


def group_incoming(rng, n, m, l):
    q = column_q(rng, n, absent=0.15, scale=1.5)
    return q[:, m].copy(), q[:, l].copy()


def test_grouped_nocross_equals_per_pair_enumeration():
    rng = np.random.default_rng(5)
    n = 6
    size = n + 1
    r_m = np.empty(size)
    r_l = np.empty(size)
    work = np.empty((5, size + 1))
    for m, l in [(1, 3), (2, 6), (1, 2), (3, 5), (4, 6)]:
        q_m, q_l = group_incoming(rng, n, m, l)
        w = rng.normal(0.0, 1.0)
        grouped_group_messages(q_m, q_l, m, l, w, CLIP, r_m, r_l, work)
        pair = lambda bits: np.exp(w) if bits[0] and bits[1] else 1.0  # noqa: E731
        for child, other, q_own, q_other, got in ((m, l, q_m, q_l, r_m), (l, m, q_l, q_m, r_l)):
            for h in range(size):
                if q_own[h] == -np.inf:
                    assert got[h] == 0.0
                    continue
                want = 0.0
                for k in range(size):
                    if q_other[k] > -np.inf and arcs_cross(h, child, k, other):
                        r, _ = factor_messages_by_enumeration(np.array([q_own[h], q_other[k]]), pair)
                        want += r[0]
                assert got[h] == pytest.approx(want, abs=1e-10)


def test_grouped_nocross_zero_weight_sends_zero():
    rng = np.random.default_rng(6)
    n = 6
    size = n + 1
    r_m = np.full(size, 7.0)
    r_l = np.full(size, 7.0)
    work = np.empty((5, size + 1))
    q_m, q_l = group_incoming(rng, n, 2, 5)
    grouped_group_messages(q_m, q_l, 2, 5, 0.0, CLIP, r_m, r_l, work)
    assert np.all(r_m == 0.0) and np.all(r_l == 0.0)


def exactly1_group_potential(heads_m, heads_l, m, l, w):
    d_m = len(heads_m)

    def potential(bits):
        on_m = [heads_m[i] for i in range(d_m) if bits[i]]
        on_l = [heads_l[i] for i in range(len(heads_l)) if bits[d_m + i]]
        if len(on_m) != 1 or len(on_l) != 1:
            return 0.0
        return np.exp(w) if arcs_cross(on_m[0], m, on_l[0], l) else 1.0
    return potential


@pytest.mark.parametrize("w", [-1.3, 0.0, 0.8, -np.inf])
def test_exactly1_nocross_matches_enumeration(w):
    rng = np.random.default_rng(7)
    n = 5
    size = n + 1
    r_m = np.empty(size)
    r_l = np.empty(size)
    work = np.empty((5, size + 1))
    for m, l in [(1, 3), (2, 5), (1, 5)]:
        q_m, q_l = group_incoming(rng, n, m, l)
        heads_m = [h for h in range(size) if q_m[h] > -np.inf]
        heads_l = [k for k in range(size) if q_l[k] > -np.inf]
        expected = exactly1_group_messages(q_m, q_l, m, l, w, CLIP, r_m, r_l, work)
        q = np.array([q_m[h] for h in heads_m] + [q_l[k] for k in heads_l])
        r, table = factor_messages_by_enumeration(q, exactly1_group_potential(heads_m, heads_l,
                                                                              m, l, w))
        r = np.clip(r, -CLIP, CLIP)
        assert np.allclose(r_m[heads_m], r[:len(heads_m)], atol=1e-9)
        assert np.allclose(r_l[heads_l], r[len(heads_m):], atol=1e-9)
        assert np.all(r_m[[h for h in range(size) if h not in heads_m]] == 0.0)
        z = sum(v for _, v in table)
        crossing = 0.0
        for bits, v in table:
            hm = heads_m[bits[:len(heads_m)].index(1)]
            kl = heads_l[bits[len(heads_m):].index(1)]
            if arcs_cross(hm, m, kl, l):
                crossing += v
        assert expected == pytest.approx(crossing / z, abs=1e-12)


def test_exactly1_nocross_zero_weight_sends_exactly1_messages():
    rng = np.random.default_rng(8)
    n = 6
    size = n + 1
    r_m = np.empty(size)
    r_l = np.empty(size)
    work = np.empty((5, size + 1))
    q = column_q(rng, n)
    m, l = 2, 5
    exactly1_group_messages(q[:, m].copy(), q[:, l].copy(), m, l, 0.0, CLIP, r_m, r_l, work)
    e1 = exactly1_messages(q, CLIP)
    assert np.allclose(r_m, e1[:, m], atol=1e-12)
    assert np.allclose(r_l, e1[:, l], atol=1e-12)


@pytest.mark.parametrize("mode", [GROUPED, EXACTLY1])
def test_nocross_update_runs_every_active_group(mode):
    rng = np.random.default_rng(9)
    n = 5
    size = n + 1
    bel = column_q(rng, n, absent=0.1)
    cross_w = np.triu(rng.normal(0.0, 1.0, (size, size)), 1)
    cross_active = np.triu(rng.random((size, size)) < 0.6, 1)
    cross_active[0, :] = False
    msg = rng.normal(0.0, 0.5, (size, size, size))
    old = msg.copy()
    new_bel = np.zeros((size, size))
    damping = 0.25
    res = nocross_update(bel, cross_w, cross_active, mode, msg, new_bel, damping, CLIP)
    kernel = grouped_group_messages if mode == GROUPED else exactly1_group_messages
    r_m = np.empty(size)
    r_l = np.empty(size)
    work = np.empty((5, size + 1))
    want_bel = np.zeros((size, size))
    largest = 0.0
    for m in range(1, size):
        for l in range(m + 1, size):
            if not cross_active[m, l]:
                assert np.array_equal(msg[m, l], old[m, l]) and np.array_equal(msg[l, m], old[l, m])
                continue
            kernel(bel[:, m] - old[m, l], bel[:, l] - old[l, m], m, l, cross_w[m, l], CLIP,
                   r_m, r_l, work)
            for x, y, r in ((m, l, r_m), (l, m, r_l)):
                largest = max(largest, np.max(np.abs(r - old[x, y])))
                want = (1 - damping) * r + damping * old[x, y]
                assert np.allclose(msg[x, y], want, atol=1e-12)
                want_bel[:, x] += want
    assert np.allclose(new_bel, want_bel, atol=1e-12)
    assert res == pytest.approx(largest, abs=1e-12)


@pytest.mark.parametrize("damping,scale", [(0.0, 1.0), (0.5, 1.0), (0.25, 1.0), (0.0, 60.0)])
def test_grouped_nocross_odds_equals_log_domain(damping, scale):
    # the odds-domain update BP runs (`nocross_update_odds`) against the log-domain one; scale 60
    # makes crossing products leave the range where they are kept and sends the logs' path
    rng = np.random.default_rng(11)
    n = 7
    size = n + 1
    bel = column_q(rng, n, absent=0.1)
    cross_w = np.triu(rng.normal(0.0, scale, (size, size)), 1)
    cross_active = np.triu(rng.random((size, size)) < 0.7, 1)
    cross_active[0, :] = False
    msg = np.clip(rng.normal(0.0, scale, (size, size, size)), -CLIP, CLIP)
    msg[np.broadcast_to((bel == -np.inf).T[:, None, :], msg.shape)] = 0.0
    want_msg = msg.copy()
    want_bel = np.zeros((size, size))
    want = nocross_update(bel, cross_w, cross_active, GROUPED, want_msg, want_bel, damping, CLIP)
    odds = np.exp(msg)
    exp_bel = np.exp(np.minimum(bel, EXP_BELIEF_CAP)).reshape(-1)
    new_odds = np.ones(size * size)
    new_log = np.zeros(size * size)
    got = nocross_update_odds(bel, exp_bel, cross_w, cross_active, odds, new_odds, new_log,
                              damping, CLIP)
    assert got == pytest.approx(want, rel=1e-9, abs=1e-9)
    assert np.allclose(np.log(odds), want_msg, rtol=1e-9, atol=1e-9)
    got_bel = (new_log + np.log(new_odds)).reshape(size, size)
    assert np.allclose(got_bel, want_bel, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("damping", [0.0, 0.3])
def test_listed_nocross_is_the_grouped_update_with_unlisted_arcs_absent(damping):
    # groups joining only the listed arcs (relaxed inference lists pruning's) send and receive as
    # the dense update does when every other arc is absent (-inf), and leave the others' messages
    rng = np.random.default_rng(13)
    n = 8
    size = n + 1
    bel = column_q(rng, n, absent=0.0)
    arcs = rng.random((size, size)) < 0.4
    arcs[:, 0] = False
    np.fill_diagonal(arcs, False)
    cross_w = np.triu(rng.normal(0.0, 1.5, (size, size)), 1)
    cross_active = np.triu(rng.random((size, size)) < 0.7, 1)
    cross_active[0, :] = False
    msg = rng.normal(0.0, 0.5, (size, size, size))
    msg[np.broadcast_to(~arcs.T[:, None, :], msg.shape)] = 0.0
    want_msg = msg.copy()
    want_bel = np.zeros((size, size))
    want = nocross_update(np.where(arcs, bel, -np.inf), cross_w, cross_active, GROUPED, want_msg,
                          want_bel, damping, CLIP)
    lists = parent_lists(arcs)
    starts, parents, rank = lists
    assert [list(parents[starts[c]:starts[c + 1]]) for c in range(size)] == [
        list(np.nonzero(arcs[:, c])[0]) for c in range(size)]
    assert [list(rank[c]) for c in range(size)] == [
        [int(np.count_nonzero(arcs[:x, c])) for x in range(size + 1)] for c in range(size)]
    got_msg = msg.copy()
    got_bel = np.zeros((size, size))
    got = nocross_update_listed(bel, cross_w, cross_active, got_msg, got_bel, damping, CLIP, lists)
    assert got == pytest.approx(want, abs=1e-12)
    np.testing.assert_allclose(got_msg, want_msg, atol=1e-12)
    np.testing.assert_allclose(got_bel, want_bel, atol=1e-12)
    assert np.all(got_bel[~arcs] == 0.0) and np.any(got_bel[arcs] != 0.0)


def test_crossing_products_match_crossing_sums():
    rng = np.random.default_rng(12)
    n = 7
    work = np.empty((2, n + 2))
    out = np.empty(n + 1)
    sums = np.empty(n + 1)
    for (m, l), sign in itertools.product(itertools.permutations(range(1, n + 1), 2), (0, -1, 1)):
        f = rng.normal(size=n + 1)
        if sign:  # every factor on one side of 1: the products are monotone
            f = sign * np.abs(f)
        assert crossing_products(np.exp(f), m, l, work, out)
        crossing_sums(f, m, l, work[0], sums)
        assert np.allclose(np.log(out), sums, atol=1e-12)
    f[:] = 200.0  # products past 1e150: refused
    assert not crossing_products(np.exp(f), 1, 3, work, out)


def test_grouped_expected_crossings_product_of_marginals():
    rng = np.random.default_rng(10)
    n = 5
    size = n + 1
    bel = column_q(rng, n, absent=0.1)
    cross_w = np.triu(np.ones((size, size)), 1)
    cross_active = np.triu(np.ones((size, size), bool), 1)
    cross_active[0, :] = False
    got = nocross_expected_crossings(bel, cross_w, cross_active, GROUPED,
                                     np.zeros((size, size, size)))
    mu = 1.0 / (1.0 + np.exp(-bel))
    for m in range(1, size):
        for l in range(m + 1, size):
            want = sum(mu[h, m] * mu[k, l] for h in range(size) for k in range(size)
                       if arcs_cross(h, m, k, l))
            assert got[m, l] == pytest.approx(want, abs=1e-12)


# ---------------------------------------------------------------- graph construction

@pytest.mark.parametrize("n", [1, 2, 5])
def test_all_pairs_enumerates_grand_then_sib(n):
    size = n + 1
    pa, pb, n_grand = all_pairs(n)
    assert n_grand == grand_count(n) and len(pa) == grand_count(n) + sib_count(n)
    grand = {(g * size + h, h * size + m) for h in range(1, size) for g in range(size)
             for m in range(1, size) if len({g, h, m}) == 3}
    sib = {(h * size + m, h * size + s) for h in range(size) for m in range(1, size)
           for s in range(m + 1, size) if h not in (m, s)}
    assert set(zip(pa[:n_grand].tolist(), pb[:n_grand].tolist())) == grand
    assert set(zip(pa[n_grand:].tolist(), pb[n_grand:].tolist())) == sib


def test_dense_extraction_round_trip():
    rng = np.random.default_rng(11)
    n = 5
    size = n + 1
    grand = rng.normal(size=(size, size, size)) * (rng.random((size, size, size)) < 0.5)
    sib = rng.normal(size=(size, size, size)) * (rng.random((size, size, size)) < 0.5)
    pa, pb, pw, n_grand = pairs_from_dense(grand, sib)
    # every kept entry is a valid factor with its weight, and every valid nonzero entry is kept
    g_back = scatter_pair_values(pw, pa, pb, 0, n_grand, size)
    s_back = scatter_pair_values(pw, pa, pb, n_grand, len(pa), size)
    g_valid = np.zeros_like(grand, bool)
    for g, h, m in itertools.product(range(size), repeat=3):
        g_valid[g, h, m] = h >= 1 and m >= 1 and len({g, h, m}) == 3
    s_valid = np.zeros_like(sib, bool)
    for h, m, s in itertools.product(range(size), repeat=3):
        s_valid[h, m, s] = 1 <= m < s and h not in (m, s)
    assert np.array_equal(g_back, np.where(g_valid, grand, 0.0))
    assert np.array_equal(s_back, np.where(s_valid, sib, 0.0))
    assert np.all(pw != 0.0)
    full_a, full_b, _ = all_pairs(n)
    order = {p: i for i, p in enumerate(zip(full_a.tolist(), full_b.tolist()))}
    ranks = [order[p] for p in zip(pa.tolist(), pb.tolist())]
    assert ranks == sorted(ranks)  # same order as all_pairs


def test_cross_extraction_and_constraint_names():
    cross = np.zeros((5, 5))
    cross[1, 3] = 0.5
    cross[3, 1] = 9.0  # lower triangle ignored
    w, act = cross_from_dense(cross, False)
    assert act.sum() == 1 and act[1, 3] and w[1, 3] == 0.5
    w, act = cross_from_dense(cross, True)
    assert act.sum() == 6 and not act[0].any()
    assert parse_constraint("tree") == ("tree", False)
    assert parse_constraint("EXACTLY1+no2cycle") == ("exactly1", True)
    with pytest.raises(ValueError):
        parse_constraint("forest")
    g = build_graph(4, constraint="not2+no2cycle")
    assert g.n_nand == len(not2_pairs(4)[0]) + len(no2cycle_pairs(4)[0])
    assert np.all(g.pair_w == -np.inf) and g.cross_w is None
