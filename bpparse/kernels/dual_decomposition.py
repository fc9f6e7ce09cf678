"""MAP trees of second-order models by dual decomposition (Rush et al. 2010; Koo et al. 2010;
docs/design.md §4).

The model scores a tree y (y[a] = 1 for its arcs a = h*(n+1) + m) as

    score(y) = Σ_a s[a] y[a] + Σ_k w_k y[a_k] y[b_k] + Σ_segments automaton(y),

LINK log-odds s, pairwise GRAND / SIB log-potentials w_k (`PairFactors` order: GRAND first) and the
CHILDSEQ head automata of `bpparse.kernels.factors.childseq`. It is split into subproblems that
are each solved exactly, each with its own copy of the arcs it reads:

- TREE: y = the maximum spanning tree (Chu-Liu-Edmonds; Eisner under PTREE) under s + u, u the sum
  of the multipliers of every copy of the arc;
- HEAD h (Koo et al. 2010, grand-sibling head automata): h's own head g (any g with a GRAND factor
  on g -> h, or "another head": one without, or none for ROOT) and its child sequences on both
  sides, by one Viterbi pass per side and per g over the automaton (transitions W of the CHILDSEQ
  segment, 0 without CHILDSEQ) with per-child scores GRAND(g, h, m) − u_out[h, m], minus u_in[g, h];
- SIB k: the two arcs of an all-pairs SIB factor, four assignments, w_k·z_a·z_b − u_a z_a − u_b z_b.

For any multipliers u the sum of the subproblems' maxima, the dual L(u), bounds every tree's score
from above; when all copies agree with y, y is the exact MAP tree (the certificate: L(u) = score(y)).
The multipliers move by one of three rules:
- AD3 (Martins et al. 2015; the default): alternating directions on the augmented Lagrangian. Each
  factor solves max_q θ·q + λ·q − (η/2)‖q − p‖² over its marginal polytope (an active set of
  configurations, grown by the factor's own MAP oracle — the tree decoder, the head automata — and
  a closed form for SIB pairs), p is the factors' mean, λ ← λ − η(q − p); η is balanced between
  primal and dual residuals. Certifies far more sentences within 50 iterations than subgradient
  steps (docs/experiments.md), at about 3x the cost of an iteration;
- RUSH: subgradient steps u_c ← u_c − α_t (y[a] − z_c), α_t = c / (1 + the number of iterations at
  which L went up) (Rush et al. Fig. 4, Appendix B);
- POLYAK: the same steps with α_t = θ (L(u_t) − best score) / ‖y − z‖² (the best tree as target).
After every update L(u) is evaluated exactly; the tree is certified when all subproblems agree, or
when L(u) is within GAP of its score (no tree can score more). Every y (and with AD3 the tree nearest
p) is a tree, so when no certificate comes the best-scoring tree seen (or given as a candidate, e.g.
BP's MBR tree) is returned. NOCROSS and the NAND pairs of weaker constraints are not decomposed
(callers refuse them).
"""
from typing import NamedTuple

import numpy as np

from bpparse.jit import njit
from bpparse.kernels.cle import mst_decode
from bpparse.kernels.eisner import eisner_decode
from bpparse.kernels.factors.childseq import childseq_segments

RUSH = 0
POLYAK = 1
AD3 = 2
# name -> (rule, its constant: c, θ, or AD3's initial penalty η; η = 2 certified most on EWT dev)
RULES = {"ad3": (AD3, 2.0), "polyak": (POLYAK, 1.5), "rush": (RUSH, 1.0)}
MAX_ACTIVE = 24  # configurations an AD3 factor keeps in its active set
MAX_ORACLE = 1  # oracle calls per factor and AD3 iteration (the active set is warm-started)
GAP = 1e-6  # a dual bound within GAP·max(1, |score|) of a tree's score certifies it


class DDResult(NamedTuple):
    """What `dual_decompose` returns: ``heads`` int64 (n+1,) (heads[0] = -1), the certified MAP tree
    or the best-scoring tree found; ``certified``: every subproblem agreed with it; ``iterations``
    run; ``dual`` float64 (iterations,) L(u) at each, an upper bound on every tree's score;
    ``score``: the model score of ``heads``."""

    heads: np.ndarray
    certified: bool
    iterations: int
    dual: np.ndarray
    score: float


@njit(cache=True, inline="always")
def segment_viterbi(v, W, base, c, best, back, chosen):
    """Best child sequence of one head automaton: max over j_1 < ... < j_r of
    W[0, j_1] + v[j_1] + W[j_1, j_2] + ... + v[j_r] + W[j_r, 0] (0 for the empty sequence).

    ``v`` float64 [c+1] per-position scores at 1..c; ``W[base:base + (c+1)²]`` the segment's flat
    log-potentials (layout of `ChildSeqFactors`); ``best``, ``back`` scratch [c+1]; ``chosen`` bool
    [c+1] receives the positions taken. Returns the maximum. O(c²)."""
    d = c + 1
    for j in range(1, d):
        top = W[base + j]
        arg = 0
        for k in range(1, j):
            x = best[k] + W[base + k * d + j]
            if x > top:
                top = x
                arg = k
        best[j] = v[j] + top
        back[j] = arg
    top = 0.0
    last = 0
    for j in range(1, d):
        x = best[j] + W[base + j * d]
        if x > top:
            top = x
            last = j
    chosen[:d] = False
    while last > 0:
        chosen[last] = True
        last = back[last]
    return top


@njit(cache=True)
def model_tree_score(heads, arc, pair_a, pair_b, pair_w, seq):
    """Score of the tree ``heads`` (int64 (n+1,)) under LINK log-odds ``arc`` (n+1, n+1), the
    pairwise factors (pair_a, pair_b arc indices, log-potentials pair_w) and the CHILDSEQ factors
    ``seq`` (children outside a segment are skipped, as the automaton skips them)."""
    n1 = arc.shape[0]
    total = 0.0
    for m in range(1, n1):
        total += arc[heads[m], m]
    for k in range(pair_a.shape[0]):
        a = pair_a[k]
        b = pair_b[k]
        if heads[a % n1] == a // n1 and heads[b % n1] == b // n1:
            total += pair_w[k]
    for s in range(seq.head.shape[0]):
        h = seq.head[s]
        lo = seq.start[s]
        d = seq.start[s + 1] - lo + 1
        base = seq.w_start[s]
        prev = 0
        for j in range(1, d):
            if heads[seq.child[lo + j - 1]] == h:
                total += seq.w[base + prev * d + j]
                prev = j
        if prev > 0:
            total += seq.w[base + prev * d]
    return total


class _HeadProblems(NamedTuple):
    """The HEAD subproblems' layout. Segments (as `ChildSeqFactors`: ``head``, ``start``,
    ``child``, ``w_start``, ``w``) with ``seg_of`` / ``pos_of`` int64 [(n+1)²] (the segment and
    position of an arc, -1 if none) and ``sides`` int64 (n+1, 2) (a head's left / right segment or
    -1); GRAND runs: ``order`` the GRAND factors sorted by their first arc g -> h, run r covering
    ``order[run_start[r]:run_start[r+1]]`` with first arc ``run_arc[r]``, head h's runs
    ``head_runs[run_of_head[h]:run_of_head[h+1]]``; ``other`` bool (n+1,): h may take a head outside
    its runs (ROOT: no head)."""

    head: np.ndarray
    start: np.ndarray
    child: np.ndarray
    w_start: np.ndarray
    w: np.ndarray
    seg_of: np.ndarray
    pos_of: np.ndarray
    sides: np.ndarray
    order: np.ndarray
    run_start: np.ndarray
    run_arc: np.ndarray
    run_of_head: np.ndarray
    head_runs: np.ndarray
    other: np.ndarray


@njit(cache=True)
def _head_problems(arc, pair_a, pair_b, n_grand, seq):
    n1 = arc.shape[0]
    if seq.head.shape[0] > 0:
        head, start, child, w_start, w = seq.head, seq.start, seq.child, seq.w_start, seq.w
    else:  # no CHILDSEQ: the children of GRAND factors, free of each other (W = 0)
        keep = np.zeros((n1, n1), dtype=np.bool_)
        for k in range(n_grand):
            keep[pair_b[k] // n1, pair_b[k] % n1] = True
        head, start, child, w_start = childseq_segments(keep, False)
        w = np.zeros(w_start[-1])
    seg_of = np.full(n1 * n1, -1, np.int64)
    pos_of = np.full(n1 * n1, -1, np.int64)
    sides = np.full((n1, 2), -1, np.int64)
    for s in range(head.shape[0]):
        h = head[s]
        for j in range(start[s], start[s + 1]):
            seg_of[h * n1 + child[j]] = s
            pos_of[h * n1 + child[j]] = j - start[s] + 1
        sides[h, 0 if child[start[s]] < h else 1] = s
    for k in range(n_grand):
        if seg_of[pair_b[k]] < 0:
            raise ValueError("a GRAND factor's child arc is outside the CHILDSEQ segments")
    order = np.argsort(pair_a[:n_grand], kind="mergesort")
    run_start = np.empty(n_grand + 1, np.int64)
    run_arc = np.empty(n_grand, np.int64)
    runs = 0
    for i in range(n_grand):
        a = pair_a[order[i]]
        if runs == 0 or run_arc[runs - 1] != a:
            run_start[runs] = i
            run_arc[runs] = a
            runs += 1
    run_start[runs] = n_grand
    run_of_head = np.zeros(n1 + 1, np.int64)
    for r in range(runs):
        run_of_head[run_arc[r] % n1 + 1] += 1
    for h in range(n1):
        run_of_head[h + 1] += run_of_head[h]
    fill = run_of_head[:n1].copy()
    head_runs = np.empty(runs, np.int64)
    in_run = np.zeros(n1 * n1, dtype=np.bool_)
    for r in range(runs):
        h = run_arc[r] % n1
        head_runs[fill[h]] = r
        fill[h] += 1
        in_run[run_arc[r]] = True
    other = np.zeros(n1, dtype=np.bool_)
    other[0] = True
    for h in range(1, n1):
        for g in range(n1):
            if g != h and arc[g, h] > -np.inf and not in_run[g * n1 + h]:
                other[h] = True
                break
    return _HeadProblems(head, start, child, w_start, w, seg_of, pos_of, sides, order,
                         run_start[:runs + 1].copy(), run_arc[:runs].copy(), run_of_head,
                         head_runs, other)


@njit(cache=True, inline="always")
def _solve_head(hp, h, run, u_out, u_in, pair_b, pair_w, v, best, back, chosen, z_out):
    """Value of HEAD h with its head fixed by ``run`` (-1: another head or none); with ``z_out``
    (uint8 [(n+1)²], or empty) the children taken are written there."""
    n1 = hp.sides.shape[0]
    total = 0.0 if run < 0 else -u_in[hp.run_arc[run]]
    for side in range(2):
        s = hp.sides[h, side]
        if s < 0:
            continue
        lo = hp.start[s]
        c = hp.start[s + 1] - lo
        for j in range(1, c + 1):
            v[j] = -u_out[h * n1 + hp.child[lo + j - 1]]
        if run >= 0:
            for i in range(hp.run_start[run], hp.run_start[run + 1]):
                k = hp.order[i]
                if hp.seg_of[pair_b[k]] == s:
                    v[hp.pos_of[pair_b[k]]] += pair_w[k]
        total += segment_viterbi(v, hp.w, hp.w_start[s], c, best, back, chosen)
        if z_out.shape[0] > 0:
            for j in range(1, c + 1):
                z_out[h * n1 + hp.child[lo + j - 1]] = chosen[j]
    return total


# ---------------------------------------------------------------- AD3 (Martins et al. 2015)

@njit(cache=True)
def _equality_qp(G, r, k, x, M, rhs):
    """x[:k] = argmin ½xᵀGx − rᵀx subject to Σx = 1 (the KKT system, by Gaussian elimination with
    partial pivoting; a 1e-9 ridge keeps affinely dependent configurations solvable)."""
    d = k + 1
    for i in range(k):
        for j in range(k):
            M[i, j] = G[i, j]
        M[i, i] += 1e-9
        M[i, k] = 1.0
        M[k, i] = 1.0
        rhs[i] = r[i]
    M[k, k] = 0.0
    rhs[k] = 1.0
    for col in range(d):
        piv = col
        for i in range(col + 1, d):
            if abs(M[i, col]) > abs(M[piv, col]):
                piv = i
        if piv != col:
            for j in range(d):
                M[col, j], M[piv, j] = M[piv, j], M[col, j]
            rhs[col], rhs[piv] = rhs[piv], rhs[col]
        for i in range(col + 1, d):
            f = M[i, col] / M[col, col]
            for j in range(col, d):
                M[i, j] -= f * M[col, j]
            rhs[i] -= f * rhs[col]
    for i in range(d - 1, -1, -1):
        acc = rhs[i]
        for j in range(i + 1, d):
            acc -= M[i, j] * rhs[j]
        rhs[i] = acc / M[i, i]
    for i in range(k):
        x[i] = rhs[i]


class _Factor(NamedTuple):
    """One AD3 factor's active set: configuration j is the set of its local arcs
    ``idx[j, :cnt[j]]`` (in a fixed order), with internal score ``c[j]`` and weight ``beta[j]``;
    ``G`` their Gram matrix (shared arcs), ``k`` (1-array) the number of configurations."""

    idx: np.ndarray
    cnt: np.ndarray
    G: np.ndarray
    c: np.ndarray
    beta: np.ndarray
    k: np.ndarray


@njit(cache=True)
def _new_factor(length):
    """An empty active set for configurations of at most ``length`` arcs."""
    A = MAX_ACTIVE
    return _Factor(np.zeros((A, max(length, 1)), np.int64), np.zeros(A, np.int64),
                   np.zeros((A, A)), np.zeros(A), np.zeros(A), np.zeros(1, np.int64))


@njit(cache=True, inline="always")
def _dot(f, j, a):
    """Σ of ``a`` over configuration j's arcs."""
    acc = 0.0
    for t in range(f.cnt[j]):
        acc += a[f.idx[j, t]]
    return acc


@njit(cache=True)
def _drop(f, j, k):
    """Remove configuration j of the first k (the last one takes its place)."""
    last = k - 1
    f.idx[j] = f.idx[last]
    f.cnt[j] = f.cnt[last]
    f.c[j] = f.c[last]
    f.beta[j] = f.beta[last]
    for i in range(k):
        f.G[j, i] = f.G[last, i]
    for i in range(k):
        f.G[i, j] = f.G[i, last]
    f.G[j, j] = f.G[last, last]


@njit(cache=True)
def _active_set_qp(f, a, eta, work):
    """β = argmax over the simplex on the active configurations of Σβ_j c_j − (η/2)‖Σβ_j y_j − a‖²
    (min ½βᵀGβ − rᵀβ, r_j = y_j·a + c_j/η), from the feasible current β: equality solves and a
    line search to the first bound that blocks (primal active set, Nocedal & Wright §16.5)."""
    M, rhs, x, r = work
    k = f.k[0]
    while True:
        for j in range(k):
            r[j] = _dot(f, j, a) + f.c[j] / eta
        _equality_qp(f.G, r, k, x, M, rhs)
        t = 1.0
        block = -1
        for j in range(k):
            if x[j] < 0.0:
                tj = f.beta[j] / (f.beta[j] - x[j])
                if tj < t:
                    t = tj
                    block = j
        if block < 0:
            f.beta[:k] = x[:k]
            f.k[0] = k
            return
        for j in range(k):
            f.beta[j] += t * (x[j] - f.beta[j])
        _drop(f, block, k)
        k -= 1


@njit(cache=True)
def _offer(f, a, eta, y, ny, cy, value, q, mark):
    """Offer the oracle's configuration ``y[:ny]`` (internal score cy; value c(y) + η y·(a − q)
    = ``value``) to the active set: added (True) unless it does not improve on the active
    configurations, is one of them, or the set is full. ``mark`` float64 zeros over the local arcs
    (restored)."""
    k = f.k[0]
    if k > 0:
        current = -np.inf
        for j in range(k):
            if f.beta[j] > 0.0:
                current = max(current, f.c[j] + eta * (_dot(f, j, a) - _dot(f, j, q)))
        if value <= current + 1e-9 * (1.0 + abs(current)):
            return False
        for j in range(k):
            if f.cnt[j] == ny:
                same = True
                for t in range(ny):
                    if f.idx[j, t] != y[t]:
                        same = False
                        break
                if same:
                    return False
        if k == MAX_ACTIVE:
            return False
    f.idx[k, :ny] = y[:ny]
    f.cnt[k] = ny
    f.c[k] = cy
    f.beta[k] = 1.0 if k == 0 else 0.0
    for t in range(ny):
        mark[y[t]] = 1.0
    for j in range(k + 1):
        g = _dot(f, j, mark)
        f.G[j, k] = g
        f.G[k, j] = g
    for t in range(ny):
        mark[y[t]] = 0.0
    f.k[0] = k + 1
    return True


@njit(cache=True)
def _solve_factor(f, a, eta, q, work):
    """Re-solve the factor's QP on its active set; q ← Σ β_j y_j (float64 over its local arcs)."""
    _active_set_qp(f, a, eta, work)
    q[:] = 0.0
    for j in range(f.k[0]):
        for t in range(f.cnt[j]):
            q[f.idx[j, t]] += f.beta[j]


class _AD3(NamedTuple):
    """AD3's state: ``p`` float64 [(n+1)²] the consensus arc values, ``deg`` the number of factors
    holding each arc, ``eta`` (1-array) the penalty; the TREE factor ``tree`` over all arcs; the
    HEAD factors' local arcs ``loc_arc[loc_start[h]:loc_start[h+1]]`` (children, then the
    incoming arcs of its runs: ``loc_in``; run r at local slot ``run_slot[r]``) and active sets
    (`_Factor` fields stacked over heads: hidx, hcnt, hG, hc, hbeta, hk). SIB factors need no
    state (`_pair_qp`)."""

    p: np.ndarray
    deg: np.ndarray
    eta: np.ndarray
    tree: _Factor
    loc_start: np.ndarray
    loc_arc: np.ndarray
    loc_in: np.ndarray
    run_slot: np.ndarray
    hidx: np.ndarray
    hcnt: np.ndarray
    hG: np.ndarray
    hc: np.ndarray
    hbeta: np.ndarray
    hk: np.ndarray


@njit(cache=True)
def _decode(t, arc, projective, single_root):
    """Best tree under scores ``t`` (arcs that ``arc`` forbids stay forbidden)."""
    w = t.copy()
    n1 = t.shape[0]
    for h in range(n1):
        for m in range(n1):
            if arc[h, m] == -np.inf:
                w[h, m] = -np.inf
    return eisner_decode(w, single_root) if projective else mst_decode(w, single_root)


@njit(cache=True)
def _ad3_setup(arc, c, pair_a, pair_b, n_grand, start, eta, active):
    """AD3's initial state for the copies ``c`` (`PairCopies`): p from the tree ``start`` or
    uniform over each word's heads; with ``active`` False an empty one (other rules)."""
    hp, has_out, has_in = c.hp, c.has_out, c.has_in
    n1 = arc.shape[0]
    n_sib = pair_a.shape[0] - n_grand
    loc_start = np.zeros(n1 + 1, np.int64)
    for h in range(n1):
        d = hp.run_of_head[h + 1] - hp.run_of_head[h]
        for side in range(2):
            s = hp.sides[h, side]
            if s >= 0:
                d += hp.start[s + 1] - hp.start[s]
        loc_start[h + 1] = loc_start[h] + d
    loc_arc = np.empty(loc_start[n1], np.int64)
    loc_in = np.zeros(loc_start[n1], dtype=np.bool_)
    run_slot = np.empty(hp.run_arc.shape[0], np.int64)
    dmax = 1
    for h in range(n1):
        j = loc_start[h]
        for side in range(2):
            s = hp.sides[h, side]
            if s >= 0:
                for i in range(hp.start[s], hp.start[s + 1]):
                    loc_arc[j] = h * n1 + hp.child[i]
                    j += 1
        for i in range(hp.run_of_head[h], hp.run_of_head[h + 1]):
            r = hp.head_runs[i]
            loc_arc[j] = hp.run_arc[r]
            loc_in[j] = True
            run_slot[r] = j - loc_start[h]
            j += 1
        dmax = max(dmax, loc_start[h + 1] - loc_start[h])
    deg = np.ones(n1 * n1)
    for a in range(n1 * n1):
        if has_out[a]:
            deg[a] += 1.0
        if has_in[a]:
            deg[a] += 1.0
    for k in range(n_sib):
        deg[pair_a[n_grand + k]] += 1.0
        deg[pair_b[n_grand + k]] += 1.0
    p = np.zeros(n1 * n1)
    for m in range(1, n1):
        if start.shape[0] == n1:
            p[start[m] * n1 + m] = 1.0
        else:
            heads = 0
            for h in range(n1):
                if arc[h, m] > -np.inf:
                    heads += 1
            for h in range(n1):
                if arc[h, m] > -np.inf:
                    p[h * n1 + m] = 1.0 / heads
    A = MAX_ACTIVE
    nh = n1 if active else 0
    return _AD3(p, deg, np.full(1, eta), _new_factor(n1), loc_start, loc_arc, loc_in, run_slot,
                np.zeros((nh, A, dmax), np.int64), np.zeros((nh, A), np.int64),
                np.zeros((nh, A, A)), np.zeros((nh, A)), np.zeros((nh, A)), np.zeros(nh, np.int64))


@njit(cache=True, inline="always")
def _pair_objective(z1, z2, a1, a2, c):
    both = min(z1, z2) if c >= 0.0 else max(0.0, z1 + z2 - 1.0)
    return 0.5 * (z1 - a1) ** 2 + 0.5 * (z2 - a2) ** 2 - c * both


@njit(cache=True)
def _pair_qp(a1, a2, c):
    """(z1, z2) minimising ½(z1 − a1)² + ½(z2 − a2)² − c·z12 over the marginal polytope of two
    binary variables, z12 = min(z1, z2) for c >= 0 (attractive) and max(0, z1 + z2 − 1) for c < 0:
    the best of the box minimisers of its three convex pieces (each piece's own closed form)."""
    lo = 0.0
    hi = 1.0
    if c >= 0.0:
        z = min(max(0.5 * (a1 + a2 + c), lo), hi)
        cand = ((min(max(a1 + c, lo), hi), min(max(a2, lo), hi)),
                (min(max(a1, lo), hi), min(max(a2 + c, lo), hi)), (z, z))
    else:
        z = min(max(0.5 * (a1 - a2 + 1.0), lo), hi)
        cand = ((min(max(a1, lo), hi), min(max(a2, lo), hi)),
                (min(max(a1 + c, lo), hi), min(max(a2 + c, lo), hi)), (z, 1.0 - z))
    best = cand[0]
    top = _pair_objective(best[0], best[1], a1, a2, c)
    for i in range(1, 3):
        f = _pair_objective(cand[i][0], cand[i][1], a1, a2, c)
        if f < top:
            top = f
            best = cand[i]
    return best


@njit(cache=True)
def _ad3_update(st, c, t, arc, pair_a, pair_b, pair_w, n_grand, projective, single_root):
    """One AD3 iteration (Martins et al. 2015, Alg. 1 with the active-set QP of Alg. 2): every
    factor's quadratic subproblem max_q θ·q + λ·q − (η/2)‖q − p‖² over its marginal polytope (the
    MAP oracles: the tree decoder, the head automata; `_pair_qp` for a SIB pair), then p ← the
    mean of the factors' q, λ ← λ − η (q − p) (u = −λ for HEAD / SIB copies; the TREE factor's λ is
    minus their sum), and η balanced between the primal and dual residuals (Boyd et al. 2011).
    ``c``: the `PairCopies`, whose multipliers are updated (and whose scratch the head automata
    use)."""
    hp, u_out, u_in, u_sa, u_sb = c.hp, c.u_out, c.u_in, c.u_sa, c.u_sb
    v, best, back, chosen = c.v, c.best, c.back, c.chosen
    n1 = arc.shape[0]
    size = n1 * n1
    n_sib = pair_a.shape[0] - n_grand
    eta = st.eta[0]
    A = MAX_ACTIVE
    work = (np.zeros((A + 1, A + 1)), np.zeros(A + 1), np.zeros(A), np.zeros(A))
    total = np.zeros(size)
    primal = 0.0
    # TREE: linear scores t = s + Σ u, a = p + t/η; a configuration lists its arcs by child
    a_t = np.zeros(size)
    tf = t.ravel()
    for i in range(size):
        if tf[i] > -np.inf:
            a_t[i] = st.p[i] + tf[i] / eta
    q_tree = np.zeros(size)
    mark = np.zeros(size)
    y = np.empty(n1, np.int64)
    for _ in range(MAX_ORACLE):
        if st.tree.k[0] > 0:
            _solve_factor(st.tree, a_t, eta, q_tree, work)
        g = eta * (a_t - q_tree)
        heads = _decode(g.reshape((n1, n1)), arc, projective, single_root)
        value = 0.0
        for m in range(1, n1):
            y[m - 1] = heads[m] * n1 + m
            value += g[y[m - 1]]
        if not _offer(st.tree, a_t, eta, y, n1 - 1, 0.0, value, q_tree, mark):
            break
    _solve_factor(st.tree, a_t, eta, q_tree, work)
    for i in range(size):
        if tf[i] > -np.inf:
            total[i] += q_tree[i]
    # HEAD h: a = p − u/η on its local arcs; internal scores GRAND + transitions
    q_loc = np.zeros(st.loc_arc.shape[0])
    tmp_out = np.zeros(size)
    tmp_in = np.zeros(size)
    tmp_z = np.zeros(size, np.uint8)
    for h in range(n1):
        lo = st.loc_start[h]
        d = st.loc_start[h + 1] - lo
        if d == 0:
            continue
        f = _Factor(st.hidx[h], st.hcnt[h], st.hG[h], st.hc[h], st.hbeta[h], st.hk[h:h + 1])
        a_h = np.empty(d)
        for j in range(d):
            arc_j = st.loc_arc[lo + j]
            a_h[j] = st.p[arc_j] - (u_in[arc_j] if st.loc_in[lo + j] else u_out[arc_j]) / eta
        qh = np.zeros(d)
        yh = np.empty(d, np.int64)
        for _ in range(MAX_ORACLE):
            if f.k[0] > 0:
                _solve_factor(f, a_h, eta, qh, work)
            g = eta * (a_h - qh)
            for j in range(d):
                if st.loc_in[lo + j]:
                    tmp_in[st.loc_arc[lo + j]] = -g[j]
                else:
                    tmp_out[st.loc_arc[lo + j]] = -g[j]
            value, run = _best_head(hp, h, tmp_out, tmp_in, pair_b, pair_w, v, best, back,
                                    chosen, tmp_z)
            ny = 0
            inner = 0.0
            for j in range(d):
                if (run >= 0 and j == st.run_slot[run]) if st.loc_in[lo + j] else \
                        tmp_z[st.loc_arc[lo + j]] == 1:
                    yh[ny] = j
                    ny += 1
                    inner += g[j]
            if not _offer(f, a_h, eta, yh, ny, value - inner, value, qh, mark):
                break
        _solve_factor(f, a_h, eta, qh, work)
        for j in range(d):
            q_loc[lo + j] = qh[j]
            total[st.loc_arc[lo + j]] += qh[j]
    # SIB k: two arcs, internal score w on (1, 1), a closed form
    q_sib = np.zeros((n_sib, 2))
    for k in range(n_sib):
        ia = pair_a[n_grand + k]
        ib = pair_b[n_grand + k]
        q_sib[k, 0], q_sib[k, 1] = _pair_qp(st.p[ia] - u_sa[k] / eta, st.p[ib] - u_sb[k] / eta,
                                            pair_w[n_grand + k] / eta)
        total[ia] += q_sib[k, 0]
        total[ib] += q_sib[k, 1]
    # consensus, multipliers, residuals
    p_new = total / st.deg
    dual_res = 0.0
    for i in range(size):
        dual_res += st.deg[i] * (p_new[i] - st.p[i]) ** 2
        if tf[i] > -np.inf:
            primal += (q_tree[i] - p_new[i]) ** 2
    for h in range(n1):
        for j in range(st.loc_start[h], st.loc_start[h + 1]):
            arc_j = st.loc_arc[j]
            diff = q_loc[j] - p_new[arc_j]
            primal += diff * diff
            if st.loc_in[j]:
                u_in[arc_j] += eta * diff
            else:
                u_out[arc_j] += eta * diff
    for k in range(n_sib):
        da = q_sib[k, 0] - p_new[pair_a[n_grand + k]]
        db = q_sib[k, 1] - p_new[pair_b[n_grand + k]]
        primal += da * da + db * db
        u_sa[k] += eta * da
        u_sb[k] += eta * db
    st.p[:] = p_new
    primal = np.sqrt(primal)
    dual_res = eta * np.sqrt(dual_res)
    if primal > 10.0 * dual_res:
        st.eta[0] = eta * 2.0
    elif dual_res > 10.0 * primal:
        st.eta[0] = eta / 2.0


@njit(cache=True, inline="always")
def _best_head(hp, h, u_out, u_in, pair_b, pair_w, v, best, back, chosen, z_out):
    """HEAD h's maximum over its head options (another head / none, or each GRAND run) and child
    sequences: (value, run of the best option or -1); its children are written to ``z_out``."""
    top = -np.inf
    arg = -2
    no_z = np.zeros(0, np.uint8)
    if hp.other[h]:
        top = _solve_head(hp, h, -1, u_out, u_in, pair_b, pair_w, v, best, back, chosen, no_z)
        arg = -1
    for i in range(hp.run_of_head[h], hp.run_of_head[h + 1]):
        r = hp.head_runs[i]
        x = _solve_head(hp, h, r, u_out, u_in, pair_b, pair_w, v, best, back, chosen, no_z)
        if x > top:
            top = x
            arg = r
    return _solve_head(hp, h, arg, u_out, u_in, pair_b, pair_w, v, best, back, chosen, z_out), arg


class PairCopies(NamedTuple):
    """The HEAD and SIB subproblems of a decomposition and their state: ``hp`` (`_HeadProblems`);
    multipliers float64 ``u_out`` / ``u_in`` [(n+1)²] (HEAD h's copies of its children's arcs and
    of its own arc, by arc index), ``u_sa`` / ``u_sb`` [K_sib] (each SIB factor's two arcs); the
    latest solutions ``z_*`` uint8 of the same shapes; ``has_out`` / ``has_in`` bool [(n+1)²]: the
    arc has that copy; per head: ``has_problem``, ``dirty`` (solve again: a multiplier moved),
    ``head_value`` and ``head_run`` (its cached maximum and head option); the automata's scratch
    ``v``, ``best``, ``back``, ``chosen``."""

    hp: _HeadProblems
    u_out: np.ndarray
    u_in: np.ndarray
    u_sa: np.ndarray
    u_sb: np.ndarray
    z_out: np.ndarray
    z_in: np.ndarray
    z_sa: np.ndarray
    z_sb: np.ndarray
    has_out: np.ndarray
    has_in: np.ndarray
    has_problem: np.ndarray
    dirty: np.ndarray
    head_value: np.ndarray
    head_run: np.ndarray
    v: np.ndarray
    best: np.ndarray
    back: np.ndarray
    chosen: np.ndarray


@njit(cache=True)
def pair_copies(arc, pair_a, pair_b, n_grand, seq):
    """`PairCopies` of the model's GRAND / SIB / CHILDSEQ factors (arguments as `dual_decompose`),
    every multiplier 0."""
    n1 = arc.shape[0]
    hp = _head_problems(arc, pair_a, pair_b, n_grand, seq)
    n_sib = pair_a.shape[0] - n_grand
    has_in = np.zeros(n1 * n1, dtype=np.bool_)
    for r in range(hp.run_arc.shape[0]):
        has_in[hp.run_arc[r]] = True
    cmax = 1
    for s in range(hp.head.shape[0]):
        cmax = max(cmax, hp.start[s + 1] - hp.start[s])
    has_problem = np.zeros(n1, dtype=np.bool_)
    for h in range(n1):
        has_problem[h] = (hp.sides[h, 0] >= 0 or hp.sides[h, 1] >= 0
                          or hp.run_of_head[h + 1] > hp.run_of_head[h])
    return PairCopies(hp, np.zeros(n1 * n1), np.zeros(n1 * n1), np.zeros(n_sib), np.zeros(n_sib),
                      np.zeros(n1 * n1, np.uint8), np.zeros(n1 * n1, np.uint8),
                      np.zeros(n_sib, np.uint8), np.zeros(n_sib, np.uint8), hp.seg_of >= 0, has_in,
                      has_problem, has_problem.copy(), np.zeros(n1), np.full(n1, -1, np.int64),
                      np.empty(cmax + 1), np.empty(cmax + 1), np.empty(cmax + 1, np.int64),
                      np.zeros(cmax + 1, dtype=np.bool_))


@njit(cache=True)
def copies_tree_scores(t, arc, c, pair_a, pair_b, n_grand):
    """Write the TREE subproblem's scores into ``t`` float64 (n+1, n+1): the LINK scores ``arc``
    plus the multipliers of every HEAD and SIB copy of each arc (-inf stays -inf)."""
    n1 = arc.shape[0]
    for h in range(n1):
        for m in range(n1):
            t[h, m] = arc[h, m] + c.u_out[h * n1 + m] + c.u_in[h * n1 + m]
    for k in range(c.u_sa.shape[0]):
        a = pair_a[n_grand + k]
        b = pair_b[n_grand + k]
        t[a // n1, a % n1] += c.u_sa[k]
        t[b // n1, b % n1] += c.u_sb[k]


@njit(cache=True)
def solve_copies(c, pair_b, pair_w, n_grand):
    """Solve every HEAD subproblem whose multipliers moved (its best head option, then its children
    under it) and every SIB subproblem (the best of four assignments, ties to fewer arcs); the
    solutions go to ``c.z_*``. Returns the sum of their maxima (their part of the dual)."""
    hp = c.hp
    value = 0.0
    for h in range(c.dirty.shape[0]):
        if c.dirty[h]:
            c.head_value[h], arg = _best_head(hp, h, c.u_out, c.u_in, pair_b, pair_w, c.v, c.best,
                                              c.back, c.chosen, c.z_out)
            if c.head_run[h] >= 0:
                c.z_in[hp.run_arc[c.head_run[h]]] = 0
            if arg >= 0:
                c.z_in[hp.run_arc[arg]] = 1
            c.head_run[h] = arg
            c.dirty[h] = False
        value += c.head_value[h]
    for k in range(c.u_sa.shape[0]):
        wa = -c.u_sa[k]
        wb = -c.u_sb[k]
        both = pair_w[n_grand + k] + wa + wb
        top = 0.0
        c.z_sa[k] = 0
        c.z_sb[k] = 0
        if wa > top:
            top = wa
            c.z_sa[k] = 1
        if wb > top:
            top = wb
            c.z_sa[k] = 0
            c.z_sb[k] = 1
        if both > top:
            top = both
            c.z_sa[k] = 1
            c.z_sb[k] = 1
        value += top
    return value


@njit(cache=True)
def copies_disagreement(c, y, pair_a, pair_b, n_grand):
    """How many HEAD and SIB copies differ from the tree ``y`` (uint8 [(n+1)²] arc indicators):
    the squared norm of their subgradient (0: they all agree with it)."""
    norm = 0.0
    for a in range(y.shape[0]):
        if c.has_out[a] and c.z_out[a] != y[a]:
            norm += 1.0
        if c.has_in[a] and c.z_in[a] != y[a]:
            norm += 1.0
    for k in range(c.u_sa.shape[0]):
        if c.z_sa[k] != y[pair_a[n_grand + k]]:
            norm += 1.0
        if c.z_sb[k] != y[pair_b[n_grand + k]]:
            norm += 1.0
    return norm


@njit(cache=True)
def copies_step(c, y, alpha, pair_a, pair_b, n_grand):
    """Subgradient step u ← u − α (y − z) on every HEAD and SIB copy; marks the HEAD subproblems
    whose multipliers moved."""
    n1 = c.dirty.shape[0]
    for a in range(y.shape[0]):
        if c.has_out[a] and c.z_out[a] != y[a]:
            c.u_out[a] -= alpha * (float(y[a]) - float(c.z_out[a]))
            c.dirty[a // n1] = True
        if c.has_in[a] and c.z_in[a] != y[a]:
            c.u_in[a] -= alpha * (float(y[a]) - float(c.z_in[a]))
            c.dirty[a % n1] = True
    for k in range(c.u_sa.shape[0]):
        c.u_sa[k] -= alpha * (float(y[pair_a[n_grand + k]]) - float(c.z_sa[k]))
        c.u_sb[k] -= alpha * (float(y[pair_b[n_grand + k]]) - float(c.z_sb[k]))


@njit(cache=True)
def dual_decompose(arc, pair_a, pair_b, pair_w, n_grand, seq, projective, single_root,
                   max_iterations, rule, step, candidates):
    """MAP tree of LINK + GRAND + SIB + CHILDSEQ scores by dual decomposition (module docstring).

    ``arc`` float64 (n+1, n+1) LINK log-odds (-inf: no arc); ``pair_a``, ``pair_b`` int64 arc
    indices and ``pair_w`` float64 log-potentials of the pairwise factors, the first ``n_grand``
    GRAND (first arc g -> h, second h -> m), the rest SIB; ``seq``: `ChildSeqFactors` (may be empty)
    whose segments contain every GRAND factor's second arc; ``projective``: PTREE (Eisner) instead of
    TREE (Chu-Liu-Edmonds); at most ``max_iterations`` updates by ``rule`` (module docstring):
    AD3 with initial penalty η = ``step``; RUSH: α_t = ``step`` / (1 + number of rises of the dual
    so far); POLYAK: α_t = ``step`` · (L(u_t) − best score so far) / ‖subgradient‖².
    ``candidates``: int64 (T, n+1) trees that seed the best tree found (e.g. BP's MBR tree), or
    shape (0, n+1). Returns a `DDResult`.
    """
    n1 = arc.shape[0]
    c = pair_copies(arc, pair_a, pair_b, n_grand, seq)
    y = np.zeros(n1 * n1, np.uint8)
    best_heads = np.full(n1, -1, np.int64)
    best_score = -np.inf
    for i in range(candidates.shape[0]):
        score = model_tree_score(candidates[i], arc, pair_a, pair_b, pair_w, seq)
        if score > best_score:
            best_score = score
            best_heads[:] = candidates[i]
    ad3 = _ad3_setup(arc, c, pair_a, pair_b, n_grand,
                     candidates[0] if candidates.shape[0] > 0 else np.zeros(0, np.int64),
                     step if rule == AD3 else 1.0, rule == AD3)
    dual = np.empty(max(max_iterations, 1))
    t = np.empty((n1, n1))
    rises = 0
    certified = False
    it = 0
    while it < max(max_iterations, 1):
        copies_tree_scores(t, arc, c, pair_a, pair_b, n_grand)
        # t is -inf wherever arc is (no copy of an impossible arc carries a multiplier)
        heads = eisner_decode(t, single_root) if projective else mst_decode(t, single_root)
        y[:] = 0
        value = 0.0
        for m in range(1, n1):
            y[heads[m] * n1 + m] = 1
            value += t[heads[m], m]
        value += solve_copies(c, pair_b, pair_w, n_grand)
        dual[it] = value
        if it > 0 and value > dual[it - 1]:
            rises += 1
        it += 1
        score = model_tree_score(heads, arc, pair_a, pair_b, pair_w, seq)
        if score > best_score:
            best_score = score
            best_heads[:] = heads
        norm = copies_disagreement(c, y, pair_a, pair_b, n_grand)
        if norm == 0.0:
            certified = True
            best_heads[:] = heads
            best_score = score
            break
        if value - best_score <= GAP * max(1.0, abs(best_score)):
            certified = True  # no tree scores more than the bound: best_heads is optimal
            break
        if rule == AD3:
            _ad3_update(ad3, c, t, arc, pair_a, pair_b, pair_w, n_grand, projective,
                        single_root)
            rounded = _decode(ad3.p.reshape((n1, n1)), arc, projective, single_root)
            score = model_tree_score(rounded, arc, pair_a, pair_b, pair_w, seq)
            if score > best_score:
                best_score = score
                best_heads[:] = rounded
            c.dirty[:] = c.has_problem
            continue
        if rule == RUSH:
            alpha = step / (1.0 + rises)
        else:
            alpha = step * max(value - best_score, 1e-9) / norm
        copies_step(c, y, alpha, pair_a, pair_b, n_grand)
    return DDResult(best_heads, certified, it, dual[:it].copy(), best_score)
