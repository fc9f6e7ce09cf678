"""Pairwise factors (GRAND, SIB, and NAND = NOT2 / NO2CYCLE) over flat arrays.

A pairwise factor k joins two arc variables A = ``pair_a[k]`` and B = ``pair_b[k]`` (arc index
a = h*(n+1) + m) with log-potential w = ``pair_w[k]`` when both arcs are present; w = -inf is the hard
NAND. Messages are log-odds (docs/design.md §2, Smith & Eisner 2008 §5.1):

    r_A = softplus(w + q_B) - softplus(q_B) = log(1 - σ(q_B) + e^w·σ(q_B)),   r_B symmetric,
    P_F(1,1) = e^w σ_A σ_B / (1 + (e^w - 1) σ_A σ_B),   σ_A = σ(q_A),

where q_A = B[A] - r_A is the message from A to this factor (its belief minus the factor's own
message). The second form of r_A is the one computed, in the odds domain (e^{r_A}): with e^w
precomputed per factor it costs one division per direction and no transcendental function; with
w = -inf it is -softplus(q_B) without cancellation, because 1 - σ and σ are formed separately.

Every kernel runs over an ``active`` list of factor indices, so the full graph and any subgraph (the
relaxation of docs/design.md §5) are the same data and the same code; inactive factors send nothing.
Cost O(|active|) per call; nothing is quadratic in the number of factors.
"""
import numpy as np

from bpparse.jit import LEAF, njit

# exp(belief) is formed for the cavity σ(B - r) = e^B / (e^B + e^r); capping B keeps it finite and,
# because |r| <= clip <= EXP_BELIEF_CAP - 40, the cap changes σ by less than e^-40. Odds of messages
# stay in [e^-clip, e^clip]: with clip <= MAX_CLIP their ratios (e^2clip) and the per-arc products
# (folded at 1e±100) cannot overflow.
EXP_BELIEF_CAP = 700.0
MAX_CLIP = 350.0
LOG1P_SERIES = 2.0 ** -12  # |x| below which `pair_message` sums log1p's series instead of a log
# e^w is formed once per factor; beyond this a pair potential is numerically a hard constraint anyway
_MAX_PAIR_W = 300.0


@njit(cache=True, inline="always")
def pair_odds(w):
    """e^w of a pairwise factor's log-potential, capped at e^300 (numerically hard anyway)."""
    return np.exp(min(w, _MAX_PAIR_W))


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
    (docs/design.md §2); 0 when q_other = -inf; -inf only for NAND with q_other = +inf (callers clip).
    """
    if ew == 1.0:
        return 0.0  # exactly, not a rounding error away from it
    s, u = sigmoid_split(q_other)
    x = (ew - 1.0) * s
    if abs(x) < LOG1P_SERIES:
        # log1p(x) by its series to x^5 (truncation below x^6/6: 2e-19 of x): most
        # arcs are unlikely, and NOCROSS sends this for every crossing parent of every group,
        # where a log was a tenth of `bpparse relax`'s time; more exact than log(u + e^w s), whose
        # sum rounds x to 1e-16 absolute
        return x * (1.0 + x * (-0.5 + x * (1.0 / 3.0 + x * (-0.25 + x * 0.2))))
    return np.log(u + ew * s)


@njit(cache=True)
def pair_belief(q_a, q_b, ew):
    """P_F(both arcs present) of one pairwise factor from its incoming log-odds q_a, q_b; e^w = ew."""
    sa, ua = sigmoid_split(q_a)
    sb, ub = sigmoid_split(q_b)
    both = ew * sa * sb
    total = ua * ub + ua * sb + sa * ub + both
    # total = 0 only for a NAND whose two arcs are both certain: an impossible state, belief 0
    return both / total if total > 0.0 else 0.0


@njit(cache=True, **LEAF)
def pairwise_update(bel, exp_bel, pair_a, pair_b, pair_ew, active, odds_a, odds_b,
                    new_odds, new_log, damping, clip):
    """One flooding step of every active pairwise factor, in the odds domain; returns the largest
    message change |r_new - r_old| (log-odds, before damping).

    ``bel``, ``exp_bel``: float64 ``[(n+1)²]``, flattened beliefs B (log-odds, -inf for absent
    arcs) of the previous iteration and exp(min(B, EXP_BELIEF_CAP)). ``pair_a``, ``pair_b``: int64
    ``[K]``; ``pair_ew``: float64 ``[K]``, e^w; ``active``: int64 indices into them.
    ``odds_a``, ``odds_b``: float64 ``[K]``, the factors' previous messages as odds e^r,
    overwritten with the new (damped, clipped) ones. The new messages are multiplied into
    ``new_odds`` (float64 ``[(n+1)²]``, per arc); whenever a product leaves [1e-100, 1e100] its log
    is moved into ``new_log``, so the arc's summed message is new_log + log(new_odds).
    ``damping`` α in [0, 1): r <- (1-α) r_new + α r_old. ``clip``: r is kept in [-clip, clip].
    Arcs with B = -inf receive r = 0.

    With O_A = e^{r_A} and E_A = e^{B[A]}, the cavity is σ(q_A) = E_A / (E_A + O_A), and
    e^{r_B} = (O_A + e^w E_A) / (E_A + O_A): per factor two divisions and no exp() or log(); damping
    0.5 is a square root of the product of new and old odds, other damping an exp and two logs.
    The change is tracked as the largest ratio of new to old odds (one log per call).
    """
    hi = np.exp(clip)
    lo = np.exp(-clip)
    ratio = 1.0
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
        ta = ob * inv_b + ew * (eb * inv_b)
        tb = oa * inv_a + ew * (ea * inv_a)
        if bel[a] == -np.inf:
            ta = 1.0
        if bel[b] == -np.inf:
            tb = 1.0
        ta = min(max(ta, lo), hi)
        tb = min(max(tb, lo), hi)
        ratio = widen_ratio(ratio, ta, oa)
        ratio = widen_ratio(ratio, tb, ob)
        ta = damped_odds(ta, oa, damping)
        tb = damped_odds(tb, ob, damping)
        odds_a[k] = ta
        odds_b[k] = tb
        multiply_into(new_odds, new_log, a, ta)
        multiply_into(new_odds, new_log, b, tb)
    return np.log(ratio)


@njit(cache=True, inline="always")
def widen_ratio(ratio, new, old):
    """The largest ratio of new to old odds so far (either way up): ``ratio`` or new/old's."""
    if new > old * ratio or old > new * ratio:
        return max(new / old, old / new)
    return ratio


@njit(cache=True, inline="always")
def damped_odds(new, old, damping):
    """Damping r <- (1-α) r_new + α r_old on odds e^r (α = ``damping``): 0.5 is the geometric
    mean, one sqrt (odds stay within e^±clip, their product within e^±2·MAX_CLIP, far from
    overflow); other α an exp and two logs."""
    if damping == 0.5:
        return np.sqrt(new * old)
    if damping > 0.0:
        return np.exp((1.0 - damping) * np.log(new) + damping * np.log(old))
    return new


@njit(cache=True, inline="always")
def multiply_into(new_odds, new_log, a, value):
    """new_odds[a] *= value, its log moved into new_log[a] when the product leaves [1e-100,
    1e100]: an arc's summed message is new_log + log(new_odds)."""
    p = new_odds[a] * value
    if p < 1e-100 or p > 1e100:
        new_log[a] += np.log(p)
        p = 1.0
    new_odds[a] = p


@njit(cache=True)
def pair_beliefs(bel, pair_a, pair_b, pair_ew, active, msg_a, msg_b):
    """P_F(1,1) of every pairwise factor: float64 ``[K]``, 0 for factors not in ``active``.

    ``bel``: flattened beliefs B (log-odds); ``msg_a``, ``msg_b``: the factors' messages (log-odds).
    The factor belief is b_F(A, B) ∝ ψ_F(A, B) e^{q_A A + q_B B} with cavities q = B - r
    (Smith & Eisner 2008 eq. 6).
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
