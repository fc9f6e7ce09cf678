"""CHILDSEQ factors: one head automaton per head and side (SE08 §3 and Table 1; Eisner & Satta
1999; docs/design.md §8).

A factor covers the arcs from head h to its candidate children on one side, listed outward from h
(a *segment*; position 1 is the candidate nearest to h). For the present children at positions
j_1 < ... < j_r its value is π(#, j_1)·π(j_1, j_2)···π(j_r, #); with no child present it is 1 (a
constant per factor changes no probability, so the empty sequence needs no weight of its own: a
"first child" feature conjoined with the head's tag and side carries the same information).

A segment's log-potentials form a (c+1, c+1) matrix W, row-major in ``w``, index 0 = # and 1..c the
positions: W[0, j] first child j, W[j, k] (j < k) adjacent children j, k, W[j, 0] last child j
(W[0, 0] and W[j, k] with j >= k are unused).

Messages are exact, by forward-backward over the automaton in log space (docs/design.md §8), with
α(j) = o_j·[W(0,j) + Σ_{k<j} α(k) W(k,j)], β(j) = W(j,0) + Σ_{l>j} W(j,l) o_l β(l), o_j = e^{q_j}:
the message to j is log(α(j)β(j)/o_j) − log Z_¬j, where Z_¬j, the total of the sequences without j,
sums the "jumps" J(k, l) = α(k)·W(k,l)·o_l β(l) over k < j < l (k = # with α(#) = 1, l = # with
o β = 1, the empty sequence J(#, #) = 1 skipping everything): no subtraction, so a belief near 1
loses nothing. The expected number of times a transition fires (the factor's belief, training's
expected feature count) is J(k, l)/Z. O(c²) per segment.
"""
from typing import NamedTuple

import numpy as np

from bpparse.jit import LEAF, njit
from bpparse.kernels.logmath import logaddexp


class ChildSeqFactors(NamedTuple):
    """A sentence's CHILDSEQ factors, one per segment s (a head and side with candidates):
    ``head`` int64 ``[S]``; ``start`` int64 ``[S+1]``: segment s has the children
    ``child[start[s]:start[s+1]]`` (outward from the head); ``w_start`` int64 ``[S+1]``: its
    (c+1, c+1) log-potential matrix is ``w[w_start[s]:w_start[s+1]]`` (float64); ``msg`` float64
    ``[C]``: the factor's log-odds message to arc (head, child) (updated by BP)."""

    head: np.ndarray
    start: np.ndarray
    child: np.ndarray
    w_start: np.ndarray
    w: np.ndarray
    msg: np.ndarray


@njit(cache=True)
def childseq_segments(keep, single_root):
    """Segments of the CHILDSEQ factors over the arcs in ``keep`` (bool ``(n+1, n+1)``
    [head, child]; the diagonal and column 0 ignored): per head its left candidates (h-1 down to 1)
    then its right ones (h+1 up to n); heads without candidates on a side have no factor there.
    With ``single_root`` ROOT has none (its one child has no siblings; start and stop transitions
    would only repeat the LINK score). Returns (head, start, child, w_start)."""
    size = keep.shape[0]
    head = np.empty(2 * size, np.int64)
    start = np.empty(2 * size + 1, np.int64)
    w_start = np.empty(2 * size + 1, np.int64)
    child = np.empty(size * size, np.int64)
    s = 0
    t = 0
    start[0] = 0
    w_start[0] = 0
    for h in range(1 if single_root else 0, size):
        for side in range(2):
            first = t
            if side == 0:
                for m in range(h - 1, 0, -1):
                    if keep[h, m]:
                        child[t] = m
                        t += 1
            else:
                for m in range(h + 1, size):
                    if keep[h, m]:
                        child[t] = m
                        t += 1
            c = t - first
            if c > 0:
                head[s] = h
                start[s + 1] = t
                w_start[s + 1] = w_start[s] + (c + 1) * (c + 1)
                s += 1
    return head[:s].copy(), start[:s + 1].copy(), child[:t].copy(), w_start[:s + 1].copy()


@njit(cache=True, **LEAF)
def _forward_backward(q, W, c, u, b, ob):
    """Log forward / backward of one segment: ``u[j]`` = log(α(j)/o_j), ``b[j]`` = log β(j),
    ``ob[l]`` = log(o_l β(l)) for positions 1..c (``q[1..c]`` incoming log-odds; ``W`` the flat
    (c+1, c+1) log-potentials). Returns log Z.

    Each log-sum is taken in two passes, its largest term first, then one exp per term and one log
    per sum: exact to rounding for any scores, and a third of the transcendental calls of a running
    logaddexp (CHILDSEQ was most of a childseq model's BP time)."""
    d = c + 1
    for j in range(1, d):
        top = W[j]  # W[0, j]
        for k in range(1, j):
            top = max(top, q[k] + u[k] + W[k * d + j])
        acc = np.exp(W[j] - top)
        for k in range(1, j):
            acc += np.exp(q[k] + u[k] + W[k * d + j] - top)
        u[j] = top + np.log(acc)
    for j in range(c, 0, -1):
        top = W[j * d]  # W[j, 0]
        for l in range(j + 1, d):
            top = max(top, W[j * d + l] + ob[l])
        acc = np.exp(W[j * d] - top)
        for l in range(j + 1, d):
            acc += np.exp(W[j * d + l] + ob[l] - top)
        b[j] = top + np.log(acc)
        ob[j] = q[j] + b[j]
    top = 0.0  # the empty sequence
    for l in range(1, d):
        top = max(top, W[l] + ob[l])
    acc = np.exp(-top)
    for l in range(1, d):
        acc += np.exp(W[l] + ob[l] - top)
    return top + np.log(acc)


@njit(cache=True, inline="always")
def _jump(q, W, c, u, ob, k, l):
    """log J(k, l) for 0 <= k < l <= c+1 (0 and c+1 are #)."""
    d = c + 1
    left = 0.0 if k == 0 else q[k] + u[k]
    if l == d:
        return left + (0.0 if k == 0 else W[k * d])
    return left + W[k * d + l] + ob[l]


@njit(cache=True, **LEAF)
def segment_messages(q, W, c, r, work):
    """Messages ``r[1..c]`` (log-odds) of one CHILDSEQ factor for incoming log-odds ``q[1..c]``;
    ``work`` float64 (4, c+2) scratch. Returns log Z."""
    u, b, ob, skip = work[0], work[1], work[2], work[3]
    log_z = _forward_backward(q, W, c, u, b, ob)
    d = c + 1
    # Z_¬j = Σ_{k<j} Σ_{l>j} J(k, l): for each k a suffix sum over l, added to every j it jumps;
    # summed as exp(log J − M) with M the largest jump (J(#, #) = 1 makes M >= 0), one exp per jump
    top = 0.0
    for k in range(c):
        for l in range(k + 2, d + 1):
            top = max(top, _jump(q, W, c, u, ob, k, l))
    for j in range(1, d):
        skip[j] = 0.0
    for k in range(c):
        acc = 0.0
        for j in range(c, k, -1):
            acc += np.exp(_jump(q, W, c, u, ob, k, j + 1) - top)
            skip[j] += acc
    exact = True
    for j in range(1, d):
        # a sum this far below M may have lost terms to underflow: redo the segment in log space
        exact = exact and skip[j] > 1e-280
        skip[j] = top + np.log(skip[j])
    if not exact:
        for j in range(1, d):
            skip[j] = -np.inf
        for k in range(c):
            acc = -np.inf
            for j in range(c, k, -1):
                acc = logaddexp(acc, _jump(q, W, c, u, ob, k, j + 1))
                skip[j] = logaddexp(skip[j], acc)
    for j in range(1, d):
        r[j] = u[j] + b[j] - skip[j]
    return log_z


@njit(cache=True, **LEAF)
def segment_beliefs(q, W, c, out, work):
    """Expected counts J(k, l)/Z of one segment's transitions into ``out`` (flat (c+1, c+1), same
    layout as W: [k, l] adjacent, [0, l] first, [k, 0] last; 0 elsewhere) for incoming ``q``."""
    u, b, ob = work[0], work[1], work[2]
    log_z = _forward_backward(q, W, c, u, b, ob)
    d = c + 1
    out[:] = 0.0
    for k in range(d):
        for l in range(k + 1, d + 1):
            if k == 0 and l == d:
                continue
            p = np.exp(_jump(q, W, c, u, ob, k, l) - log_z)
            out[k * d + (0 if l == d else l)] = p


@njit(cache=True, **LEAF)
def _segment_q(bel, seq, s, q):
    """Incoming log-odds of segment s's arcs, q[1..c] = B − r; returns c."""
    h = seq.head[s]
    a = seq.start[s]
    c = seq.start[s + 1] - a
    child, msg = seq.child, seq.msg
    for j in range(1, c + 1):
        q[j] = bel[h, child[a + j - 1]] - msg[a + j - 1]
    return c


@njit(cache=True)
def childseq_update(bel, seq, new_bel, damping, clip):
    """One BP update of every CHILDSEQ factor: reads beliefs ``bel`` (log-odds ``(n+1, n+1)``)
    and the factors' previous messages ``seq.msg``, stores r ← (1−α)·r_new + α·r_old (clipped to
    ±``clip``) and adds it to ``new_bel``. Returns the largest |r_new − r_old|."""
    S = seq.head.shape[0]
    cmax = 0
    for s in range(S):
        cmax = max(cmax, seq.start[s + 1] - seq.start[s])
    q = np.empty(cmax + 2)
    r = np.empty(cmax + 2)
    work = np.empty((4, cmax + 2))
    keep = 1.0 - damping
    change = 0.0
    child, msg, w, w_start = seq.child, seq.msg, seq.w, seq.w_start
    for s in range(S):
        c = _segment_q(bel, seq, s, q)
        segment_messages(q, w[w_start[s]:w_start[s + 1]], c, r, work)
        h = seq.head[s]
        a = seq.start[s]
        for j in range(1, c + 1):
            new = min(max(r[j], -clip), clip)
            old = msg[a + j - 1]
            d = abs(new - old)
            change = max(change, d)
            value = keep * new + damping * old
            msg[a + j - 1] = value
            new_bel[h, child[a + j - 1]] += value
    return change


@njit(cache=True)
def childseq_beliefs(bel, seq):
    """Expected transition counts of every CHILDSEQ factor under BP's beliefs ``bel`` (float64,
    aligned with ``seq.w``): the gradient's expected feature counts (docs/design.md §4)."""
    S = seq.head.shape[0]
    cmax = 0
    for s in range(S):
        cmax = max(cmax, seq.start[s + 1] - seq.start[s])
    q = np.empty(cmax + 2)
    work = np.empty((4, cmax + 2))
    out = np.zeros(seq.w.shape[0])
    for s in range(S):
        c = _segment_q(bel, seq, s, q)
        lo, hi = seq.w_start[s], seq.w_start[s + 1]
        segment_beliefs(q, seq.w[lo:hi], c, out[lo:hi], work)
    return out


@njit(cache=True)
def gold_transitions(seq, heads):
    """1.0 at every transition the tree ``heads`` (int64 ``(n+1,)``) takes in each segment (its
    children in the segment, in order), 0 elsewhere: float64 aligned with ``seq.w``. A tree child
    outside the segments (pruned) is skipped as the automaton skips it."""
    out = np.zeros(seq.w.shape[0])
    for s in range(seq.head.shape[0]):
        h = seq.head[s]
        a = seq.start[s]
        c = seq.start[s + 1] - a
        d = c + 1
        base = seq.w_start[s]
        prev = 0
        for j in range(1, d):
            if heads[seq.child[a + j - 1]] == h:
                out[base + prev * d + j] = 1.0
                prev = j
        if prev > 0:
            out[base + prev * d] = 1.0
    return out


@njit(cache=True)
def childseq_from_dense(dense, keep, single_root):
    """`ChildSeqFactors` (zero messages) over the arcs in ``keep`` with log-potentials read from
    ``dense`` float64 ``(n+1, n+1, n+1)`` [h, a, b] (a = h: first child b; b = h: last child a;
    else adjacent children a, b, outward order)."""
    head, start, child, w_start = childseq_segments(keep, single_root)
    seq = ChildSeqFactors(head, start, child, w_start, np.zeros(w_start[-1]),
                          np.zeros(child.shape[0]))
    seq.w[:] = transition_values_at(seq, dense)
    return seq


@njit(cache=True)
def dense_transition_values(seq, values, size):
    """float64 ``(n+1, n+1, n+1)`` [h, a, b] holding per-transition ``values`` (aligned with
    ``seq.w``) in the layout of `childseq_from_dense`; ``size`` = n+1."""
    out = np.zeros((size, size, size))
    for s in range(seq.head.shape[0]):
        h = seq.head[s]
        a = seq.start[s]
        c = seq.start[s + 1] - a
        d = c + 1
        base = seq.w_start[s]
        for j in range(1, d):
            x = seq.child[a + j - 1]
            out[h, h, x] = values[base + j]
            out[h, x, h] = values[base + j * d]
            for k in range(j + 1, d):
                out[h, x, seq.child[a + k - 1]] = values[base + j * d + k]
    return out


@njit(cache=True)
def transition_values_at(seq, dense):
    """The inverse of `dense_transition_values`: float64 aligned with ``seq.w`` read from
    ``dense`` ``(n+1, n+1, n+1)`` [h, a, b] (0 at unused entries)."""
    out = np.zeros(seq.w.shape[0])
    for s in range(seq.head.shape[0]):
        h = seq.head[s]
        a = seq.start[s]
        d = seq.start[s + 1] - a + 1
        base = seq.w_start[s]
        for j in range(1, d):
            x = seq.child[a + j - 1]
            out[base + j] = dense[h, h, x]
            out[base + j * d] = dense[h, x, h]
            for k in range(j + 1, d):
                out[base + j * d + k] = dense[h, x, seq.child[a + k - 1]]
    return out


@njit(cache=True)
def no_childseq():
    """An empty `ChildSeqFactors` (a graph without CHILDSEQ)."""
    z = np.zeros(1, np.int64)
    return ChildSeqFactors(np.zeros(0, np.int64), z, np.zeros(0, np.int64), z, np.zeros(0),
                           np.zeros(0))
