"""Public exact inference and decoding: validation above the numba kernels (docs/design.md §3, §8).

Scores are dense ``(n+1, n+1)`` float arrays ``scores[h, m]`` for the arc h -> m, 0 = ROOT; the
diagonal and column 0 are ignored and ``-inf`` forbids an arc. Trees are int64 ``heads`` arrays of
length n+1 with ``heads[0] == -1``. First order: any tree or projective trees; second order
(arcs plus head automata, ``childseq``): projective trees, by Eisner / McDonald & Pereira's DP;
any tree of arcs + GRAND + SIB + head automata: the MAP tree by dual decomposition (`dd_decode`).
Trees and tags together (arcs + TAGLINK + a tag chain): joint BP (`joint_marginals`) and the joint
MAP by dual decomposition (`joint_dd_decode`).
"""
import numpy as np

from bpparse.kernels.batch import batch_decode, batch_offsets, batch_tree_marginals
from bpparse.kernels.cle import mst_decode
from bpparse.kernels.dual_decomposition import RULES, dual_decompose
from bpparse.kernels.eisner import eisner_decode, eisner_marginals
from bpparse.kernels.matrix_tree import matrix_tree_marginals
from bpparse.kernels.sibling_dp import sibling_decode, sibling_inside_outside

__all__ = ["tree_marginals", "decode_tree", "tree_marginals_batch", "decode_tree_batch", "pack_scores",
           "sibling_marginals", "decode_sibling_tree", "dd_decode", "joint_marginals",
           "joint_dd_decode"]


def _check_scores(scores, what="scores"):
    """scores as a C-contiguous float64 array, or ValueError saying what is wrong."""
    arr = np.asarray(scores)
    if arr.dtype.kind != "f":
        raise ValueError(f"{what} must be a float array, got dtype {arr.dtype}")
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        raise ValueError(f"{what} must be a square (n+1, n+1) array, got shape {arr.shape}")
    if arr.shape[0] < 2:
        raise ValueError(f"{what} must be at least 2x2 (ROOT and one word), got shape {arr.shape}")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    arcs = arr[:, 1:][~np.eye(arr.shape[0], dtype=bool)[:, 1:]]
    if np.isnan(arcs).any() or np.isposinf(arcs).any():
        raise ValueError(f"{what} contains NaN or +inf on an arc (only -inf, a forbidden arc, is allowed)")
    return arr


def tree_marginals(scores, projective=False, single_root=True):
    """Arc marginals and log partition function of a first-order tree distribution.

    p(tree) ∝ exp(Σ_m scores[heads[m], m]) over all trees (matrix-tree theorem) or over projective
    trees (Eisner inside-outside); ``single_root`` requires ROOT to have exactly one child.
    Returns ``(marginals, log_z)``: float64 ``(n+1, n+1)`` probabilities with each column m >= 1
    summing to 1 and zeros where no arc exists, and a float (``-inf`` with all-zero marginals when
    no tree is possible).
    """
    arr = _check_scores(scores)
    kernel = eisner_marginals if projective else matrix_tree_marginals
    marginals, log_z = kernel(arr, bool(single_root))
    return marginals, float(log_z)


def decode_tree(scores, projective=False, single_root=True):
    """Highest-scoring tree: Chu-Liu-Edmonds (Tarjan, O(n²)) or Eisner's projective decoder.

    Returns int64 heads of length n+1 with heads[0] == -1. Forbidden (-inf) arcs are used only when
    no tree avoids them. Ties are broken deterministically.
    """
    arr = _check_scores(scores)
    kernel = eisner_decode if projective else mst_decode
    return kernel(arr, bool(single_root))


def pack_scores(scores_list):
    """Concatenate validated score matrices: ``(flat, offsets, head_offsets)`` for the batch kernels
    of bpparse.kernels.batch (flat float64, offsets and head_offsets int64 of length B+1)."""
    arrays = [_check_scores(s, f"scores[{i}]") for i, s in enumerate(scores_list)]
    n_words = np.array([a.shape[0] - 1 for a in arrays], dtype=np.int64)
    offsets, head_offsets = batch_offsets(n_words)
    flat = np.concatenate([a.ravel() for a in arrays]) if arrays else np.zeros(0)
    return flat, offsets, head_offsets


def tree_marginals_batch(scores_list, projective=False, single_root=True):
    """tree_marginals for many sentences in one parallel call (numba prange over sentences).

    Returns ``(marginals_list, log_z)``: a list of float64 ``(n_b+1, n_b+1)`` arrays and a float64
    array of length B, identical to per-sentence calls.
    """
    flat, offsets, _ = pack_scores(scores_list)
    out = np.empty_like(flat)
    log_z = np.empty(len(offsets) - 1)
    batch_tree_marginals(flat, offsets, bool(projective), bool(single_root), out, log_z)
    marginals = []
    for b in range(len(offsets) - 1):
        side = int(round(np.sqrt(offsets[b + 1] - offsets[b])))
        marginals.append(out[offsets[b]:offsets[b + 1]].reshape(side, side))
    return marginals, log_z


def decode_tree_batch(scores_list, projective=False, single_root=True):
    """decode_tree for many sentences in one parallel call; returns a list of int64 heads arrays."""
    flat, offsets, head_offsets = pack_scores(scores_list)
    heads = np.empty(head_offsets[-1], dtype=np.int64)
    batch_decode(flat, offsets, bool(projective), bool(single_root), heads, head_offsets)
    return [heads[head_offsets[b]:head_offsets[b + 1]] for b in range(len(head_offsets) - 1)]


def _check_childseq(childseq, size, what="childseq"):
    arr = np.ascontiguousarray(childseq, dtype=np.float64)
    if arr.shape != (size, size, size):
        raise ValueError(f"{what} must have shape {(size, size, size)}, got {arr.shape}")
    if np.isnan(arr).any() or np.isposinf(arr).any():
        raise ValueError(f"{what} contains NaN or +inf")
    return arr


def sibling_marginals(scores, childseq, single_root=True):
    """Exact marginals of a second-order projective model: arcs plus head automata (CHILDSEQ).

    p(tree) ∝ exp(Σ_m scores[heads[m], m] + Σ_h its child sequences' transitions) over projective
    trees, with ``childseq[h, a, b]`` float ``(n+1, n+1, n+1)`` as in `bpparse.bp_marginals`
    ([h, h, c] first child c, [h, c, d] d follows c outward, [h, c, h] last child c; ROOT has one
    side). O(n³) inside-outside (Eisner 1996, McDonald & Pereira 2006) in log space.
    Returns ``(marginals, log_z, transitions)``: float64 ``(n+1, n+1)`` arc marginals, a float, and
    float64 ``(n+1, n+1, n+1)`` the expected count of each transition.
    """
    arr = _check_scores(scores)
    seq = _check_childseq(childseq, arr.shape[0])
    marginals, log_z, transitions = sibling_inside_outside(arr, seq, bool(single_root))
    return marginals, float(log_z), transitions


def decode_sibling_tree(scores, childseq, single_root=True):
    """The highest-scoring projective tree of the model of `sibling_marginals` (int64 heads) and
    its score."""
    arr = _check_scores(scores)
    heads, score = sibling_decode(arr, _check_childseq(childseq, arr.shape[0]), bool(single_root))
    return heads, float(score)


def dd_decode(scores, grand=None, sib=None, childseq=None, projective=False, single_root=True,
              iterations=50, rule="ad3"):
    """The MAP tree of a second-order model by dual decomposition (Koo et al. 2010; Rush et al.
    2010; `bpparse.kernels.dual_decomposition`), with a certificate when it is exact.

    score(tree) = Σ_m scores[heads[m], m] + Σ grand[g, h, m] (g -> h -> m) + Σ sib[h, m, s] (m < s
    both children of h) + the child sequences' transitions ``childseq[h, a, b]`` (as in
    `sibling_marginals`); each array float ``(n+1,)*3`` or None, zeros mean no factor. Any tree
    (Chu-Liu-Edmonds) or projective trees; at most ``iterations`` updates by ``rule`` ("ad3",
    "polyak" or "rush"). Returns a `DDResult` (heads, certified, iterations, dual values per
    iteration — each an upper bound on every tree's score — and the score of heads).
    """
    arr = _check_scores(scores)
    if rule not in RULES or int(iterations) < 1:
        raise ValueError(f"rule must be one of {', '.join(RULES)} and iterations >= 1")
    code, step = RULES[rule]
    return dual_decompose(arr, *_second_order_factors(arr.shape[0], grand, sib, childseq,
                                                      bool(single_root)),
                          bool(projective), bool(single_root), int(iterations), code, step,
                          np.zeros((0, arr.shape[0]), dtype=np.int64))


def _second_order_factors(size, grand, sib, childseq, single_root):
    """(pair_a, pair_b, pair_w, n_grand, seq) of dense ``grand``, ``sib`` and ``childseq`` arrays
    (float ``(n+1,)*3`` or None; see `dd_decode`), as `dual_decomposition.dual_decompose` reads
    them."""
    from bpparse.graph import pairs_from_dense
    from bpparse.kernels.factors.childseq import childseq_from_dense, no_childseq

    none = np.zeros((0, 0, 0))
    pa, pb, pw, n_grand = pairs_from_dense(
        none if grand is None else _check_childseq(grand, size, "grand"),
        none if sib is None else _check_childseq(sib, size, "sib"))
    if single_root:  # two children of ROOT never co-occur: its SIB factors never fire
        kept = (np.arange(pa.shape[0]) < n_grand) | (pa // size != 0)
        pa, pb, pw = pa[kept], pb[kept], pw[kept]
    if childseq is None:
        seq = no_childseq()
    else:
        keep = np.ones((size, size), dtype=np.bool_)
        np.fill_diagonal(keep, False)
        keep[:, 0] = False
        seq = childseq_from_dense(_check_childseq(childseq, size), keep, single_root)
    return pa, pb, pw, n_grand, seq


def _joint_arrays(scores, taglink, unary, trans):
    """Validated (scores, taglink (n+1, n+1, g, g), unary (n, g), trans (g+1, g+1), cand, cnt):
    every tag a candidate of every word, ROOT one pseudo-tag (row 0 of taglink[0, m])."""
    arr = _check_scores(scores)
    n1 = arr.shape[0]
    unary = np.ascontiguousarray(unary, dtype=np.float64)
    if unary.ndim != 2 or unary.shape[0] != n1 - 1:
        raise ValueError(f"unary must be (n, g) = ({n1 - 1}, g), got shape {unary.shape}")
    g = unary.shape[1]
    trans = np.ascontiguousarray(trans, dtype=np.float64)
    taglink = np.ascontiguousarray(taglink, dtype=np.float64)
    if trans.shape != (g + 1, g + 1) or taglink.shape != (n1, n1, g, g):
        raise ValueError(f"trans must be ({g + 1}, {g + 1}) and taglink ({n1}, {n1}, {g}, {g}), got "
                         f"{trans.shape} and {taglink.shape}")
    for name, a in (("unary", unary), ("trans", trans), ("taglink", taglink)):
        if np.isnan(a).any() or np.isposinf(a).any():
            raise ValueError(f"{name} contains NaN or +inf")
    cand = np.full((n1, g), -1, dtype=np.int64)
    cand[1:] = np.arange(g)
    cnt = np.full(n1, g, dtype=np.int64)
    cnt[0] = 1
    return arr, taglink, unary, trans, cand, cnt


def joint_marginals(scores, taglink, unary, trans, projective=False, single_root=True,
                    max_iter=50, damping=0.0, tol=1e-8):
    """Arc and tag marginals of a joint model by BP (Smith & Eisner 2008 §3; `bpparse.joint`).

    The model: p(tree, tags) ∝ exp(Σ_{h->m} (scores[h, m] + taglink[h, m, t_h, t_m]) + Σ_i
    unary[i-1, t_i] + Σ_i trans[t_{i-1}, t_i]) under TREE (PTREE when ``projective``); ``taglink``
    float (n+1, n+1, g, g) (ROOT's row: ``taglink[0, m, 0, b]``), ``unary`` float (n, g) (-inf
    forbids a tag), ``trans`` float (g+1, g+1) with START / END at index g. Returns (arc marginals
    float64 (n+1, n+1), tag marginals float64 (n, g), converged).
    """
    from bpparse.kernels.bp_engine import TREE, PairFactors, bp_options
    from bpparse.kernels.factors.childseq import no_childseq
    from bpparse.kernels.factors.taglink import taglink_factors
    from bpparse.kernels.joint import empty_cross, joint_bp

    arr, taglink, unary, trans, cand, cnt = _joint_arrays(scores, taglink, unary, trans)
    n1, g = arr.shape[0], unary.shape[1]
    arcs = np.array([h * n1 + m for h in range(n1) for m in range(1, n1)
                     if h != m and arr[h, m] > -np.inf], dtype=np.int64)
    phi = taglink.reshape(n1 * n1, g, g)[arcs].copy()
    tl = taglink_factors(arcs, cand, cnt, phi)
    empty = np.zeros(0, dtype=np.int64)
    options = bp_options(TREE, projective, single_root, max_iter, tol, damping)
    bel, *_, tag_bel, _, residual = joint_bp(arr, PairFactors(empty, empty, np.zeros(0)),
                                             empty_cross(n1), no_childseq(), options, unary, trans,
                                             tl)
    with np.errstate(over="ignore"):
        mu = np.where(np.isneginf(bel), 0.0, 1.0 / (1.0 + np.exp(-bel)))
    tags = np.exp(tag_bel[1:])
    return mu, tags, bool(residual < tol)


def joint_dd_decode(scores, taglink, unary, trans, projective=False, single_root=True,
                    iterations=200, step=1.0, grand=None, sib=None, childseq=None):
    """The joint MAP tree and tags of the `joint_marginals` model, plus the second-order scores
    ``grand``, ``sib``, ``childseq`` of `dd_decode` if given, by dual decomposition (Rush et al.
    2010 §4.1; `bpparse.kernels.joint_dd`), with a certificate when it is exact. Returns a
    `JointDDResult` (heads, tags int64 (n+1,) with tags[0] = 0, certified, iterations, dual values
    — each an upper bound on every assignment's score — and the returned assignment's score)."""
    from bpparse.kernels.bp_engine import PairFactors
    from bpparse.kernels.joint_dd import TagScores, joint_dual_decompose

    arr, taglink, unary, trans, cand, cnt = _joint_arrays(scores, taglink, unary, trans)
    pa, pb, pw, n_grand, seq = _second_order_factors(arr.shape[0], grand, sib, childseq,
                                                     bool(single_root))
    none = np.zeros((0, arr.shape[0]), dtype=np.int64)
    return joint_dual_decompose(arr, PairFactors(pa, pb, pw), n_grand, seq,
                                TagScores(taglink, unary, trans, cand, cnt), bool(projective),
                                bool(single_root), int(iterations), float(step), none, none)
