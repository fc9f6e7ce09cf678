"""Loopy sum-product BP over arc variables, one sentence per call (Smith & Eisner 2008 §4-5, docs/design.md §2).

Variables: one boolean L[h,m] per arc. Messages are log-odds. The variable belief is
B[h,m] = s[h,m] + Σ_F r_F[h,m] (LINK folded in as s), the message from a variable to a factor is
q_F = B - r_F, and the arc marginal is σ(B). Factors:

- the global constraint (one message per arc): TREE / PTREE (`factors.tree`), or one of the weaker
  constraints of SE08 Table 3, EXACTLY1 / ATMOST1 (`factors.hard`), or none (NOT2 is then given as
  NAND pairs);
- pairwise factors (GRAND, SIB, NAND) as flat arrays run over an ``active`` list (`factors.pairwise`);
- NOCROSS groups, ``grouped`` or ``exactly1`` form (`factors.nocross`);
- CHILDSEQ head automata, one per head and side (`factors.childseq`).

Schedule: flooding. Every factor reads the beliefs of the previous iteration and its own previous
messages; its new messages r_new replace the old ones as r <- (1-α)·r_new + α·r_old (damping α) and
are summed into the next beliefs. BP stops when the largest |r_new - r_old| over all messages is below
``tol`` (converged) or after ``max_iter`` iterations. Cost per iteration O(n³ + |active|).

All state is in the arrays passed in, so a call can continue from the messages of a previous call
(warm start, e.g. after relaxation added factors to ``active``); messages of factors not in
``active`` are left untouched and contribute nothing.
"""
from typing import NamedTuple

import numpy as np

from bpparse.jit import njit
from bpparse.kernels.factors.childseq import childseq_beliefs, childseq_update
from bpparse.kernels.factors.hard import atmost1_messages, exactly1_messages
from bpparse.kernels.factors.nocross import (in_odds, nocross_expected_crossings, nocross_update,
                                             nocross_update_listed, nocross_update_odds,
                                             parent_lists)
from bpparse.kernels.factors.pairwise import (EXP_BELIEF_CAP, MAX_CLIP, pair_beliefs, pair_odds,
                                              pairwise_update)
from bpparse.kernels.factors.tree import (messages_at_arcs, messages_from_marginals,
                                          tree_marginals_cached, tree_messages)
from bpparse.kernels.matrix_tree import arc_weights

from bpparse.kernels.codes import CROSS_GROUPED
from bpparse.kernels.codes import ATMOST1, EXACTLY1, NO_GLOBAL, TREE  # noqa: F401 (re-exported)

DEFAULT_CLIP = 200.0


class BPOptions(NamedTuple):
    """How BP runs (a numba record; build it with `bp_options` so every field has one type).

    ``constraint``: TREE (PTREE when ``projective``), EXACTLY1, ATMOST1 or NO_GLOBAL
    (`bpparse.kernels.codes`); ``single_root``: ROOT takes exactly one child (TREE / PTREE only);
    ``max_iter``, ``tol``, ``damping`` α in [0, 1), ``clip``: message bound (at most
    ``pairwise.MAX_CLIP``); ``sparse``: see `bp_engine_continue`.
    """

    constraint: int
    projective: bool
    single_root: bool
    max_iter: int
    tol: float
    damping: float
    clip: float
    sparse: bool


def bp_options(constraint, projective, single_root, max_iter, tol, damping, clip=200.0,
               sparse=False):
    """`BPOptions` with each field coerced to its one type (one compiled specialisation)."""
    return BPOptions(int(constraint), bool(projective), bool(single_root), int(max_iter),
                     float(tol), float(damping), float(clip), bool(sparse))


class PairFactors(NamedTuple):
    """Flat pairwise factors (GRAND, SIB, NAND): ``a``, ``b`` int64 ``[K]`` arc indices
    h*(n+1)+m, ``w`` float64 ``[K]`` log-potentials (-inf = NAND; inside `bp_iterate` the odds
    e^w instead)."""

    a: np.ndarray
    b: np.ndarray
    w: np.ndarray


class CrossFactors(NamedTuple):
    """NOCROSS groups: ``w`` float64 ``(n+1, n+1)`` log-potentials and ``active`` bool
    ``(n+1, n+1)`` groups [m, l], m < l; ``mode`` CROSS_GROUPED or CROSS_EXACTLY1; ``msg`` float64
    ``(n+1, n+1, n+1)`` their messages (layout in `factors.nocross`), or shape (0, 0, 0) for no
    NOCROSS; ``arcs`` bool ``(n+1, n+1)`` the only arcs the ``grouped`` groups join (the others
    neither send to them nor receive from them, as if absent: `nocross.nocross_update_listed`), or
    shape (0, 0) for every arc."""

    w: np.ndarray
    active: np.ndarray
    mode: int
    msg: np.ndarray
    arcs: np.ndarray


@njit(cache=True)
def bp_engine(link, pairs, active, msg_a, msg_b, cross, seq, global_msg, options):
    """Run BP on one sentence; returns (beliefs, iterations, converged, residual).

    (`bp_engine_continue` with no ``first_global``; see below for the arguments.)
    """
    return bp_engine_continue(link, pairs, active, msg_a, msg_b, cross, seq, global_msg, options,
                              np.empty((0, 0)))


@njit(cache=True)
def bp_engine_continue(link, pairs, active, msg_a, msg_b, cross, seq, global_msg, options,
                       first_global):
    """Run BP on one sentence; returns (beliefs, iterations, converged, residual).

    ``first_global``: float64 ``(n+1, n+1)``, what the global constraint sends in the first
    iteration when the caller knows it, or shape (0, 0): the first iteration then takes it
    instead of running the same O(n³) propagation. Relaxation passes ``global_msg`` itself (the
    seed graph's TREE messages while every other message is still 0, so TREE's input is LINK
    again: they are kept, change 0); `bp_full_graph` the messages of pruning's first-order
    marginals. It differs from propagating only by rounding.

    ``options.sparse`` (TREE / PTREE only: relaxation's subgraphs, and undamped BP on pruned
    graphs, `inference.bp_options_of`): the global constraint sends its messages each iteration
    only to the arcs that another factor of the graph reads (those of the active pairwise factors,
    of the CHILDSEQ automata and of the children of active NOCROSS groups). Every other arc's
    incoming message to the constraint is its LINK score throughout, so its outgoing message feeds
    nothing until the end: it is set once, undamped, from the last propagation's marginals, and
    the residual covers the messages that form BP's state. That saves a log per arc and
    iteration, and the matrix-tree's arc weights are kept between iterations (an exp per arc); the
    O(n³) marginals remain. Without damping the result is the same as without ``sparse`` to
    rounding; with damping the other arcs' final messages are the last propagation's rather than
    a damped average of all of them.

    Arguments (n+1 = ``link.shape[0]``; all messages log-odds, updated in place):
    - ``link``: float64 ``(n+1, n+1)`` LINK scores s[h,m]; -inf forbids an arc; the diagonal and
      column 0 are ignored. Finite or -inf only.
    - ``pairs``: `PairFactors` of ``K`` factors; ``active``: int64 ``[A]`` distinct indices of the
      factors in the graph; ``msg_a``, ``msg_b``: float64 ``[K]`` their messages to arc a and b.
    - ``cross``: `CrossFactors` (its ``msg`` updated in place).
    - ``seq``: `factors.childseq.ChildSeqFactors` (its ``msg`` updated in place; no segments = no
      CHILDSEQ).
    - ``global_msg``: float64 ``(n+1, n+1)`` messages of the global constraint.
    - ``options``: `BPOptions`.
    Returns ``beliefs`` float64 ``(n+1, n+1)`` (log-odds; -inf for absent arcs, the diagonal and
    column 0), the number of iterations run, whether the residual fell below ``tol``, and the
    residual (largest message change of the last iteration; inf when no iteration ran).
    """
    pair_a, pair_b, pair_w = pairs
    cross_active, cross_msg = cross.active, cross.msg
    base = base_scores(link, global_msg, options.constraint)
    # beliefs from the messages given (all zero on a cold start)
    bel = base.copy()
    if options.constraint != NO_GLOBAL:
        bel += global_msg
    size = base.shape[0]
    bel_flat = bel.reshape(size * size)
    for j in range(active.shape[0]):
        k = active[j]
        bel_flat[pair_a[k]] += msg_a[k]
        bel_flat[pair_b[k]] += msg_b[k]
    if cross_msg.shape[0] > 0:
        for m in range(1, size):
            for l in range(m + 1, size):
                if cross_active[m, l]:
                    for h in range(size):
                        bel[h, m] += cross_msg[m, l, h]
                        bel[h, l] += cross_msg[l, m, h]
    for s in range(seq.head.shape[0]):
        for t in range(seq.start[s], seq.start[s + 1]):
            bel[seq.head[s], seq.child[t]] += seq.msg[t]

    # The pairwise kernel works on odds e^r: msg_a / msg_b hold odds until the end of this call
    # (no scratch of the factor list's size beyond e^w). A cold start (r = 0) needs no exp().
    pair_ew = np.empty(pair_a.shape[0])
    for j in range(active.shape[0]):
        k = active[j]
        pair_ew[k] = pair_odds(pair_w[k])
        msg_a[k] = 1.0 if msg_a[k] == 0.0 else np.exp(msg_a[k])
        msg_b[k] = 1.0 if msg_b[k] == 0.0 else np.exp(msg_b[k])
    cross_odds(cross, True, options.damping)
    out = bp_iterate(base, bel, PairFactors(pair_a, pair_b, pair_ew), active, msg_a, msg_b, cross,
                     seq, global_msg, (np.empty((0, 0)), np.empty(0)), options, first_global)
    for j in range(active.shape[0]):
        k = active[j]
        msg_a[k] = 0.0 if msg_a[k] == 1.0 else np.log(msg_a[k])
        msg_b[k] = 0.0 if msg_b[k] == 1.0 else np.log(msg_b[k])
    cross_odds(cross, False, options.damping)
    return out


@njit(cache=True)
def cross_odds(cross, to_odds, damping):
    """Convert the messages of the active NOCROSS groups of ``cross`` (a `CrossFactors`) in place,
    log-odds -> odds (``to_odds``) or back, when `bp_iterate` keeps them as odds (`nocross.in_odds`
    of the form, the arcs and ``damping``); otherwise, or without NOCROSS, nothing."""
    msg = cross.msg
    if msg.shape[0] == 0 or not in_odds(cross.mode, damping, cross.arcs):
        return
    size = msg.shape[0]
    for m in range(1, size):
        for l in range(m + 1, size):
            if cross.active[m, l]:
                for x, y in ((m, l), (l, m)):
                    for h in range(size):
                        v = msg[x, y, h]
                        if to_odds:
                            msg[x, y, h] = 1.0 if v == 0.0 else np.exp(v)
                        else:
                            msg[x, y, h] = 0.0 if v == 1.0 else np.log(v)


@njit(cache=True)
def base_scores(link, global_msg, constraint):
    """LINK scores with -inf on the diagonal, column 0 and forbidden arcs (float64 ``(n+1, n+1)``);
    zeroes ``global_msg`` there (such arcs receive no message).

    Under TREE / PTREE and EXACTLY1 every child has exactly one parent, so adding a constant to a
    child's column changes no probability: each column is shifted to a largest score of 0. Then
    messages are formed from scores of moderate size whatever the scale of the input (a neural
    scorer's 1e3 or 1e6), and their clipping bound only cuts where a marginal is 0 or 1 to
    rounding anyway. Under ATMOST1 and NOT2 a shift would change the model, so scores are kept.
    """
    size = link.shape[0]
    base = np.empty((size, size))
    shift = constraint == TREE or constraint == EXACTLY1
    for m in range(size):
        top = -np.inf
        for h in range(size):
            base[h, m] = -np.inf if (m == 0 or h == m) else link[h, m]
            if base[h, m] == -np.inf:
                global_msg[h, m] = 0.0
            elif base[h, m] > top:
                top = base[h, m]
        if shift and top != -np.inf:
            for h in range(size):
                base[h, m] -= top
    return base


@njit(cache=True)
def bp_iterate(base, bel, pairs_ew, active, odds_a, odds_b, cross, seq, global_msg, tree_weights,
               options, first_global):
    """The iterations of `bp_engine_continue` on its state as it keeps it, so that a caller that
    runs BP repeatedly on a growing graph (`relax_kernels.relaxed_bp`) converts nothing between
    runs: ``base`` (`base_scores`), ``bel`` the current beliefs (log-odds; not modified), pairwise
    factors as odds: ``pairs_ew`` a `PairFactors` whose ``w`` = `pair_odds` of their weights,
    ``odds_a``, ``odds_b`` e^r of their messages (updated in place), the NOCROSS groups'
    messages ``cross.msg`` as odds too when `nocross.in_odds` (`cross_odds`), ``tree_weights``:
    (weights, shift), the sparse path's matrix-tree weights (`matrix_tree.arc_weights` of
    ``base``, kept across runs and updated in place; shapes (0, 0) / (0,): formed here). Other
    arguments and the result as in `bp_engine_continue`.
    """
    pair_a, pair_b, pair_ew = pairs_ew
    cross_w, cross_active, cross_mode, cross_msg, cross_arcs = cross
    weights, shift = tree_weights
    constraint, projective, single_root = options.constraint, options.projective, options.single_root
    max_iter, tol, damping, sparse = options.max_iter, options.tol, options.damping, options.sparse
    clip = min(options.clip, MAX_CLIP)
    size = base.shape[0]
    use_cross = cross_msg.shape[0] > 0
    use_seq = seq.head.shape[0] > 0
    all_cross_arcs = cross_arcs.shape[0] == 0

    # the arcs some active pairwise factor touches: only they need e^B and the odds products (on a
    # relaxed subgraph a small fraction of the (n+1)² arcs)
    mark = np.zeros(size * size, dtype=np.bool_)
    for j in range(active.shape[0]):
        k = active[j]
        mark[pair_a[k]] = True
        mark[pair_b[k]] = True
    # the grouped NOCROSS form runs in the odds domain too, undamped or damped by 0.5 (its
    # messages are odds here, see `cross_odds`), reading e^B of every arc of its children
    odds_cross = use_cross and in_odds(cross_mode, damping, cross_arcs)
    # groups that join only some arcs run over their lists of heads (`nocross_update_listed`)
    listed = use_cross and not all_cross_arcs
    if listed and cross_mode != CROSS_GROUPED:
        raise ValueError("NOCROSS groups on some arcs only: the grouped form only")
    lists = parent_lists(cross_arcs & (base > -np.inf) if listed else
                         np.zeros((0, 0), dtype=np.bool_))
    if odds_cross:
        for m in range(1, size):
            for l in range(m + 1, size):
                if cross_active[m, l]:
                    for h in range(size):
                        mark[h * size + m] = True
                        mark[h * size + l] = True
    touched = np.nonzero(mark)[0]

    keep = 1.0 - damping
    sparse_tree = sparse and constraint == TREE
    if sparse_tree:
        read = mark.reshape((size, size)).copy()
        if use_cross:
            for m in range(1, size):
                for l in range(m + 1, size):
                    if cross_active[m, l]:
                        for h in range(size):
                            read[h, m] |= all_cross_arcs or cross_arcs[h, m]
                            read[h, l] |= all_cross_arcs or cross_arcs[h, l]
        for s in range(seq.head.shape[0]):
            for t in range(seq.start[s], seq.start[s + 1]):
                read[seq.head[s], seq.child[t]] = True
        cols, col_start, heads = _column_major_arcs(read, base)
        r_read = np.empty(heads.shape[0])
        # the incoming message of every arc no other factor reads is its LINK score throughout,
        # and so is its weight in the matrix-tree
        q = base.copy()
        if weights.shape[0] == 0:
            weights, shift = arc_weights(q)
    else:
        q = np.empty((size, size))
        read = np.zeros((0, 0), dtype=np.bool_)
        cols = col_start = heads = np.empty(0, dtype=np.int64)
        r_read = np.empty(0)
    mu = np.empty((0, 0))
    tree_ok = False
    propagated = False
    exp_bel = np.empty(size * size)
    new_odds = np.empty(size * size)
    new_log = np.empty(size * size)
    iterations = 0
    converged = False
    residual = np.inf
    for it in range(max_iter):
        new_bel = base.copy()
        change = 0.0
        first = it == 0 and first_global.shape[0] > 0
        if sparse_tree and not first:
            for j in range(cols.shape[0]):
                m = cols[j]
                for t in range(col_start[j], col_start[j + 1]):
                    q[heads[t], m] = bel[heads[t], m] - global_msg[heads[t], m]
            mu, tree_ok = tree_marginals_cached(q, weights, shift, cols, col_start, heads,
                                                projective, single_root)
            propagated = True
            if tree_ok:
                messages_at_arcs(q, mu, clip, col_start, heads, cols, r_read)
            else:
                r_read[:] = 0.0
            for j in range(cols.shape[0]):
                m = cols[j]
                for t in range(col_start[j], col_start[j + 1]):
                    h = heads[t]
                    old = global_msg[h, m]
                    d = abs(r_read[t] - old)
                    if d > change:
                        change = d
                    value = keep * r_read[t] + damping * old
                    global_msg[h, m] = value
                    new_bel[h, m] += value
        elif constraint != NO_GLOBAL:
            if first:
                r = first_global
            else:
                for h in range(size):
                    for m in range(size):
                        q[h, m] = bel[h, m] - global_msg[h, m]
                if constraint == TREE:
                    r = tree_messages(q, projective, single_root, clip)
                elif constraint == EXACTLY1:
                    r = exactly1_messages(q, clip)
                else:
                    r = atmost1_messages(q, clip)
            for h in range(size):
                for m in range(1, size):
                    if base[h, m] == -np.inf:
                        continue
                    old = global_msg[h, m]
                    d = abs(r[h, m] - old)
                    if d > change:
                        change = d
                    # a message that did not change is kept as it is (relaxation's first
                    # iteration, `first_global` = ``global_msg``), not re-formed by damping
                    value = old if d == 0.0 else keep * r[h, m] + damping * old
                    global_msg[h, m] = value
                    new_bel[h, m] += value
        if touched.shape[0] > 0:
            bel_flat = bel.reshape(size * size)
            for t in range(touched.shape[0]):
                a = touched[t]
                exp_bel[a] = np.exp(min(bel_flat[a], EXP_BELIEF_CAP))
                new_odds[a] = 1.0
                new_log[a] = 0.0
            if active.shape[0] > 0:
                d = pairwise_update(bel_flat, exp_bel, pair_a, pair_b, pair_ew, active, odds_a,
                                    odds_b, new_odds, new_log, damping, clip)
                if d > change:
                    change = d
            if odds_cross:
                d = nocross_update_odds(bel, exp_bel, cross_w, cross_active, cross_msg, new_odds,
                                        new_log, damping, clip)
                if d > change:
                    change = d
            new_flat = new_bel.reshape(size * size)
            for t in range(touched.shape[0]):
                a = touched[t]
                if new_odds[a] != 1.0 or new_log[a] != 0.0:
                    new_flat[a] += new_log[a] + np.log(new_odds[a])
        if listed:
            d = nocross_update_listed(bel, cross_w, cross_active, cross_msg, new_bel, damping,
                                      clip, lists)
            if d > change:
                change = d
        elif use_cross and not odds_cross:
            d = nocross_update(bel, cross_w, cross_active, cross_mode, cross_msg, new_bel,
                               damping, clip)
            if d > change:
                change = d
        if use_seq:
            d = childseq_update(bel, seq, new_bel, damping, clip)
            if d > change:
                change = d
        bel = new_bel
        iterations = it + 1
        residual = change
        if change < tol:
            converged = True
            break
    if propagated:
        # the messages nothing read, from the last propagation (0 everywhere if no tree exists)
        r = np.zeros((size, size))
        if tree_ok:
            messages_from_marginals(q, mu, clip, r)
        for h in range(size):
            for m in range(1, size):
                if base[h, m] != -np.inf and not read[h, m]:
                    global_msg[h, m] = r[h, m]
                    bel[h, m] = base[h, m] + r[h, m]
    return bel, iterations, converged, residual


@njit(cache=True)
def _column_major_arcs(read, base):
    """The present arcs marked in ``read`` (bool ``(n+1, n+1)``) as a column-major list: (cols,
    col_start, heads) int64, child ``cols[j]`` having the heads ``heads[col_start[j]:col_start[j+1]]``."""
    size = read.shape[0]
    cols = np.empty(size, dtype=np.int64)
    col_start = np.empty(size + 1, dtype=np.int64)
    heads = np.empty(size * size, dtype=np.int64)
    nc = 0
    t = 0
    for m in range(1, size):
        start = t
        for h in range(size):
            if read[h, m] and base[h, m] != -np.inf:
                heads[t] = h
                t += 1
        if t > start:
            cols[nc] = m
            col_start[nc] = start
            nc += 1
    col_start[nc] = t
    return cols[:nc], col_start[:nc + 1], heads[:t]


@njit(cache=True)
def beliefs_to_marginals(bel):
    """Arc marginals σ(B): float64 ``(n+1, n+1)`` probabilities (0 where B = -inf)."""
    size = bel.shape[0]
    out = np.empty((size, size))
    for h in range(size):
        for m in range(size):
            b = bel[h, m]
            if b >= 0.0:
                out[h, m] = 1.0 / (1.0 + np.exp(-b))
            else:
                e = np.exp(b)
                out[h, m] = e / (1.0 + e)
    return out


@njit(cache=True)
def bp_factor_beliefs(bel, pairs, active, msg_a, msg_b, cross, seq):
    """Factor beliefs after `bp_engine` (same arrays): (pair_prob, expected_crossings, seq_prob).

    ``pair_prob``: float64 ``[K]``, P_F(both arcs) of every pairwise factor (0 if not active);
    ``expected_crossings``: float64 ``(n+1, n+1)`` at [m, l] per active NOCROSS group (zeros when
    there is no NOCROSS); ``seq_prob``: float64 aligned with ``seq.w``, the expected count of every
    CHILDSEQ transition. These are the expected feature counts training needs (docs/design.md §4).
    """
    pair_a, pair_b, pair_w = pairs
    cross_w, cross_active, cross_mode, cross_msg = cross.w, cross.active, cross.mode, cross.msg
    size = bel.shape[0]
    n_pairs = pair_a.shape[0]
    pair_ew = np.empty(n_pairs)
    for j in range(active.shape[0]):
        pair_ew[active[j]] = pair_odds(pair_w[active[j]])
    pair_prob = pair_beliefs(bel.reshape(size * size), pair_a, pair_b, pair_ew, active, msg_a,
                             msg_b)
    if cross_msg.shape[0] > 0:
        crossings = nocross_expected_crossings(bel, cross_w, cross_active, cross_mode, cross_msg)
    else:
        crossings = np.zeros((size, size))
    return pair_prob, crossings, childseq_beliefs(bel, seq)


@njit(cache=True)
def first_tree_messages(link, first_mu, options):
    """What TREE sends in BP's first iteration from zero messages, when its input is the LINK
    scores ``link`` alone: the messages of their first-order marginals ``first_mu`` (float64
    ``(n+1, n+1)``, `tree.tree_marginals` of ``link``, as pruning computed them; shape (0, 0):
    not known), so that BP need not run the same O(n³) propagation again. float64 ``(n+1, n+1)``
    log-odds, or shape (0, 0) when not known or the constraint is not TREE (`bp_engine_continue`'s
    ``first_global``)."""
    n1 = link.shape[0]
    if first_mu.shape[0] != n1 or options.constraint != TREE or options.projective:
        return np.empty((0, 0))
    out = np.zeros((n1, n1))
    messages_from_marginals(base_scores(link, out, TREE), first_mu, min(options.clip, MAX_CLIP),
                            out)
    return out


@njit(cache=True)
def bp_full_graph(link, pairs, cross_w, use_cross, cross_mode, seq, options, first_mu):
    """`bp_engine` from zero messages on a whole sentence graph: every pairwise factor active, the
    CHILDSEQ factors of ``seq`` (messages zeroed) and, with ``use_cross``, every NOCROSS group m < l (``cross_w`` float64 ``(n+1, n+1)``, any shape
    without NOCROSS). ``first_mu``: float64 ``(n+1, n+1)`` the first-order marginals of
    ``link`` (as pruning computed them) or shape (0, 0), for `first_tree_messages`. Returns
    (beliefs, active, msg_a, msg_b, cross, global_msg): the beliefs (log-odds) and the final engine
    state, which `bp_factor_beliefs` reads (``cross`` a `CrossFactors`, its ``w`` zeros without
    NOCROSS)."""
    n1 = link.shape[0]
    K = pairs.a.shape[0]
    active = np.arange(K)
    msg_a = np.zeros(K)
    msg_b = np.zeros(K)
    cross_active = np.zeros((n1, n1), dtype=np.bool_)
    if use_cross:
        for m in range(1, n1):
            for l in range(m + 1, n1):
                cross_active[m, l] = True
        cross_msg = np.zeros((n1, n1, n1))
        cw = cross_w
    else:
        cross_msg = np.zeros((0, 0, 0))
        cw = np.zeros((n1, n1))
    global_msg = np.zeros((n1, n1))
    cross = CrossFactors(cw, cross_active, cross_mode, cross_msg, np.zeros((0, 0), dtype=np.bool_))
    seq.msg[:] = 0.0
    bel, _, _, _ = bp_engine_continue(link, pairs, active, msg_a, msg_b, cross, seq, global_msg,
                                      options, first_tree_messages(link, first_mu, options))
    return bel, active, msg_a, msg_b, cross, global_msg
