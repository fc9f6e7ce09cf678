"""`bpparse parse` and the parsing library: exact first-order probabilities and decoders against
enumeration, BP marginals against the training code's, byte-identical output for any --jobs, only
HEAD/DEPREL/MISC changed, long-sentence fallback, errors, closed pipes, marginals files, bundled names.

Models are built here with random weights (no training needed): the pipeline's job is to compute and
decode what the model defines, which enumeration checks exactly on short sentences."""
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import bpparse
import pytest
from click.testing import CliRunner
from oracle import brute_force_first_order, is_projective, is_tree, tree_score, tree_table

from bpparse import bundled
from bpparse.cli import cli
from bpparse.inference import encoded_marginals
from bpparse.config import load_config
from bpparse.conll import read_conll
from bpparse.encode import Vocabularies
from bpparse.errors import InputError, ModelFileError
from bpparse.kernels.matrix_tree import matrix_tree_marginals
from bpparse.model import Model, load_model, round_weights, save_model
from bpparse.parse import _groups, iter_parse, parse_file, parse_sentences, parse_settings
from bpparse.scoring import encoded_scores

DATA = Path(__file__).resolve().parent / "data"
SAMPLE = DATA / "en_ewt_sample.conllu"
SMALL = {"features.hash_bits": 16, "features.second_order_hash_bits": 12, "features.label_hash_bits": 10,
         "features.fine_tags": True, "features.morph": False, "features.lemma": False}


def random_model(config, seed, **overrides):
    vocabs = Vocabularies.build(list(read_conll(DATA / "en_ewt_train_tiny.conllu")))
    model = Model(load_config(config, {**SMALL, **overrides}), vocabs)
    rng = np.random.default_rng(seed)
    model.theta = round_weights(rng.normal(scale=0.3, size=model.theta.shape[0]))
    return model


@pytest.fixture(scope="module")
def first_order():
    return random_model("first-order", 1)


@pytest.fixture(scope="module")
def second_order():
    return random_model("second-order", 2)


@pytest.fixture(scope="module")
def model_files(tmp_path_factory, first_order, second_order):
    d = tmp_path_factory.mktemp("models")
    save_model(first_order, d / "first.bpm")
    save_model(second_order, d / "second.bpm")
    return {"first": str(d / "first.bpm"), "second": str(d / "second.bpm")}


def short_text(lengths=(1, 2, 3, 4, 5, 6, 6, 5)):
    """Untreed sentences cut from the sample: the first k words of successive sentences, HEAD `_`."""
    blocks = []
    sentences = [s for s in read_conll(SAMPLE) if s.n >= 6]
    for i, k in enumerate(lengths):
        s = sentences[i]
        lines = [f"# sent_id = short-{i}"]
        for w in range(1, k + 1):
            cols = s.lines[s.word_lines[w]].split("\t")
            cols[0], cols[6], cols[7], cols[8] = str(w), "_", "_", "_"
            lines.append("\t".join(cols))
        blocks.append("\n".join(lines) + "\n\n")
    return "".join(blocks)


def run(*args, input=None):
    try:
        runner = CliRunner(mix_stderr=False)
    except TypeError:
        runner = CliRunner()
    return runner.invoke(cli, [str(a) for a in args], input=input)


def single_rooted_tree(heads):
    return heads[0] == -1 and is_tree(list(heads)) and int(np.sum(heads[1:] == 0)) == 1


# ---------------------------------------------------------------- exactness on short sentences

@pytest.mark.parametrize("constraint,single_root", [("TREE", True), ("TREE", False), ("PTREE", True)])
def test_first_order_probabilities_and_mbr_are_exact(constraint, single_root):
    model = random_model("first-order", 3, **{"model.single_root": single_root})
    projective = constraint == "PTREE"
    parsed = parse_sentences(model, short_text(), marginals=True, constraint=constraint)
    assert [p.n for p in parsed] == [1, 2, 3, 4, 5, 6, 6, 5]
    for p in parsed:
        scores = encoded_scores(model, model.encode(p.sentence))
        marg, _, _, _ = brute_force_first_order(scores.arc, projective, single_root)
        np.testing.assert_allclose(p.marginals, marg, atol=1e-9)
        np.testing.assert_allclose(p.marginals[:, 1:].sum(axis=0), 1.0, atol=1e-12)
        m = np.arange(1, p.n + 1)
        np.testing.assert_allclose(p.head_probs[1:], marg[p.heads[1:], m], atol=1e-9)
        assert np.all(p.head_probs[1:] > 0) and np.all(p.head_probs[1:] <= 1 + 1e-12)
        # the most probable label of the chosen arc, and its probability
        chosen = scores.label_logp[p.heads[1:], m]
        assert [model.labels[i] for i in chosen.argmax(axis=1)] == p.deprels[1:]
        np.testing.assert_allclose(p.label_probs[1:], np.exp(chosen.max(axis=1)), rtol=1e-12)
        # MBR: no tree has a larger sum of marginals
        trees = tree_table(p.n, projective, single_root)
        best = marg[trees[:, 1:], m].sum(axis=1).max()
        assert tree_score(marg, p.heads) == pytest.approx(best, abs=1e-9)
        assert is_tree(list(p.heads)) and (not projective or is_projective(list(p.heads)))
        if single_root:
            assert single_rooted_tree(p.heads)
        # MISC carries the same numbers, 4 significant digits
        misc = [line.split("\t")[9] for line in p.text.splitlines() if line and line[0].isdigit()]
        for i, field in enumerate(misc, 1):
            items = dict(x.split("=") for x in field.split("|"))
            assert float(items["HeadProb"]) == pytest.approx(p.head_probs[i], rel=1e-3)
            assert float(items["LabelProb"]) == pytest.approx(p.label_probs[i], rel=1e-3)
            assert 0.0 < float(items["HeadProb"]) <= 1.0


@pytest.mark.parametrize("projective", [False, True])
def test_map_decoder_is_the_exact_first_order_map_tree(first_order, projective):
    parsed = parse_sentences(first_order, short_text(), decoder="map",
                             constraint="PTREE" if projective else "TREE")
    for p in parsed:
        arc = encoded_scores(first_order, first_order.encode(p.sentence)).arc
        _, _, _, best = brute_force_first_order(arc, projective, True)
        assert tree_score(arc, p.heads) == pytest.approx(best, abs=1e-9)
        assert single_rooted_tree(p.heads)


def test_unlabeled_model_and_empty_input(model_files, tmp_path):
    model = random_model("first-order", 4, **{"model.labels": False})
    for p in parse_sentences(model, SAMPLE, marginals=True):
        assert p.deprels[1:] == ["_"] * p.n and "LabelProb" not in p.text and "HeadProb" in p.text
        assert single_rooted_tree(p.heads)
    result = run("parse", "-m", model_files["first"], DATA / "empty.conllu")
    assert result.exit_code == 0 and result.stdout == "" and "0 sentences" in result.stderr


def test_greedy_decoder_takes_each_words_most_probable_head(second_order):
    greedy = parse_sentences(second_order, SAMPLE, decoder="greedy", marginals=True)
    for p in greedy:
        mu = p.marginals.copy()
        np.fill_diagonal(mu, -1.0)
        assert list(p.heads[1:]) == list(mu[:, 1:].argmax(axis=0))
        np.testing.assert_array_equal(p.head_probs[1:], mu[:, 1:].max(axis=0))


def test_second_order_marginals_equal_the_training_inference_and_mbr_is_exact(second_order):
    parsed = parse_sentences(second_order, short_text(), marginals=True)
    for p in parsed:
        mu, _ = encoded_marginals(second_order, second_order.encode(p.sentence))
        np.testing.assert_allclose(p.marginals, mu, rtol=1e-12, atol=1e-15)
        m = np.arange(1, p.n + 1)
        trees = tree_table(p.n, False, True)
        assert tree_score(mu, p.heads) == pytest.approx(mu[trees[:, 1:], m].sum(axis=1).max(), abs=1e-9)
        assert single_rooted_tree(p.heads)
    # a BP model really differs from its first-order part: the GRAND/SIB messages move marginals
    first = parse_sentences(second_order, short_text(), marginals=True, max_length=1)
    assert max(np.abs(a.marginals - b.marginals).max() for a, b in zip(parsed, first)) > 1e-3


def test_every_tree_is_valid_on_real_sentences(second_order):
    for constraint in ("TREE", "PTREE"):
        for decoder in ("mbr", "map"):
            for p in parse_sentences(second_order, SAMPLE, decoder=decoder, constraint=constraint):
                assert single_rooted_tree(p.heads), (constraint, decoder, p)
                assert constraint == "TREE" or is_projective(list(p.heads))
                assert np.all((p.head_probs[1:] > 0) & (p.head_probs[1:] <= 1))


# ---------------------------------------------------------------- output bytes

def word_lines(text):
    return [line for line in text.splitlines() if line and not line.startswith("#")
            and line.split("\t")[0].isdigit()]


@pytest.mark.parametrize("name", ["en_ewt_sample.conllu", "pt_bosque_sample.conllu",
                                  "en_ewt_empty_nodes.conllu", "en_ewt_sample.conllx"])
@pytest.mark.parametrize("marginals", [False, True])
def test_output_differs_only_in_head_and_deprel(model_files, name, marginals):
    path = DATA / name
    args = ["parse", "-m", model_files["second"], "-j", "1", path] + (["--marginals"] if marginals else [])
    result = run(*args)
    assert result.exit_code == 0, result.stderr
    src = path.read_text(encoding="utf-8").splitlines()
    out = result.stdout.splitlines()
    assert len(src) == len(out)
    conllu = name.endswith(".conllu")
    changed = {6, 7} | ({8} if conllu else set()) | ({9} if marginals and conllu else set())
    n_changed = 0
    for a, b in zip(src, out):
        if not a or a.startswith("#") or not a.split("\t")[0].isdigit():
            assert a == b  # comments, blank lines, multiword tokens, empty nodes
            continue
        ca, cb = a.split("\t"), b.split("\t")
        assert len(cb) == 10
        assert [x for i, x in enumerate(ca) if i not in changed] == [x for i, x in enumerate(cb) if i not in changed]
        n_changed += ca[6] != cb[6]
        if conllu:
            assert cb[8] == "_"  # the input's enhanced dependencies would contradict the new tree
        if 9 in changed:
            keep = [x for x in ca[9].split("|") if x != "_"]
            assert cb[9].split("|")[:len(keep)] == keep and "HeadProb=" in cb[9]
    assert n_changed > 0
    assert "bpparse: model" in result.stderr and "sentences/s" in result.stderr


def test_jobs_give_identical_bytes(model_files, second_order, tmp_path):
    inputs = [DATA / "pt_bosque_sample.conllu", SAMPLE, DATA / "da_ddt_sample.conllu"]
    outs = []
    for jobs in (1, 2):
        out = tmp_path / f"j{jobs}.conllu"
        result = run("parse", "-m", model_files["second"], "-j", jobs, "--marginals", *inputs, "-o", out)
        assert result.exit_code == 0, result.stderr
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    assert outs[0].count(b"\n\n") == sum(1 for p in inputs for _ in read_conll(p))
    # small chunks and several threads: still the same sentences, in the same order
    sentences = [s for p in inputs for s in read_conll(p)]
    settings = parse_settings(second_order)
    texts = [p.text for p in iter_parse(second_order, iter(sentences), settings, jobs=2, misc_probs=True,
                                        chunk_size=3)]
    assert "".join(texts).encode("utf-8") == outs[0]


def test_groups_cover_each_sentence_once():
    sizes = np.array([5, 40, 3, 3, 80, 12, 2, 30, 7], dtype=np.int64)
    for jobs in (1, 2, 3):
        groups = _groups(sizes, jobs)
        flat = np.concatenate(groups)
        assert sorted(flat.tolist()) == list(range(len(sizes)))
        assert flat[0] == 4  # the costliest sentence starts first


def test_pipeline_into_eval(model_files):
    text = SAMPLE.read_text(encoding="utf-8")
    parsed = run("parse", "-m", model_files["first"], "-", input=text)
    assert parsed.exit_code == 0, parsed.stderr
    scored = run("eval", "--json", SAMPLE, "-", input=parsed.stdout)
    assert scored.exit_code == 0, scored.stderr
    result = json.loads(scored.stdout)
    assert result["words"] == 652 and 0.0 <= result["uas"] <= 100.0


# ---------------------------------------------------------------- long sentences, errors

def test_long_sentences_use_first_order_and_are_reported(model_files, second_order):
    result = run("parse", "-m", model_files["second"], "--max-length", 8, SAMPLE)
    assert result.exit_code == 0, result.stderr
    sentences = list(read_conll(SAMPLE))
    long = [s for s in sentences if s.n > 8]
    assert long and len(long) < len(sentences)
    reports = [line for line in result.stderr.splitlines() if "first-order inference" in line]
    assert reports == [f"bpparse: warning: {s.path}:{s.first_line}: sentence of {s.n} words is longer than "
                       f"the limit of 8: parsed with first-order inference" for s in long]
    assert result.stdout.count("\n\n") == len(sentences)
    parsed = parse_sentences(second_order, SAMPLE, marginals=True, max_length=8, on_warning=lambda m: None)
    for p in parsed:
        assert p.first_order == (p.n > 8)
        if p.first_order:
            exact, _ = matrix_tree_marginals(
                encoded_scores(second_order, second_order.encode(p.sentence)).arc, True)
            np.testing.assert_allclose(p.marginals, exact, atol=1e-12)
            assert single_rooted_tree(p.heads)


def test_untagged_input_is_an_error_naming_file_and_line(model_files, tmp_path):
    text = short_text((3, 4)).splitlines()
    cols = text[7].split("\t")  # second sentence, word 2
    cols[3] = "_"
    text[7] = "\t".join(cols)
    path = tmp_path / "untagged.conllu"
    path.write_text("\n".join(text) + "\n", encoding="utf-8")
    result = run("parse", "-m", model_files["first"], path)
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1].startswith(f"bpparse: error: {path}:8: UPOS is '_'")
    assert result.stdout.count("\n\n") == 1  # the first sentence was parsed and written
    with pytest.raises(InputError):
        parse_file(model_files["first"], path)


@pytest.mark.parametrize("jobs", [1, 2])
def test_malformed_input_fails_with_file_and_line(model_files, jobs):
    result = run("parse", "-m", model_files["first"], "-j", jobs, SAMPLE, DATA / "bad_columns.conllu")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (f"bpparse: error: {DATA / 'bad_columns.conllu'}:16: "
                                              "expected 10 tab-separated columns, found 9")
    # every sentence before the bad one was parsed and written, in order
    good = list(read_conll(SAMPLE)) + list(read_conll(io.StringIO(
        "\n".join((DATA / "bad_columns.conllu").read_text().splitlines()[:10]) + "\n")))
    written = list(read_conll(io.StringIO(result.stdout)))
    assert [s.forms for s in written] == [s.forms for s in good]


def test_bad_model_and_options(tmp_path, model_files):
    result = run("parse", "-m", tmp_path / "missing.bpm", SAMPLE)
    assert result.exit_code == 1 and "model file not found, and no bundled model" in result.stderr
    result = run("parse", "-m", model_files["first"], "--constraint", "FOREST", SAMPLE)
    assert result.exit_code == 1 and "unknown constraint" in result.stderr


def console(*args):
    return [sys.executable, "-c", "from bpparse.cli import main; main()", *map(str, args)]


def test_closed_pipe_exits_quietly(model_files):
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(console("parse", "-m", model_files["first"], SAMPLE), stdout=write_end,
                              stderr=subprocess.PIPE, text=True)
    finally:
        os.close(write_end)
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert lines[0] == f"bpparse: model {model_files['first']}"
    assert not [line for line in lines[1:] if "the parser's kernels" not in line]


# ---------------------------------------------------------------- marginals files, library, models

def test_marginals_files(model_files, second_order, tmp_path):
    npz, jsonl = tmp_path / "m.npz", tmp_path / "m.jsonl"
    for f in (npz, jsonl):
        result = run("parse", "-m", model_files["second"], "--marginals-file", f, SAMPLE)
        assert result.exit_code == 0, result.stderr
        assert "HeadProb" not in result.stdout
    parsed = parse_sentences(second_order, SAMPLE, marginals=True)
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    with np.load(npz) as z:
        assert sorted(z.files) == [f"s{i:07d}" for i in range(1, len(parsed) + 1)]
        for i, (p, rec) in enumerate(zip(parsed, records), 1):
            mu = z[f"s{i:07d}"]
            assert mu.dtype == np.float32 and mu.shape == (p.n + 1, p.n + 1)
            np.testing.assert_allclose(mu, p.marginals, atol=1e-7)
            assert np.all((mu[:, 1:] >= 0) & (mu[:, 1:] <= 1))  # loopy BP: columns need not sum to 1
            assert rec["sentence"] == i and rec["sent_id"] == p.sentence.sent_id and rec["n"] == p.n
            assert rec["heads"] == p.heads[1:].tolist()
            np.testing.assert_allclose(np.array(rec["head_probs"]), p.marginals[:, 1:].T, atol=1e-6)


def test_library_accepts_text_tokenlists_sentences_and_files(first_order, model_files):
    import conllu

    text = SAMPLE.read_text(encoding="utf-8")
    by_file = parse_file(model_files["first"], SAMPLE)
    by_text = parse_sentences(first_order, text)
    by_sentences = parse_sentences(first_order, list(read_conll(SAMPLE)), jobs=2)
    by_tokenlists = parse_sentences(first_order, conllu.parse(text))
    by_name = bpparse.parse_file(model_files["first"], SAMPLE)
    assert len(by_file) == len(by_text) == len(by_sentences) == len(by_tokenlists) == 29
    for a, b, c, d in zip(by_file, by_text, by_sentences, by_name):
        assert a.text == b.text == c.text == d.text
    for a, d in zip(by_file, by_tokenlists):
        assert a.heads.tolist() == d.heads.tolist()
    tokens = by_text[0].tokens
    words = [t for t in tokens if isinstance(t["id"], int)]
    assert [t["head"] for t in words] == by_text[0].heads[1:].tolist()
    assert [t["deprel"] for t in words] == by_text[0].deprels[1:]


def test_inference_hook_replaces_the_kernel(first_order):
    calls = []

    def exact(model, encoded, settings):
        calls.append(settings.code)
        s = encoded_scores(model, encoded)
        marg, _, _, _ = brute_force_first_order(s.arc, settings.projective, settings.single_root)
        return marg, s.label_logp, s.arc

    builtin = parse_sentences(first_order, short_text(), marginals=True)
    hooked = parse_sentences(first_order, short_text(), marginals=True, inference=exact)
    assert len(calls) == len(builtin)
    for a, b in zip(builtin, hooked):
        assert a.heads.tolist() == b.heads.tolist() and a.deprels == b.deprels
        np.testing.assert_allclose(a.head_probs, b.head_probs, atol=1e-9)


def test_bundled_names(monkeypatch, tmp_path, model_files):
    models = tmp_path / "models"
    models.mkdir()
    (models / "tiny.bpm").write_bytes(Path(model_files["first"]).read_bytes())
    monkeypatch.setattr(bundled, "MODEL_DIR", models)
    assert bundled.bundled_models() == {"tiny": models / "tiny.bpm"}
    assert bundled.resolve_model("tiny") == (models / "tiny.bpm", True)
    assert bundled.resolve_model("tiny.bpm") == (models / "tiny.bpm", True)
    assert bundled.resolve_model(model_files["first"]) == (Path(model_files["first"]), False)
    with pytest.raises(ModelFileError, match="bundled: tiny"):
        bundled.resolve_model("nope")
    monkeypatch.setattr(bundled, "DEFAULT_MODEL", "tiny")
    result = run("parse", SAMPLE)
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines()[0] == f"bpparse: model tiny (bundled: {models / 'tiny.bpm'})"
    assert result.stdout == run("parse", "-m", model_files["first"], SAMPLE).stdout
    assert load_model("tiny").config.name == "first-order"


def test_shipped_sample_parses_with_the_default_model():
    """The README's first command; skipped until the bundled model is installed."""
    if bundled.DEFAULT_MODEL not in bundled.bundled_models():
        pytest.skip("no bundled model installed")
    sample = Path(bundled.__file__).parent / "data" / "sample.conllu"
    assert all(np.all(s.heads[1:] < 0) for s in read_conll(sample))  # no trees: the parser's work shows
    result = run("parse", sample)
    assert result.exit_code == 0, result.stderr
    gold = list(read_conll(DATA / "sample_gold.conllu"))
    parsed = list(read_conll(io.StringIO(result.stdout)))
    assert [p.n for p in parsed] == [g.n for g in gold]
    correct = sum(int(np.sum(p.heads[1:] == g.heads[1:])) for p, g in zip(parsed, gold))
    assert correct / sum(g.n for g in gold) > 0.7  # a trained English model on easy sentences


def test_pruning_drops_factors_of_unlikely_arcs_only(second_order):
    full = parse_sentences(second_order, short_text(), marginals=True, prune=0.0)
    # every arc has a positive first-order marginal, so a tiny threshold keeps every factor
    tiny = parse_sentences(second_order, short_text(), marginals=True, prune=1e-300)
    pruned = parse_sentences(second_order, short_text(), marginals=True, prune=0.2)
    for f, t, p in zip(full, tiny, pruned):
        np.testing.assert_array_equal(f.marginals, t.marginals)
        assert single_rooted_tree(p.heads)
        assert ((p.marginals >= 0) & (p.marginals <= 1)).all()
    # a high threshold removes factors, so the marginals differ from full BP
    moved = max(np.abs(f.marginals - p.marginals).max() for f, p in zip(full, pruned))
    assert moved > 1e-6


# ---------------------------------------------------------------- the dd decoder

@pytest.mark.parametrize("config", ["second-order", "childseq", "grand-childseq"])
def test_dd_decoder_certified_trees_are_the_models_map_trees(config):
    """On short sentences every certified dd tree is the best tree of the model's own scores
    (enumeration with `model_tree_score`), never below the MBR tree's score; DD status in MISC."""
    from bpparse.kernels.dual_decomposition import model_tree_score

    model = random_model(config, 7)
    text = short_text()
    mbr = parse_sentences(model, text)
    parsed = parse_sentences(model, text, decoder="dd", dd_misc=True, dd_iterations=200)
    assert sum(p.dd[0] for p in parsed) >= len(parsed) // 2
    settings = model.config.inference_settings("parse")
    for p, q in zip(parsed, mbr):
        sc = encoded_scores(model, model.encode(p.sentence), settings)

        def score(heads):
            return model_tree_score(np.asarray(heads), sc.arc, sc.pair_a, sc.pair_b, sc.pair_w, sc.seq)

        assert score(p.heads) >= score(q.heads) - 1e-9  # MBR's tree is a candidate
        certified, iterations = p.dd
        assert 1 <= iterations <= 200
        first = p.text.splitlines()[1].split("\t")[9]
        assert first == ("DD=certified" if certified else f"DD={iterations}")
        if certified:
            trees = tree_table(p.n, False, True)
            assert score(p.heads) == pytest.approx(max(score(t) for t in trees), abs=1e-9)
        m = np.arange(1, p.n + 1)
        chosen = sc.label_logp[p.heads[1:], m]
        assert [model.labels[i] for i in chosen.argmax(axis=1)] == p.deprels[1:]


def test_dd_decoder_refuses_nocross_and_hooks(model_files):
    full = random_model("full", 3)
    with pytest.raises(bpparse.ConfigError, match="dd decoder needs a TREE or PTREE model without NOCROSS"):
        parse_settings(full, decoder="dd")
    with pytest.raises(bpparse.ConfigError, match="dd decoder"):
        parse_settings(random_model("second-order", 3), constraint="EXACTLY1", decoder="dd")
    result = run("parse", "-m", model_files["second"], SAMPLE, "--dd-iterations", 5)
    assert result.exit_code == 2 and "--decoder dd" in result.stderr
    result = run("parse", "-m", model_files["second"], SAMPLE, "--decoder", "dd", "--inference",
                 "relaxed")
    assert result.exit_code == 2 and "relaxed" in result.stderr


def test_dd_decoder_cli_reports_certificates(model_files):
    result = run("parse", "-m", model_files["second"], SAMPLE, "--decoder", "dd", "--dd-status",
                 "--dd-iterations", 30, "-j", 1)
    assert result.exit_code == 0, result.stderr
    sentences = list(read_conll(io.StringIO(result.stdout)))
    status = [s.misc[1].split("|")[-1] for s in sentences]  # after what MISC held (SpaceAfter=No)
    assert all(x == "DD=certified" or x == "DD=30" for x in status)
    certified = status.count("DD=certified")
    assert f"dd certified {certified} of {len(sentences)} sentences" in result.stderr
