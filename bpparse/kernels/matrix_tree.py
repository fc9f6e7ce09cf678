"""Non-projective first-order marginals and log Z by the matrix-tree theorem (docs/design.md §3).

Koo et al. (2007): with arc weights A[h, m] = exp(scores[h, m]), the Laplacian over the words 1..n,
L[m, m] = Σ_h A[h, m] (h = 0..n), L[h, m] = -A[h, m], has det L = Z (multi-root). Single root (UD:
exactly one child of ROOT): Z is the coefficient of t in det(L0 + t·diag(A[0, ·])), L0 the Laplacian
of the words alone; this equals Koo's determinant with the first row replaced by the root weights.

How it is computed, and why:
- Every column m (the incoming arcs of one child, ROOT included) is shifted by its own log-sum-exp
  before exp(): each tree has exactly one arc into m, so this divides Z by a known constant and
  changes no marginal (docs/design.md §2-3). Single root also rescales the root weights to sum to 1 (each
  tree has exactly one root arc).
- The determinant is a product of pivots of Gaussian elimination in the GTH form (Grassmann, Taksar &
  Heyman 1985): L is a column diagonally dominant M-matrix, so it is stored as off-diagonal weights
  X[i, j] >= 0 plus the root "excess" e[j] >= 0, and each pivot is recomputed as e[k] + Σ_i X[i, k]
  instead of being updated by subtraction. Elimination of node k only adds products of non-negative
  numbers (X[i, j] += X[i, k] X[k, j] / d_k, e[j] += e[k] X[k, j] / d_k), so every pivot, hence log Z,
  keeps full relative precision even when trees are e^-100 times lighter than the column maxima
  (two tight cycles at ±50 log-odds, where LU with partial pivoting returns garbage). This replaces
  the partial pivoting of textbook LU; the elimination is exact in any order.
- Single root follows the same elimination with pivots that leave the excess out (the t -> 0 limit):
  d_k = Σ_i X[i, k] for every node but the last, whose pivot is its excess.
- Marginals (_hitting_marginals): read the weights as a random walk from a child to a head. Then
  μ[h, m] ∝ A[h, m]·P(the walk from h reaches ROOT before m) (Wilson's loop-erased walk), a ratio of
  sums of positive terms, so every marginal, however tiny, keeps full relative precision (1e-13
  measured against enumeration down to 1e-300), where the textbook A[h, m]·(L⁻¹[m, m] - L⁻¹[m, h])
  subtracts two numbers of order 1/Z. The escape probabilities of all pairs come from one
  divide-and-conquer over GTH eliminations (O(n³)), whose left spine also gives log Z.
- Fallback (_gth_reverse_mode): when some walk cannot reach a word (single root with a word that only
  ROOT may head), marginals are the reverse-mode derivative of a pivoted GTH elimination, carried as
  log-adjoints bounded by 1: absolute accuracy about 1e-16, not relative.
- When a column spans more than e^600 or an elimination leaves the double range (scores like ±1e3,
  or no tree at all), the GTH elimination and its reverse pass are redone with every quantity in log
  space: slower (an exp and a log1p per multiply-add), exact for any finite scores.

Cost: O(n³) time (about 1.3 n³ multiply-adds for marginals and log Z), O(n²) memory.
"""
import numpy as np

from bpparse.jit import LEAF, njit
from bpparse.kernels.logmath import logaddexp

_TINY = 1e-250  # a pivot below this (relative to column sums of 1) sends the sentence to log space
_HUGE = 1e250  # single-root excesses grow as 1 / pivot; beyond this, log space
_TINY_ENTRY = 1e-280  # a weight this small came from underflowing products: log space
_MAX_RANGE = 600.0  # log-ratios within one column kept in the linear pass (e^-600 ~ 1e-261)


@njit(cache=True)
def matrix_tree_marginals(scores, single_root):
    """Arc marginals and log partition function of non-projective trees (Koo et al. 2007).

    scores: float64 (n+1, n+1), log-potentials, [head, child]; the diagonal and column 0 are ignored;
        -inf forbids an arc; other entries must be finite. n >= 1.
    single_root: bool, True when ROOT must have exactly one child.
    Returns (marginals, log_z): marginals float64 (n+1, n+1), probabilities, 0 on the diagonal, in
    column 0 and on forbidden arcs, each column m >= 1 summing to 1; log_z float64. When no tree is
    possible, log_z = -inf and marginals are all zero.
    """
    n = scores.shape[0] - 1
    marginals = np.zeros((n + 1, n + 1))
    # (the passes are called from here directly: every extra njit layer recompiles its callees)
    x, e, shift, status = _normalised_weights(scores, single_root)
    if status == 1:
        return marginals, -np.inf
    if status == 0:
        log_z = _hitting_marginals(x, e, single_root, marginals)
        if not np.isnan(log_z):
            return marginals, shift + log_z
        marginals[:, :] = 0.0
        log_z = _gth_reverse_mode(x, e, single_root, marginals)
        if not np.isnan(log_z):
            return marginals, shift + log_z
        marginals[:, :] = 0.0
    # the linear passes could not represent this sentence: redo it exactly in log space
    return marginals, _matrix_tree_log(scores, single_root, marginals)


@njit(cache=True)
def matrix_tree_log_z(scores, single_root):
    """log Z only (same conventions as matrix_tree_marginals): one GTH elimination, no marginals."""
    marginals = np.zeros((0, 0))
    x, e, shift, status = _normalised_weights(scores, single_root)
    if status == 1:
        return -np.inf
    if status == 0:
        log_z = _gth_reverse_mode(x, e, single_root, marginals)
        if not np.isnan(log_z):
            return shift + log_z
    return _matrix_tree_log(scores, single_root, marginals)


@njit(cache=True)
def _swap_nodes(x, e, perm, a, b):
    """Symmetric permutation of positions a and b: rows, columns, excess and labels."""
    n = x.shape[0]
    for j in range(n):
        t = x[a, j]
        x[a, j] = x[b, j]
        x[b, j] = t
    for i in range(n):
        t = x[i, a]
        x[i, a] = x[i, b]
        x[i, b] = t
    t = e[a]
    e[a] = e[b]
    e[b] = t
    p = perm[a]
    perm[a] = perm[b]
    perm[b] = p


@njit(cache=True)
def _normalised_weights(scores, single_root):
    """(x, e, shift, status): word weights x[i, j] = exp(scores[i+1, j+1] - c_j) (0-based words,
    [head, child]) and root weights e[j], c_j the log-sum-exp of column j+1 (ROOT included); single
    root also scales e to sum 1. shift = Σ of the constants taken out of Z. status: 0 ok, 1 no tree
    (a child without any head), 2 a column spans more than e^600 (use log space)."""
    n = scores.shape[0] - 1
    x = np.zeros((n, n))
    e = np.zeros(n)
    shift = 0.0
    for m in range(1, n + 1):
        mx = -np.inf
        for h in range(n + 1):
            if h != m and scores[h, m] > mx:
                mx = scores[h, m]
        if mx == -np.inf:
            return x, e, shift, 1
        total = 0.0
        for h in range(n + 1):
            if h != m:
                total += np.exp(scores[h, m] - mx)
        c = mx + np.log(total)
        shift += c
        for h in range(n + 1):
            if h == m:
                continue
            v = scores[h, m] - c
            if v < -_MAX_RANGE and v != -np.inf:
                return x, e, shift, 2
            if h == 0:
                e[m - 1] = np.exp(v)
            else:
                x[h - 1, m - 1] = np.exp(v)
    if single_root:
        # Z is linear in the root weights (one root arc per tree): scale them to sum to 1
        total = 0.0
        for m in range(n):
            total += e[m]
        if total == 0.0:
            return x, e, shift, 1
        shift += np.log(total)
        for m in range(n):
            e[m] /= total
    return x, e, shift, 0


@njit(cache=True)
def _gth_reverse_mode(x, e, single_root, marginals):
    """GTH elimination with pivoting (log Z) and, if marginals.size > 0, its reverse pass.

    x, e: as from _normalised_weights (overwritten). Returns log Z of these weights, or NaN when a
    pivot, excess or weight leaves the range where the linear pass is trusted. Marginals have
    absolute accuracy (about 1e-16), not relative: the fallback of _hitting_marginals.
    """
    n = x.shape[0]
    w0 = x.copy()
    a0 = e.copy()
    perm = np.arange(n)
    # approximate pivot sizes, only to choose the order; exact pivots are recomputed below
    approx = np.zeros(n)
    for j in range(n):
        s = 0.0 if single_root else e[j]
        for i in range(n):
            if i != j:
                s += x[i, j]
        approx[j] = s
    d = np.zeros(n)
    f = np.zeros(n)
    log_z = 0.0
    for k in range(n - 1):
        best = k
        for q in range(k + 1, n):
            if approx[q] > approx[best]:
                best = q
        if best != k:
            _swap_nodes(x, e, perm, k, best)
            t = approx[k]
            approx[k] = approx[best]
            approx[best] = t
        dk = 0.0 if single_root else e[k]
        for i in range(k + 1, n):
            dk += x[i, k]
        if dk < _TINY:
            # the approximate sizes misled the choice: take the exactly largest remaining pivot
            for q in range(k, n):
                s = 0.0 if single_root else e[q]
                for i in range(k, n):
                    if i != q:
                        s += x[i, q]
                approx[q] = s
            best = k
            for q in range(k + 1, n):
                if approx[q] > approx[best]:
                    best = q
            if approx[best] < _TINY:
                return np.nan
            if best != k:
                _swap_nodes(x, e, perm, k, best)
                t = approx[k]
                approx[k] = approx[best]
                approx[best] = t
            dk = approx[k]
        d[k] = dk
        inv = 1.0 / dk
        for j in range(k + 1, n):
            f[j] = x[k, j] * inv
        for i in range(k + 1, n):
            xik = x[i, k]
            if xik != 0.0:
                # the diagonal x[i, i] also accumulates here; it is never read
                for j in range(k + 1, n):
                    x[i, j] += xik * f[j]
        ek = e[k]
        if ek != 0.0:
            for j in range(k + 1, n):
                e[j] += ek * f[j]
        for j in range(k + 1, n):
            approx[j] -= f[j] * x[j, k]
        log_z += np.log(dk)
    d[n - 1] = e[n - 1]
    if not (d[n - 1] >= _TINY):
        return np.nan
    for j in range(n):
        if not (e[j] <= _HUGE):
            return np.nan
    log_z += np.log(d[n - 1])
    if marginals.size == 0:
        return log_z
    # Fallback (a walk that cannot reach some word, or first-order E out of range): marginals as the
    # reverse-mode derivative of the elimination, with absolute rather than relative accuracy.
    marginals[:, :] = 0.0
    for i in range(n):
        for j in range(n):
            if i != j and 0.0 < x[i, j] < _TINY_ENTRY:
                return np.nan  # an underflowed product: its adjoint would overflow below

    # Reverse pass. nu[i, j] = ∂ log Z / ∂ log x[i, j] (final value of x[i, j]): the marginal of a
    # reduced arc, in [0, 1]. lam = nu / x = ∂ log Z / ∂ x[i, j] is the same for every version of
    # x[i, j] (each elimination only adds to it), so it is formed once per entry, when complete:
    # entry (i, j) gets its last contribution at step min(i, j).
    nu = np.zeros((n, n))
    lam = np.zeros((n, n))
    nue = np.zeros(n)
    lame = np.zeros(n)
    g = np.zeros(n)
    nue[n - 1] = 1.0
    lame[n - 1] = 1.0 / e[n - 1]
    for k in range(n - 2, -1, -1):
        inv = 1.0 / d[k]
        for j in range(k + 1, n):
            f[j] = x[k, j] * inv
            g[j] = 0.0
        nud = 1.0
        ek = e[k]
        if ek != 0.0:
            # e[j] += e[k] f[j]
            for j in range(k + 1, n):
                c = lame[j] * ek * f[j]
                nue[k] += c
                nu[k, j] += c
                nud -= c
        # x[i, j] += x[i, k] f[j]: two matrix-vector products over the trailing block
        for i in range(k + 1, n):
            xik = x[i, k]
            if xik == 0.0:
                continue
            acc = 0.0
            for j in range(k + 1, n):
                acc += lam[i, j] * f[j]
                g[j] += xik * lam[i, j]
            acc *= xik
            nu[i, k] += acc
            nud -= acc
        for j in range(k + 1, n):
            nu[k, j] += g[j] * f[j]
        # d_k = (e_k +) Σ_i x[i, k]
        for i in range(k + 1, n):
            nu[i, k] += nud * x[i, k] * inv
        if not single_root:
            nue[k] += nud * ek * inv
        # row and column k are complete now
        for j in range(k + 1, n):
            if x[k, j] > 0.0:
                lam[k, j] = nu[k, j] / x[k, j]
            if x[j, k] > 0.0:
                lam[j, k] = nu[j, k] / x[j, k]
        if e[k] > 0.0:
            lame[k] = nue[k] / e[k]
    _write_marginals(perm, x, e, nu, nue, w0, a0, marginals)
    return log_z


@njit(cache=True, **LEAF)
def _write_marginals(perm, x, e, nu, nue, w0, a0, marginals):
    """marginals[h, m] = ν·(original weight / final weight), clamped at 0, columns renormalised."""
    n = x.shape[0]
    for p in range(n):
        m = perm[p]
        total = 0.0
        if e[p] > 0.0:
            v = nue[p] * (a0[m] / e[p])
            if v < 0.0:
                v = 0.0
            marginals[0, m + 1] = v
            total += v
        for q in range(n):
            h = perm[q]
            if q != p and x[q, p] > 0.0:
                v = nu[q, p] * (w0[h, m] / x[q, p])
                if v < 0.0:
                    v = 0.0
                marginals[h + 1, m + 1] = v
                total += v
        if total > 0.0:
            for h in range(n + 1):
                marginals[h, m + 1] /= total


@njit(cache=True)
def _matrix_tree_log(scores, single_root, marginals):
    """The GTH elimination and reverse pass of _gth_reverse_mode with every weight in log space.

    Exact for any finite scores; pivots are reordered only to skip structurally empty ones.
    Returns log Z (-inf when no tree exists, marginals left zero).
    """
    n = scores.shape[0] - 1
    lx = np.full((n, n), -np.inf)
    le = np.full(n, -np.inf)
    for m in range(1, n + 1):
        for h in range(1, n + 1):
            if h != m:
                lx[h - 1, m - 1] = scores[h, m]
        le[m - 1] = scores[0, m]
    lw0 = lx.copy()
    la0 = le.copy()
    perm = np.arange(n)
    ld = np.zeros(n)
    lf = np.zeros(n)
    log_z = 0.0
    for k in range(n - 1):
        ldk = -np.inf if single_root else le[k]
        for i in range(k + 1, n):
            ldk = logaddexp(ldk, lx[i, k])
        if ldk == -np.inf:
            found = -1
            for q in range(k + 1, n):
                s = -np.inf if single_root else le[q]
                for i in range(k, n):
                    if i != q:
                        s = logaddexp(s, lx[i, q])
                if s > -np.inf:
                    found = q
                    ldk = s
                    break
            if found < 0:
                return -np.inf
            _swap_nodes(lx, le, perm, k, found)
        ld[k] = ldk
        for j in range(k + 1, n):
            lf[j] = lx[k, j] - ldk
        for i in range(k + 1, n):
            lxik = lx[i, k]
            if lxik == -np.inf:
                continue
            for j in range(k + 1, n):
                if j != i:
                    lx[i, j] = logaddexp(lx[i, j], lxik + lf[j])
        lek = le[k]
        if lek > -np.inf:
            for j in range(k + 1, n):
                le[j] = logaddexp(le[j], lek + lf[j])
        log_z += ldk
    ld[n - 1] = le[n - 1]
    if ld[n - 1] == -np.inf:
        return -np.inf
    log_z += ld[n - 1]
    if marginals.size == 0:
        return log_z

    nu = np.zeros((n, n))
    nue = np.zeros(n)
    nue[n - 1] = 1.0
    for k in range(n - 2, -1, -1):
        ldk = ld[k]
        for j in range(k + 1, n):
            lf[j] = lx[k, j] - ldk
        nud = 1.0
        lek = le[k]
        if lek > -np.inf:
            for j in range(k + 1, n):
                if nue[j] != 0.0:
                    c = nue[j] * np.exp(lek + lf[j] - le[j])
                    nue[k] += c
                    nu[k, j] += c
                    nud -= c
        for i in range(k + 1, n):
            lxik = lx[i, k]
            if lxik == -np.inf:
                continue
            acc = 0.0
            for j in range(k + 1, n):
                if j != i and nu[i, j] != 0.0:
                    c = nu[i, j] * np.exp(lxik + lf[j] - lx[i, j])
                    acc += c
                    nu[k, j] += c
            nu[i, k] += acc
            nud -= acc
        for i in range(k + 1, n):
            if lx[i, k] > -np.inf:
                nu[i, k] += nud * np.exp(lx[i, k] - ldk)
        if not single_root and lek > -np.inf:
            nue[k] += nud * np.exp(lek - ldk)
    for p in range(n):
        m = perm[p]
        total = 0.0
        if le[p] > -np.inf:
            v = nue[p] * np.exp(la0[m] - le[p])
            if v < 0.0:
                v = 0.0
            marginals[0, m + 1] = v
            total += v
        for q in range(n):
            h = perm[q]
            if q != p and lx[q, p] > -np.inf:
                v = nu[q, p] * np.exp(lw0[h, m] - lx[q, p])
                if v < 0.0:
                    v = 0.0
                marginals[h + 1, m + 1] = v
                total += v
        if total > 0.0:
            for h in range(n + 1):
                marginals[h, m + 1] /= total
    return log_z


@njit(cache=True, **LEAF)
def _eliminate_leading(y, ey, k, s, single_root, d):
    """GTH-eliminate positions 0..s-1 of the k-node chain y[:k, :k], ey[:k], in place.

    Pivots go to d[0:s]; the trailing block is then the reduced chain on positions s..k-1.
    Returns False at a zero pivot (a walk that cannot leave: only possible for single root).
    """
    for p in range(s):
        dp = 0.0 if single_root else ey[p]
        for i in range(p + 1, k):
            dp += y[i, p]
        if not (dp > 0.0):
            return False
        d[p] = dp
        inv = 1.0 / dp
        for i in range(p + 1, k):
            yip = y[i, p]
            if yip != 0.0:
                f = yip * inv
                for j in range(p + 1, k):
                    y[i, j] += f * y[p, j]
        ep = ey[p]
        if ep != 0.0:
            f = ep * inv
            for j in range(p + 1, k):
                ey[j] += f * y[p, j]
    return True


@njit(cache=True, **LEAF)
def _exit_probabilities(y, ey, k, s, d, ex, ex_root):
    """After _eliminate_leading: ex[p, t - s] = P(walk from position p < s first leaves 0..s-1 at
    position t >= s), ex_root[p] = P(it is absorbed at ROOT first) (first-order coefficient for
    single root). Walks move from a child to a head: from j to i with probability y[i, j] / d_j.
    Back-substitution in reverse elimination order; every term is non-negative."""
    for p in range(s - 1, -1, -1):
        inv = 1.0 / d[p]
        r = ey[p]
        for q in range(p + 1, s):
            r += y[q, p] * ex_root[q]
        ex_root[p] = r * inv
        for t in range(s, k):
            ex[p, t - s] = y[t, p] * inv
        for q in range(p + 1, s):
            yqp = y[q, p]
            if yqp != 0.0:
                f = yqp * inv
                for t in range(s, k):
                    ex[p, t - s] += f * ex[q, t - s]


@njit(cache=True)
def _hitting_marginals(x, e, single_root, marginals):
    """Marginals with full relative precision from escape probabilities (sums of positive terms).

    With walks that move from a child to a random head (weights x[i, j] of column j, ROOT weight
    e[j]), μ[h, m] ∝ A[h, m]·E[h, m] and μ[0, m] ∝ A[0, m], E[h, m] = P(the walk from h reaches ROOT
    before m) (Wilson 1996; the loop-erased walk from m). Single root is the limit of ROOT weights
    t·A[0, ·], t -> 0: E[h, m] is then the first-order coefficient in t, with pivots without excess.
    E for all pairs in O(n³): split the words into halves B1, B2; eliminating B2 (GTH) leaves the
    exact chain on B1 and gives the exit distribution of walks from B2 into B1 ∪ {ROOT}; so
    E[B2, B1] = exit_root + exit @ E[B1, B1], and E[B1, B1] comes from recursing on the reduced
    chain; likewise with the halves swapped. Recursion is an explicit stack over index ranges.
    The eliminations along the left spine (B2 out, then B2 of B1 out, ...) form one complete GTH
    elimination, so log Z comes out of the same pass.
    x: float64 (n, n) word weights [head, child] (0-based words), e: float64 (n,) root weights.
    Returns log Z of these weights, or NaN (marginals then partly written) when a walk cannot reach
    some word (a zero pivot: single root only), a pivot is below 1e-250, or E over/underflows.
    """
    n = x.shape[0]
    depth = 1
    while (1 << (depth - 1)) < n:
        depth += 1
    # per depth, blocks have at most ceil(n / 2^depth) words: square buffers of that side, packed
    side = np.empty(depth + 1, dtype=np.int64)
    start = np.zeros(depth + 2, dtype=np.int64)
    for lev in range(depth + 1):
        side[lev] = (n + (1 << lev) - 1) >> lev
        start[lev + 1] = start[lev] + side[lev] * side[lev]
    ybuf = np.empty(start[depth + 1])  # reduced chain of the block at each depth
    exbuf = np.empty(start[depth + 1])  # its exit probabilities, kept while the child is processed
    ebuf = np.empty((depth + 1, n))
    exroot = np.empty((depth + 1, n))
    scratch = np.empty((n, n))
    escratch = np.empty(n)
    d = np.empty(n)
    big_e = np.zeros((n, n))  # big_e[h, m] = E[h, m], zero on the diagonal
    order = np.empty(n, dtype=np.int64)
    frame_lo = np.zeros(depth + 2, dtype=np.int64)
    frame_hi = np.zeros(depth + 2, dtype=np.int64)
    frame_stage = np.zeros(depth + 2, dtype=np.int64)
    ybuf[0:n * n] = x.ravel()
    ebuf[0, :n] = e
    log_z = 0.0
    top = 0
    frame_lo[0] = 0
    frame_hi[0] = n
    frame_stage[0] = 0
    while top >= 0:
        lo = frame_lo[top]
        hi = frame_hi[top]
        k = hi - lo
        if k == 1:
            if lo == 0:
                if not (ebuf[top, 0] >= _TINY):
                    return np.nan
                log_z += np.log(ebuf[top, 0])  # the last pivot: word 0's excess
            top -= 1
            continue
        mid = lo + (k + 1) // 2
        stage = frame_stage[top]
        sz = side[top]
        ex = exbuf[start[top]:start[top + 1]].reshape((sz, sz))
        if stage == 2:
            # E[B1, B2] from the exits of B1 into B2
            _cross(big_e, ex, exroot[top], lo, mid, mid, hi)
            top -= 1
            continue
        if stage == 1:
            _cross(big_e, ex, exroot[top], mid, hi, lo, mid)
        # stage 0: eliminate B2 = [mid, hi) keeping B1; stage 1: eliminate B1 keeping B2
        if stage == 0:
            elim_lo, elim_hi, keep_lo, keep_hi = mid, hi, lo, mid
        else:
            elim_lo, elim_hi, keep_lo, keep_hi = lo, mid, mid, hi
        s = elim_hi - elim_lo
        c = 0
        for g in range(elim_lo, elim_hi):
            order[c] = g - lo
            c += 1
        for g in range(keep_lo, keep_hi):
            order[c] = g - lo
            c += 1
        y = ybuf[start[top]:start[top + 1]].reshape((sz, sz))
        ey = ebuf[top]
        for a in range(k):
            oa = order[a]
            escratch[a] = ey[oa]
            for b in range(k):
                scratch[a, b] = y[oa, order[b]]
        if not _eliminate_leading(scratch, escratch, k, s, single_root, d):
            return np.nan
        if lo == 0 and stage == 0:
            for p in range(s):
                if not (d[p] >= _TINY):
                    return np.nan
                log_z += np.log(d[p])
        _exit_probabilities(scratch, escratch, k, s, d, ex, exroot[top])
        csz = side[top + 1]
        child = ybuf[start[top + 1]:start[top + 2]].reshape((csz, csz))
        kk = k - s
        child[:kk, :kk] = scratch[s:k, s:k]
        ebuf[top + 1, :kk] = escratch[s:k]
        frame_stage[top] = stage + 1
        frame_lo[top + 1] = keep_lo
        frame_hi[top + 1] = keep_hi
        frame_stage[top + 1] = 0
        top += 1
    for m in range(n):
        total = e[m]
        for h in range(n):
            if h != m:
                total += x[h, m] * big_e[h, m]
        if not (0.0 < total < np.inf):
            return np.nan  # underflow or overflow of the first-order E (single root)
    for m in range(n):
        total = e[m]
        for h in range(n):
            if h != m:
                total += x[h, m] * big_e[h, m]
        marginals[0, m + 1] = e[m] / total
        for h in range(n):
            if h != m:
                marginals[h + 1, m + 1] = x[h, m] * big_e[h, m] / total
    return log_z


@njit(cache=True)
def _cross(big_e, ex, ex_root, a_lo, a_hi, b_lo, b_hi):
    """big_e[a, b] = ex_root[a] + Σ_t ex[a, t]·big_e[t, b] for words a in [a_lo, a_hi), b and t in
    [b_lo, b_hi) (ex rows and columns are local to those ranges; big_e[b, b] = 0)."""
    for a in range(a_hi - a_lo):
        ga = a_lo + a
        for b in range(b_lo, b_hi):
            big_e[ga, b] = ex_root[a]
        for t in range(b_hi - b_lo):
            f = ex[a, t]
            if f != 0.0:
                gt = b_lo + t
                for b in range(b_lo, b_hi):
                    big_e[ga, b] += f * big_e[gt, b]


# tree_messages' fast path accepts a marginal whose error bound is below 1e-12 or 1e-7 of its value
_FAST_ABS_ERR = 1e-12
_FAST_REL_ERR = 1e-7
# a generous multiple of n·u for the componentwise error of the Gauss-Jordan inverse of a column
# diagonally dominant Laplacian (no pivot growth); only used to decide when to fall back
_GJ_ERR = 16.0 * 2.220446049250313e-16


@njit(cache=True, inline="always")
def _scale_pivot_row(lap, k):
    """Divide row k of the Gauss-Jordan tableau by its pivot (which becomes 1 in the inverse's
    column k); False when the pivot is below 1e-200 in magnitude."""
    piv = lap[k, k]
    if not (abs(piv) > 1e-200):
        return False
    p = 1.0 / piv
    lap[k, k] = 1.0
    for j in range(lap.shape[0]):
        lap[k, j] *= p
    return True


@njit(cache=True, **LEAF)
def _gauss_jordan_inverse(lap):
    """Invert the float64 (n, n) matrix ``lap`` in place by Gauss-Jordan elimination without
    pivoting, two pivots per sweep (one rank-2 update of the other rows: half the passes over the
    matrix of the textbook one-pivot loop). Returns False at a pivot below 1e-200 in magnitude."""
    n = lap.shape[0]
    k = 0
    while k < n:
        if not _scale_pivot_row(lap, k):
            return False
        if k + 1 == n:
            for i in range(n - 1):
                f = lap[i, k]
                lap[i, k] = 0.0
                for j in range(n):
                    lap[i, j] -= f * lap[k, j]
            break
        k1 = k + 1
        f = lap[k1, k]
        lap[k1, k] = 0.0
        for j in range(n):
            lap[k1, j] -= f * lap[k, j]
        if not _scale_pivot_row(lap, k1):
            return False
        g = lap[k, k1]
        lap[k, k1] = 0.0
        for j in range(n):
            lap[k, j] -= g * lap[k1, j]
        for i in range(n):
            if i == k or i == k1:
                continue
            a = lap[i, k]
            b = lap[i, k1]
            lap[i, k] = 0.0
            lap[i, k1] = 0.0
            for j in range(n):
                lap[i, j] -= a * lap[k, j] + b * lap[k1, j]
        k += 2
    return True


@njit(cache=True, **LEAF)
def column_weights(scores, weights, shift, m):
    """Form column m of the arc weights of ``scores``: ``weights[h, m]`` = e^(scores[h, m] −
    shift[m]) with ``shift[m]`` = max_h scores[h, m] (0 where the score is -inf; shift -inf and
    the column all 0 if no head is possible)."""
    mx = -np.inf
    for h in range(scores.shape[0]):
        if h != m and scores[h, m] > mx:
            mx = scores[h, m]
    shift[m] = mx
    for h in range(scores.shape[0]):
        weights[h, m] = np.exp(scores[h, m] - mx) if (h != m and mx > -np.inf) else 0.0


@njit(cache=True)
def arc_weights(scores):
    """`column_weights` of every column: (weights float64 (n+1, n+1), shift float64 [n+1])."""
    size = scores.shape[0]
    weights = np.zeros((size, size))
    shift = np.zeros(size)
    for m in range(1, size):
        column_weights(scores, weights, shift, m)
    return weights, shift


@njit(cache=True)
def matrix_tree_marginals_fast(scores, single_root):
    """Arc marginals by the textbook inverse (Koo et al. 2007) with an a-posteriori check: the
    fast path of TREE messages (`factors.tree.tree_marginals`).

    Same conventions as `matrix_tree_marginals` (scores float64 (n+1, n+1) log-potentials, -inf
    forbids): `matrix_tree_marginals_weights` of the `arc_weights`; returns what it returns.
    """
    return matrix_tree_marginals_weights(arc_weights(scores)[0], single_root)


@njit(cache=True)
def matrix_tree_marginals_weights(weights, single_root):
    """`matrix_tree_marginals_fast` from arc weights: float64 (n+1, n+1) ``weights`` ≥ 0 (e^score
    up to a positive factor per column; 0 forbids; the diagonal and column 0 are ignored), left
    unchanged. Sparse BP keeps most arcs' weights from one iteration to the next.

    Columns are normalised to sum 1; the (n, n) Laplacian (single root:
    Koo's matrix with the first word's row replaced by the root weights) is inverted in place by
    Gauss-Jordan elimination without pivoting (`_gauss_jordan_inverse`, ~n³ multiply-adds, about
    3x fewer cycles than the GTH divide-and-conquer of `matrix_tree_marginals`), and μ[h, m] = A[h, m]·(L⁻¹[m, m] −
    L⁻¹[m, h]). That subtraction loses relative precision on arcs whose walk from h almost surely
    reaches m first (tiny μ), so every marginal gets an absolute error bound
    err = c·n·u·A[h, m]·(|L⁻¹[m, m]| + |L⁻¹[m, h]|) and is floored at it.
    Returns (marginals, floor, ok): marginals float64 (n+1, n+1) probabilities (max(μ, err) on
    word arcs), floor float64 (n+1, n+1) the bounds; ok False when the result is not to be trusted
    (a bound above both 1e-12 and 1e-7·μ, a column sum off by more than its bounds allow, no tree,
    non-finite values): the caller must then use `matrix_tree_marginals`.
    """
    n = weights.shape[0] - 1
    size = n + 1
    marg = np.zeros((size, size))
    floor = np.zeros((size, size))
    a = np.zeros((size, size))
    for m in range(1, size):
        total = 0.0
        for h in range(size):
            if h != m:
                total += weights[h, m]
        if not (total > 0.0 and total < np.inf):
            return marg, floor, False
        inv_total = 1.0 / total
        for h in range(size):
            if h != m:
                a[h, m] = weights[h, m] * inv_total
    if single_root:
        # Z is linear in the root weights (one root arc per tree): scale them to sum to 1
        total = 0.0
        for m in range(1, size):
            total += a[0, m]
        if not total > 0.0:
            return marg, floor, False
        for m in range(1, size):
            a[0, m] /= total
    # lap = the Laplacian transposed ([child, head]) so that elimination runs along rows
    lap = np.empty((n, n))
    for m in range(n):
        d = 0.0 if single_root else a[0, m + 1]
        for h in range(n):
            v = a[h + 1, m + 1]
            lap[m, h] = -v
            d += v
        lap[m, m] = d
    if single_root:
        for m in range(n):
            lap[m, 0] = a[0, m + 1]
    # lap becomes (L^T)^-1, i.e. lap[b, a] = L^-1[a, b]
    if not _gauss_jordan_inverse(lap):
        return marg, floor, False
    c = _GJ_ERR * n
    for m in range(n):
        if single_root:
            dm = lap[m, m] if m != 0 else 0.0
            v = a[0, m + 1] * lap[0, m]
        else:
            dm = lap[m, m]
            v = a[0, m + 1] * dm
        # the root marginal has no subtraction; its error only matters through the column check
        marg[0, m + 1] = v
        col = v
        col_err = c * abs(v)
        for h in range(n):
            if h == m:
                continue
            w = a[h + 1, m + 1]
            if w == 0.0:
                continue
            o = lap[h, m] if (h != 0 or not single_root) else 0.0
            err = c * w * (abs(dm) + abs(o))
            mu = w * (dm - o)
            if not (err <= _FAST_ABS_ERR or err <= _FAST_REL_ERR * mu):
                return marg, floor, False
            col += mu
            col_err += err
            floor[h + 1, m + 1] = err
            marg[h + 1, m + 1] = mu if mu > err else err
        # the column sums to 1 exactly: a larger deviation than the bounds allow means a bad inverse
        if not (abs(col - 1.0) <= 4.0 * col_err + 1e-12) or not (v >= -1e-13):
            return marg, floor, False
        if v < 0.0:
            marg[0, m + 1] = 0.0
    return marg, floor, True
