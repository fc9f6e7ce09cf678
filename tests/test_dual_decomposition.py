"""Dual decomposition (docs/design.md §9) against enumeration of every tree: the dual bounds the MAP
score from above at every iteration, and a certified tree is the brute-force MAP tree."""
import numpy as np
import pytest
from oracle_factor_graph import childseq_transitions, tree_log_score, tree_table

from bpparse.graph import pairs_from_dense
from bpparse.kernels.dual_decomposition import (AD3, POLYAK, RULES, RUSH, dual_decompose,
                                                model_tree_score, segment_viterbi)
from bpparse.kernels.factors.childseq import childseq_from_dense, no_childseq
from bpparse.scoring import kept_pairs


def _random_model(rng, n, grand=True, sib=False, childseq=True, scale=1.0):
    size = n + 1
    link = rng.normal(0.0, 2.0, (size, size))
    np.fill_diagonal(link, -np.inf)
    link[:, 0] = -np.inf
    g = rng.normal(0.0, scale, (size,) * 3) if grand else None
    s = rng.normal(0.0, scale, (size,) * 3) if sib else None
    seq = rng.normal(0.0, scale, (size,) * 3) if childseq else None
    return link, g, s, seq


def _oracle_scores(trees, link, grand, sib, seq):
    return np.array([tree_log_score(t, link, grand, sib)
                     + (sum(seq[x] for x in childseq_transitions(t)) if seq is not None else 0.0)
                     for t in trees])


def _factors(link, grand, sib, seq, keep, single_root):
    size = link.shape[0]
    empty = np.zeros((0, 0, 0))
    pa, pb, pw, n_grand = pairs_from_dense(empty if grand is None else grand,
                                           empty if sib is None else sib)
    kept = np.array([keep[a // size, a % size] and keep[b // size, b % size]
                     for a, b in zip(pa, pb)], dtype=bool)
    if sib is not None and single_root:  # ROOT has no SIB factors (as in scoring.kept_pairs)
        kept &= ~((np.arange(len(pa)) >= n_grand) & (pa // size == 0))
    n_grand = int(kept[:n_grand].sum())
    factors = (pa[kept], pb[kept], pw[kept], n_grand)
    cs = childseq_from_dense(seq, keep, single_root) if seq is not None else no_childseq()
    return factors, cs


def _all_arcs(size):
    keep = np.ones((size, size), dtype=bool)
    np.fill_diagonal(keep, False)
    keep[:, 0] = False
    return keep


@pytest.mark.parametrize("c", [0, 1, 2, 4])
def test_segment_viterbi_is_the_best_sequence(c):
    rng = np.random.default_rng(c)
    d = c + 1
    W = rng.normal(0.0, 1.5, d * d)
    v = np.concatenate([[0.0], rng.normal(0.0, 1.5, c)])
    best_value = 0.0
    best_set = ()
    for bits in range(1, 2 ** c):
        pos = [j + 1 for j in range(c) if bits >> j & 1]
        path = [0] + pos
        value = sum(W[a * d + b] for a, b in zip(path, path[1:])) + W[pos[-1] * d] + v[pos].sum()
        if value > best_value:
            best_value, best_set = value, tuple(pos)
    chosen = np.zeros(d, dtype=bool)
    got = segment_viterbi(v, W, 0, c, np.empty(d), np.empty(d, np.int64), chosen)
    assert got == pytest.approx(best_value)
    assert tuple(np.flatnonzero(chosen)) == best_set


@pytest.mark.parametrize("single_root", [True, False])
def test_model_tree_score_matches_the_oracle(single_root):
    rng = np.random.default_rng(3)
    n = 5
    link, grand, sib, seq = _random_model(rng, n, grand=True, sib=True)
    (pa, pb, pw, _), cs = _factors(link, grand, sib, seq, _all_arcs(n + 1), single_root)
    trees = tree_table(n, False, single_root)
    if single_root:  # the oracle has ROOT's SIB and automaton; scoring leaves them out
        sib[0] = 0.0
        seq[0] = 0.0
    want = _oracle_scores(trees, link, grand, sib, seq)
    got = [model_tree_score(t, link, pa, pb, pw, cs) for t in trees]
    assert np.allclose(got, want)


CASES = [  # (grand, sib, childseq, projective, single_root, pruned)
    (False, False, True, False, True, False),
    (True, False, True, False, True, False),
    (True, False, True, True, True, False),
    (True, False, False, False, False, False),
    (True, True, True, False, True, False),
    (True, False, True, False, True, True),
    (True, True, True, True, False, True),
]


def _decompose(link, pa, pb, pw, n_grand, cs, projective, single_root, iterations, rule=RUSH):
    step = {code: step for code, step in RULES.values()}[rule]
    return dual_decompose(link, pa, pb, pw, n_grand, cs, projective, single_root, iterations, rule,
                          step, np.zeros((0, link.shape[0]), np.int64))


@pytest.mark.parametrize("rule", [RUSH, POLYAK, AD3])
@pytest.mark.parametrize("grand,sib,childseq,projective,single_root,pruned", CASES)
def test_dual_bounds_map_and_certificates_are_exact(grand, sib, childseq, projective, single_root,
                                                     pruned, rule):
    rng = np.random.default_rng(hash((grand, sib, childseq, projective, single_root, pruned)) % 2**32)
    certified = 0
    runs = 12
    for trial in range(runs):
        n = int(rng.integers(3, 7))
        size = n + 1
        link, g, s, seq = _random_model(rng, n, grand, sib, childseq, scale=0.7)
        keep = _all_arcs(size)
        if pruned:
            keep &= rng.random((size, size)) < 0.6
        (pa, pb, pw, n_grand), cs = _factors(link, g, s, seq, keep, single_root)
        trees = tree_table(n, projective, single_root)
        scores = np.array([model_tree_score(t, link, pa, pb, pw, cs) for t in trees])
        best = scores.max()
        res = _decompose(link, pa, pb, pw, n_grand, cs, projective, single_root, 200, rule)
        assert res.iterations == len(res.dual) >= 1
        assert np.all(res.dual >= best - 1e-9), (res.dual.min(), best)
        assert res.score == pytest.approx(model_tree_score(res.heads, link, pa, pb, pw, cs))
        assert any(np.array_equal(res.heads, t) for t in trees)  # always a tree of the constraint
        if res.certified:
            certified += 1
            assert res.score == pytest.approx(best)
            assert np.array_equal(res.heads, trees[int(np.argmax(scores))])
            assert res.dual[-1] == pytest.approx(best)
    # the relaxation is tight on most of these small problems (Koo et al. 2010: 98% on treebanks)
    assert certified >= runs // 2


def test_first_order_certifies_at_once():
    rng = np.random.default_rng(0)
    link, _, _, _ = _random_model(rng, 6, grand=False, childseq=False)
    empty = np.zeros(0, np.int64)
    res = _decompose(link, empty, empty, np.zeros(0), 0, no_childseq(), False, True, 50)
    trees = tree_table(6, False, True)
    scores = _oracle_scores(trees, link, None, None, None)
    assert res.certified and res.iterations == 1
    assert np.array_equal(res.heads, trees[int(np.argmax(scores))])


def test_kept_pairs_layout_is_accepted():
    """The factors `bpparse.scoring` builds (GRAND children inside the automata) decompose."""
    rng = np.random.default_rng(5)
    n = 6
    size = n + 1
    link, grand, sib, seq = _random_model(rng, n, grand=True, sib=True)
    keep = _all_arcs(size) & (rng.random((size, size)) < 0.7)
    for m in range(1, size):  # every word keeps a head, as scoring.kept_arcs does
        keep[0 if m == 1 else m - 1, m] = True
    pa, pb, n_grand = kept_pairs(keep, True, True, True)
    pw = np.where(np.arange(len(pa)) < n_grand, grand[pa // size, pa % size, pb % size],
                  sib[pa // size, pa % size, pb % size])
    cs = childseq_from_dense(seq, keep, True)
    res = _decompose(link, pa, pb, pw, n_grand, cs, False, True, 100)
    trees = tree_table(n, False, True)
    best = max(model_tree_score(t, link, pa, pb, pw, cs) for t in trees)
    assert np.all(res.dual >= best - 1e-9)
    assert res.score <= best + 1e-9


# ---------------------------------------------------------------- the public API and the parser

@pytest.mark.parametrize("projective", [False, True])
def test_dd_decode_against_brute_force(projective):
    """`bpparse.dd_decode` on dense first-order + GRAND + CHILDSEQ scores: certified trees are the
    MAP trees of the oracle's own scoring (tests/oracle_factor_graph.py), the dual bounds it."""
    import bpparse

    rng = np.random.default_rng(11 + projective)
    certified = 0
    for trial in range(12):
        n = int(rng.integers(3, 7))
        link, grand, _, seq = _random_model(rng, n, grand=True, childseq=True, scale=0.3)
        seq[0] = 0.0  # single root: ROOT has no automaton
        trees = tree_table(n, projective, True)
        scores = _oracle_scores(trees, link, grand, None, seq)
        res = bpparse.dd_decode(link, grand=grand, childseq=seq, projective=projective,
                                iterations=200)
        assert np.all(res.dual >= scores.max() - 1e-9)
        if res.certified:
            certified += 1
            assert np.array_equal(res.heads, trees[int(np.argmax(scores))])
    assert certified >= 6
    with pytest.raises(ValueError, match="rule"):
        bpparse.dd_decode(link, rule="newton")
    with pytest.raises(ValueError, match="grand must have shape"):
        bpparse.dd_decode(link, grand=np.zeros((2, 2, 2)))
