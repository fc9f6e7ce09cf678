"""TREE (non-projective) and PTREE (projective) propagators (Smith & Eisner 2008 §5.3, DESIGN §2).

Incoming log-odds q[h,m] act as first-order arc scores; μ = the arc marginals of the distribution
over trees with arc weights e^q (matrix-tree theorem for TREE, Eisner inside-outside for PTREE; single-
or multi-root), and the outgoing message is

    r[h,m] = log μ[h,m] - log(1 - μ[h,m]) - q[h,m],

with 1 - μ[h,m] computed as Σ_{h'≠h} μ[h',m] (prefix + suffix sums, every child has one parent)
rather than by subtraction (one log of the ratio per arc). Shifting every q[·,m] of one child by a constant changes no marginal, so
each column is shifted to max 0 before the first-order kernel sees it. Messages are clipped to
[-clip, clip] where μ is 0 or 1. Cost O(n³) per call (one first-order inference).

TREE uses `matrix_tree_marginals_fast` (Gauss-Jordan inverse, ~2.5x faster) whenever its
a-posteriori bound puts the error of every marginal below 1e-12 absolute or 1e-7 relative, and the exact GTH kernel
`matrix_tree_marginals` otherwise. On the fast path a marginal below its bound is floored at the bound:
the message of such an arc (μ < ~1e-12) keeps an absolute, not relative, accuracy of its μ, which moves
no belief's probability by more than ~1e-12; all other messages agree with the exact kernel to ~1e-7
log-odds or better.

``q``, ``r``: float64 ``(n+1, n+1)`` ``[head, child]``; -inf in q marks an absent arc (forbidden,
diagonal, column 0), which gets r = 0.
"""
import numpy as np
from numba import njit

from bpparse.kernels.eisner import eisner_marginals
from bpparse.kernels.matrix_tree import matrix_tree_marginals, matrix_tree_marginals_fast


@njit(cache=True)
def tree_messages(q, projective, single_root, clip):
    """TREE (``projective`` False) or PTREE messages; see the module docstring.

    Returns float64 ``(n+1, n+1)`` log-odds. If no tree is possible (every tree has weight 0) the
    factor sends 0 everywhere.
    """
    size = q.shape[0]
    r = np.zeros((size, size))
    mu = np.empty((0, 0))
    log_z = 0.0
    ok = False
    if not projective:
        # the textbook inverse when its error bound allows (absolute error <= 1e-12 or relative
        # <= 1e-7 on every marginal, tiny ones floored at their bound), else the exact GTH kernel;
        # it shifts and normalises the columns itself and ignores the diagonal and column 0
        mu, _, ok = matrix_tree_marginals_fast(q, single_root)
    if not ok:
        # both exact kernels shift and normalise each column themselves and return log Z = -inf
        # when a word has no possible head
        if projective:
            mu, log_z = eisner_marginals(q, single_root)
        else:
            mu, log_z = matrix_tree_marginals(q, single_root)
        if not np.isfinite(log_z):
            return r
    col = np.empty(size)
    prefix = np.empty(size + 1)
    for m in range(1, size):
        prefix[0] = 0.0
        for h in range(size):
            value = mu[h, m] if h != m and q[h, m] > -np.inf else 0.0
            # a rounding error (or NaN) of the first-order kernel must not reach a logarithm
            col[h] = value if value > 0.0 else 0.0
            prefix[h + 1] = prefix[h] + col[h]
        suffix = 0.0
        for h in range(size - 1, -1, -1):
            if h != m and q[h, m] > -np.inf:
                mu_hm = col[h]
                others = prefix[h] + suffix
                if mu_hm <= 0.0:
                    value = -clip
                elif others <= 0.0:
                    value = clip
                else:
                    value = np.log(mu_hm / others) - q[h, m]
                r[h, m] = min(max(value, -clip), clip)
                suffix += mu_hm
    return r
