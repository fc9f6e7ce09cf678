"""Non-projective first-order marginals and log Z by the matrix-tree theorem (DESIGN §3).

Koo et al. (2007): with arc weights A[h, m] = exp(scores[h, m]), the Laplacian over the words 1..n,
L[m, m] = Σ_h A[h, m] (h = 0..n), L[h, m] = -A[h, m], has det L = Z (multi-root). Single root (UD:
exactly one child of ROOT): Z is the coefficient of t in det(L0 + t·diag(A[0, ·])), L0 the Laplacian
of the words alone; this equals Koo's determinant with the first row replaced by the root weights.

How it is computed, and why:
- Every column m (the incoming arcs of one child, ROOT included) is shifted by its own log-sum-exp
  before exp(): each tree has exactly one arc into m, so this divides Z by a known constant and
  changes no marginal (DESIGN §2-3). Single root also rescales the root weights to sum to 1 (each
  tree has exactly one root arc).
- The determinant is a product of pivots of Gaussian elimination in the GTH form (Grassmann, Taksar &
  Heyman 1985): L is a column diagonally dominant M-matrix, so it is stored as off-diagonal weights
  X[i, j] >= 0 plus the root "excess" e[j] >= 0, and each pivot is recomputed as e[k] + Σ_i X[i, k]
  instead of being updated by subtraction. Elimination of node k only adds products of non-negative
  numbers (X[i, j] += X[i, k] X[k, j] / d_k, e[j] += e[k] X[k, j] / d_k), so every pivot, hence log Z,
  keeps full relative precision even when trees are e^-100 times lighter than the column maxima
  (two tight cycles at ±50 log-odds, where LU with partial pivoting returns garbage). Pivoting is
  symmetric (a reordering of the words, which keeps the M-matrix form); it is needed only by the single
  root variant, where a node reachable only from ROOT must be eliminated last.
- Single root follows the same elimination with pivots that leave the excess out (the t -> 0 limit):
  d_k = Σ_i X[i, k] for every node but the last, whose pivot is its excess.
- Marginals are ∂ log Z / ∂ scores[h, m] by reverse-mode differentiation of that elimination, carried
  as log-adjoints ν (the marginal of a reduced arc): every term is bounded by 1, so absolute errors stay
  near machine precision where the textbook A[h, m]·(L⁻¹[m, m] - L⁻¹[m, h]) subtracts two numbers of
  order 1/Z. Tiny marginals get absolute, not relative, accuracy.
- When a column spans more than e^600 or an elimination leaves the double range (scores like ±1e3,
  or no tree at all), the same elimination is redone with every quantity in log space: slower (one
  exp and log1p per multiply-add) but exact for any finite scores. Both passes are exact.

Cost: O(n³) for the elimination and O(n³) for the reverse pass, O(n²) memory.
"""
import numpy as np
from numba import njit

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
    log_z = _matrix_tree_linear(scores, single_root, marginals)
    if np.isnan(log_z):
        # the linear pass could not represent this sentence: redo it exactly in log space
        marginals[:, :] = 0.0
        log_z = _matrix_tree_log(scores, single_root, marginals)
    return marginals, log_z


@njit(cache=True)
def matrix_tree_log_z(scores, single_root):
    """log Z only (same conventions as matrix_tree_marginals); skips the reverse pass."""
    n = scores.shape[0] - 1
    marginals = np.zeros((0, 0))
    log_z = _matrix_tree_linear(scores, single_root, marginals)
    if np.isnan(log_z):
        log_z = _matrix_tree_log(scores, single_root, marginals)
    return log_z


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
def _matrix_tree_linear(scores, single_root, marginals):
    """Linear-domain GTH elimination and its reverse pass; writes marginals if marginals.size > 0.

    Returns log Z, -inf when a child has no possible head, or NaN when the sentence needs the log pass.
    """
    n = scores.shape[0] - 1
    x = np.zeros((n, n))  # x[i, j]: weight of word arc (i+1) -> (j+1), column-normalised
    e = np.zeros(n)  # root weights (the Laplacian's excess)
    shift = 0.0
    for m in range(1, n + 1):
        mx = -np.inf
        for h in range(n + 1):
            if h != m and scores[h, m] > mx:
                mx = scores[h, m]
        if mx == -np.inf:
            return -np.inf
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
                return np.nan
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
            return -np.inf
        shift += np.log(total)
        for m in range(n):
            e[m] /= total
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
    log_z = shift
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


@njit(cache=True)
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
    """The GTH elimination and reverse pass of _matrix_tree_linear with every weight in log space.

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
