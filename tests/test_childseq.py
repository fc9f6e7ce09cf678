"""CHILDSEQ head automata (docs/design.md §8): the factor's messages and beliefs against enumeration
of its assignments, BP with CHILDSEQ against enumeration of trees / assignments, and the model's
features, gradient and training through the same kernels."""
import itertools

import numpy as np
import pytest
from oracle_factor_graph import exact_childseq, factor_messages_by_enumeration

from bpparse.bp import bp_marginals
from bpparse.kernels.factors.childseq import (
    childseq_from_dense,
    childseq_segments,
    gold_transitions,
    segment_beliefs,
    segment_messages,
)


def _sequence_log_value(bits, W, c):
    """Log-potential of one segment's assignment (positions 1..c present where bits say)."""
    d = c + 1
    present = [j + 1 for j in range(c) if bits[j]]
    if not present:
        return 0.0
    seq = [0] + present
    total = sum(W[a * d + b] for a, b in zip(seq, seq[1:]))
    return total + W[present[-1] * d]


def _random_segment(rng, c, scale=1.5):
    d = c + 1
    W = rng.normal(0.0, scale, d * d)
    q = np.concatenate([[np.nan], rng.normal(0.0, 2.0, c), [np.nan]])
    return W, q


@pytest.mark.parametrize("c", [1, 2, 3, 5])
def test_segment_messages_match_enumeration(c):
    rng = np.random.default_rng(c)
    for _ in range(5):
        W, q = _random_segment(rng, c)
        r = np.empty(c + 2)
        log_z = segment_messages(q, W, c, r, np.empty((4, c + 2)))
        expected, table = factor_messages_by_enumeration(
            q[1:c + 1], lambda bits: np.exp(_sequence_log_value(bits, W, c)))
        np.testing.assert_allclose(r[1:c + 1], expected, atol=1e-10)
        np.testing.assert_allclose(log_z, np.log(sum(v for _, v in table)), atol=1e-10)


@pytest.mark.parametrize("c", [1, 2, 4])
def test_segment_beliefs_are_transition_probabilities(c):
    rng = np.random.default_rng(10 + c)
    d = c + 1
    W, q = _random_segment(rng, c)
    out = np.empty(d * d)
    segment_beliefs(q, W, c, out, np.empty((4, c + 2)))
    expected = np.zeros(d * d)
    total = 0.0
    for bits in itertools.product((0, 1), repeat=c):
        value = np.exp(_sequence_log_value(bits, W, c) + sum(q[j + 1] for j in range(c) if bits[j]))
        total += value
        present = [j + 1 for j in range(c) if bits[j]]
        if present:
            seq = [0] + present + [0]
            for a, b in zip(seq, seq[1:]):
                expected[a * d + b] += value
    np.testing.assert_allclose(out, expected / total, atol=1e-12)


def test_messages_are_exact_for_beliefs_near_one_and_huge_scores():
    # a child that is almost surely present: Z_¬j is formed without subtracting from Z
    c = 3
    W = np.zeros((c + 1) ** 2)
    q = np.array([np.nan, 40.0, -3.0, 1.0, np.nan])
    r = np.empty(c + 2)
    segment_messages(q, W, c, r, np.empty((4, c + 2)))
    expected, _ = factor_messages_by_enumeration(q[1:c + 1], lambda bits: 1.0)
    np.testing.assert_allclose(r[1:c + 1], expected, atol=1e-9)
    np.testing.assert_allclose(r[1:c + 1], 0.0, atol=1e-9)  # a constant factor sends nothing
    W = np.full((c + 1) ** 2, 5000.0)
    q = np.array([np.nan, -9000.0, 20.0, 8000.0, np.nan])
    segment_messages(q, W, c, r, np.empty((4, c + 2)))
    assert np.isfinite(r[1:c + 1]).all()


def _log_z_reference(q, W, c, forbid=0, force=0):
    """log Σ over the segment's sequences (positions 1..c) of exp(potential + Σ q), by a plain DP
    over the last present position in np.logaddexp; sequences containing ``forbid`` or skipping
    ``force`` (a position, 0 = none) are left out."""
    d = c + 1
    last = np.full(d, -np.inf)  # last[k]: sequences so far ending at k (0 = none yet)
    last[0] = 0.0
    for j in range(1, d):
        if j == forbid:
            continue
        lo = force if 0 < force < j else 0  # a sequence that skipped `force` cannot continue
        terms = [last[k] + W[k * d + j] for k in range(lo, j) if np.isfinite(last[k])]
        last[j] = q[j] + np.logaddexp.reduce(terms)
    ends = [last[k] + (W[k * d] if k else 0.0) for k in range(d)
            if np.isfinite(last[k]) and (force == 0 or k >= force)]
    return np.logaddexp.reduce(ends)


@pytest.mark.parametrize("c,scale", [(12, 1.5), (30, 3.0), (12, 2000.0), (25, 800.0)])
def test_long_segments_and_huge_scores_match_a_log_space_dp(c, scale):
    # messages = log Z(sequences with j) - log Z(sequences without j) - q_j, each Z by its own DP;
    # the huge scores make the fast sums underflow, so the kernel redoes them in log space
    rng = np.random.default_rng(c)
    for _ in range(3):
        W, q = _random_segment(rng, c, scale)
        q[1:c + 1] *= scale / 2
        r = np.empty(c + 2)
        log_z = segment_messages(q, W, c, r, np.empty((4, c + 2)))
        assert np.isclose(log_z, _log_z_reference(q, W, c), rtol=1e-12, atol=1e-9)
        for j in range(1, c + 1):
            expected = (_log_z_reference(q, W, c, force=j) - _log_z_reference(q, W, c, forbid=j)
                        - q[j])
            assert np.isclose(r[j], expected, rtol=1e-9, atol=1e-8 * max(1.0, scale)), (j, r[j], expected)


def test_segments_order_children_outward():
    keep = np.ones((5, 5), bool)
    np.fill_diagonal(keep, False)
    keep[:, 0] = False
    keep[2, 4] = False
    head, start, child, w_start = childseq_segments(keep, True)
    segs = [(int(h), list(child[start[s]:start[s + 1]])) for s, h in enumerate(head)]
    assert segs[:3] == [(1, [2, 3, 4]), (2, [1]), (2, [3])]
    assert (3, [2, 1]) in segs and (4, [3, 2, 1]) in segs
    assert all(h != 0 for h, _ in segs)  # single root: ROOT has no automaton
    assert list(np.diff(w_start)) == [(len(c) + 1) ** 2 for _, c in segs]
    head, _, _, _ = childseq_segments(keep, False)
    assert head[0] == 0


def test_gold_transitions_follow_the_tree():
    n = 5
    heads = np.array([-1, 2, 0, 2, 2, 4])
    keep = np.ones((n + 1, n + 1), bool)
    np.fill_diagonal(keep, False)
    keep[:, 0] = False
    seq = childseq_from_dense(np.zeros((n + 1,) * 3), keep, False)
    from oracle_factor_graph import childseq_transitions

    from bpparse.kernels.factors.childseq import dense_transition_values
    dense = dense_transition_values(seq, gold_transitions(seq, heads), n + 1)
    expected = np.zeros((n + 1,) * 3)
    for x in childseq_transitions(heads):
        expected[x] += 1
    np.testing.assert_array_equal(dense, expected)


def _all_assignments_childseq(link, seq, per_child):
    """Exact arc marginals of LINK + CHILDSEQ + a per-child hard constraint ("atmost1" or
    "exactly1"), over every assignment of the arc variables."""
    n = link.shape[0] - 1
    arcs = [(h, m) for m in range(1, n + 1) for h in range(n + 1) if h != m]
    values = []
    for bits in itertools.product((0, 1), repeat=len(arcs)):
        present = {a for a, b in zip(arcs, bits) if b}
        parents = [sum((h, m) in present for h in range(n + 1)) for m in range(1, n + 1)]
        if max(parents) > 1 or (per_child == "exactly1" and min(parents) == 0):
            continue
        value = sum(link[a] for a in present)
        for h in range(n + 1):
            for side in ([m for m in range(h - 1, 0, -1) if (h, m) in present],
                         [m for m in range(h + 1, n + 1) if (h, m) in present]):
                if side:
                    chain = [h] + side + [h]
                    value += sum(seq[h, a, b] for a, b in zip(chain, chain[1:]))
        values.append((present, value))
    top = max(v for _, v in values)
    z = sum(np.exp(v - top) for _, v in values)
    marg = np.zeros_like(link)
    for present, v in values:
        for a in present:
            marg[a] += np.exp(v - top) / z
    return marg


@pytest.mark.parametrize("per_child", ["atmost1", "exactly1"])
def test_bp_is_exact_on_a_factor_tree(per_child):
    # n = 2: CHILDSEQ of ROOT joins the two ROOT arcs, each per-child factor one of them with the
    # other word's arc: the factor graph has no loop, so BP is exact
    rng = np.random.default_rng(5)
    for _ in range(3):
        link = rng.normal(0.0, 1.0, (3, 3))
        seq = rng.normal(0.0, 1.5, (3, 3, 3))
        res = bp_marginals(link, childseq=seq, constraint=per_child, max_iter=10, tol=1e-12)
        assert res.converged
        exact = _all_assignments_childseq(link, seq, per_child)
        np.testing.assert_allclose(res.marginals[:, 1:], exact[:, 1:], atol=1e-9)


@pytest.mark.parametrize("projective", [False, True])
@pytest.mark.parametrize("single_root", [False, True])
def test_bp_with_tree_and_childseq_is_close_to_exact(projective, single_root):
    # loopy BP is approximate: it must be much closer to the exact marginals than the first-order
    # model that ignores the automata (measured mean errors 0.013-0.027 vs 0.12-0.15)
    n = 5
    rng = np.random.default_rng(3 + 2 * projective + single_root)
    bp_error = first_error = count_error = 0.0
    for _ in range(4):
        link = rng.normal(0.0, 1.0, (n + 1, n + 1))
        seq = rng.normal(0.0, 1.0, (n + 1,) * 3)
        exact, _, counts, _ = exact_childseq(link, seq, projective, single_root)
        res = bp_marginals(link, childseq=seq, projective=projective, single_root=single_root,
                           max_iter=20, damping=0.3)
        first = bp_marginals(link, projective=projective, single_root=single_root, max_iter=1)
        bp_error += np.abs(res.marginals - exact)[:, 1:].mean() / 4
        first_error += np.abs(first.marginals - exact)[:, 1:].mean() / 4
        count_error += np.abs(res.seq_expected - counts).mean() / 4
        np.testing.assert_allclose(res.marginals[:, 1:].sum(axis=0), 1.0, atol=1e-3)
    assert bp_error < 0.03 and bp_error < first_error / 2
    assert count_error < 0.02


def test_zero_childseq_changes_nothing():
    n = 4
    rng = np.random.default_rng(0)
    link = rng.normal(0.0, 1.0, (n + 1, n + 1))
    plain = bp_marginals(link, max_iter=3)
    with_seq = bp_marginals(link, childseq=np.zeros((n + 1,) * 3), max_iter=3)
    np.testing.assert_allclose(with_seq.marginals, plain.marginals, atol=1e-12)


@pytest.mark.parametrize("fine,second_words", [(True, False), (False, True)])
def test_childseq_scores_and_scatter_enumerate_the_same_features(fine, second_words):
    # scoring sums theta over a transition's features, the gradient adds to the same features:
    # theta · scatter(coef) = Σ_e coef[e] · w[e] for any theta and coef
    from bpparse import features as F
    from test_features import _w, layout, random_tokens
    rng = np.random.default_rng(7)
    ly = layout(fine=fine, second_words=second_words)
    n = 6
    attrs = F.sentence_attributes(random_tokens(rng, n), fine)
    keep = rng.random((n + 1, n + 1)) < 0.6
    np.fill_diagonal(keep, False)
    keep[:, 0] = False
    head, start, child, w_start = childseq_segments(keep, False)
    theta = rng.normal(size=int(ly[F.LY_SIZE]))
    nomask = np.empty(0, dtype=np.uint64)
    w = F.childseq_scores(attrs, _w(ly, nomask, theta), head, start, child, w_start)
    coef = rng.normal(size=w.shape[0])
    grad = np.zeros_like(theta)
    F.childseq_scatter(attrs, ly, nomask, head, start, child, w_start, coef, grad,
                       np.empty(0, np.uint8), 0.0)
    assert np.count_nonzero(w) > 0
    assert theta @ grad == pytest.approx(coef @ w, rel=1e-9)
    # a gold tree's transitions keep every feature under the gold-feature mask
    heads = np.array([-1, 2, 0, 2, 2, 6, 4])
    mask = np.zeros(int(ly[F.LY_LAB_OFF]) // 64 + 1, dtype=np.uint64)
    F.mark_gold_features(attrs, ly, heads, False, False, True, mask)
    every = np.ones((n + 1, n + 1), bool)
    np.fill_diagonal(every, False)
    every[:, 0] = False
    seq = childseq_from_dense(np.zeros((n + 1,) * 3), every, False)
    args = (seq.head, seq.start, seq.child, seq.w_start)
    full = F.childseq_scores(attrs, _w(ly, nomask, theta), *args)
    masked = F.childseq_scores(attrs, _w(ly, mask, theta), *args)
    gold = gold_transitions(seq, heads) > 0
    np.testing.assert_allclose(masked[gold], full[gold])
    assert not np.allclose(masked[~gold], full[~gold])


def test_projective_bp_approaches_the_exact_sibling_dp():
    # beyond enumeration (n = 14): the exact O(n³) DP is the reference for PTREE + CHILDSEQ BP
    import bpparse
    rng = np.random.default_rng(11)
    n = 14
    link = rng.normal(0.0, 2.0, (n + 1, n + 1))
    seq = rng.normal(0.0, 0.5, (n + 1,) * 3)
    exact, log_z, counts = bpparse.sibling_marginals(link, seq, single_root=True)
    res = bp_marginals(link, childseq=seq, projective=True, single_root=True, max_iter=30,
                       damping=0.3)
    first, _ = bpparse.tree_marginals(link, projective=True)
    bp_error = np.abs(res.marginals - exact)[:, 1:].mean()
    assert bp_error < np.abs(first - exact)[:, 1:].mean() / 2
    heads, score = bpparse.decode_sibling_tree(link, seq, single_root=True)
    assert score <= log_z
    small = rng.normal(0.0, 1.0, (5, 5))
    small_seq = rng.normal(0.0, 1.0, (5, 5, 5))
    marg, lz, cnt, best = exact_childseq(small, small_seq, projective=True)
    got = bpparse.sibling_marginals(small, small_seq)
    np.testing.assert_allclose(got[0], marg, atol=1e-10)
    np.testing.assert_allclose(got[2], cnt, atol=1e-10)
    assert got[1] == pytest.approx(lz)
    assert list(bpparse.decode_sibling_tree(small, small_seq)[0]) == list(best)
    with pytest.raises(ValueError, match="childseq must have shape"):
        bpparse.sibling_marginals(small, small_seq[:4])


@pytest.mark.slow
def test_childseq_gradient_matches_finite_differences_of_the_exact_likelihood():
    # on the exact projective model (sibling DP): d log p(gold) / d theta over the CHILDSEQ
    # weights = Σ_e (gold[e] − expected[e]) · features(e), which childseq_scatter forms
    from pathlib import Path

    from bpparse import features as F
    from bpparse.config import load_config
    from bpparse.conll import read_conll
    from bpparse.encode import Vocabularies
    from bpparse.inference import exact_projective_marginals
    from bpparse.kernels.factors.childseq import transition_values_at
    from bpparse.model import Model
    from bpparse.scoring import sentence_scores
    tiny = Path(__file__).resolve().parent / "data" / "en_ewt_train_tiny.conllu"
    sentences = list(read_conll(tiny))
    config = load_config("childseq-projective", {
        "features.hash_bits": 16, "features.second_order_hash_bits": 12,
        "features.label_hash_bits": 10, "features.gold_only": False, "features.fine_tags": True,
        "features.morph": False, "features.lemma": False})
    model = Model(config, Vocabularies.build(sentences))
    rng = np.random.default_rng(2)
    model.theta = rng.normal(scale=0.3, size=model.theta.shape[0])
    e = model.encode(next(s for s in sentences if 4 <= s.n <= 7))
    heads = np.asarray(e.heads, dtype=np.int64)
    settings = config.inference_settings("parse", prune=0.0)
    attrs = F.sentence_attributes(e.tokens, model.fine_tags)
    empty = np.empty(0, dtype=np.int64)

    def log_likelihood():
        sc = sentence_scores(attrs, model.weights, settings, empty)
        gold = sum(sc.arc[heads[m], m] for m in range(1, len(heads)))
        gold += gold_transitions(sc.seq, heads) @ sc.seq.w
        return gold - exact_projective_marginals(model, e, settings)[2]

    sc = sentence_scores(attrs, model.weights, settings, empty)
    expected = transition_values_at(sc.seq, exact_projective_marginals(model, e, settings)[3])
    grad = np.zeros_like(model.theta)
    F.childseq_scatter(attrs, model.layout, model.mask, sc.seq.head, sc.seq.start, sc.seq.child,
                       sc.seq.w_start, gold_transitions(sc.seq, heads) - expected, grad,
                       np.empty(0, np.uint8), 0.0)
    touched = np.flatnonzero(grad)
    lo, hi = int(model.layout[F.LY_SEC_OFF]), int(model.layout[F.LY_LAB_OFF])
    assert touched.size > 20 and ((touched >= lo) & (touched < hi)).all()
    base = model.theta.copy()
    eps = 1e-5
    for _ in range(3):
        v = np.zeros_like(base)
        v[touched] = rng.normal(size=touched.size)
        model.theta = base + eps * v
        up = log_likelihood()
        model.theta = base - eps * v
        down = log_likelihood()
        assert (up - down) / (2 * eps) == pytest.approx(grad @ v, rel=1e-5, abs=1e-7)


@pytest.mark.slow
def test_cli_trains_a_childseq_model_that_parse_and_relax_parse_alike(tmp_path):
    from pathlib import Path

    from test_cli import run
    data = Path(__file__).resolve().parent / "data"
    tiny = data / "en_ewt_train_tiny.conllu"
    out = tmp_path / "cs.bpm"
    args = ["train", "--config", "childseq", "--train", str(tiny), "--out", str(out), "--epochs", "2",
            "--jobs", "1", "--no-progress"]
    for key, value in (("features.hash_bits", 16), ("features.second_order_hash_bits", 12),
                       ("features.label_hash_bits", 10)):
        args += ["--set", f"{key}={value}"]
    assert run(*args).exit_code == 0
    parsed = run("parse", "-m", str(out), str(tiny))
    assert parsed.exit_code == 0
    assert parsed.stdout.count("\n\n") == sum(1 for _ in open(tiny).read().split("\n\n") if _.strip())
    # LINK + CHILDSEQ leaves relaxation nothing to select: BP to convergence on the same graph
    parsed = run("parse", "-m", str(out), str(tiny), "--iterations", "300", "--tolerance", "1e-11")
    relaxed = run("relax", "-m", str(out), str(tiny), "--bp-iter", "300", "--tolerance", "1e-11")
    assert relaxed.exit_code == 0 and relaxed.stdout == parsed.stdout
