"""Joint tagging and parsing (bpparse.joint): the TAGLINK factor and joint BP against brute-force
enumeration over tags x trees, and joint parsing end to end."""
import io
import itertools
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from oracle import all_trees, is_tree
from oracle_factor_graph import childseq_transitions, tree_log_scores, tree_table

from bpparse.cli import cli
from bpparse.conll import read_conll, with_tags
from bpparse.errors import ConfigError
from bpparse.kernels.bp_engine import TREE, PairFactors, bp_options
from bpparse.kernels.chain import chain_log_marginals
from bpparse.kernels.factors.childseq import ChildSeqFactors, no_childseq
from bpparse.kernels.factors.taglink import (
    taglink_beliefs,
    taglink_factors,
    taglink_update,
)
from bpparse.kernels.joint import empty_cross, joint_bp
from bpparse.kernels.joint_dd import TagScores, joint_dual_decompose, joint_score
from bpparse.parse import parse_sentences, parse_settings
from bpparse.tagging import strip_tags


def _logsumexp(values):
    values = np.asarray(list(values), dtype=np.float64)
    top = values.max()
    return top + np.log(np.exp(values - top).sum())


@pytest.mark.parametrize("seed", range(5))
def test_taglink_messages_and_beliefs_match_enumeration(seed):
    """One factor over (L, T_h, T_m) with incoming messages: outgoing messages and the factor
    belief by the kernel equal the sums over the factor's 2 x C x C configurations."""
    rng = np.random.default_rng(seed)
    C = 3
    n1 = 3
    h, m = 1, 2
    cand = np.array([[-1, -1, -1], [0, 1, 2], [2, 0, 1]], dtype=np.int64)
    cnt = np.array([1, 3, 2 + seed % 2], dtype=np.int64)
    phi = rng.normal(0, 2, (1, C, C))
    tl = taglink_factors(np.array([h * n1 + m]), cand, cnt, phi)
    q = rng.normal(0, 2)
    bel = np.zeros((n1, n1))
    bel[h, m] = q  # the factor's own message is 0, so the arc sends q
    tag_bel = np.full((n1, C), -np.inf)
    tag_bel[0, 0] = 0.0
    mu_h = rng.normal(0, 1, cnt[h])
    mu_m = rng.normal(0, 1, cnt[m])
    tag_bel[h, :cnt[h]] = mu_h
    tag_bel[m, :cnt[m]] = mu_m
    prob = taglink_beliefs(bel, tag_bel, tl)
    taglink_update(bel, tag_bel, tl, 0.0, 200.0)

    def config_scores():
        for L, a, b in itertools.product((0, 1), range(cnt[h]), range(cnt[m])):
            yield L, a, b, L * (q + phi[0, a, b]) + mu_h[a] + mu_m[b]

    configs = list(config_scores())
    on = _logsumexp(v - q for L, a, b, v in configs if L == 1)
    off = _logsumexp(v for L, a, b, v in configs if L == 0)
    assert tl.to_arc[0] == pytest.approx(on - off, abs=1e-10)
    for a in range(cnt[h]):
        # message to T_h: sum over L and b with T_h's own input left out
        expected = _logsumexp(v - mu_h[a] for L, a2, b, v in configs if a2 == a)
        expected -= max(_logsumexp(v - mu_h[x] for L, a2, b, v in configs if a2 == x)
                        for x in range(cnt[h]))
        assert tl.to_head[0, a] == pytest.approx(expected, abs=1e-10)
    for b in range(cnt[m]):
        expected = _logsumexp(v - mu_m[b] for L, a, b2, v in configs if b2 == b)
        expected -= max(_logsumexp(v - mu_m[x] for L, a, b2, v in configs if b2 == x)
                        for x in range(cnt[m]))
        assert tl.to_child[0, b] == pytest.approx(expected, abs=1e-10)
    logz = _logsumexp(v for *_, v in configs)
    for a in range(cnt[h]):
        for b in range(cnt[m]):
            expected = np.exp(q + phi[0, a, b] + mu_h[a] + mu_m[b] - logz)
            assert prob[0, a, b] == pytest.approx(expected, abs=1e-12)


def brute_force_joint(link, unary, trans, arcs, phi, cand, single_root=True):
    """Arc marginals (n+1, n+1) and tag marginals (n, g) of the joint model by enumerating every
    tree and every tag sequence of the candidates."""
    n = link.shape[0] - 1
    g = unary.shape[1]
    n1 = n + 1
    factor = {int(a): f for f, a in enumerate(arcs)}
    cand_index = [{int(t): c for c, t in enumerate(row) if t >= 0} for row in cand]
    mu = np.zeros((n1, n1))
    tags = np.zeros((n, g))
    entries = []
    for heads in all_trees(n, single_root=single_root):
        tree = sum(link[heads[m], m] for m in range(1, n1))
        for seq in itertools.product(range(g), repeat=n):
            if any(unary[i, t] == -np.inf for i, t in enumerate(seq)):
                continue
            path = (g,) + seq + (g,)
            score = tree + sum(unary[i, t] for i, t in enumerate(seq))
            score += sum(trans[a, b] for a, b in itertools.pairwise(path))
            full = (-1,) + seq
            for m in range(1, n1):
                f = factor.get(heads[m] * n1 + m)
                if f is not None:
                    a = 0 if heads[m] == 0 else cand_index[heads[m]][full[heads[m]]]
                    score += phi[f, a, cand_index[m][full[m]]]
            entries.append((heads, seq, score))
    logz = _logsumexp(s for *_, s in entries)
    for heads, seq, score in entries:
        p = np.exp(score - logz)
        for m in range(1, n1):
            mu[heads[m], m] += p
        for i, t in enumerate(seq):
            tags[i, t] += p
    return mu, tags


def _joint_case(rng, n, g, scale, only=None):
    """Random link scores, chain and TAGLINK factors on every arc (all tags candidates); with
    ``only`` = (h, m) every φ but that arc's is 0."""
    n1 = n + 1
    link = rng.normal(0, 1, (n1, n1))
    unary = rng.normal(0, 1, (n, g))
    trans = rng.normal(0, scale, (g + 1, g + 1))
    cand = np.full((n1, g), -1, dtype=np.int64)
    cand[0, 0] = -1
    cand[1:] = np.arange(g)
    cnt = np.full(n1, g, dtype=np.int64)
    cnt[0] = 1
    arcs = np.array([h * n1 + m for h in range(n1) for m in range(1, n1) if h != m], dtype=np.int64)
    phi = rng.normal(0, scale, (arcs.shape[0], g, g))
    phi[arcs < n1, 1:, :] = 0.0  # ROOT has one pseudo-tag: only row 0 is read
    if only is not None:
        keep = arcs == only[0] * n1 + only[1]
        phi[~keep] = 0.0
    return link, unary, trans, taglink_factors(arcs, cand, cnt, phi)


def _run_joint(link, unary, trans, tl, iterations=200, damping=0.0):
    n1 = link.shape[0]
    empty = np.zeros(0, dtype=np.int64)
    seq = ChildSeqFactors(empty, np.zeros(1, np.int64), empty, np.zeros(1, np.int64), np.zeros(0),
                          np.zeros(0))
    options = bp_options(TREE, False, True, iterations, 1e-12, damping)
    pairs = PairFactors(empty, empty, np.zeros(0))
    bel, *_, tag_bel, _, residual = joint_bp(link, pairs, empty_cross(n1), seq, options, unary,
                                               trans, tl)
    mu = 1.0 / (1.0 + np.exp(-bel))
    g = unary.shape[1]
    tags = np.zeros((n1 - 1, g))
    for i in range(1, n1):
        for c in range(tl.cnt[i]):
            tags[i - 1, tl.cand[i, c]] = np.exp(tag_bel[i, c])
    return mu, tags, residual


@pytest.mark.parametrize("seed", range(4))
def test_joint_bp_is_exact_when_the_graph_is_a_tree(seed):
    """With zero transitions (the chain couples nothing) and one TAGLINK factor carrying scores,
    the joint graph has no loop through the tags: BP's arc and tag marginals are exact."""
    rng = np.random.default_rng(seed)
    n, g = 3, 3
    link, unary, trans, tl = _joint_case(rng, n, g, 1.5, only=(1 + seed % 3, 1 + (seed + 1) % 3))
    trans[:] = 0.0
    mu_ref, tags_ref = brute_force_joint(link, unary, trans, tl.arcs, tl.phi, tl.cand)
    mu, tags, residual = _run_joint(link, unary, trans, tl)
    assert residual < 1e-9
    n1 = n + 1
    for h in range(n1):
        for m in range(1, n1):
            if h != m:
                assert mu[h, m] == pytest.approx(mu_ref[h, m], abs=1e-8)
    np.testing.assert_allclose(tags, tags_ref, atol=1e-8)


def test_joint_bp_without_taglink_scores_is_tree_and_chain_inference():
    """φ = 0: arcs and tags are independent, BP gives the matrix-tree marginals and the chain's."""
    rng = np.random.default_rng(7)
    link, unary, trans, tl = _joint_case(rng, 4, 3, 1.0)
    tl.phi[:] = 0.0
    mu_ref, _ = brute_force_joint(link, np.zeros((4, 1)), np.zeros((2, 2)), tl.arcs[:0],
                                  tl.phi[:0], tl.cand)
    mu, tags, _ = _run_joint(link, unary, trans, tl)
    lm, _ = chain_log_marginals(unary, trans)
    np.testing.assert_allclose(tags, np.exp(lm), atol=1e-10)
    for h in range(5):
        for m in range(1, 5):
            if h != m:
                assert mu[h, m] == pytest.approx(mu_ref[h, m], abs=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_loopy_joint_bp_is_close_to_enumeration(seed):
    """Every arc a TAGLINK factor and a scored chain: the graph is loopy, BP approximate; with
    moderate scores its marginals stay close to the exact ones, and far closer than the
    marginals of the uncoupled model (tree and chain separately, the pipeline's view)."""
    rng = np.random.default_rng(100 + seed)
    n, g = 3, 2
    link, unary, trans, tl = _joint_case(rng, n, g, 0.5)
    mu_ref, tags_ref = brute_force_joint(link, unary, trans, tl.arcs, tl.phi, tl.cand)
    mu, tags, residual = _run_joint(link, unary, trans, tl, damping=0.3)
    assert residual < 1e-6
    n1 = n + 1
    off = ~np.eye(n1, dtype=bool)
    off[:, 0] = False
    err = np.abs(mu - mu_ref)[off].mean() + np.abs(tags - tags_ref).mean()
    tl0 = taglink_factors(tl.arcs, tl.cand, tl.cnt, np.zeros_like(tl.phi))
    mu0, tags0, _ = _run_joint(link, unary, trans, tl0)
    err0 = np.abs(mu0 - mu_ref)[off].mean() + np.abs(tags0 - tags_ref).mean()
    assert err < 0.045  # measured 0.012-0.040 (seeds 0-3)
    assert err < err0 / 2



# ---------------------------------------------------------------- the joint model end to end

TINY = Path(__file__).parent / "data" / "en_ewt_train_tiny.conllu"


def _train_joint_model(folder, config_name):
    """A ``config_name`` model with a tagger and TAGLINK weights trained on the tiny fixture,
    written and read back; ``.trained`` is the TagLink before storing."""
    from bpparse.config import load_config
    from bpparse.model import load_model, save_model
    from bpparse.train import train
    from bpparse.train_joint import train_taglink

    config = load_config(config_name, {"features.hash_bits": 16, "train.epochs": 2,
                                       "tagger.enabled": True, "tagger.epochs": 4,
                                       "tagger.hash_bits": 14, "tagger.feats_hash_bits": 12})
    train(config, TINY, folder / "m.bpm", progress=False, log=lambda message: None)
    model = load_model(folder / "m.bpm")
    sentences = list(read_conll(TINY))
    options = {"epochs": 4, "hash_bits": 14, "feats_bits": 12}
    trained = train_taglink(model, sentences, None, folds=2, epochs=2, hash_bits=12,
                            say=lambda message: None, tagger_options=options)
    model.taglink = trained
    save_model(model, folder / "joint.bpm")
    loaded = load_model(folder / "joint.bpm")
    loaded.trained = trained
    loaded.path = folder / "joint.bpm"
    loaded.plain_path = folder / "m.bpm"
    return loaded


@pytest.fixture(scope="module")
def joint_model(tmp_path_factory):
    """A first-order joint model (`_train_joint_model`)."""
    return _train_joint_model(tmp_path_factory.mktemp("joint"), "first-order")


def test_taglink_weights_survive_the_model_file(joint_model):
    stored, trained = joint_model.taglink, joint_model.trained
    assert np.count_nonzero(trained.table) > 0
    np.testing.assert_array_equal(stored.table, trained.table)
    assert stored._replace(table=None) == trained._replace(table=None)


def _stripped():
    return [strip_tags(s) for s in read_conll(TINY)]


def test_joint_parsing_tags_untagged_words_and_gives_trees(joint_model):
    tags = set(joint_model.tagger.upos_tags)
    parsed = parse_sentences(joint_model, _stripped(), marginals=True)
    assert parse_settings(joint_model).joint
    for p, gold in zip(parsed, read_conll(TINY), strict=True):
        assert p.sentence.forms == gold.forms
        assert all(u in tags for u in p.sentence.upos[1:])
        assert all(x != "_" for x in p.sentence.xpos[1:])  # the cascade ran on the joint UPOS
        probs = p.upos_probs[1:]
        assert np.all((probs > 0) & (probs <= 1 + 1e-12))
        assert is_tree(tuple(int(h) for h in p.heads))


def test_joint_parsing_with_zero_taglink_weights_is_the_pipeline(joint_model):
    """φ = 0 and every tag a candidate: the tags do not touch the arcs, so the heads and arc
    probabilities are the pipeline's, and each word's UPOS is its most probable tag under the
    chain, with the chain's marginal (the pipeline's UPOS is the Viterbi sequence's)."""
    saved = joint_model.taglink
    joint_model.taglink = saved._replace(table=np.zeros_like(saved.table), min_prob=0.0,
                                         max_candidates=len(joint_model.tagger.upos_tags))
    try:
        joint = parse_sentences(joint_model, _stripped(), tagging="joint")
    finally:
        joint_model.taglink = saved
    pipeline = parse_sentences(joint_model, _stripped(), tagging="pipeline")
    same = 0
    total = 0
    for j, p in zip(joint, pipeline, strict=True):
        np.testing.assert_array_equal(j.heads, p.heads)
        np.testing.assert_allclose(j.head_probs[1:], p.head_probs[1:], atol=1e-9)
        for i in range(1, j.n + 1):
            total += 1
            if j.sentence.upos[i] == p.sentence.upos[i]:
                same += 1
                assert j.upos_probs[i] == pytest.approx(p.upos_probs[i], abs=1e-9)
            else:
                assert j.upos_probs[i] > p.upos_probs[i]
    assert same > 0.9 * total


def test_joint_parsing_keeps_the_tags_the_input_gives(joint_model):
    sentences = _stripped()
    first = sentences[0]
    given = [None, "X"] + [None] * (first.n - 1)
    sentences[0] = with_tags(first, upos=given)
    parsed = parse_sentences(joint_model, sentences, tagging="joint", marginals=True)
    assert parsed[0].sentence.upos[1] == "X"
    assert np.isnan(parsed[0].upos_probs[1])
    assert all(u != "_" for u in parsed[0].sentence.upos[2:])


def test_joint_tagging_needs_taglink_weights(joint_model):
    from bpparse.model import load_model

    plain = load_model(joint_model.plain_path)
    assert not parse_settings(plain).joint
    with pytest.raises(ConfigError, match="TAGLINK"):
        parse_settings(plain, tagging="joint")


def test_cli_train_joint_then_parse_text(joint_model, tmp_path):
    runner = CliRunner()
    out = tmp_path / "j.bpm"
    result = runner.invoke(cli, ["train-joint", "-m", str(joint_model.plain_path), "--train",
                                 str(TINY), "--out", str(out), "--folds", "2", "--epochs", "1",
                                 "--hash-bits", "12"])
    assert result.exit_code == 0, result.output
    text = "The cat sat on the mat .\nI saw her duck .\n"
    for tagging in ("joint", "pipeline"):
        result = runner.invoke(cli, ["parse", "-m", str(out), "--format", "text", "--tagging",
                                     tagging, "-"], input=text)
        assert result.exit_code == 0, result.output
        rows = [line.split("\t") for line in result.stdout.splitlines()
                if line and not line.startswith("#")]
        assert [r[1] for r in rows] == text.split()
        assert all(r[3] != "_" and r[6] != "_" for r in rows)
    result = runner.invoke(cli, ["parse", "-m", str(joint_model.plain_path), "--tagging", "joint",
                                 "--format", "text", "-"], input=text)
    assert result.exit_code == 1 and "TAGLINK" in result.output


# ---------------------------------------------------------------- joint MAP by dual decomposition

NO_PAIRS = PairFactors(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))  # LINK only
NO_SEQ = no_childseq()


def brute_force_joint_map(arc, phi, unary, trans, cand, cnt, single_root=True):
    """(score, heads, tags) of the best joint assignment, by enumeration."""
    n = arc.shape[0] - 1
    tagging = TagScores(phi, unary, trans, cand, cnt)
    best = (-np.inf, None, None)
    for heads in all_trees(n, single_root=single_root):
        for choice in itertools.product(*(range(cnt[i]) for i in range(1, n + 1))):
            tags = np.array((0,) + choice, dtype=np.int64)
            s = joint_score(arc, NO_PAIRS, NO_SEQ, tagging, heads, tags)
            if s > best[0]:
                best = (s, heads, tags)
    return best


def _dd_case(rng, n, g, scale):
    n1 = n + 1
    arc = rng.normal(0, 1, (n1, n1))
    unary = rng.normal(0, 1, (n, g))
    trans = rng.normal(0, scale, (g + 1, g + 1))
    cand = np.full((n1, g), -1, dtype=np.int64)
    cand[1:] = np.arange(g)
    cnt = np.full(n1, g, dtype=np.int64)
    cnt[0] = 1
    phi = rng.normal(0, scale, (n1, n1, g, g))
    phi[0, :, 1:, :] = 0.0
    return arc, phi, unary, trans, cand, cnt


@pytest.mark.parametrize("n,g", [(2, 2), (3, 2), (3, 3), (4, 2)])
def test_joint_dd_certificates_are_exact_and_duals_bound_the_map(n, g):
    """On random small joint models: every dual value bounds the brute-force MAP score from above,
    and every certified assignment is the brute-force MAP (most sentences get a certificate)."""
    rng = np.random.default_rng(10 * n + g)
    empty = np.zeros((0, n + 1), dtype=np.int64)
    certified = 0
    cases = 12
    for _ in range(cases):
        arc, phi, unary, trans, cand, cnt = _dd_case(rng, n, g, 1.0)
        top, heads, tags = brute_force_joint_map(arc, phi, unary, trans, cand, cnt)
        tagging = TagScores(phi, unary, trans, cand, cnt)
        r = joint_dual_decompose(arc, NO_PAIRS, 0, NO_SEQ, tagging, False, True, 300, 1.0, empty,
                                 empty)
        assert np.all(r.dual >= top - 1e-9)
        assert r.score <= top + 1e-9
        assert r.score == pytest.approx(joint_score(arc, NO_PAIRS, NO_SEQ, tagging, r.heads,
                                                    r.tags))
        if r.certified:
            certified += 1
            assert r.score == pytest.approx(top, abs=1e-9)
            np.testing.assert_array_equal(r.heads, heads)
            np.testing.assert_array_equal(r.tags[1:], tags[1:])
    assert certified >= cases // 2


@pytest.mark.parametrize("factors", [("grand", "childseq"), ("grand", "sib"), ("sib", "childseq")])
@pytest.mark.parametrize("n", [3, 4])
def test_joint_dd_with_second_order_factors_against_enumeration(factors, n):
    """Joint MAP with GRAND / SIB / CHILDSEQ parser scores (bpparse.joint_dd_decode): every dual
    value bounds the best score over all trees x tag sequences (scored by the oracle's tree score
    plus the tag terms), and every certified assignment is that best one."""
    import bpparse

    rng = np.random.default_rng(100 * n + len("".join(factors)))
    trees = tree_table(n, False, True)
    tag_rows = [np.array((0,) + c) for c in itertools.product(range(2), repeat=n)]
    certified = 0
    cases = 10
    for _ in range(cases):
        arc, phi, unary, trans, _, _ = _dd_case(rng, n, 2, 1.0)
        arc, unary = 3.0 * arc, 3.0 * unary  # peaked, as trained parsers and taggers are
        extra = {name: rng.normal(0, 0.5, (n + 1,) * 3) for name in factors}
        for name in ("sib", "childseq"):  # ROOT (single root) has neither
            if name in extra:
                extra[name][0] = 0.0
        tree_part = tree_log_scores(trees, arc, extra.get("grand"), extra.get("sib"))
        if "childseq" in extra:
            tree_part += [sum(extra["childseq"][x] for x in childseq_transitions(t)) for t in trees]
        best = (-np.inf, None, None)
        for tags in tag_rows:
            chain = unary[np.arange(n), tags[1:]].sum() + trans[2, tags[1]] + trans[tags[n], 2]
            chain += sum(trans[tags[i], tags[i + 1]] for i in range(1, n))
            kids = np.arange(1, n + 1)
            total = tree_part + chain + phi[trees[:, 1:], kids, tags[trees[:, 1:]], tags[1:]].sum(1)
            k = int(np.argmax(total))
            if total[k] > best[0]:
                best = (total[k], trees[k], tags)
        r = bpparse.joint_dd_decode(arc, phi, unary, trans, iterations=300, **extra)
        assert np.all(r.dual >= best[0] - 1e-9)
        assert r.score <= best[0] + 1e-9
        if r.certified:
            certified += 1
            assert r.score == pytest.approx(best[0], abs=1e-9)
            np.testing.assert_array_equal(r.heads, best[1])
            np.testing.assert_array_equal(r.tags[1:], best[2][1:])
    # random second-order + TAGLINK scores: the relaxation is tight less often than for LINK only
    assert certified >= 3


def test_joint_dd_decoder_parses_untagged_input(joint_model):
    """--decoder dd with joint tagging (a LINK-only parser): every sentence gets a tree, tags from
    the tagger's set and a DD status in MISC; most are certified."""
    parsed = parse_sentences(joint_model, _stripped(), decoder="dd", dd_misc=True)
    tags = set(joint_model.tagger.upos_tags)
    assert all(p.dd is not None for p in parsed)
    assert sum(p.dd[0] for p in parsed) >= len(parsed) // 2
    for p in parsed:
        assert is_tree(tuple(int(h) for h in p.heads))
        assert all(u in tags for u in p.sentence.upos[1:])
        assert "DD=" in p.text


def test_joint_dd_decoder_with_a_second_order_parser(tmp_path_factory):
    """--decoder dd with joint tagging and a GRAND + SIB parser: the decomposition takes the
    parser's head automata and SIB pairs; every sentence gets a tree, tags from the tagger's set
    and a DD status, and the summary on stderr counts the certificates."""
    model = _train_joint_model(tmp_path_factory.mktemp("joint2"), "second-order")
    settings = parse_settings(model, decoder="dd")
    assert settings.joint and settings.inference.use_grand and settings.inference.use_sib
    stripped = tmp_path_factory.mktemp("in") / "stripped.conllu"
    stripped.write_text("".join("\n".join(s.lines) + "\n\n" for s in _stripped()))
    result = CliRunner().invoke(cli, ["parse", "-m", str(model.path), "--decoder", "dd",
                                      "--dd-status", str(stripped)])
    assert result.exit_code == 0, result.output
    sentences = list(read_conll(io.StringIO(result.stdout)))
    assert len(sentences) == len(_stripped())
    tags = set(model.tagger.upos_tags)
    statuses = [s.misc[1].split("|")[-1] for s in sentences]  # after what MISC held
    for s in sentences:
        assert is_tree(tuple(int(h) for h in s.heads))
        assert all(u in tags for u in s.upos[1:])
    assert all(x == "DD=certified" or x.startswith("DD=") and int(x[3:]) >= 1 for x in statuses)
    certified = statuses.count("DD=certified")
    assert certified >= 1
    assert f"dd certified {certified} of {len(sentences)}" in result.stderr


def test_public_joint_api_on_dense_arrays():
    """bpparse.joint_marginals / joint_dd_decode on dense arrays: exact marginals where the graph
    is a tree (one scored TAGLINK, no transitions), and the brute-force MAP when certified."""
    import bpparse

    rng = np.random.default_rng(3)
    n, g = 3, 2
    n1 = n + 1
    link = rng.normal(0, 1, (n1, n1))
    unary = rng.normal(0, 1, (n, g))
    trans = np.zeros((g + 1, g + 1))
    taglink = np.zeros((n1, n1, g, g))
    taglink[2, 3] = rng.normal(0, 2, (g, g))
    mu, tags, converged = bpparse.joint_marginals(link, taglink, unary, trans, max_iter=100)
    assert converged
    cand = np.full((n1, g), -1, dtype=np.int64)
    cand[1:] = np.arange(g)
    arcs = np.array([2 * n1 + 3])
    mu_ref, tags_ref = brute_force_joint(link, unary, trans, arcs, taglink[2, 3][None], cand)
    np.testing.assert_allclose(tags, tags_ref, atol=1e-8)
    off = ~np.eye(n1, dtype=bool)
    off[:, 0] = False
    np.testing.assert_allclose(mu[off], mu_ref[off], atol=1e-8)
    cnt = np.full(n1, g, dtype=np.int64)
    cnt[0] = 1
    _, heads, best_tags = brute_force_joint_map(link, taglink, unary, trans, cand, cnt)
    r = bpparse.joint_dd_decode(link, taglink, unary, trans)
    assert r.certified
    np.testing.assert_array_equal(r.heads, heads)
    np.testing.assert_array_equal(r.tags[1:], best_tags[1:])
    with pytest.raises(ValueError, match="taglink"):
        bpparse.joint_marginals(link, taglink[:, :, :1], unary, trans)


@pytest.mark.parametrize("tagging", ["pipeline", "joint"])
@pytest.mark.parametrize("suffix", [".npz", ".jsonl"])
def test_marginals_file_carries_the_tag_distributions(joint_model, tmp_path, tagging, suffix):
    """Untagged words get their UPOS distribution in the marginals file (the chain's marginals, or
    the joint tag beliefs), and the tag written is its most probable one; given UPOS gets none."""
    import json

    from bpparse.parse import parse_corpus

    sentences = _stripped()[:3]
    sentences[0] = with_tags(sentences[0], upos=[None, "X"] + [None] * (sentences[0].n - 1))
    src = tmp_path / "in.conllu"
    src.write_text("".join("\n".join(s.lines) + "\n\n" for s in sentences))
    out, marg = tmp_path / "out.conllu", tmp_path / f"m{suffix}"
    parse_corpus(joint_model, [str(src)], str(out), settings=parse_settings(joint_model,
                 tagging=tagging), marginals_file=str(marg), jobs=1)
    parsed = list(read_conll(out))
    tags = joint_model.tagger.upos_tags
    if suffix == ".npz":
        with np.load(marg) as z:
            assert list(z["upos_tags"]) == tags
            dists = [z[f"t{i:07d}"] for i in range(1, 4)]
    else:
        records = [json.loads(line) for line in marg.read_text().splitlines()]
        dists = [np.array([[np.nan] * len(tags)] + [
            [np.nan] * len(tags) if d is None else [d.get(t, 0.0) for t in tags]
            for d in r["upos_probs"]]) for r in records]
    for k, (p, dist) in enumerate(zip(parsed, dists, strict=True)):
        for i in range(1, p.n + 1):
            if k == 0 and i == 1:
                assert p.upos[1] == "X" and np.isnan(dist[1]).all()
                continue
            assert dist[i].sum() == pytest.approx(1.0, abs=1e-3)
            assert tags[int(np.nanargmax(dist[i]))] == p.upos[i] or tagging == "pipeline"
