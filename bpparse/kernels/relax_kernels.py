"""Relaxed marginal inference: factor gains, subgraph selection and KL bounds (DESIGN §5).

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
import numpy as np
from numba import njit

# Above this weight exp(θ) is never formed: log(1 - μ + μe^θ) = θ + log(μ + (1 - μ)e^{-θ}).
_EXP_SAFE = 30.0


@njit(cache=True)
def factor_gain(mu, theta):
    """Gain of adding one binary factor: g = log(1 − μ + μ·e^θ) − μ·θ (nats, ≥ 0).

    Riedel & Smith (2010) Prop. 1 / DESIGN §5: g = KL(p_G ‖ p_{G∪{i}}) exactly when μ is the
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


@njit(cache=True)
def pair_firing_probs(arc_marg_flat, pair_a, pair_b):
    """Independence approximation of the firing probability of every pairwise factor.

    ``arc_marg_flat``: float64 ``[(n+1)²]`` arc marginals (probabilities) of the current graph;
    ``pair_a``, ``pair_b``: int64 ``[K]`` arc indices. Returns float64 ``[K]``, μ_i ≈ μ[a_i]·μ[b_i].
    """
    k = pair_a.shape[0]
    out = np.empty(k)
    for i in range(k):
        out[i] = arc_marg_flat[pair_a[i]] * arc_marg_flat[pair_b[i]]
    return out


@njit(cache=True)
def crossing_probs(marg):
    """Independence approximation of P(parent arcs of m and l cross) for every NOCROSS group.

    ``marg``: float64 ``(n+1, n+1)`` arc marginals ``[head, child]``. Returns float64 ``(n+1, n+1)``
    with entry [m, l] (1 ≤ m < l ≤ n) = Σ_{h→m crosses k→l} μ[h,m]·μ[k,l]; other entries 0.
    For fixed h and l the crossing heads k form at most two contiguous ranges (DESIGN §1: one end
    strictly inside the span of h→m, the other strictly outside; shared endpoints never cross),
    so prefix sums over k make this O(n) per group and O(n³) in all.
    """
    n1 = marg.shape[0]
    n = n1 - 1
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
def select_min_size(gains, candidate, epsilon):
    """MinSize (Riedel, Smith & McCallum §3.2, problem 7): the fewest factors such that the summed
    gain of the discarded candidates stays ≤ ε.

    Candidates are discarded in increasing order of gain while the running sum stays ≤ ε; all
    others are added. O(F log F). Returns bool ``[F]`` of factors to add.
    """
    idx = np.nonzero(candidate)[0]
    order = idx[np.argsort(gains[idx], kind="mergesort")]
    out = candidate.copy()
    dropped = 0.0
    for j in range(order.shape[0]):
        i = order[j]
        if dropped + gains[i] > epsilon:
            break
        dropped += gains[i]
        out[i] = False
    return out


@njit(cache=True)
def select_min_divergence(gains, candidate, m):
    """MinDivergence (Riedel, Smith & McCallum §3.3, problem 8): the m candidates of highest gain
    (all of them when there are fewer). Ties keep the earlier factor. Returns bool ``[F]``."""
    idx = np.nonzero(candidate)[0]
    out = np.zeros(gains.shape[0], dtype=np.bool_)
    if m <= 0:
        return out
    order = idx[np.argsort(-gains[idx], kind="mergesort")]
    for j in range(min(m, order.shape[0])):
        out[order[j]] = True
    return out


@njit(cache=True)
def kl_bounds(mu, theta, rest):
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
    ``mu``: float64 ``[F]`` firing probabilities under p_H; ``theta``: float64 ``[F]``; ``rest``:
    bool ``[F]``. Returns (eta, tight), nats.
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
    mus = mus[:nr]
    ths = ths[:nr]
    order = np.argsort(mus, kind="mergesort")
    # log-sum-exp over j = 0..L of log(Δ_j) − S_j; S_j is non-decreasing
    terms = np.empty(nr + 1)
    prev = 0.0
    s = 0.0
    for j in range(nr + 1):
        cur = mus[order[j]] if j < nr else 1.0
        delta = cur - prev
        terms[j] = np.log(delta) - s if delta > 0.0 else -np.inf
        if j < nr:
            s += ths[order[j]]
            prev = cur
    top = np.max(terms)
    acc = 0.0
    for j in range(nr + 1):
        acc += np.exp(terms[j] - top)
    c = top + np.log(acc)
    tight = eta + c
    if tight < 0.0:
        tight = 0.0
    if tight > eta:
        tight = eta
    return eta, tight
