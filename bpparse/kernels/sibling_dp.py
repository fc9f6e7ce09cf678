"""Exact second-order projective inference: arcs plus head automata (adjacent siblings, CHILDSEQ).

Eisner (1996) and McDonald & Pereira (2006) with sibling items (docs/design.md §8). A projective
tree scores Σ_m arc[heads[m], m] plus, for every head h and side with children c_1, ..., c_r listed
outward from h, seq[h, h, c_1] + seq[h, c_1, c_2] + ... + seq[h, c_r, h] (a = h: start, b = h:
stop; a side without children adds 0; ROOT has only a right side). Inputs are log-potentials:
``arc`` float64 (n+1, n+1) [head, child] (-inf forbids an arc; diagonal and column 0 ignored) and
``seq`` float64 (n+1, n+1, n+1) [h, a, b].

Items over spans s < t, in one chart ``ch[kind, s, t]``, float64 (5, n+1, n+1):
  CR[s, t]  s with its finished right side (no child past t); CR[s, s] = 0
  CL[s, t]  t with its finished left side; CL[t, t] = 0
  IR[s, t]  arc s -> t, t the outermost right child of s so far
  IL[s, t]  arc t -> s, s the outermost left child of t so far
  SB[s, t]  adjacent siblings s < t (of a head outside [s, t]): s's right side, then t's left side
In the log semiring (⊕ = log-sum-exp) or the max semiring (⊕ = max):
  SB[s, t] = ⊕_{s<=p<t} CR[s, p] + CL[p+1, t]
  IR[s, t] = arc[s, t] + (CL[s+1, t] + seq[s, s, t]  ⊕  ⊕_{s<p<t} IR[s, p] + SB[p, t] + seq[s, p, t])
  IL[s, t] = arc[t, s] + (CR[s, t-1] + seq[t, t, s]  ⊕  ⊕_{s<p<t} SB[s, p] + IL[p, t] + seq[t, p, s])
  CR[s, t] = ⊕_{s<p<=t} IR[s, p] + CR[p, t] + seq[s, p, s]
  CL[s, t] = ⊕_{s<=p<t} CL[s, p] + IL[p, t] + seq[t, p, t]
(p: split point, previous sibling, or last child). The top item is CR[0, n]; ROOT is never a child,
so no IL, CL or SB starts at 0. Single root: IR[0, c] keeps only its first-child derivation, so
ROOT's one child c adds seq[0, 0, c] + seq[0, c, 0]. Every tree has exactly one derivation.
O(n³) time, O(n²) memory besides ``seq`` and its expected counts.

The sum runs in log space (a two-pass log-sum-exp per item), so any finite scores work (|scores| of
1e4 at n = 250 included). Marginals and expected transition counts are ∂ log Z / ∂ scores: the
outside pass is the reverse mode of the inside pass; its adjoints ∂ log Z / ∂ log item are the
probabilities that an item is used (<= 1: nothing overflows). Decoding re-derives each item's argmax
on the way down (no backpointers). The recurrences are written once, as data, in `_item`; the
semiring is a runtime flag, passed as a non-literal ``np.bool_`` so that numba compiles each
function once (a literal True/False argument would make a specialisation each).
"""
import numpy as np

from bpparse.jit import njit
from bpparse.kernels.logmath import max_or_logsumexp

CR = 0
CL = 1
IR = 2
IL = 3
SB = 4
_ORDER = (SB, IR, IL, CR, CL)  # within a span: CR[s, t] needs IR[s, t], CL[s, t] needs IL[s, t]
_REVERSE = (CL, CR, IL, IR, SB)


@njit(cache=True)
def _item(kind, s, t, single_root):
    """The derivations of item (kind, s, t), s < t, as (ka, kb, db, h, b, p0, p1, kf, sf, tf).

    For p0 <= p < p1: ch[ka, s, p] + ch[kb, p + db, t] + seq[h, p, b] (h = -1: no transition); when
    kf >= 0, also the first-child derivation ch[kf, sf, tf] + seq[h, h, b]. IR and IL add their arc.
    """
    if s == 0 and kind != CR and kind != IR:
        return 0, 0, 0, -1, 0, 0, 0, -1, 0, 0  # ROOT is never a child: no derivation
    if kind == SB:  # p: the end of s's subtree
        return CR, CL, 1, -1, 0, s, t, -1, 0, 0
    if kind == IR:  # p: the previous right child of s
        p1 = s + 1 if s == 0 and single_root else t  # ROOT's single child has no siblings
        return IR, SB, 0, s, t, s + 1, p1, CL, s + 1, t
    if kind == IL:  # p: the previous left child of t
        return SB, IL, 0, t, s, s + 1, t, CR, s, t - 1
    if kind == CR:  # p: the last right child of s
        return IR, CR, 0, s, s, s + 1, t + 1, -1, 0, 0
    return CL, IL, 0, t, t, s, t, -1, 0, 0  # CL; p: the last left child of t


@njit(cache=True)
def _arc(kind, s, t, arc):
    """The arc score carried by every derivation of item (kind, s, t): IR, IL; 0 otherwise."""
    if kind == IR:
        return arc[s, t]
    if kind == IL:
        return arc[t, s]
    return 0.0


@njit(cache=True)
def _values(kind, s, t, single_root, seq, ch, buf):
    """Write the log-values of item (kind, s, t)'s derivations, without its arc, into buf in
    `_item`'s order (split points, then the first-child derivation); returns their number."""
    ka, kb, db, h, b, p0, p1, kf, sf, tf = _item(kind, s, t, single_root)
    for p in range(p0, p1):
        buf[p - p0] = ch[ka, s, p] + ch[kb, p + db, t]
    if h >= 0:
        for p in range(p0, p1):
            buf[p - p0] += seq[h, p, b]
    k = p1 - p0
    if kf >= 0:
        buf[k] = ch[kf, sf, tf] + seq[h, h, b]
        k += 1
    return k


@njit(cache=True)
def _inside(arc, seq, single_root, use_max, ch, buf):
    """Fill ch bottom-up; returns the top item CR[0, n]: log Z, or the best score when use_max.

    ch: float64 (5, n+1, n+1), overwritten; buf: float64 (n+1,) scratch.
    """
    n = arc.shape[0] - 1
    ch.fill(-np.inf)
    for s in range(n + 1):
        ch[CR, s, s] = 0.0
        ch[CL, s, s] = 0.0
    for width in range(1, n + 1):
        for s in range(n + 1 - width):
            t = s + width
            for kind in _ORDER:
                k = _values(kind, s, t, single_root, seq, ch, buf)
                if k > 0:
                    ch[kind, s, t] = max_or_logsumexp(buf, k, use_max)[0] + _arc(kind, s, t, arc)
    return ch[CR, 0, n]


@njit(cache=True)
def _outside(arc, seq, single_root, ch, buf, mu, seq_marg):
    """Reverse pass of the log-space _inside (log Z finite): writes ∂ log Z / ∂ arc into mu and
    adds ∂ log Z / ∂ seq into seq_marg."""
    n = arc.shape[0] - 1
    grad = np.zeros(ch.shape)  # ∂ log Z / ∂ log item: the probability that the tree uses the item
    grad[CR, 0, n] = 1.0
    for width in range(n, 0, -1):
        for s in range(n + 1 - width):
            t = s + width
            for kind in _REVERSE:
                g = grad[kind, s, t]
                v = ch[kind, s, t]
                if g == 0.0 or v == -np.inf:
                    continue
                if kind == IR:
                    mu[s, t] = g
                elif kind == IL:
                    mu[t, s] = g
                base = v - _arc(kind, s, t, arc)
                k = _values(kind, s, t, single_root, seq, ch, buf)
                for j in range(k):  # each derivation's share of g
                    buf[j] = g * np.exp(buf[j] - base) if buf[j] > -np.inf else 0.0
                ka, kb, db, h, b, p0, p1, kf, sf, tf = _item(kind, s, t, single_root)
                for p in range(p0, p1):
                    grad[ka, s, p] += buf[p - p0]
                    grad[kb, p + db, t] += buf[p - p0]
                if h >= 0:
                    for p in range(p0, p1):
                        seq_marg[h, p, b] += buf[p - p0]
                if kf >= 0:
                    grad[kf, sf, tf] += buf[k - 1]
                    seq_marg[h, h, b] += buf[k - 1]


@njit(cache=True)
def sibling_inside_outside(arc, seq, single_root):
    """Arc marginals, log Z and expected head-automaton transition counts over projective trees.

    arc: float64 (n+1, n+1), seq: float64 (n+1, n+1, n+1): log-potentials (module docstring); n >= 1.
    single_root: bool, True when ROOT must have exactly one child.
    Returns (mu, log_z, seq_marg): mu float64 (n+1, n+1), arc marginals [head, child], 0 where no
    tree has the arc, each column m >= 1 summing to 1; log_z float; seq_marg float64 (n+1, n+1, n+1),
    the expected number of times transition [h, a, b] fires (= ∂ log Z / ∂ seq). When no projective
    tree is possible, log_z = -inf and both arrays are zero.
    """
    n = arc.shape[0] - 1
    ch = np.empty((5, n + 1, n + 1))
    buf = np.empty(n + 1)
    mu = np.zeros((n + 1, n + 1))
    seq_marg = np.zeros(seq.shape)
    log_z = _inside(arc, seq, single_root, np.bool_(False), ch, buf)
    if log_z > -np.inf:
        _outside(arc, seq, single_root, ch, buf, mu, seq_marg)
    return mu, log_z, seq_marg


@njit(cache=True)
def sibling_decode(arc, seq, single_root):
    """The highest-scoring projective tree under arc + head-automaton scores, and its score.

    Same inputs as sibling_inside_outside. Returns (heads, score): heads int64 (n+1,), heads[0] = -1;
    score float (-inf when every projective tree is forbidden; a projective tree is still returned).
    Ties go to the first derivation in `_item`'s order, so the result is deterministic.
    """
    n = arc.shape[0] - 1
    ch = np.empty((5, n + 1, n + 1))
    buf = np.empty(n + 1)
    use_max = np.bool_(True)
    score = _inside(arc, seq, single_root, use_max, ch, buf)
    heads = np.empty(n + 1, dtype=np.int64)
    heads[0] = -1
    stack = np.empty((4 * n + 4, 3), dtype=np.int64)  # a derivation has <= 4n + 1 items with s < t
    stack[0, 0], stack[0, 1], stack[0, 2] = CR, 0, n
    top = 1
    while top > 0:
        top -= 1
        kind, s, t = stack[top, 0], stack[top, 1], stack[top, 2]
        if s == t:
            continue
        if kind == IR:
            heads[t] = s
        elif kind == IL:
            heads[s] = t
        # the same arithmetic as the inside pass, so the same argmax
        j = max_or_logsumexp(buf, _values(kind, s, t, single_root, seq, ch, buf), use_max)[1]
        ka, kb, db, _, _, p0, p1, kf, sf, tf = _item(kind, s, t, single_root)
        p = p0 + j
        if p < p1:
            stack[top, 0], stack[top, 1], stack[top, 2] = ka, s, p
            stack[top + 1, 0], stack[top + 1, 1], stack[top + 1, 2] = kb, p + db, t
            top += 2
        else:
            stack[top, 0], stack[top, 1], stack[top, 2] = kf, sf, tf
            top += 1
    return heads, score
