"""Exact second-order projective inference: arcs plus grandparents (GRAND).

The grandchild model of Koo & Collins (2010, "model 0"; Carreras 2007 without siblings), for the
exact DP of Smith & Eisner (2008) §8.4 (LINK + GRAND under PTREE). A projective tree scores
Σ_m arc[heads[m], m] + Σ_{m: h = heads[m] != 0} grand[heads[h], h, m]. Inputs are log-potentials:
``arc`` float64 (n+1, n+1) [head, child] (-inf forbids an arc; diagonal and column 0 ignored) and
``grand`` float64 (n+1, n+1, n+1) [g, h, m], added when arcs g -> h and h -> m are both in the tree
(h >= 1, m >= 1, g, h, m distinct; other entries are never read).

Eisner's items over spans s < t, each also indexed by the head's own head g, which lies outside
[s, t]; one chart ``ch[kind, g, s, t]``, float64 (4, n+1, n+1, n+1):
  CR[g, s, t]  s (head g) with its right side finished up to t; CR[g, s, s] = 0
  CL[g, s, t]  t (head g) with its left side finished down to s; CL[g, t, t] = 0
  IR[g, s, t]  arc s -> t, s's head g, t the outermost right child of s so far
  IL[g, s, t]  arc t -> s, t's head g, s the outermost left child of t so far
ROOT has no head: its items (CR and IR with s = 0) sit in the slot g = 0, unused otherwise (g is
never inside the span); ROOT is never a child, so no IL or CL starts at 0. In the log semiring
(⊕ = log-sum-exp) or the max semiring (⊕ = max):
  IR[g, s, t] = arc[s, t] + grand[g, s, t] + ⊕_{s<=r<t} CR[g, s, r] + CL[s, r+1, t]   (no grand if s = 0)
  IL[g, s, t] = arc[t, s] + grand[g, t, s] + ⊕_{s<=r<t} CR[t, s, r] + CL[g, r+1, t]
  CR[g, s, t] = ⊕_{s<p<=t} IR[g, s, p] + CR[s, p, t]
  CL[g, s, t] = ⊕_{s<=p<t} CL[t, s, p] + IL[g, p, t]
(r: where the head's side stops and the child's subtree starts; p: the head's last child on that
side, whose own items carry the head as their g). The top item is CR[0, 0, n]. Single root:
IR[0, 0, c] keeps only r = 0 (c is ROOT's first child, and CR[0, 0, n] makes it the last). Every
tree has exactly one derivation, and IR[g, h, m] / IL[g, m, h] is used exactly when the tree has
arcs g -> h -> m (h >= 1).

Cost: about 2n³/3 items [kind, g, s, t], each with t - s derivations: about n⁴/3 terms per pass
(inside, then outside or the argmax re-derivation), so O(n⁴) time; O(n³) memory: the chart and its
adjoints, 4 (n+1)³ float64 each, besides ``grand`` and ``grand_marg``.

The sum runs in log space (a two-pass log-sum-exp per item), so any finite scores work (|scores| of
1e4 included). Marginals are ∂ log Z / ∂ scores: the outside pass is the reverse mode of the inside
pass; its adjoints ∂ log Z / ∂ log item are the probabilities that an item is used (<= 1: nothing
overflows). Arc marginals sum the adjoints of IR/IL over g; the grandparent pair marginal
P(g -> h and h -> m) is the adjoint of IR[g, h, m] (h < m) or IL[g, m, h] (m < h). Decoding re-derives
each item's argmax on the way down (no backpointers). The recurrences are written once, as data, in
`_item` (as in sibling_dp.py); the semiring is a runtime flag, passed as a non-literal ``np.bool_``
so that numba compiles each function once (a literal True/False argument would make a
specialisation each).
"""
import numpy as np

from bpparse.jit import njit
from bpparse.kernels.logmath import max_or_logsumexp

CR = 0
CL = 1
IR = 2
IL = 3
_ORDER = (IR, IL, CR, CL)  # within a span: CR[g, s, t] needs IR[g, s, t], CL[g, s, t] needs IL[g, s, t]
_REVERSE = (CL, CR, IL, IR)


@njit(cache=True)
def _exists(kind, g, s, t):
    """True when [kind, g, s, t] (s < t) is an item: g outside [s, t], or g = 0 for ROOT's items."""
    if s == 0:
        return g == 0 and (kind == CR or kind == IR)
    return g < s or g > t


@njit(cache=True)
def _item(kind, g, s, t, single_root):
    """The derivations of item (kind, g, s, t), s < t, as (ka, ga, kb, gb, db, p0, p1): for
    p0 <= p < p1, ch[ka, ga, s, p] + ch[kb, gb, p + db, t]. IR and IL add `_own`."""
    if kind == IR:  # p = r: the end of s's right side before t's subtree
        p1 = s + 1 if s == 0 and single_root else t  # ROOT's single child has no siblings
        return CR, g, CL, s, 1, s, p1
    if kind == IL:  # p = r: the end of s's subtree before t's left side
        return CR, t, CL, g, 1, s, t
    if kind == CR:  # p: the last right child of s
        return IR, g, CR, s, 0, s + 1, t + 1
    return CL, t, IL, g, 0, s, t  # CL; p: the last left child of t


@njit(cache=True)
def _own(kind, g, s, t, arc, grand):
    """The score carried by every derivation of item (kind, g, s, t): arc + grandparent for IR, IL;
    0 otherwise."""
    if kind == IR:
        if s == 0:
            return arc[s, t]
        return arc[s, t] + grand[g, s, t]
    if kind == IL:
        return arc[t, s] + grand[g, t, s]
    return 0.0


@njit(cache=True)
def _values(kind, g, s, t, single_root, ch, buf):
    """Write the log-values of item (kind, g, s, t)'s derivations, without `_own`, into buf in
    `_item`'s order; returns their number (>= 1)."""
    ka, ga, kb, gb, db, p0, p1 = _item(kind, g, s, t, single_root)
    for p in range(p0, p1):
        buf[p - p0] = ch[ka, ga, s, p] + ch[kb, gb, p + db, t]
    return p1 - p0


@njit(cache=True)
def _inside(arc, grand, single_root, use_max, ch, buf):
    """Fill ch bottom-up; returns the top item CR[0, 0, n]: log Z, or the best score when use_max.

    ch: float64 (4, n+1, n+1, n+1), overwritten (-inf where no item); buf: float64 (n+1,) scratch.
    """
    n = arc.shape[0] - 1
    ch.fill(-np.inf)
    for g in range(n + 1):
        for s in range(n + 1):
            ch[CR, g, s, s] = 0.0
            ch[CL, g, s, s] = 0.0
    for width in range(1, n + 1):
        for s in range(n + 1 - width):
            t = s + width
            for kind in _ORDER:
                for g in range(n + 1):
                    if _exists(kind, g, s, t):
                        k = _values(kind, g, s, t, single_root, ch, buf)
                        ch[kind, g, s, t] = (max_or_logsumexp(buf, k, use_max)[0]
                                             + _own(kind, g, s, t, arc, grand))
    return ch[CR, 0, 0, n]


@njit(cache=True)
def _outside(arc, grand, single_root, ch, buf, mu, grand_marg):
    """Reverse pass of the log-space _inside (log Z finite): adds ∂ log Z / ∂ arc into mu and writes
    ∂ log Z / ∂ grand into grand_marg."""
    n = arc.shape[0] - 1
    adj = np.zeros(ch.shape)  # ∂ log Z / ∂ log item: the probability that the tree uses the item
    adj[CR, 0, 0, n] = 1.0
    for width in range(n, 0, -1):
        for s in range(n + 1 - width):
            t = s + width
            for kind in _REVERSE:
                for g in range(n + 1):
                    a = adj[kind, g, s, t]
                    v = ch[kind, g, s, t]
                    if a == 0.0 or v == -np.inf:
                        continue
                    if kind == IR:
                        mu[s, t] += a
                        if s > 0:
                            grand_marg[g, s, t] = a
                    elif kind == IL:
                        mu[t, s] += a
                        grand_marg[g, t, s] = a
                    base = v - _own(kind, g, s, t, arc, grand)
                    k = _values(kind, g, s, t, single_root, ch, buf)
                    ka, ga, kb, gb, db, p0, _ = _item(kind, g, s, t, single_root)
                    for j in range(k):  # each derivation's share of a
                        if buf[j] > -np.inf:
                            share = a * np.exp(buf[j] - base)
                            adj[ka, ga, s, p0 + j] += share
                            adj[kb, gb, p0 + j + db, t] += share


@njit(cache=True)
def grand_inside_outside(arc, grand, single_root):
    """Arc marginals, log Z and grandparent pair marginals over projective trees.

    arc: float64 (n+1, n+1), grand: float64 (n+1, n+1, n+1): log-potentials (module docstring);
    n >= 1. single_root: bool, True when ROOT must have exactly one child.
    Returns (mu, log_z, grand_marg): mu float64 (n+1, n+1), arc marginals [head, child], 0 where no
    tree has the arc, each column m >= 1 summing to 1; log_z float; grand_marg float64 (n+1, n+1, n+1),
    [g, h, m] = P(arcs g -> h and h -> m both in the tree) for h >= 1 (= ∂ log Z / ∂ grand), 0 for
    h = 0 and repeated indices. When no projective tree is possible, log_z = -inf and both arrays
    are zero.
    """
    n = arc.shape[0] - 1
    ch = np.empty((4, n + 1, n + 1, n + 1))
    buf = np.empty(n + 1)
    mu = np.zeros((n + 1, n + 1))
    grand_marg = np.zeros((n + 1, n + 1, n + 1))
    log_z = _inside(arc, grand, single_root, np.bool_(False), ch, buf)
    if log_z > -np.inf:
        _outside(arc, grand, single_root, ch, buf, mu, grand_marg)
    return mu, log_z, grand_marg


@njit(cache=True)
def grand_decode(arc, grand, single_root):
    """The highest-scoring projective tree under arc + grandparent scores, and its score.

    Same inputs as grand_inside_outside. Returns (heads, score): heads int64 (n+1,), heads[0] = -1;
    score float (-inf when every projective tree is forbidden; a projective tree is still returned).
    Ties go to the first derivation in `_item`'s order, so the result is deterministic.
    """
    n = arc.shape[0] - 1
    ch = np.empty((4, n + 1, n + 1, n + 1))
    buf = np.empty(n + 1)
    use_max = np.bool_(True)
    score = _inside(arc, grand, single_root, use_max, ch, buf)
    heads = np.empty(n + 1, dtype=np.int64)
    heads[0] = -1
    stack = np.empty((4 * n + 4, 4), dtype=np.int64)  # <= 2n + 1 pending: a derivation has 2n items with s < t
    stack[0, 0], stack[0, 1], stack[0, 2], stack[0, 3] = CR, 0, 0, n
    top = 1
    while top > 0:
        top -= 1
        kind, g, s, t = stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3]
        if s == t:
            continue
        if kind == IR:
            heads[t] = s
        elif kind == IL:
            heads[s] = t
        # the same arithmetic as the inside pass, so the same argmax
        j = max_or_logsumexp(buf, _values(kind, g, s, t, single_root, ch, buf), use_max)[1]
        ka, ga, kb, gb, db, p0, _ = _item(kind, g, s, t, single_root)
        p = p0 + j
        stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3] = ka, ga, s, p
        stack[top + 1, 0], stack[top + 1, 1], stack[top + 1, 2], stack[top + 1, 3] = kb, gb, p + db, t
        top += 2
    return heads, score
