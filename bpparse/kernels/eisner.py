"""Projective first-order inference and decoding: Eisner's O(n³) algorithm (docs/design.md §3).

One chart recursion (`_inside`) over four charts, written once for three semirings:
- LOG_SUM: log-space inside, log Z (Eisner 1996; inside-outside as in Smith & Eisner 2008 §4.2);
- MAX: Viterbi with backpointers for the projective MAP tree (Eisner 1996, McDonald et al. 2005);
- LINEAR: probability-space inside over column-normalised weights, the fast path for marginals.
Spans [s, t], 0 <= s <= t <= n, with 0 = ROOT at the left end:
  S[s, t]  = ⊕_{r=s}^{t-1} Cr[s, r] ⊗ Cl[r+1, t]        (shared by both incomplete spans)
  Ir[s, t] = w[s, t] ⊗ S[s, t]   (arc s -> t)           Il[s, t] = w[t, s] ⊗ S[s, t]   (arc t -> s)
  Cr[s, t] = ⊕_{r=s+1}^{t} Ir[s, r] ⊗ Cr[r, t]         Cl[s, t] = ⊕_{r=s}^{t-1} Cl[s, r] ⊗ Il[r, t]
Multi-root: Z = Cr[0, n]. Single root: Z = ⊕_r w[0, r] ⊗ Cl[1, r] ⊗ Cr[r, n].
Charts headed at the right end are also kept transposed (`*_t[t, s]`) so that every reduction runs
over contiguous memory.

Marginals are ∂ log Z / ∂ scores (inside-outside is reverse-mode differentiation of the inside pass):
in LINEAR with plain adjoints (only multiply-adds), in LOG_SUM with span probabilities. Both are sums
of positive terms, so tiny marginals keep their relative precision.
The linear pass divides every column by its log-sum-exp first (each tree has one arc per child, so
this is exact), and stores the spans of each width scaled so that the largest is 1 (the projective
trees are a vanishing fraction of all head assignments, so unscaled values underflow for n ~ 100).
The reverse pass bounds what underflow could have cost (Z's relative error <= 1e-308 x the largest
adjoint); when that bound, Z, or a column's range (> e^600) is out of reach, the sentence is redone
in log space. Cost O(n³) time, O(n²) memory.
"""
import numpy as np

from bpparse.jit import njit
from bpparse.kernels.logmath import logaddexp

LOG_SUM = 0
MAX = 1
LINEAR = 2
# The semiring is passed as a literal constant on purpose: numba then compiles one copy of _inside /
# _outside per semiring with the other branches removed (about 11 s of a cold first run), and those
# copies are 1.6-2x (marginals) and 2-9x (decoding) faster than one copy taking a runtime semiring
# (measured 2026-11-25, n = 20-100).

_TINY = 1e-250
_HUGE = 1e250
_MAX_RANGE = 600.0


@njit(cache=True)
def _reduce(a, b, rho, k, semiring):
    """(⊕_{r<k} a[r] ⊗ b[r], first r attaining the max) for 1-D float64 views a, b; LINEAR also
    multiplies each term by the scale factor rho[r]."""
    if semiring == LINEAR:
        acc = 0.0
        for r in range(k):
            acc += a[r] * b[r] * rho[r]
        return acc, -1
    best = -np.inf
    arg = 0
    for r in range(k):
        v = a[r] + b[r]
        if v > best:
            best = v
            arg = r
    if semiring == MAX or best == -np.inf:
        return best, arg
    acc = 0.0
    for r in range(k):
        acc += np.exp(a[r] + b[r] - best)
    return best + np.log(acc), arg


@njit(cache=True)
def _spread(a, b, rho, ga, gb, k, y, gy, semiring):
    """Reverse of y = _reduce(a, b, rho, k, semiring) with adjoint gy, accumulated into ga, gb.

    LINEAR: plain adjoints (∂/∂value). LOG_SUM: log-adjoints (∂/∂log value, i.e. span probabilities).
    """
    if semiring == LINEAR:
        for r in range(k):
            ga[r] += gy * b[r] * rho[r]
            gb[r] += gy * a[r] * rho[r]
    else:
        for r in range(k):
            v = a[r] + b[r]
            if v > -np.inf:
                w = gy * np.exp(v - y)
                ga[r] += w
                gb[r] += w


@njit(cache=True)
def _inside(w, semiring, single_root, charts, ls, rho_s, rho_c, back):
    """Fill the charts bottom-up; returns the root value (log Z, max score, or scaled Z).

    w: float64 (n+1, n+1), [head, child]: log-potentials (LOG_SUM, MAX) or weights (LINEAR).
    charts: the 7 float64 (n+1, n+1) arrays of _charts. back: int64 (3, n+1, n+1) split points
    (S, Cr, Cl), written for MAX only; back[0, 0, 0] is the single root's child.
    LINEAR stores every span of width k divided by e^ls[k] (ls: float64 (n+2,)), so that the largest
    span of each width is 1: a long sentence's inside values would otherwise underflow. rho_s[k, a]
    and rho_c[k, a] are the factors e^(ls[a] + ls[b] - ls[k]) that recombine widths a and b into k.
    The scaled Z is returned: log Z = log-normalisation + ls[n + 1] + log(returned value), where
    ls[n + 1] is ls[n] (multi-root) or the scale of the single root's final combination.
    """
    sp, ir, il_t, cr, cr_t, cl, cl_t = charts
    n = w.shape[0] - 1
    linear = semiring == LINEAR
    zero = 0.0 if linear else -np.inf
    one = 1.0 if linear else 0.0
    for c in charts:
        c[:, :] = zero
    for s in range(n + 1):
        cr[s, s] = one
        cr_t[s, s] = one
        cl[s, s] = one
        cl_t[s, s] = one
    ls[:] = 0.0
    rho_s[:, :] = 1.0
    rho_c[:, :] = 1.0
    first = 1 if single_root else 0  # single root never builds spans that start at ROOT
    for width in range(1, n + 1):
        if linear:
            prov = -np.inf
            for a in range(width):
                prov = max(prov, ls[a] + ls[width - 1 - a])
            ls[width] = prov
            _scale_row(ls, width, rho_s, rho_c)
        level_max = 0.0
        for s in range(first, n + 1 - width):
            t = s + width
            v, r = _reduce(cr[s, s:t], cl_t[t, s + 1:t + 1], rho_s[width, 0:width], width, semiring)
            sp[s, t] = v
            back[0, s, t] = s + r
            if linear:
                ir[s, t] = w[s, t] * v
                il_t[t, s] = w[t, s] * v if s > 0 else 0.0
            else:
                ir[s, t] = w[s, t] + v
                il_t[t, s] = w[t, s] + v if s > 0 else -np.inf
            v, r = _reduce(ir[s, s + 1:t + 1], cr_t[t, s + 1:t + 1], rho_c[width, 1:width + 1], width,
                           semiring)
            cr[s, t] = v
            cr_t[t, s] = v
            back[1, s, t] = s + 1 + r
            v, r = _reduce(cl[s, s:t], il_t[t, s:t], rho_c[width, 0:width], width, semiring)
            cl[s, t] = v
            cl_t[t, s] = v
            back[2, s, t] = s + r
            if linear:
                level_max = max(level_max, sp[s, t], ir[s, t], il_t[t, s], cr[s, t], cl[s, t])
        if linear and level_max > 0.0:
            inv = 1.0 / level_max
            for s in range(first, n + 1 - width):
                t = s + width
                sp[s, t] *= inv
                ir[s, t] *= inv
                il_t[t, s] *= inv
                cr[s, t] *= inv
                cr_t[t, s] *= inv
                cl[s, t] *= inv
                cl_t[t, s] *= inv
            ls[width] += np.log(level_max)
            _scale_row(ls, width, rho_s, rho_c)  # the factors that the stored values now satisfy
    if not single_root:
        ls[n + 1] = ls[n]
        return cr[0, n]
    best = zero
    if linear:
        # ROOT's child r joins widths r-1 and n-r
        top = -np.inf
        for r in range(1, n + 1):
            top = max(top, ls[r - 1] + ls[n - r])
        ls[n + 1] = top
    for r in range(1, n + 1):
        if linear:
            best += w[0, r] * cl[1, r] * cr[r, n] * np.exp(ls[r - 1] + ls[n - r] - ls[n + 1])
        else:
            v = w[0, r] + cl[1, r] + cr[r, n]
            if semiring == MAX:
                if v > best:
                    best = v
                    back[0, 0, 0] = r
            else:
                best = logaddexp(best, v)
    return best


@njit(cache=True)
def _scale_row(ls, width, rho_s, rho_c):
    for a in range(width):
        rho_s[width, a] = np.exp(ls[a] + ls[width - 1 - a] - ls[width])
    for a in range(width + 1):
        rho_c[width, a] = np.exp(ls[a] + ls[width - a] - ls[width])


@njit(cache=True)
def _outside(w, semiring, single_root, z, charts, ls, rho_s, rho_c, marginals):
    """Reverse pass of _inside (LOG_SUM or LINEAR): writes arc marginals into marginals[h, m].

    Returns the largest adjoint of a stored chart value (LINEAR), a bound on the error that
    underflow in the scaled inside pass can cause (Z's relative error <= 1e-308 x that adjoint).
    """
    sp, ir, il_t, cr, cr_t, cl, cl_t = charts
    n = w.shape[0] - 1
    gir = np.zeros((n + 1, n + 1))
    gil_t = np.zeros((n + 1, n + 1))
    gcr = np.zeros((n + 1, n + 1))
    gcr_t = np.zeros((n + 1, n + 1))
    gcl = np.zeros((n + 1, n + 1))
    gcl_t = np.zeros((n + 1, n + 1))
    linear = semiring == LINEAR
    largest = 0.0
    if not single_root:
        gcr[0, n] = 1.0 / z if linear else 1.0
    else:
        for r in range(1, n + 1):
            if linear:
                f = np.exp(ls[r - 1] + ls[n - r] - ls[n + 1]) / z
                p = w[0, r] * cl[1, r] * cr[r, n] * f
                gcl[1, r] += w[0, r] * cr[r, n] * f
                gcr[r, n] += w[0, r] * cl[1, r] * f
            else:
                v = w[0, r] + cl[1, r] + cr[r, n]
                p = np.exp(v - z) if v > -np.inf else 0.0
                gcl[1, r] += p
                gcr[r, n] += p
            marginals[0, r] = p
    first = 1 if single_root else 0
    for width in range(n, 0, -1):
        for s in range(first, n + 1 - width):
            t = s + width
            g = gcr[s, t] + gcr_t[t, s]
            largest = max(largest, g)
            if g != 0.0:
                _spread(ir[s, s + 1:t + 1], cr_t[t, s + 1:t + 1], rho_c[width, 1:width + 1],
                        gir[s, s + 1:t + 1], gcr_t[t, s + 1:t + 1], width, cr[s, t], g, semiring)
            g = gcl[s, t] + gcl_t[t, s]
            largest = max(largest, g)
            if g != 0.0:
                _spread(cl[s, s:t], il_t[t, s:t], rho_c[width, 0:width], gcl[s, s:t], gil_t[t, s:t],
                        width, cl[s, t], g, semiring)
            if linear:
                arc_r = gir[s, t] * ir[s, t]
                arc_l = gil_t[t, s] * il_t[t, s]
                g = gir[s, t] * w[s, t] + (gil_t[t, s] * w[t, s] if s > 0 else 0.0)
            else:
                arc_r = gir[s, t]
                arc_l = gil_t[t, s]
                g = arc_r + arc_l
            largest = max(largest, g, gir[s, t], gil_t[t, s])
            if s > 0 or not single_root:
                marginals[s, t] = arc_r
            if s > 0:
                marginals[t, s] = arc_l
            if g != 0.0:
                _spread(cr[s, s:t], cl_t[t, s + 1:t + 1], rho_s[width, 0:width], gcr[s, s:t],
                        gcl_t[t, s + 1:t + 1], width, sp[s, t], g, semiring)
    return largest


@njit(cache=True)
def _charts(n):
    return (np.empty((n + 1, n + 1)), np.empty((n + 1, n + 1)), np.empty((n + 1, n + 1)),
            np.empty((n + 1, n + 1)), np.empty((n + 1, n + 1)), np.empty((n + 1, n + 1)),
            np.empty((n + 1, n + 1)))


@njit(cache=True)
def _normalised_weights(scores, single_root):
    """(weights, shift, ok): exp(scores - column log-sum-exp), root weights rescaled to sum 1 when
    single_root; ok is False when a column spans more than e^600 (then use log space)."""
    n = scores.shape[0] - 1
    w = np.zeros((n + 1, n + 1))
    shift = 0.0
    for m in range(1, n + 1):
        mx = -np.inf
        for h in range(n + 1):
            if h != m and scores[h, m] > mx:
                mx = scores[h, m]
        if mx == -np.inf:
            return w, -np.inf, True
        total = 0.0
        for h in range(n + 1):
            if h != m:
                total += np.exp(scores[h, m] - mx)
        c = mx + np.log(total)
        shift += c
        for h in range(n + 1):
            if h != m:
                v = scores[h, m] - c
                if v < -_MAX_RANGE and v != -np.inf:
                    return w, shift, False
                w[h, m] = np.exp(v)
    if single_root:
        total = 0.0
        for m in range(1, n + 1):
            total += w[0, m]
        if total == 0.0:
            return w, -np.inf, True
        shift += np.log(total)
        for m in range(1, n + 1):
            w[0, m] /= total
    return w, shift, True


@njit(cache=True)
def eisner_marginals(scores, single_root):
    """Arc marginals and log Z over projective trees (Eisner inside-outside).

    scores: float64 (n+1, n+1), log-potentials, [head, child]; diagonal and column 0 ignored; -inf
        forbids an arc. n >= 1.
    single_root: bool, True when ROOT must have exactly one child.
    Returns (marginals, log_z): marginals float64 (n+1, n+1), probabilities, zero on the diagonal,
    in column 0 and on forbidden arcs, each column m >= 1 summing to 1; log_z float64. When no
    projective tree is possible, log_z = -inf and marginals are all zero.
    """
    n = scores.shape[0] - 1
    marginals = np.zeros((n + 1, n + 1))
    charts, ls, rho_s, rho_c, back = _workspace(n)
    # (the passes are called from here directly: every extra njit layer recompiles its callees)
    w, shift, ok = _normalised_weights(scores, single_root)
    if shift == -np.inf:
        return marginals, -np.inf
    if ok:
        z = _inside(w, LINEAR, single_root, charts, ls, rho_s, rho_c, back)
        if _TINY <= z <= _HUGE:
            largest = _outside(w, LINEAR, single_root, z, charts, ls, rho_s, rho_c, marginals)
            if largest <= _HUGE and _renormalise(marginals):
                return marginals, shift + ls[n + 1] + np.log(z)
            marginals[:, :] = 0.0
    # scaled probability space could not represent this sentence: log space (one exp per term)
    log_z = _inside(scores, LOG_SUM, single_root, charts, ls, rho_s, rho_c, back)
    if log_z > -np.inf:
        _outside(scores, LOG_SUM, single_root, log_z, charts, ls, rho_s, rho_c, marginals)
        _renormalise(marginals)
    return marginals, log_z


@njit(cache=True)
def eisner_log_z(scores, single_root):
    """log Z over projective trees (same conventions as eisner_marginals).

    Runs the reverse pass too: its adjoints are what certifies the scaled linear pass.
    """
    return eisner_marginals(scores, single_root)[1]


@njit(cache=True)
def _workspace(n):
    charts = _charts(n)
    ls = np.zeros(n + 2)
    rho_s = np.ones((n + 1, n + 1))
    rho_c = np.ones((n + 1, n + 1))
    back = np.zeros((3, n + 1, n + 1), dtype=np.int64)
    return charts, ls, rho_s, rho_c, back


@njit(cache=True)
def _eisner_log(scores, single_root, work, marginals):
    """Log-space inside-outside alone (the fallback of eisner_marginals), for tests and benchmarks."""
    charts, ls, rho_s, rho_c, back = work
    log_z = _inside(scores, LOG_SUM, single_root, charts, ls, rho_s, rho_c, back)
    if log_z > -np.inf:
        _outside(scores, LOG_SUM, single_root, log_z, charts, ls, rho_s, rho_c, marginals)
        _renormalise(marginals)
    return log_z


@njit(cache=True)
def _renormalise(marginals):
    """Divide each child's column by its sum (1 up to rounding), so that it sums to 1.

    Returns False if a marginal is not finite (then the caller redoes the sentence in log space).
    """
    n = marginals.shape[0] - 1
    for m in range(1, n + 1):
        total = 0.0
        for h in range(n + 1):
            if not np.isfinite(marginals[h, m]):
                return False
            if marginals[h, m] < 0.0:
                marginals[h, m] = 0.0
            total += marginals[h, m]
        if total > 0.0:
            for h in range(n + 1):
                marginals[h, m] /= total
    return True


@njit(cache=True)
def eisner_decode(scores, single_root):
    """Highest-scoring projective tree (Eisner's algorithm in the max semiring, with backpointers).

    scores: float64 (n+1, n+1), [head, child]; diagonal and column 0 ignored; -inf forbids an arc
        (if every projective tree has a forbidden arc, some projective tree is still returned).
    single_root: bool, True when ROOT must have exactly one child.
    Returns heads: int64 (n+1,), heads[0] = -1. Ties go to the first split point in left-to-right
    order (and the leftmost ROOT child), so the result is deterministic.
    """
    n = scores.shape[0] - 1
    charts, ls, rho_s, rho_c, back = _workspace(n)
    _inside(scores, MAX, single_root, charts, ls, rho_s, rho_c, back)
    heads = np.full(n + 1, -1, dtype=np.int64)
    # explicit stack of (kind, s, t): 0 = Cr, 1 = Cl, 2 = Ir (arc s -> t), 3 = Il (arc t -> s)
    stack = np.zeros((4 * n + 8, 3), dtype=np.int64)
    top = 0
    if single_root:
        r = back[0, 0, 0] if n > 0 else 0
        if r == 0:
            r = 1
        heads[r] = 0
        stack[0, 0], stack[0, 1], stack[0, 2] = 1, 1, r
        stack[1, 0], stack[1, 1], stack[1, 2] = 0, r, n
        top = 2
    else:
        stack[0, 0], stack[0, 1], stack[0, 2] = 0, 0, n
        top = 1
    while top > 0:
        top -= 1
        kind, s, t = stack[top, 0], stack[top, 1], stack[top, 2]
        if s == t:
            continue
        if kind == 0:
            r = back[1, s, t]
            stack[top, 0], stack[top, 1], stack[top, 2] = 2, s, r
            stack[top + 1, 0], stack[top + 1, 1], stack[top + 1, 2] = 0, r, t
            top += 2
        elif kind == 1:
            r = back[2, s, t]
            stack[top, 0], stack[top, 1], stack[top, 2] = 1, s, r
            stack[top + 1, 0], stack[top + 1, 1], stack[top + 1, 2] = 3, r, t
            top += 2
        else:
            if kind == 2:
                heads[t] = s
            else:
                heads[s] = t
            r = back[0, s, t]
            stack[top, 0], stack[top, 1], stack[top, 2] = 0, s, r
            stack[top + 1, 0], stack[top + 1, 1], stack[top + 1, 2] = 1, r + 1, t
            top += 2
    return heads
