"""Relaxed marginal inference: factor gains, subgraph selection and KL bounds (docs/design.md §5).

Every soft higher-order factor i is binary, ψ_i(y) = exp(θ_i φ_i(y)) with φ_i ∈ {0, 1}:
- a pairwise factor (GRAND or SIB) fires when both its arcs are present, θ_i = its log-potential w;
- a NOCROSS group (m, l), m < l, fires when the parent arcs of m and of l cross. Under the TREE /
  PTREE constraint each child has exactly one parent, so at most one crossing pair of the group can be
  present and the group's potential Π_pairs exp(w·[pair present]) is exactly exp(w·φ) with
  φ = [the arcs of m and l cross] ∈ {0, 1}. The group is therefore the unit of relaxation here: it is
  one binary factor and the gain formula of Riedel & Smith (2010) applies to it unchanged.

μ_i is the probability that factor i fires. For a factor not yet in the graph it is approximated from
the arc marginals of the current graph as if the arcs were independent: μ ≈ μ[a]·μ[b] for a pair,
μ ≈ Σ_{crossing (h→m, k→l)} μ[h,m]·μ[k,l] for a NOCROSS group (the grouped form's "expected
crossings"). The tests measure that approximation against exact enumeration.

Arrays: arc marginals are float64 probabilities, either dense ``(n+1, n+1)`` ``[head, child]`` or the
same array flattened (arc index a = h*(n+1) + m); pair arrays are ``pair_a, pair_b`` int64 ``[K]``
and ``pair_w`` float64 ``[K]`` (log-potentials). Masks are bool arrays over the candidate list.
"""
from typing import NamedTuple

import numpy as np

from bpparse.jit import njit
from bpparse.kernels.bp_engine import (TREE, BPOptions, CrossFactors, PairFactors, base_scores,
                                       beliefs_to_marginals, bp_engine_continue, bp_iterate,
                                       cross_odds, first_tree_messages)
from bpparse.kernels.factors.nocross import in_odds, parent_lists
from bpparse.kernels.factors.pairwise import pair_odds
from bpparse.kernels.matrix_tree import arc_weights

# Above this weight exp(θ) is never formed: log(1 - μ + μe^θ) = θ + log(μ + (1 - μ)e^{-θ}).
_EXP_SAFE = 30.0


@njit(cache=True)
def factor_gain(mu, theta):
    """Gain of adding one binary factor: g = log(1 − μ + μ·e^θ) − μ·θ (nats, ≥ 0).

    Riedel & Smith (2010) Prop. 1 / docs/design.md §5: g = KL(p_G ‖ p_{G∪{i}}) exactly when μ is the
    probability under p_G that the factor fires. ``mu``: probability in [0, 1]; ``theta``: the
    factor's log-potential (any sign, finite). Two branches keep exp() in range and avoid
    cancellation when the gain is small.
    """
    if theta == 0.0 or mu <= 0.0 or mu >= 1.0:
        return 0.0
    if theta < _EXP_SAFE:
        g = np.log1p(mu * np.expm1(theta)) - mu * theta
    else:
        g = theta * (1.0 - mu) + np.log(mu + (1.0 - mu) * np.exp(-theta))
    # the exact value is ≥ 0 (Jensen); rounding must not make a factor look worse than useless
    return g if g > 0.0 else 0.0


@njit(cache=True)
def factor_gains(mu, theta):
    """Vector form of `factor_gain`: ``mu``, ``theta`` float64 ``[F]`` -> gains float64 ``[F]``."""
    out = np.empty(mu.shape[0])
    for i in range(mu.shape[0]):
        out[i] = factor_gain(mu[i], theta[i])
    return out


# Deciding g ≥ γ from bounds instead of `factor_gain`: a factor is skipped only when an upper bound
# on its gain is below _SKIP_MARGIN·γ and accepted unevaluated only when a lower bound reaches
# _ACCEPT_MARGIN·γ. Where the bounds are used (μ' ≤ 1/2 and −30 < θ' < 5 after the flip of
# `_gain_bounds`, or below the run floor of `pair_candidates_into`) `factor_gain` rounds by less than
# 1e-13 nats and the bounds by a few ulps, so for γ ≥ _BOUNDS_MIN_GAMMA the 0.1% margins (≥ 1e-12)
# make every decision exactly `factor_gain(μ, θ) >= γ`. Smaller γ > 0 is decided by `factor_gain`
# alone.
_SKIP_MARGIN = 0.999
_ACCEPT_MARGIN = 1.001
_BOUNDS_MIN_GAMMA = 1e-9
# the series bounds of `_gain_bounds` hold for θ' < _SERIES_MAX
_SERIES_MAX = 5.0


@njit(cache=True, inline="always")
def _excess_upper(theta):
    """Upper bound on C(θ) = e^θ − 1 − θ without exp, for θ < 5 (meaningless above), from the
    series: for x ≥ 0, C(−x) ≤ 1/P − 1 + x = (x²/2 + x³/3 + x⁴/6)/P with P = 1 + x + x²/2 + x³/6 ≤
    e^x (at most 2.5% above C), and C(x) ≤ x²/2 + x³/6 + x⁴/(24 − 4.8x) for x < 5, since x^k/k! ≤
    (x⁴/24)(x/5)^{k−4} (1.3% above C at x = 2)."""
    x = abs(theta)
    x2 = x * x
    num_neg = x2 * (0.5 + x * (1.0 / 3.0 + x * (1.0 / 6.0)))
    den_neg = 1.0 + x * (1.0 + x * (0.5 + x * (1.0 / 6.0)))
    # positive for θ < 5; the clamp only keeps larger θ from dividing by zero
    den_pos = max(24.0 - 4.8 * x, 1e-300)
    num_pos = x2 * ((0.5 + x * (1.0 / 6.0)) * den_pos + x2)
    # both signs formed, one selected: no branch on the sign of θ
    neg = theta < 0.0
    return (num_neg if neg else num_pos) / (den_neg if neg else den_pos)


@njit(cache=True, inline="always")
def _gain_bounds(mu, theta):
    """(lower, upper, valid): bounds on g(μ, θ) of `factor_gain` without exp or log, meaningful only
    where ``valid``.

    g(μ, θ) = g(1 − μ, −θ) (flip φ ↔ 1 − φ), so with (μ', θ') the pair with μ' ≤ 1/2 and
    y = μ'(e^θ' − 1), C(θ) = e^θ − 1 − θ: log(1 + y) ≤ y gives g ≤ μ'·C(θ'); log(1 + y) ≥ y − y²/2
    (y ≥ 0) and ≥ y − y²/(2(1 + y)) (−1 < y ≤ 0, with 1 + y ≥ 1 − μ' and 1/(2(1 − μ')) ≤ 1/2 + μ')
    give g ≥ μ'·(C(θ') − (1/2 + μ')·μ'·(e^θ' − 1)²). Hoeffding's lemma adds g ≤ θ²/8. C is bounded
    above by `_excess_upper` and below by its Taylor polynomial of degree 5 (remainder θ⁶e^ξ/720 ≥ 0);
    |e^θ' − 1| ≤ |θ'| for θ' ≤ 0 and ≤ θ' + C(θ') above. ``valid``: 0 ≤ μ' and −30 < θ' < 5 (False
    for NaN). One division, no branch.
    """
    flip = mu > 0.5
    u = 1.0 - mu if flip else mu
    t = -theta if flip else theta
    valid = (u >= 0.0) & (t > -_EXP_SAFE) & (t < _SERIES_MAX)
    x = abs(t)
    c_up = _excess_upper(t)
    e_up = x if t < 0.0 else x + c_up
    c_lo = (x * x) * (0.5 + t * (1.0 / 6.0 + t * (1.0 / 24.0 + t * (1.0 / 120.0))))
    upper = min(u * c_up, 0.125 * (x * x))
    lower = u * (c_lo - (0.5 + u) * u * (e_up * e_up))
    return lower, upper, valid


@njit(cache=True, inline="always")
def _gain_reaches(mu, theta, gamma):
    # factor_gain(μ, θ) >= γ, exactly, for γ ≥ _BOUNDS_MIN_GAMMA: the bounds first, exp/log only
    # when they leave it open
    lower, upper, valid = _gain_bounds(mu, theta)
    if valid:
        if upper < _SKIP_MARGIN * gamma:
            return False
        if lower >= _ACCEPT_MARGIN * gamma:
            return True
    return factor_gain(mu, theta) >= gamma


@njit(cache=True)
def select_gain_at_least(mu, theta, candidate, gamma):
    """Every candidate with g(μ, θ) ≥ γ: `select_min_joint` (MinJoint, and the separation step of
    Riedel & Smith Alg. 1) without computing every gain.

    The bounds of `_gain_bounds` (polynomials, one division) decide most factors without exp/log;
    the exact gain is computed only where they leave it open. The result is exactly that of
    `select_min_joint` on `factor_gains` (see _SKIP_MARGIN). O(F).
    ``mu``, ``theta``: float64 ``[F]``; ``candidate``: bool ``[F]``. Returns bool ``[F]``.
    """
    out = np.zeros(mu.shape[0], dtype=np.bool_)
    bounded = gamma >= _BOUNDS_MIN_GAMMA
    for i in range(mu.shape[0]):
        if not candidate[i]:
            continue
        if gamma <= 0.0:
            out[i] = True  # every gain is ≥ 0
        elif bounded:
            out[i] = _gain_reaches(mu[i], theta[i], gamma)
        else:
            out[i] = factor_gain(mu[i], theta[i]) >= gamma
    return out


@njit(cache=True, inline="always")
def _pair_mu(arc_marg_flat, a, b, n1, single_root):
    # under a single-root constraint two ROOT arcs (indices < n+1) never co-occur
    if single_root and a < n1 and b < n1:
        return 0.0
    return arc_marg_flat[a] * arc_marg_flat[b]


@njit(cache=True)
def pair_firing_probs(arc_marg_flat, pair_a, pair_b, count, single_root):
    """Independence approximation of the firing probability of the first ``count`` pair factors.

    ``arc_marg_flat``: float64 ``[(n+1)²]`` arc marginals (probabilities) of the current graph;
    ``pair_a``, ``pair_b``: int64 ``[K]`` arc indices; ``single_root``: the tree constraint lets
    ROOT take one child, so a factor on two ROOT arcs (a SIB at h = 0) has μ = 0 exactly.
    Returns float64 ``[count]``, μ_i ≈ μ[a_i]·μ[b_i].
    """
    n1 = int(np.sqrt(arc_marg_flat.shape[0]) + 0.5)
    out = np.empty(count)
    for i in range(count):
        out[i] = _pair_mu(arc_marg_flat, pair_a[i], pair_b[i], n1, single_root)
    return out


@njit(cache=True)
def pair_candidates_at_least(arc_marg_flat, pair_a, pair_b, pair_w, count, in_graph, single_root,
                             gamma):
    """Separation over the pair factors: the indices i < ``count`` with ``in_graph[i]`` False and
    g(μ_i, θ_i) ≥ γ, μ_i as in `pair_firing_probs`. Returns int64 indices in increasing order.
    O(count); see `pair_candidates_into`, which this calls with a fresh scratch array."""
    runs, run_c = pair_runs(pair_a, pair_w, count)
    return pair_candidates_into(arc_marg_flat, pair_a, pair_b, pair_w, count, in_graph,
                                single_root, gamma, np.empty(count, dtype=np.int64), runs, run_c)


@njit(cache=True, inline="always")
def _largest_excess(lo, hi):
    # an upper bound on the max of e^θ − 1 − θ over θ in [lo, hi], which is at an end (convex):
    # `_excess_upper` (no exp, ≤ 2.5% above) except for θ ≥ 2, where expm1 is tighter. Weights
    # ≥ _EXP_SAFE get inf: their gains round by more than the margins allow below the floor (see
    # _SKIP_MARGIN), so such a run is never skipped.
    if hi >= _EXP_SAFE:
        return np.inf
    c = np.expm1(hi) - hi if hi >= 2.0 else _excess_upper(hi)
    # e^x − 1 − x ≥ e^{−x} − 1 + x for x ≥ 0: the low end matters only if further from 0
    if lo < -hi:
        c = max(c, _excess_upper(lo))
    return c


@njit(cache=True)
def pair_runs(pair_a, pair_w, count):
    """Runs of equal first arcs in ``pair_a[:count]`` and their gain constants: (runs int64
    ``[2R + 1]``, run_c float64 ``[R]``). ``runs[:R + 1]`` are the boundaries, run r being
    ``[runs[r], runs[r + 1])``; ``runs[R + 1:]`` the first arc of each run (so that the scan reads R
    consecutive entries rather than one cache line of ``pair_a`` per run); run_c[r] an upper bound,
    within 2.5%, on the largest e^θ − 1 − θ over the run's weights θ = ``pair_w`` (inf if one is
    ≥ 30).

    From log(1 + x) ≤ x, g(μ, θ) ≤ μ·(e^θ − 1 − θ), and the gains use μ = μ[a]·μ[b]: a factor of
    run r can reach γ only if μ[a]·μ[b]·run_c[r] does.
    `bpparse.graph.all_pairs` and the pruned graphs of training list GRAND and SIB factors in runs of
    one first arc (g→h for GRAND, h→m for SIB, up to n factors each), so the separation scan skips a
    whole run after one look at that arc. Any order is correct; only the speed depends on it.
    O(count), once per sentence; no exp unless a weight is ≥ 2."""
    starts = np.empty(count + 1, dtype=np.int64)
    lows = np.empty(count)
    highs = np.empty(count)
    r = 0
    prev = -1
    lo = np.inf
    hi = -np.inf
    for i in range(count):
        a = pair_a[i]
        if a != prev:
            if r > 0:
                lows[r - 1] = lo
                highs[r - 1] = hi
            starts[r] = i
            r += 1
            prev = a
            lo = np.inf
            hi = -np.inf
        w = pair_w[i]
        lo = min(lo, w)
        hi = max(hi, w)
    if r > 0:
        lows[r - 1] = lo
        highs[r - 1] = hi
    runs = np.empty(2 * r + 1, dtype=np.int64)
    run_c = np.empty(r)
    for k in range(r):
        runs[k] = starts[k]
        runs[r + 1 + k] = pair_a[starts[k]]
        run_c[k] = _largest_excess(lows[k], highs[k])
    runs[r] = count
    return runs, run_c


@njit(cache=True)
def pair_candidates_into(arc_marg_flat, pair_a, pair_b, pair_w, count, in_graph, single_root,
                         gamma, scratch, runs, run_c):
    """`pair_candidates_at_least` with int64 ``scratch`` ``[≥ count]`` and the `pair_runs` of
    ``pair_a[:count]`` given, all reused across rounds (only the first few entries of scratch are
    written, so a fresh np.empty costs no page faults).

    Per run r of first arc a: skipped unless μ[a]·run_c[r] reaches 0.999·γ (marginals are peaked,
    so most runs are skipped after one look); otherwise, branch-free, the factors whose second arc
    reaches 0.999·γ/(μ[a]·run_c[r]) are appended to ``scratch``, and each of those is decided by the
    bounds of `_gain_bounds` (exact gain only where they leave it open), the ones taken compacted in
    place. The 0.1% margins make the result exactly {i : g ≥ γ} as `factor_gain` computes g (see
    _SKIP_MARGIN); γ below _BOUNDS_MIN_GAMMA evaluates every gain. Returns int64 indices, increasing.
    """
    n1 = int(np.sqrt(arc_marg_flat.shape[0]) + 0.5)
    kept = 0
    if gamma <= 0.0 or not gamma >= _BOUNDS_MIN_GAMMA:
        for i in range(count):
            if in_graph[i]:
                continue
            if gamma <= 0.0 or factor_gain(
                    _pair_mu(arc_marg_flat, pair_a[i], pair_b[i], n1, single_root),
                    pair_w[i]) >= gamma:
                scratch[kept] = i
                kept += 1
        return scratch[:kept].copy()
    skip = _SKIP_MARGIN * gamma
    accept = _ACCEPT_MARGIN * gamma
    n_runs = run_c.shape[0]
    for r in range(n_runs):
        a = runs[n_runs + 1 + r]
        mu_a = arc_marg_flat[a]
        lim = mu_a * run_c[r]
        if lim < skip:
            continue
        floor = skip / lim
        # unsigned indices: numba then emits no negative-index wraparound in this hot loop
        end = kept
        for i in range(np.uint64(runs[r]), np.uint64(runs[r + 1])):
            scratch[np.uint64(end)] = i
            end += arc_marg_flat[np.uint64(pair_b[i])] >= floor
        root_a = single_root and a < n1
        for j in range(kept, end):
            i = scratch[j]
            # after the first round most survivors are factors added before
            if in_graph[i]:
                continue
            b = pair_b[i]
            # the product as `_pair_mu` forms it, so the gain is bit-identical
            u = 0.0 if root_a and b < n1 else mu_a * arc_marg_flat[b]
            t = pair_w[i]
            lower, upper, valid = _gain_bounds(u, t)
            take = valid & (lower >= accept)
            if not take and not (valid and upper < skip):
                take = factor_gain(u, t) >= gamma
            scratch[kept] = i
            kept += take
    return scratch[:kept].copy()


@njit(cache=True)
def pair_eta(arc_marg_flat, pair_a, pair_b, pair_w, count, in_graph, single_root):
    """The η bound (`kl_bounds`) summed over the pair factors i < ``count`` not in the graph, with
    μ as in `pair_firing_probs`; one pass, nats."""
    n1 = int(np.sqrt(arc_marg_flat.shape[0]) + 0.5)
    eta = 0.0
    for i in range(count):
        if in_graph[i]:
            continue
        t = pair_w[i]
        u = _pair_mu(arc_marg_flat, pair_a[i], pair_b[i], n1, single_root)
        if t > 0.0:
            if u < 1.0:
                eta += t * (1.0 - u)
        elif t < 0.0:
            if u > 0.0:
                eta -= t * u
    return eta


@njit(cache=True)
def crossing_probs(marg):
    """Independence approximation of P(parent arcs of m and l cross) for every NOCROSS group.

    ``marg``: float64 ``(n+1, n+1)`` arc marginals ``[head, child]``. Returns float64 ``(n+1, n+1)``
    with entry [m, l] (1 ≤ m < l ≤ n) = Σ_{h→m crosses k→l} μ[h,m]·μ[k,l]; other entries 0.
    For fixed h and l the crossing heads k form at most two contiguous ranges (docs/design.md §1: one end
    strictly inside the span of h→m, the other strictly outside; shared endpoints never cross),
    so prefix sums over k make this O(n) per group and O(n³) in all.
    """
    n1 = marg.shape[0]
    # prefix[l, x] = Σ_{k < x} μ[k, l]
    prefix = np.zeros((n1, n1 + 1))
    for l in range(1, n1):
        acc = 0.0
        for k in range(n1):
            prefix[l, k] = acc
            if k != l:
                acc += marg[k, l]
        prefix[l, n1] = acc
    out = np.zeros((n1, n1))
    for m in range(1, n1):
        for l in range(m + 1, n1):
            total = 0.0
            for h in range(n1):
                if h == m or h == l:
                    continue
                mu_hm = marg[h, m]
                if mu_hm == 0.0:
                    continue
                lo = min(h, m)
                hi = max(h, m)
                if lo < l < hi:
                    # k strictly outside [lo, hi]
                    c = prefix[l, lo] + (prefix[l, n1] - prefix[l, hi + 1])
                else:
                    # l outside: k strictly inside (lo, hi)
                    c = prefix[l, hi] - prefix[l, lo + 1]
                total += mu_hm * c
            out[m, l] = total
    return out


@njit(cache=True)
def select_min_joint(gains, candidate, gamma):
    """MinJoint (Riedel, Smith & McCallum §3.4, Alg. 1 pickAllOver_γ): every candidate with g ≥ γ.

    Also the separation step of Riedel & Smith (2010) Alg. 1 with γ = ε; the paper writes g > ε,
    ≥ is used so that γ = 0 adds every candidate (the two differ only on ties). O(F).
    ``gains`` float64 ``[F]``, ``candidate`` bool ``[F]`` -> bool ``[F]`` of factors to add.
    """
    out = np.zeros(gains.shape[0], dtype=np.bool_)
    for i in range(gains.shape[0]):
        if candidate[i] and gains[i] >= gamma:
            out[i] = True
    return out


@njit(cache=True)
def _kth_largest(values, k):
    """The k-th largest entry of ``values`` (1 <= k <= len), by quickselect: O(len)."""
    return np.partition(values, values.shape[0] - k)[values.shape[0] - k]


@njit(cache=True)
def select_min_size(gains, candidate, epsilon):
    """MinSize (Riedel, Smith & McCallum §3.2, problem 7): the fewest factors such that the summed
    gain of the discarded candidates stays ≤ ε.

    Candidates are discarded in increasing order of gain while the running sum stays ≤ ε; all
    others are added. Only the few largest gains need sorting (the kept set is small): the k largest
    are found by quickselect, k growing ×4 until the gains below them sum to ≤ ε, so the cost is
    O(F + k log k) rather than the paper's O(F log F). Returns bool ``[F]`` of factors to add.
    """
    idx = np.nonzero(candidate)[0]
    c = idx.shape[0]
    out = candidate.copy()
    if c == 0 or epsilon < 0.0:
        return out
    vals = gains[idx]
    k = 64
    while True:
        if k >= c:
            sel = np.ones(c, dtype=np.bool_)
            dropped = 0.0
            break
        v = _kth_largest(vals, k)
        sel = vals >= v
        dropped = 0.0
        for j in range(c):
            if not sel[j]:
                dropped += vals[j]
        if dropped <= epsilon:
            break
        k *= 4
    for j in range(c):
        if not sel[j]:
            out[idx[j]] = False
    chosen = np.nonzero(sel)[0]
    order = chosen[np.argsort(vals[chosen], kind="mergesort")]
    for j in range(order.shape[0]):
        g = vals[order[j]]
        if dropped + g > epsilon:
            break
        dropped += g
        out[idx[order[j]]] = False
    return out


@njit(cache=True)
def select_min_divergence(gains, candidate, m):
    """MinDivergence (Riedel, Smith & McCallum §3.3, problem 8): the m candidates of highest gain
    (all of them when there are fewer). Ties at the m-th gain keep the earlier factors. The m-th
    largest gain is found by quickselect, O(F). Returns bool ``[F]``."""
    idx = np.nonzero(candidate)[0]
    c = idx.shape[0]
    if m >= c:
        return candidate.copy()
    out = np.zeros(gains.shape[0], dtype=np.bool_)
    if m <= 0:
        return out
    vals = gains[idx]
    v = _kth_largest(vals, m)
    taken = 0
    for j in range(c):
        if vals[j] > v:
            out[idx[j]] = True
            taken += 1
    for j in range(c):
        if taken == m:
            break
        if vals[j] == v:
            out[idx[j]] = True
            taken += 1
    return out


# kl_bounds sorts the C sum only until the bound on its remaining terms is this far (in log) below
# its largest sorted term.
_C_TAIL_MARGIN = 36.0


@njit(cache=True)
def kl_bounds(mu, theta, rest, tight=True):
    """Upper bounds on KL(p_H ‖ p_F) from the factors left out of H (``rest`` True).

    Weights are made non-negative by flipping φ ↔ 1 − φ (θ' = |θ|, μ' = μ if θ ≥ 0 else 1 − μ;
    the constant e^θ goes into Z), then
    - eta   = ‖θ'‖₁ − ⟨μ', θ'⟩  (Riedel & Smith 2010, Prop. 2.1);
    - tight = eta + C with C = log Σ_{j=0}^{L} (μ'_{(j+1)} − μ'_{(j)}) e^{−Σ_{k≤j} θ'_{(k)}} over the
      remaining factors sorted by increasing μ' (μ'_{(0)} = 0, μ'_{(L+1)} = 1): Riedel, Smith &
      McCallum Prop. 2. The paper prints "− C" and calls C non-negative; with C written as above
      C ≤ 0 (a convex combination of numbers ≤ 1), and eta + C = log E*[e^{⟨θ',φ'⟩}] − ⟨μ', θ'⟩
      where E* is the comonotone coupling of the φ' (the largest E[e^{⟨θ',φ'⟩}] given the means,
      Kreinovich et al. 2003), so eta + C is the tight bound. With one factor left out it equals
      that factor's gain.
    Only the c factors of smallest μ' are sorted (quickselect finds them, c grows ×4 as needed); the
    rest of the C sum is replaced by its upper bound (1 − μ'_{(c)})·e^{−S_c}, once that is below
    e^{−36} times the largest sorted term, so ``tight`` stays a valid bound and is exact to rounding.
    O(F + c log c), c usually ≪ F.
    ``mu``: float64 ``[F]`` firing probabilities under p_H; ``theta``: float64 ``[F]``; ``rest``:
    bool ``[F]``; ``tight``: False skips the C term (one O(F) pass; ``tight`` is then NaN).
    Returns (eta, tight), nats.
    """
    idx = np.nonzero(rest)[0]
    mus = np.empty(idx.shape[0])
    ths = np.empty(idx.shape[0])
    eta = 0.0
    nr = 0
    for j in range(idx.shape[0]):
        i = idx[j]
        t = theta[i]
        u = mu[i]
        if t < 0.0:
            t = -t
            u = 1.0 - u
        u = min(max(u, 0.0), 1.0)
        # a factor with μ' = 1 adds nothing to either bound; skipping it also keeps a hard factor
        # (θ = ±inf) that is certainly satisfied from producing inf·0
        if u >= 1.0 or t == 0.0:
            continue
        mus[nr] = u
        ths[nr] = t
        nr += 1
        eta += t * (1.0 - u)
    if nr == 0:
        return 0.0, 0.0
    if eta == np.inf:
        return np.inf, np.inf
    if not tight:
        return eta, np.nan
    mus = mus[:nr]
    ths = ths[:nr]
    # the c smallest μ' (all ties of the c-th included), c growing ×4 until the bound on the rest
    # of the sum is negligible (e^{-36} relative) next to the sorted head
    k = 64
    while True:
        if k >= nr:
            chosen = np.arange(nr)
        else:
            v = np.partition(mus, k - 1)[k - 1]
            chosen = np.nonzero(mus <= v)[0]
        order = chosen[np.argsort(mus[chosen])]
        c = order.shape[0]
        # log-sum-exp of log(Δ_j) − S_j, j = 0..c−1, then the tail term (exact when c = nr)
        terms = np.empty(c + 1)
        prev = 0.0
        s = 0.0
        for j in range(c):
            cur = mus[order[j]]
            delta = cur - prev
            terms[j] = np.log(delta) - s if delta > 0.0 else -np.inf
            s += ths[order[j]]
            prev = cur
        terms[c] = np.log(1.0 - prev) - s if prev < 1.0 else -np.inf
        head = np.max(terms[:c])
        if c == nr or terms[c] < head - _C_TAIL_MARGIN:
            break
        k *= 4
    top = np.max(terms)
    acc = 0.0
    for j in range(c + 1):
        acc += np.exp(terms[j] - top)
    bound = eta + top + np.log(acc)
    return eta, min(max(bound, 0.0), eta)


# ---------------------------------------------------------------- one sentence, one kernel call

# method codes of `relaxed_bp`
ITERATIVE = 0
MIN_JOINT = 1
MIN_SIZE = 2
MIN_DIVERGENCE = 3


@njit(cache=True, inline="always")
def _gain_upper_bound(mu, theta):
    # never below `factor_gain` as computed: the bounds of `_gain_bounds` with room for rounding
    # (see _SKIP_MARGIN), else Hoeffding's θ²/8 (|θ| < 30, where the 0.1% covers rounding) or inf
    lower, upper, valid = _gain_bounds(mu, theta)
    if valid:
        return upper / _SKIP_MARGIN + 1e-12
    if -_EXP_SAFE < theta < _EXP_SAFE:
        return 0.125 * theta * theta / _SKIP_MARGIN + 1e-12
    return np.inf


@njit(cache=True)
def _group_firing_probs(marg, cross_arcs, groups_m, groups_l, n_groups):
    """`crossing_probs` read at the listed groups: float64 ``[n_groups]``, counting only the arcs
    of ``cross_arcs`` (bool ``(n+1, n+1)``; shape (0, 0): all). With arcs listed, each group sums
    over the listed heads of m and the listed heads' prefix sums of l (`nocross.parent_lists`):
    O(P_m) a group instead of O(n), the same sums in the same order as `crossing_probs` of the
    masked marginals."""
    if cross_arcs.shape[0] == 0:
        cp = crossing_probs(marg)
        out = np.empty(n_groups)
        for j in range(n_groups):
            out[j] = cp[groups_m[j], groups_l[j]]
        return out
    starts, parents, rank = parent_lists(cross_arcs)
    size = marg.shape[0]
    # child c's prefix sums over its listed heads, P_c + 1 of them, from prefix[starts[c] + c]
    prefix = np.empty(starts[size] + size)
    for c in range(size):
        acc = 0.0
        prefix[starts[c] + c] = 0.0
        for t in range(starts[c], starts[c + 1]):
            acc += marg[parents[t], c]
            prefix[t + c + 1] = acc
    out = np.empty(n_groups)
    for j in range(n_groups):
        m = groups_m[j]
        l = groups_l[j]
        p = prefix[starts[l] + l:starts[l + 1] + l + 1]
        below = rank[l]
        total_l = p[starts[l + 1] - starts[l]]
        total = 0.0
        for u in range(starts[m], starts[m + 1]):
            h = parents[u]
            mu_hm = marg[h, m]
            if h == l or mu_hm == 0.0:
                continue
            lo = min(h, m)
            hi = max(h, m)
            if lo < l < hi:
                c = p[below[lo]] + (total_l - p[below[hi + 1]])
            else:
                c = p[below[hi]] - p[below[lo + 1]]
            total += mu_hm * c
        out[j] = total
    return out


@njit(cache=True)
def _one_shot_selection(flat, marg, pairs, n_soft, in_pair, zero_root, groups, in_group, relax,
                        cross_arcs):
    """MinSize / MinDivergence over every candidate pair and group: (add_pairs bool ``[n_soft]``,
    add_groups bool ``[G]``). ``pairs``: the full graph's `PairFactors`; ``groups``: (groups_m,
    groups_l, theta_g) of the NOCROSS candidates; ``relax``: `RelaxOptions`; ``cross_arcs``: as
    for `_group_firing_probs`.

    MinDivergence needs exact gains only where they can reach the m-th largest: the m largest upper
    bounds (`_gain_upper_bound`) give m exact gains, the m-th of which, L, is a lower bound on the
    m-th largest gain overall; factors whose upper bound is below L can neither be picked nor tie,
    so the others are left out unevaluated and the choice is exactly `select_min_divergence` over
    all. MinSize sums the gains of everything it drops, so every gain is computed.
    """
    pair_a, pair_b, pair_w = pairs
    groups_m, groups_l, theta_g = groups
    method, threshold, max_factors = relax.method, relax.threshold, relax.max_factors
    G = theta_g.shape[0]
    F = n_soft + G
    n1 = marg.shape[0]
    mu = np.empty(F)
    theta = np.empty(F)
    candidate = np.zeros(F, dtype=np.bool_)
    for i in range(n_soft):
        theta[i] = pair_w[i]
        mu[i] = _pair_mu(flat, pair_a[i], pair_b[i], n1, zero_root)
        candidate[i] = not in_pair[i]
    if G > 0:
        mu_g = _group_firing_probs(marg, cross_arcs, groups_m, groups_l, G)
        for j in range(G):
            theta[n_soft + j] = theta_g[j]
            mu[n_soft + j] = mu_g[j]
            candidate[n_soft + j] = not in_group[j]
    gains = np.zeros(F)
    if method == MIN_SIZE:
        for i in range(F):
            if candidate[i]:
                gains[i] = factor_gain(mu[i], theta[i])
        add = select_min_size(gains, candidate, threshold)
    else:
        idx = np.nonzero(candidate)[0]
        c = idx.shape[0]
        if max_factors <= 0 or max_factors >= c:
            add = select_min_divergence(gains, candidate, max_factors)
        else:
            ub = np.empty(c)
            for j in range(c):
                ub[j] = _gain_upper_bound(mu[idx[j]], theta[idx[j]])
            v = _kth_largest(ub, max_factors)
            top = np.empty(c)
            t = 0
            for j in range(c):
                if ub[j] >= v:
                    top[t] = factor_gain(mu[idx[j]], theta[idx[j]])
                    t += 1
            low = _kth_largest(top[:t], max_factors)
            kept = candidate.copy()
            for j in range(c):
                i = idx[j]
                if ub[j] >= low:
                    gains[i] = factor_gain(mu[i], theta[i])
                else:
                    kept[i] = False
            add = select_min_divergence(gains, kept, max_factors)
    return add[:n_soft].copy(), add[n_soft:].copy()


class RelaxOptions(NamedTuple):
    """How relaxed inference chooses factors (a numba record; build it with `relax_options`).

    ``method``: ITERATIVE, MIN_JOINT, MIN_SIZE or MIN_DIVERGENCE; ``threshold``: ε or γ (nats);
    ``max_rounds``: R for ITERATIVE (< 0: until nothing is added); ``bp_iter``: B, BP iterations
    per round (one-shot: of the final run); ``seed_iter``: BP iterations on the seed graph (1 is
    exact first-order inference when the seed is LINK + TREE/PTREE alone); ``max_factors``: m of
    MinDivergence.
    """

    method: int
    threshold: float
    max_rounds: int
    bp_iter: int
    seed_iter: int
    max_factors: int


def relax_options(method, threshold, max_rounds, bp_iter, seed_iter, max_factors):
    """`RelaxOptions` with each field coerced to its one type."""
    return RelaxOptions(int(method), float(threshold), int(max_rounds), int(bp_iter),
                        int(seed_iter), int(max_factors))


@njit(cache=True)
def relaxed_bp(link, pairs, n_soft, cross, seq, options, relax, first_mu):
    """Relaxed marginal inference on one sentence in one call (Riedel & Smith 2010 Alg. 1; Riedel,
    Smith & McCallum Alg. 1; docs/design.md §5): seed BP, gains, add, warm-started BP, repeat.

    Arguments (n+1 = ``link.shape[0]``):
    - ``link``, ``options`` (`BPOptions`; its ``sparse`` is ignored: the rounds always run
      sparse): as in `bp_engine`;
    - ``pairs``: the full graph's `PairFactors` ``[K]``, the first ``n_soft`` (GRAND, SIB)
      candidates, the rest hard NAND pairs that are always in the graph;
    - ``cross``: the full graph's NOCROSS groups as `CrossFactors` (``active`` = the candidate
      groups, all False: no NOCROSS; ``msg`` unused);
    - ``seq``: the CHILDSEQ factors (`ChildSeqFactors`; `no_childseq()`: none), always in the
      graph: the gain of Riedel & Smith's Prop. 1 is that of a factor over two arcs, and a head
      automaton spans every child of a head on one side. Its ``msg`` (zeros on entry) holds BP's
      messages on return;
    - ``relax``: `RelaxOptions`;
    - ``first_mu``: float64 ``(n+1, n+1)`` the first-order marginals of ``link`` (pruning's), from
      which the seed's first iteration takes TREE's messages (`bp_engine.first_tree_messages`), or
      shape (0, 0).
    The seed graph is LINK + the global constraint + the NAND pairs + the CHILDSEQ factors. After
    each BP run the factors not in the graph are scored with μ ≈ μ[a]·μ[b] (`pair_firing_probs`,
    `crossing_probs`) and added per ``method``; BP then continues from the previous messages on a
    compact copy of the grown subgraph (arrays of its own factors only, in the full graph's order),
    so a BP iteration costs O(n³) for the constraint plus O(|subgraph|); the constraint's messages
    go only to the arcs the subgraph's factors read (``sparse`` in `bp_engine.bp_iterate`, which
    keeps its state across rounds), the other arcs' once at the end of each run. The separation scan
    is O(K) with the exp-free gain bounds of `_gain_bounds` in front of every exp/log.

    Returns (beliefs float64 ``(n+1, n+1)`` log-odds, marginals float64 ``(n+1, n+1)``, sel int64
    ``[A]`` indices of the pairwise factors in the final graph (ascending; the compact arrays are
    ``pair_*[sel]``), msg_a, msg_b float64 ``[A]`` their messages, cross_active bool ``(n+1, n+1)``,
    cross_msg float64 ``(n+1, n+1, n+1)`` or ``(0, 0, 0)``, global_msg float64 ``(n+1, n+1)``,
    rounds, iterations in all, iterations of the last run, converged, residual of the last run,
    ``seq.msg``).
    """
    pair_a, pair_b, pair_w = pairs
    cross_w, cross_candidate, cross_mode, cross_arcs = cross.w, cross.active, cross.mode, cross.arcs
    constraint, damping = options.constraint, options.damping
    method, threshold, max_rounds = relax.method, relax.threshold, relax.max_rounds
    n1 = link.shape[0]
    K = pair_a.shape[0]
    zero_root = options.single_root and constraint == 0
    # NOCROSS candidates as a list of groups
    G = 0
    for m in range(1, n1):
        for l in range(m + 1, n1):
            if cross_candidate[m, l]:
                G += 1
    groups_m = np.empty(G, dtype=np.int64)
    groups_l = np.empty(G, dtype=np.int64)
    theta_g = np.empty(G)
    j = 0
    for m in range(1, n1):
        for l in range(m + 1, n1):
            if cross_candidate[m, l]:
                groups_m[j] = m
                groups_l[j] = l
                theta_g[j] = cross_w[m, l]
                j += 1
    in_group = np.zeros(G, dtype=np.bool_)
    cross_active = np.zeros((n1, n1), dtype=np.bool_)
    cross_msg = np.zeros((n1, n1, n1)) if G > 0 else np.zeros((0, 0, 0))

    in_pair = np.zeros(K, dtype=np.bool_)
    for i in range(n_soft, K):
        in_pair[i] = True
    sel = np.arange(n_soft, K)
    A = sel.shape[0]
    sub_a = pair_a[sel]
    sub_b = pair_b[sel]
    sub_w = pair_w[sel]
    msg_a = np.zeros(A)
    msg_b = np.zeros(A)
    global_msg = np.zeros((n1, n1))
    scratch = np.empty(n_soft, dtype=np.int64)
    if method == ITERATIVE or method == MIN_JOINT:
        runs, run_c = pair_runs(pair_a, pair_w, n_soft)
    else:
        runs, run_c = scratch[:0], np.empty(0)

    # LINK + TREE/PTREE alone is exact after one undamped iteration; damping would only stop the
    # seed short of the first-order marginals
    no_seq = seq.head.shape[0] == 0
    seed_damping = 0.0 if A == 0 and constraint == 0 and no_seq else damping
    seed = BPOptions(constraint, options.projective, options.single_root, relax.seed_iter,
                     options.tol, seed_damping, options.clip, False)
    bel, last, converged, residual = bp_engine_continue(
        link, PairFactors(sub_a, sub_b, sub_w), np.arange(A), msg_a, msg_b,
        CrossFactors(cross_w, cross_active, cross_mode, cross_msg, cross_arcs), seq, global_msg, seed,
        first_tree_messages(link, first_mu, seed))
    iterations = last
    rounds = 0
    marg = beliefs_to_marginals(bel)
    # after an undamped seed without pairwise factors the global messages are the constraint's
    # exact output for LINK alone, which is again its input in the first iteration after the first
    # additions (every new message starts at 0): that iteration need not recompute it
    seed_exact = A == 0 and no_seq and seed_damping == 0.0 and last >= 1
    # the rounds' BP runs continue on the state as `bp_iterate` keeps it: messages as odds, e^w,
    # and the matrix-tree weights, which only the arcs that factors read change
    base = base_scores(link, global_msg, constraint)
    for j in range(A):
        msg_a[j] = 1.0 if msg_a[j] == 0.0 else np.exp(msg_a[j])
        msg_b[j] = 1.0 if msg_b[j] == 0.0 else np.exp(msg_b[j])
    sub_ew = np.empty(A)
    for j in range(A):
        sub_ew[j] = pair_odds(sub_w[j])
    if constraint == TREE:
        weights, shift = arc_weights(base)
    else:
        weights, shift = np.empty((0, 0)), np.empty(0)
    rounds_options = BPOptions(constraint, options.projective, options.single_root, relax.bp_iter,
                               options.tol, damping, options.clip, True)
    # the rounds may keep the NOCROSS messages as odds (`in_odds`): a group added starts at 1
    rounds_cross = CrossFactors(cross_w, cross_active, cross_mode, cross_msg, cross_arcs)
    odds_cross = in_odds(cross_mode, damping, cross_arcs)
    while True:
        if method != ITERATIVE and rounds == 1:
            break
        if method == ITERATIVE and max_rounds >= 0 and rounds >= max_rounds:
            break
        flat = marg.reshape(n1 * n1)
        if method == ITERATIVE or method == MIN_JOINT:
            add_p = pair_candidates_into(flat, pair_a, pair_b, pair_w, n_soft, in_pair,
                                         zero_root, threshold, scratch, runs, run_c)
            add_g = np.zeros(G, dtype=np.bool_)
            # the crossing probabilities (O(n³)) only when some group can pass the θ²/8 bound
            need = False
            for j in range(G):
                if not in_group[j] and 0.125 * theta_g[j] * theta_g[j] >= threshold:
                    need = True
                    break
            if need:
                mu_g = _group_firing_probs(marg, cross_arcs, groups_m, groups_l, G)
                add_g = select_gain_at_least(mu_g, theta_g, ~in_group, threshold)
        else:
            add_mask, add_g = _one_shot_selection(
                flat, marg, pairs, n_soft, in_pair, zero_root, (groups_m, groups_l, theta_g),
                in_group, relax, cross_arcs)
            add_p = np.nonzero(add_mask)[0]
        n_new = add_p.shape[0]
        n_new_g = 0
        for j in range(G):
            if add_g[j]:
                n_new_g += 1
        if n_new == 0 and n_new_g == 0:
            break
        rounds += 1
        for j in range(G):
            if add_g[j]:
                in_group[j] = True
                cross_active[groups_m[j], groups_l[j]] = True
                if odds_cross:
                    cross_msg[groups_m[j], groups_l[j]] = 1.0
                    cross_msg[groups_l[j], groups_m[j]] = 1.0
        if n_new > 0:
            # merge the two ascending index lists; the messages (odds, 1 for a new factor) and
            # e^w move with their factors
            new_sel = np.empty(A + n_new, dtype=np.int64)
            new_a = np.ones(A + n_new)
            new_b = np.ones(A + n_new)
            new_ew = np.empty(A + n_new)
            x = 0
            y = 0
            for t in range(A + n_new):
                if y >= n_new or (x < A and sel[x] < add_p[y]):
                    new_sel[t] = sel[x]
                    new_a[t] = msg_a[x]
                    new_b[t] = msg_b[x]
                    new_ew[t] = sub_ew[x]
                    x += 1
                else:
                    new_sel[t] = add_p[y]
                    new_ew[t] = pair_odds(pair_w[add_p[y]])
                    in_pair[add_p[y]] = True
                    y += 1
            sel = new_sel
            msg_a = new_a
            msg_b = new_b
            sub_ew = new_ew
            A = sel.shape[0]
            sub_a = pair_a[sel]
            sub_b = pair_b[sel]
        # a new factor's messages are 0, so the beliefs are those the last run ended with
        bel, last, converged, residual = bp_iterate(
            base, bel, PairFactors(sub_a, sub_b, sub_ew), np.arange(A), msg_a, msg_b,
            rounds_cross, seq, global_msg,
            (weights, shift), rounds_options,
            global_msg if seed_exact and rounds == 1 else np.empty((0, 0)))
        iterations += last
        marg = beliefs_to_marginals(bel)
    for j in range(A):
        msg_a[j] = 0.0 if msg_a[j] == 1.0 else np.log(msg_a[j])
        msg_b[j] = 0.0 if msg_b[j] == 1.0 else np.log(msg_b[j])
    cross_odds(rounds_cross, False, damping)
    return (bel, marg, sel, msg_a, msg_b, cross_active, cross_msg, global_msg, rounds, iterations,
            last, converged, residual, seq.msg)
