"""MAP trees of second-order models by dual decomposition (Rush et al. 2010; Koo et al. 2010;
docs/design.md §9).

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
Multipliers move by subgradient steps, u_c ← u_c − α_t (y[a] − z_c), with either Rush et al.'s rule
(RUSH: α_t = c / (1 + the number of iterations at which L went up); Fig. 4, Appendix B; design §9)
or Polyak's (POLYAK: α_t = θ (L(u_t) − best score) / ‖y − z‖², the best tree found as the target),
which certifies more sentences within 50 iterations on our models (docs/experiments.md). Every y is
a tree, so when no certificate comes within the iterations the best-scoring tree seen (or given as a
candidate, e.g. BP's MBR tree) is returned. A HEAD subproblem is solved again only when one of its
multipliers moved. All-pairs SIB factors, as pairwise subproblems, make the relaxation much looser
than the head automata do; NOCROSS and the NAND pairs of weaker constraints are not decomposed
(callers refuse them).
"""
from typing import NamedTuple

import numpy as np
from numba import njit

from bpparse.kernels.cle import mst_decode
from bpparse.kernels.eisner import eisner_decode
from bpparse.kernels.factors.childseq import childseq_segments

RUSH = 0
POLYAK = 1
RULES = {"polyak": (POLYAK, 1.5), "rush": (RUSH, 1.0)}  # name -> (rule, θ or c in log-odds)


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


@njit(cache=True)
def segment_viterbi(v, W, c, best, back, chosen):
    """Best child sequence of one head automaton: max over j_1 < ... < j_r of
    W[0, j_1] + v[j_1] + W[j_1, j_2] + ... + v[j_r] + W[j_r, 0] (0 for the empty sequence).

    ``v`` float64 [c+1] per-position scores at 1..c; ``W`` the segment's flat (c+1)² log-potentials
    (layout of `ChildSeqFactors`); ``best``, ``back`` scratch [c+1]; ``chosen`` bool [c+1] receives
    the positions taken. Returns the maximum. O(c²)."""
    d = c + 1
    for j in range(1, d):
        top = W[j]
        arg = 0
        for k in range(1, j):
            x = best[k] + W[k * d + j]
            if x > top:
                top = x
                arg = k
        best[j] = v[j] + top
        back[j] = arg
    top = 0.0
    last = 0
    for j in range(1, d):
        x = best[j] + W[j * d]
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


@njit(cache=True)
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
        total += segment_viterbi(v, hp.w[hp.w_start[s]:hp.w_start[s + 1]], c, best, back, chosen)
        if z_out.shape[0] > 0:
            for j in range(1, c + 1):
                z_out[h * n1 + hp.child[lo + j - 1]] = chosen[j]
    return total


@njit(cache=True)
def dual_decompose(arc, pair_a, pair_b, pair_w, n_grand, seq, projective, single_root,
                   max_iterations, rule, step, candidates):
    """MAP tree of LINK + GRAND + SIB + CHILDSEQ scores by dual decomposition (module docstring).

    ``arc`` float64 (n+1, n+1) LINK log-odds (-inf: no arc); ``pair_a``, ``pair_b`` int64 arc
    indices and ``pair_w`` float64 log-potentials of the pairwise factors, the first ``n_grand``
    GRAND (first arc g -> h, second h -> m), the rest SIB; ``seq``: `ChildSeqFactors` (may be empty)
    whose segments contain every GRAND factor's second arc; ``projective``: PTREE (Eisner) instead of
    TREE (Chu-Liu-Edmonds); at most ``max_iterations`` subgradient steps. ``rule`` RUSH: step
    α_t = ``step`` / (1 + number of rises of the dual so far); POLYAK: α_t = ``step`` ·
    (L(u_t) − best score so far) / ‖subgradient‖² (Polyak's rule with the best tree as target).
    ``candidates``: int64 (T, n+1) trees that seed the best tree found (e.g. BP's MBR tree), or
    shape (0, n+1). Returns a `DDResult`.
    """
    n1 = arc.shape[0]
    hp = _head_problems(arc, pair_a, pair_b, n_grand, seq)
    n_sib = pair_a.shape[0] - n_grand
    has_out = hp.seg_of >= 0
    has_in = np.zeros(n1 * n1, dtype=np.bool_)
    for r in range(hp.run_arc.shape[0]):
        has_in[hp.run_arc[r]] = True
    u_out = np.zeros(n1 * n1)
    u_in = np.zeros(n1 * n1)
    u_sa = np.zeros(n_sib)
    u_sb = np.zeros(n_sib)
    z_out = np.zeros(n1 * n1, np.uint8)
    z_in = np.zeros(n1 * n1, np.uint8)
    z_sa = np.zeros(n_sib, np.uint8)
    z_sb = np.zeros(n_sib, np.uint8)
    y = np.zeros(n1 * n1, np.uint8)
    cmax = 1
    for s in range(hp.head.shape[0]):
        cmax = max(cmax, hp.start[s + 1] - hp.start[s])
    v = np.empty(cmax + 1)
    best = np.empty(cmax + 1)
    back = np.empty(cmax + 1, np.int64)
    chosen = np.zeros(cmax + 1, dtype=np.bool_)
    no_z = np.zeros(0, np.uint8)
    # a HEAD subproblem is solved again only when one of its multipliers moved
    dirty = np.zeros(n1, dtype=np.bool_)
    for h in range(n1):
        dirty[h] = (hp.sides[h, 0] >= 0 or hp.sides[h, 1] >= 0
                    or hp.run_of_head[h + 1] > hp.run_of_head[h])
    head_value = np.zeros(n1)
    head_run = np.full(n1, -1, np.int64)
    best_heads = np.full(n1, -1, np.int64)
    best_score = -np.inf
    for i in range(candidates.shape[0]):
        score = model_tree_score(candidates[i], arc, pair_a, pair_b, pair_w, seq)
        if score > best_score:
            best_score = score
            best_heads[:] = candidates[i]
    dual = np.empty(max(max_iterations, 1))
    t = np.empty((n1, n1))
    rises = 0
    certified = False
    it = 0
    while it < max(max_iterations, 1):
        # TREE
        for h in range(n1):
            for m in range(n1):
                t[h, m] = arc[h, m] + u_out[h * n1 + m] + u_in[h * n1 + m]
        for k in range(n_sib):
            a = pair_a[n_grand + k]
            b = pair_b[n_grand + k]
            t[a // n1, a % n1] += u_sa[k]
            t[b // n1, b % n1] += u_sb[k]
        heads = eisner_decode(t, single_root) if projective else mst_decode(t, single_root)
        y[:] = 0
        value = 0.0
        for m in range(1, n1):
            y[heads[m] * n1 + m] = 1
            value += t[heads[m], m]
        # HEAD h: its best head option, then its children under that option
        for h in range(n1):
            if dirty[h]:
                top = -np.inf
                arg = -2
                if hp.other[h]:
                    top = _solve_head(hp, h, -1, u_out, u_in, pair_b, pair_w, v, best, back,
                                      chosen, no_z)
                    arg = -1
                for i in range(hp.run_of_head[h], hp.run_of_head[h + 1]):
                    r = hp.head_runs[i]
                    x = _solve_head(hp, h, r, u_out, u_in, pair_b, pair_w, v, best, back, chosen,
                                    no_z)
                    if x > top:
                        top = x
                        arg = r
                head_value[h] = _solve_head(hp, h, arg, u_out, u_in, pair_b, pair_w, v, best,
                                            back, chosen, z_out)
                if head_run[h] >= 0:
                    z_in[hp.run_arc[head_run[h]]] = 0
                if arg >= 0:
                    z_in[hp.run_arc[arg]] = 1
                head_run[h] = arg
                dirty[h] = False
            value += head_value[h]
        # SIB k: the best of its four assignments (ties to fewer arcs)
        for k in range(n_sib):
            wa = -u_sa[k]
            wb = -u_sb[k]
            both = pair_w[n_grand + k] + wa + wb
            top = 0.0
            z_sa[k] = 0
            z_sb[k] = 0
            if wa > top:
                top = wa
                z_sa[k] = 1
            if wb > top:
                top = wb
                z_sa[k] = 0
                z_sb[k] = 1
            if both > top:
                top = both
                z_sa[k] = 1
                z_sb[k] = 1
            value += top
        dual[it] = value
        if it > 0 and value > dual[it - 1]:
            rises += 1
        it += 1
        score = model_tree_score(heads, arc, pair_a, pair_b, pair_w, seq)
        if score > best_score:
            best_score = score
            best_heads[:] = heads
        # subgradient y - z over every copy
        norm = 0.0
        for a in range(n1 * n1):
            if has_out[a] and z_out[a] != y[a]:
                norm += 1.0
            if has_in[a] and z_in[a] != y[a]:
                norm += 1.0
        for k in range(n_sib):
            if z_sa[k] != y[pair_a[n_grand + k]]:
                norm += 1.0
            if z_sb[k] != y[pair_b[n_grand + k]]:
                norm += 1.0
        if norm == 0.0:
            certified = True
            best_heads[:] = heads
            best_score = score
            break
        if rule == RUSH:
            alpha = step / (1.0 + rises)
        else:
            alpha = step * max(value - best_score, 1e-9) / norm
        for a in range(n1 * n1):
            if has_out[a] and z_out[a] != y[a]:
                u_out[a] -= alpha * (float(y[a]) - float(z_out[a]))
                dirty[a // n1] = True
            if has_in[a] and z_in[a] != y[a]:
                u_in[a] -= alpha * (float(y[a]) - float(z_in[a]))
                dirty[a % n1] = True
        for k in range(n_sib):
            ya = y[pair_a[n_grand + k]]
            yb = y[pair_b[n_grand + k]]
            u_sa[k] -= alpha * (float(ya) - float(z_sa[k]))
            u_sb[k] -= alpha * (float(yb) - float(z_sb[k]))
    return DDResult(best_heads, certified, it, dual[:it].copy(), best_score)
