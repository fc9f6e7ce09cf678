"""TREE (non-projective) and PTREE (projective) propagators (Smith & Eisner 2008 §5.3, docs/design.md §2).

Incoming log-odds q[h,m] act as first-order arc scores; μ = the arc marginals of the distribution
over trees with arc weights e^q (matrix-tree theorem for TREE, Eisner inside-outside for PTREE; single-
or multi-root), and the outgoing message is

    r[h,m] = log μ[h,m] - log(1 - μ[h,m]) - q[h,m],

with 1 - μ[h,m] computed as Σ_{h'≠h} μ[h',m] (prefix + suffix sums, every child has one parent)
rather than by subtraction (one log of the ratio per arc). Shifting every q[·,m] of one child by a
constant changes no marginal, so each column is shifted to max 0 before the first-order kernel sees
it. Messages are clipped to [-clip, clip] where μ is 0 or 1. Cost O(n³) per call (one first-order
inference).

TREE uses `matrix_tree_marginals_fast` (Gauss-Jordan inverse, ~2.5x faster) whenever its
a-posteriori bound puts the error of every marginal below 1e-12 absolute or 1e-7 relative, and the
exact GTH kernel `matrix_tree_marginals` otherwise. On the fast path a marginal below its bound is
floored at the bound: the message of such an arc (μ < ~1e-12) keeps an absolute, not relative,
accuracy of its μ, which moves no belief's probability by more than ~1e-12; all other messages agree
with the exact kernel to ~1e-7 log-odds or better.

``q``, ``r``: float64 ``(n+1, n+1)`` ``[head, child]``; -inf in q marks an absent arc (forbidden,
diagonal, column 0), which gets r = 0.
"""
import numpy as np

from bpparse.jit import LEAF, njit
from bpparse.kernels.eisner import eisner_marginals
from bpparse.kernels.matrix_tree import (column_weights, matrix_tree_marginals,
                                         matrix_tree_marginals_fast, matrix_tree_marginals_weights)

# a column's weights are e^(q - shift) with shift its largest q when formed; an arc whose q has
# since risen this far above the shift gets the column re-formed (e^600 is far from overflow)
_MAX_WEIGHT_EXPONENT = 600.0


@njit(cache=True)
def tree_marginals(q, projective, single_root):
    """The TREE / PTREE factor's arc marginals for incoming log-odds ``q``: (μ float64 ``(n+1, n+1)``
    probabilities, ok). ok is False when no tree is possible (every tree has weight 0); μ is then
    not to be used. The fast TREE path when its error bound allows, else the exact kernel."""
    if not projective:
        # the textbook inverse when its error bound allows (absolute error <= 1e-12 or relative
        # <= 1e-7 on every marginal, tiny ones floored at their bound), else the exact GTH kernel;
        # it shifts and normalises the columns itself and ignores the diagonal and column 0
        mu, _, ok = matrix_tree_marginals_fast(q, single_root)
        if ok:
            return mu, True
    return _exact_tree_marginals(q, projective, single_root)


@njit(cache=True)
def _exact_tree_marginals(q, projective, single_root):
    # both exact kernels shift and normalise each column themselves and return log Z = -inf
    # when a word has no possible head
    if projective:
        mu, log_z = eisner_marginals(q, single_root)
    else:
        mu, log_z = matrix_tree_marginals(q, single_root)
    return mu, bool(np.isfinite(log_z))


@njit(cache=True)
def tree_marginals_cached(q, weights, shift, cols, col_start, heads, projective, single_root):
    """`tree_marginals` when only the listed arcs' q changed since ``weights`` / ``shift``
    (float64 ``(n+1, n+1)`` / ``[n+1]``, `matrix_tree.arc_weights`) were formed: the heads
    ``heads[col_start[j]:col_start[j + 1]]`` of child ``cols[j]`` (column-major, int64). Their
    weights are updated in place (a column is re-formed if one rose above e^600), then the fast
    TREE path runs from the weights: one exp per listed arc rather than per arc. Falls back to
    the exact kernel as `tree_marginals` does; PTREE has no cached path. Returns (μ, ok)."""
    if projective:
        return tree_marginals(q, projective, single_root)
    for j in range(cols.shape[0]):
        m = cols[j]
        top = -np.inf
        for t in range(col_start[j], col_start[j + 1]):
            x = q[heads[t], m] - shift[m]
            top = max(top, x)
            weights[heads[t], m] = np.exp(min(x, _MAX_WEIGHT_EXPONENT))
        if top > _MAX_WEIGHT_EXPONENT or shift[m] == -np.inf:
            column_weights(q, weights, shift, m)
    mu, _, ok = matrix_tree_marginals_weights(weights, single_root)
    if ok:
        return mu, True
    # ``projective`` (False here) rather than a literal False: a literal would compile the exact
    # kernel a second time (4 s of the first run)
    return _exact_tree_marginals(q, projective, single_root)


@njit(cache=True, **LEAF)
def _column_sums(q, mu, m, col, prefix, suffix):
    """Column m of μ with absent arcs (and rounding below 0 or NaN) as 0 into ``col``, and its
    prefix and suffix sums: Σ_{h' < h} = ``prefix[h]``, Σ_{h' > h} = ``suffix[h + 1]``."""
    size = q.shape[0]
    prefix[0] = 0.0
    for h in range(size):
        value = mu[h, m] if h != m and q[h, m] > -np.inf else 0.0
        # a rounding error (or NaN) of the first-order kernel must not reach a logarithm
        col[h] = value if value > 0.0 else 0.0
        prefix[h + 1] = prefix[h] + col[h]
    suffix[size] = 0.0
    for h in range(size - 1, -1, -1):
        suffix[h] = suffix[h + 1] + col[h]


@njit(cache=True, inline="always")
def _arc_message(mu_hm, others, q_hm, clip):
    # r = log μ − log(1 − μ) − q with 1 − μ = the other heads' marginals; ±clip where μ is 0 or 1
    if mu_hm <= 0.0:
        value = -clip
    elif others <= 0.0:
        value = clip
    else:
        value = np.log(mu_hm / others) - q_hm
    return min(max(value, -clip), clip)


@njit(cache=True)
def messages_from_marginals(q, mu, clip, r):
    """Fill ``r`` (float64 ``(n+1, n+1)``, log-odds) with the TREE messages of every present arc,
    given the incoming ``q`` and the factor's marginals ``mu`` (`tree_marginals`)."""
    size = q.shape[0]
    col = np.empty(size)
    prefix = np.empty(size + 1)
    suffix = np.empty(size + 1)
    for m in range(1, size):
        _column_sums(q, mu, m, col, prefix, suffix)
        for h in range(size):
            if h != m and q[h, m] > -np.inf:
                r[h, m] = _arc_message(col[h], prefix[h] + suffix[h + 1], q[h, m], clip)


@njit(cache=True)
def messages_at_arcs(q, mu, clip, col_start, heads, cols, out):
    """TREE messages of the listed arcs only: the heads ``heads[col_start[j]:col_start[j + 1]]`` of
    child ``cols[j]`` (int64 arrays, a column-major arc list). Writes ``out`` float64 ``[len(heads)]``
    in that order. O(n) per listed column plus one log per listed arc: what BP on a sparse
    subgraph needs each iteration, since the other arcs' messages feed no factor."""
    size = q.shape[0]
    col = np.empty(size)
    prefix = np.empty(size + 1)
    suffix = np.empty(size + 1)
    for j in range(cols.shape[0]):
        m = cols[j]
        _column_sums(q, mu, m, col, prefix, suffix)
        for t in range(col_start[j], col_start[j + 1]):
            h = heads[t]
            out[t] = _arc_message(col[h], prefix[h] + suffix[h + 1], q[h, m], clip)


@njit(cache=True)
def tree_messages(q, projective, single_root, clip):
    """TREE (``projective`` False) or PTREE messages; see the module docstring.

    Returns float64 ``(n+1, n+1)`` log-odds. If no tree is possible (every tree has weight 0) the
    factor sends 0 everywhere.
    """
    r = np.zeros(q.shape)
    mu, ok = tree_marginals(q, projective, single_root)
    if ok:
        messages_from_marginals(q, mu, clip, r)
    return r
