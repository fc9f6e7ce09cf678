"""Joint BP over arc and tag variables (Smith & Eisner 2008 §3): the parser's factor graph plus
one UPOS variable T_i per word, the tag chain (TAG unary factors and the BIGRAM chain, propagated
exactly by forward-backward, `kernels.chain`) and TAGLINK factors coupling L[h,m] with T_h, T_m
(`factors.taglink`).

Schedule (flooding, one sweep per iteration): the arc part of the graph takes one iteration of
`bp_engine_continue` with the TAGLINK messages added to the LINK scores (they are unary on the arc
variables, as far as the arc factors are concerned); the TAGLINK factors then read the new arc
beliefs and the tag beliefs; the chain reads the tag unaries plus the TAGLINK messages and gives
the tag beliefs (its log node marginals: for a chain factor, marginals are exactly the beliefs).
BP stops when no message moved more than ``tol`` or after ``max_iter`` sweeps.
"""
import numpy as np

from bpparse.jit import njit
from bpparse.kernels.bp_engine import (
    EXACTLY1,
    TREE,
    BPOptions,
    CrossFactors,
    bp_engine_continue,
)
from bpparse.kernels.chain import chain_log_marginals
from bpparse.kernels.factors.taglink import tag_incoming, taglink_update


@njit(cache=True, nogil=True)
def tag_beliefs(unary, trans, tl):
    """float64 (n+1, C) log-beliefs of the tag variables over their candidates (row 0: ROOT, 0):
    the chain's log node marginals with ``unary`` float64 (n, g) (-inf outside the candidates) plus
    the TAGLINK messages as its input."""
    n = unary.shape[0]
    C = tl.cand.shape[1]
    inc = tag_incoming(tl, n)
    un = unary.copy()
    for i in range(1, n + 1):
        for c in range(tl.cnt[i]):
            un[i - 1, tl.cand[i, c]] += inc[i, c]
    lm, _ = chain_log_marginals(un, trans)
    out = np.full((n + 1, C), -np.inf)
    out[0, 0] = 0.0
    for i in range(1, n + 1):
        for c in range(tl.cnt[i]):
            out[i, c] = lm[i - 1, tl.cand[i, c]]
    return out


@njit(cache=True, nogil=True)
def _column_tops(link):
    size = link.shape[0]
    top = np.full(size, -np.inf)
    for m in range(1, size):
        for h in range(size):
            if h != m and link[h, m] > top[m]:
                top[m] = link[h, m]
    return top


@njit(cache=True, nogil=True)
def joint_bp(link, pairs, cross, seq, options, unary, trans, tl):
    """Joint BP for one sentence; returns (beliefs, active, msg_a, msg_b, global_msg, tag_bel,
    iterations, residual).

    ``link``, ``pairs``, ``cross`` (`CrossFactors`, messages zero), ``seq`` (messages zeroed here),
    ``options``: as for `bp_engine.bp_full_graph` (every pairwise factor active); ``unary`` float64
    (n, g) the tag chain's unary log-potentials (-inf outside each word's candidates), ``trans``
    float64 (g+1, g+1) its transitions; ``tl``: `TagLinkFactors` (messages updated in place).
    ``beliefs``: float64 (n+1, n+1) arc log-odds including the TAGLINK messages; ``tag_bel``
    float64 (n+1, C) tag log-beliefs over the candidates.
    """
    size = link.shape[0]
    K = pairs.a.shape[0]
    active = np.arange(K)
    msg_a = np.zeros(K)
    msg_b = np.zeros(K)
    global_msg = np.zeros((size, size))
    seq.msg[:] = 0.0
    one = BPOptions(options.constraint, options.projective, options.single_root, 1, options.tol,
                    options.damping, options.clip, False)
    shift = options.constraint == TREE or options.constraint == EXACTLY1
    n1 = size
    eff = link.copy()
    top = _column_tops(eff)
    tag_bel = tag_beliefs(unary, trans, tl)
    bel = eff.copy()
    residual = np.inf
    iterations = 0
    for it in range(options.max_iter):
        for f in range(tl.arcs.shape[0]):
            a = tl.arcs[f]
            eff[a // n1, a % n1] = link[a // n1, a % n1] + tl.to_arc[f]
        if shift:
            # the engine shifts each column to a top score of 0; keep the global messages in the
            # frame they were computed in, so that the beliefs it starts from stay the same
            new_top = _column_tops(eff)
            for m in range(1, size):
                if new_top[m] > -np.inf and top[m] > -np.inf:
                    d = new_top[m] - top[m]
                    for h in range(size):
                        if eff[h, m] > -np.inf and h != m:
                            global_msg[h, m] += d
            top = new_top
        bel, _, _, r_arcs = bp_engine_continue(eff, pairs, active, msg_a, msg_b, cross, seq,
                                               global_msg, one, np.empty((0, 0)))
        used = tl.to_arc.copy()
        r_tags = taglink_update(bel, tag_bel, tl, options.damping, options.clip)
        for f in range(tl.arcs.shape[0]):
            a = tl.arcs[f]
            bel[a // n1, a % n1] += tl.to_arc[f] - used[f]
        tag_bel = tag_beliefs(unary, trans, tl)
        iterations = it + 1
        residual = max(r_arcs, r_tags)
        if residual < options.tol:
            break
    return bel, active, msg_a, msg_b, global_msg, tag_bel, iterations, residual


def empty_cross(n1):
    """`CrossFactors` of a graph without NOCROSS."""
    return CrossFactors(np.zeros((n1, n1)), np.zeros((n1, n1), dtype=np.bool_), 0,
                        np.zeros((0, 0, 0)), np.zeros((0, 0), dtype=np.bool_))
