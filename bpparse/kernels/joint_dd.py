"""Joint tagging and parsing by dual decomposition (Rush et al. 2010 §4.1, for dependency trees).

The joint model scores a tree y (heads) with tags t (one candidate tag per word) as

    score(y, t) = parser(y) + Σ_{h->m in y} φ[h, m, t_h, t_m] + Σ_i U[i, t_i] + Σ_i trans[t_{i-1}, t_i]

(parser(y): LINK log-odds plus the GRAND / SIB / CHILDSEQ factors of `dual_decomposition`'s model;
TAGLINK log-potentials φ over candidate indices, ROOT's tag fixed to candidate 0; the tag chain's
unaries U and transitions, START / END included). Subproblems, each solved exactly with its own
copies of what it reads:

- TREE: the maximum spanning tree (Chu-Liu-Edmonds; Eisner under PTREE) under s + u, u the sum of
  the multipliers of every copy of the arc;
- the parser's HEAD and SIB subproblems of `dual_decomposition` (Koo et al.'s grand-sibling head
  automata; none for a LINK-only parser);
- TAGHEAD h: a tag a for h itself and any set of children, each child m with a tag b of its own:
  max_a [−v_head[h, a] + Σ_m max(0, max_b (φ[h, m, a, b] − v_child[m, b]) − u[h, m])], O(n C²);
- TAGS: the chain's Viterbi path under U + v_head + v_child.

The copies must agree: every copy of an arc with the tree (multipliers per copy), the tag each
TAGHEAD h gives itself = t_h (v_head), and Σ_h [TAGHEAD h took m with tag b] = [t_m = b] (v_child).
These are linear equalities, so the sum of the subproblems' maxima L(u, v) bounds every joint
assignment's score from above; when every copy agrees the tree and tags are the exact joint MAP (a
certificate). Multipliers move by projected subgradient steps with Rush et al.'s rule α = c / (1 +
the number of iterations at which L went up). The tree of TREE with the tags of TAGS is a joint
assignment at every iteration; the best-scoring one seen (or given as a candidate) is returned when
no certificate comes, and a bound within GAP of it certifies it too.
"""
from typing import NamedTuple

import numpy as np

from bpparse.jit import njit
from bpparse.kernels.chain import chain_viterbi
from bpparse.kernels.cle import mst_decode
from bpparse.kernels.dual_decomposition import (copies_disagreement, copies_step,
                                                copies_tree_scores, model_tree_score, pair_copies,
                                                solve_copies)
from bpparse.kernels.eisner import eisner_decode

GAP = 1e-6


class TagScores(NamedTuple):
    """The tagging side of the joint model: ``phi`` float64 (n+1, n+1, C, C) TAGLINK
    log-potentials over candidate indices (0 where an arc has none); ``unary`` float64 (n, g) the
    chain's unaries over tag ids (-inf outside the candidates) and ``trans`` float64 (g+1, g+1) its
    transitions (START / END at g); ``cand`` int64 (n+1, C) each word's candidate tag ids and
    ``cnt`` int64 (n+1,) how many (row 0: ROOT, one)."""

    phi: np.ndarray
    unary: np.ndarray
    trans: np.ndarray
    cand: np.ndarray
    cnt: np.ndarray


class JointDDResult(NamedTuple):
    """heads int64 (n+1,), tags int64 (n+1,) candidate indices (0 at ROOT), certified bool,
    iterations int, dual float64 (iterations,) L after each iteration, score float of the
    returned assignment."""

    heads: np.ndarray
    tags: np.ndarray
    certified: bool
    iterations: int
    dual: np.ndarray
    score: float


@njit(cache=True, nogil=True)
def joint_score(arc, pairs, seq, tagging, heads, tags):
    """score(y, t) of the module docstring: the parser's ``arc`` float64 (n+1, n+1), its pairwise
    factors ``pairs`` (`PairFactors`) and ``seq`` as in `dual_decomposition.model_tree_score`;
    ``tagging``: `TagScores`; ``heads`` and ``tags`` (candidate indices) int64 (n+1,)."""
    phi, unary, trans, cand = tagging.phi, tagging.unary, tagging.trans, tagging.cand
    n1 = arc.shape[0]
    g = unary.shape[1]
    total = model_tree_score(heads, arc, pairs.a, pairs.b, pairs.w, seq)
    prev = g
    for m in range(1, n1):
        total += phi[heads[m], m, tags[heads[m]], tags[m]]
        t = cand[m, tags[m]]
        total += unary[m - 1, t] + trans[prev, t]
        prev = t
    return total + trans[prev, g]


@njit(cache=True, nogil=True)
def joint_dual_decompose(arc, pairs, n_grand, seq, tagging, projective, single_root,
                         max_iterations, step, candidate_heads, candidate_tags):
    """The joint MAP tree and tags by dual decomposition (module docstring); a `JointDDResult`.

    The parser: ``arc`` float64 (n+1, n+1) LINK scores (-inf: forbidden arc) and its GRAND / SIB
    / CHILDSEQ factors ``pairs`` (`PairFactors`, the first ``n_grand`` GRAND) and ``seq`` as in
    `dual_decomposition.dual_decompose` (empty for a LINK-only parser); ``tagging``: `TagScores`;
    ``step`` Rush's c; ``candidate_heads`` / ``candidate_tags`` int64 (K, n+1) assignments to start
    the primal search from (e.g. BP's), K may be 0.
    """
    phi, unary, trans, cand, cnt = tagging
    pair_a, pair_b, pair_w = pairs.a, pairs.b, pairs.w
    n1 = arc.shape[0]
    C = cand.shape[1]
    g = unary.shape[1]
    copies = pair_copies(arc, pair_a, pair_b, n_grand, seq)
    u = np.zeros((n1, n1))
    v_head = np.zeros((n1, C))
    v_child = np.zeros((n1, C))
    dual = np.zeros(max_iterations)
    best_heads = np.full(n1, -1, dtype=np.int64)
    best_tags = np.zeros(n1, dtype=np.int64)
    best = -np.inf
    for k in range(candidate_heads.shape[0]):
        s = joint_score(arc, pairs, seq, tagging, candidate_heads[k], candidate_tags[k])
        if s > best:
            best = s
            best_heads[:] = candidate_heads[k]
            best_tags[:] = candidate_tags[k]
    index = np.full((n1, g), -1, dtype=np.int64)  # tag id -> candidate index
    for i in range(1, n1):
        for c in range(cnt[i]):
            index[i, cand[i, c]] = c
    w = np.empty((n1, n1))
    y = np.zeros(n1 * n1, np.uint8)
    took = np.zeros((n1, n1), dtype=np.bool_)
    child_tag = np.zeros((n1, n1), dtype=np.int64)
    own_tag = np.zeros(n1, dtype=np.int64)
    un = np.empty(unary.shape)
    tags = np.zeros(n1, dtype=np.int64)
    lowest = np.inf
    previous = np.inf
    rises = 0
    certified = False
    iterations = 0
    for it in range(max_iterations):
        # TREE
        copies_tree_scores(w, arc, copies, pair_a, pair_b, n_grand)
        for h in range(n1):
            for m in range(n1):
                w[h, m] = w[h, m] + u[h, m] if arc[h, m] > -np.inf and m > 0 and h != m \
                    else -np.inf
        heads = eisner_decode(w, single_root) if projective else mst_decode(w, single_root)
        y[:] = 0
        value = 0.0
        for m in range(1, n1):
            y[heads[m] * n1 + m] = 1
            value += w[heads[m], m]
        # the parser's HEAD and SIB subproblems
        value += solve_copies(copies, pair_b, pair_w, n_grand)
        # TAGHEAD h
        for h in range(n1):
            top = -np.inf
            for a in range(cnt[h]):
                total = -v_head[h, a]
                for m in range(1, n1):
                    if m == h or arc[h, m] == -np.inf:
                        continue
                    gain = -np.inf
                    for b in range(cnt[m]):
                        gain = max(gain, phi[h, m, a, b] - v_child[m, b])
                    gain -= u[h, m]
                    if gain > 0.0:
                        total += gain
                if total > top:
                    top = total
                    own_tag[h] = a
            value += top
            a = own_tag[h]
            for m in range(1, n1):
                took[h, m] = False
                if m == h or arc[h, m] == -np.inf:
                    continue
                gain = -np.inf
                arg = 0
                for b in range(cnt[m]):
                    x = phi[h, m, a, b] - v_child[m, b]
                    if x > gain:
                        gain = x
                        arg = b
                if gain - u[h, m] > 0.0:
                    took[h, m] = True
                    child_tag[h, m] = arg
        # TAGS
        un[:] = unary
        for i in range(1, n1):
            for c in range(cnt[i]):
                un[i - 1, cand[i, c]] += v_head[i, c] + v_child[i, c]
        path = chain_viterbi(un, trans)
        prev = g
        for i in range(1, n1):
            tags[i] = index[i, path[i - 1]]
            value += un[i - 1, path[i - 1]] + trans[prev, path[i - 1]]
            prev = path[i - 1]
        value += trans[prev, g]
        dual[it] = value
        iterations = it + 1
        lowest = min(lowest, value)
        s = joint_score(arc, pairs, seq, tagging, heads, tags)
        if s > best:
            best = s
            best_heads[:] = heads
            best_tags[:] = tags
        # agreement of every copy, and the subgradient
        alpha = step / (1 + rises)
        agree = copies_disagreement(copies, y, pair_a, pair_b, n_grand) == 0.0
        copies_step(copies, y, alpha, pair_a, pair_b, n_grand)
        for m in range(1, n1):
            for h in range(n1):
                if h == m:
                    continue
                d = float(y[h * n1 + m]) - (1.0 if took[h, m] else 0.0)
                if d != 0.0:
                    agree = False
                    u[h, m] -= alpha * d
        for i in range(1, n1):
            for c in range(cnt[i]):
                z = 1.0 if tags[i] == c else 0.0
                d_head = z - (1.0 if own_tag[i] == c else 0.0)
                given = 0.0
                for h in range(n1):
                    if took[h, i] and child_tag[h, i] == c:
                        given += 1.0
                d_child = z - given
                if d_head != 0.0 or d_child != 0.0:
                    agree = False
                v_head[i, c] -= alpha * d_head
                v_child[i, c] -= alpha * d_child
        if agree or lowest - best <= GAP * max(1.0, abs(best)):
            certified = True
            break
        if value > previous:
            rises += 1
        previous = value
    return JointDDResult(best_heads, best_tags, certified, iterations, dual[:iterations], best)
