"""Pairwise factors (GRAND, SIB, and NAND = NOT2 / NO2CYCLE) over flat arrays.

A pairwise factor k joins two arc variables A = ``pair_a[k]`` and B = ``pair_b[k]`` (arc index
a = h*(n+1) + m) with log-potential w = ``pair_w[k]`` when both arcs are present; w = -inf is the hard
NAND. Messages are log-odds (DESIGN §2, Smith & Eisner 2008 §5.1):

    r_A = softplus(w + q_B) - softplus(q_B) = log(1 - σ(q_B) + e^w·σ(q_B)),   r_B symmetric,
    P_F(1,1) = e^w σ_A σ_B / (1 + (e^w - 1) σ_A σ_B),   σ_A = σ(q_A),

where q_A = B[A] - r_A is the message from A to this factor (its belief minus the factor's own
message). The second form of r_A is the one computed: with e^w precomputed per factor it costs one
division and one logarithm per direction; with w = -inf it is -softplus(q_B) without cancellation,
because 1 - σ and σ are formed separately.

Every kernel runs over an ``active`` list of factor indices, so the full graph and any subgraph (the
relaxation of DESIGN §5) are the same data and the same code; inactive factors send nothing.
Cost O(|active|) per call; nothing is quadratic in the number of factors.
"""
import numpy as np
from numba import njit

# exp(belief) is formed for the cavity σ(B - r) = e^B / (e^B + e^r); capping B keeps it finite and,
# because |r| <= clip <= EXP_BELIEF_CAP - 40, the cap changes σ by less than e^-40.
EXP_BELIEF_CAP = 700.0
MAX_CLIP = EXP_BELIEF_CAP - 40.0


@njit(cache=True)
def sigmoid_split(q):
    """(σ(q), 1 - σ(q)) for a log-odds q (may be ±inf), each with full relative precision."""
    e = np.exp(-abs(q))
    d = 1.0 / (1.0 + e)
    if q >= 0.0:
        return d, e * d
    return e * d, d


@njit(cache=True)
def pair_message(q_other, ew):
    """Message of one pairwise factor to one of its arcs, log-odds.

    ``q_other``: log-odds message from the factor's other arc; ``ew``: e^w (0 for NAND).
    Returns log(1 - σ(q_other) + e^w σ(q_other)) = softplus(w + q_other) - softplus(q_other)
    (DESIGN §2); 0 when q_other = -inf; -inf only for NAND with q_other = +inf (callers clip).
    """
    if ew == 1.0:
        return 0.0  # exactly, not a rounding error away from it
    s, u = sigmoid_split(q_other)
    return np.log(u + ew * s)


@njit(cache=True)
def pair_belief(q_a, q_b, ew):
    """P_F(both arcs present) of one pairwise factor from its incoming log-odds q_a, q_b; e^w = ew."""
    sa, ua = sigmoid_split(q_a)
    sb, ub = sigmoid_split(q_b)
    both = ew * sa * sb
    return both / (ua * ub + ua * sb + sa * ub + both)


@njit(cache=True, inline="always")
def _settle(t, old, absent, damping, clip):
    """New message (log-odds r, odds e^r) from its odds t: clip, damp; and |r_new - r_old|."""
    if absent:
        return 0.0, 1.0, abs(old)
    r = np.log(t)
    if r > clip:
        r = clip
        t = np.exp(clip)
    elif r < -clip:
        r = -clip
        t = np.exp(-clip)
    change = abs(r - old)
    if damping > 0.0:
        r = (1.0 - damping) * r + damping * old
        t = np.exp(r)
    return r, t, change


@njit(cache=True)
def pairwise_update(bel, exp_bel, pair_a, pair_b, pair_ew, active, msg_a, msg_b, odds_a, odds_b,
                    new_bel, damping, clip):
    """One flooding step of every active pairwise factor; returns the largest message change.

    ``bel``, ``exp_bel``: float64 ``[(n+1)²]``, flattened beliefs B (log-odds, -inf for absent
    arcs) of the previous iteration and exp(min(B, EXP_BELIEF_CAP)). ``pair_a``, ``pair_b``: int64
    ``[K]``; ``pair_ew``: float64 ``[K]``, e^w; ``active``: int64 indices into them.
    ``msg_a``, ``msg_b`` (log-odds) and ``odds_a``, ``odds_b`` (= exp of the same messages): float64
    ``[K]``, the factors' previous messages, overwritten with the new (damped, clipped) ones.
    ``new_bel``: float64 ``[(n+1)²]`` accumulator; each new message is added at its arc.
    ``damping`` α in [0, 1): r <- (1-α) r_new + α r_old. ``clip``: messages are kept in [-clip, clip].
    The change reported is |r_new - r_old| before damping. Arcs with B = -inf receive 0.

    With O_A = e^{r_A} and E_A = e^{B[A]}, the cavity is σ(q_A) = E_A / (E_A + O_A), so
    r_B = log((O_A + e^w E_A) / (E_A + O_A)): no exp() per factor when undamped and unclipped.
    """
    residual = 0.0
    for j in range(active.shape[0]):
        k = active[j]
        a = pair_a[k]
        b = pair_b[k]
        ew = pair_ew[k]
        ea = exp_bel[a]
        eb = exp_bel[b]
        oa = odds_a[k]
        ob = odds_b[k]
        # t = u + e^w s with the cavity split into s = E/(E+O), u = O/(E+O): no overflow for large w
        inv_b = 1.0 / (eb + ob)
        inv_a = 1.0 / (ea + oa)
        r, t, change = _settle(ob * inv_b + ew * (eb * inv_b), msg_a[k], bel[a] == -np.inf,
                               damping, clip)
        msg_a[k] = r
        odds_a[k] = t
        new_bel[a] += r
        if change > residual:
            residual = change
        r, t, change = _settle(oa * inv_a + ew * (ea * inv_a), msg_b[k], bel[b] == -np.inf,
                               damping, clip)
        msg_b[k] = r
        odds_b[k] = t
        new_bel[b] += r
        if change > residual:
            residual = change
    return residual


@njit(cache=True)
def pair_beliefs(bel, pair_a, pair_b, pair_ew, active, msg_a, msg_b):
    """P_F(1,1) of every pairwise factor: float64 ``[K]``, 0 for factors not in ``active``.

    ``bel``: flattened beliefs B (log-odds); messages as in `pairwise_update`. The factor belief
    b_F(A, B) ∝ ψ_F(A, B) e^{q_A A + q_B B} with cavities q = B - r (Smith & Eisner 2008 eq. 6).
    """
    out = np.zeros(pair_a.shape[0])
    for j in range(active.shape[0]):
        k = active[j]
        a = pair_a[k]
        b = pair_b[k]
        if bel[a] == -np.inf or bel[b] == -np.inf:
            continue
        out[k] = pair_belief(bel[a] - msg_a[k], bel[b] - msg_b[k], pair_ew[k])
    return out
