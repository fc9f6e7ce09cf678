"""Calibration of the probabilities in MISC: ECE, Brier score and the reliability diagram."""
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

import numpy as np

from bpparse.calibration import (
    calibration,
    fit_head_temperature,
    fit_label_temperature,
    reliability_svg,
    tempered_head_probs,
    tempered_label_probs,
)
from bpparse.decode import temper_head_probs
from bpparse.cli import cli
from bpparse.conll import read_conll

DATA = Path(__file__).parent / "data"


def run(*args):
    try:
        runner = CliRunner(mix_stderr=False)
    except TypeError:
        runner = CliRunner()
    return runner.invoke(cli, [str(a) for a in args])


def test_ece_and_brier_of_a_hand_computed_case():
    # bins of width 0.1: {0.9, 0.9} accuracy 1/2, {0.6} accuracy 1, {0.2} accuracy 0, {1.0} in the last bin
    r = calibration([0.9, 0.9, 0.6, 0.2, 1.0], [1, 0, 1, 0, 1], bins=10)
    # bin 9 holds 0.9, 0.9 and 1.0: confidence 2.8 / 3, accuracy 2/3
    want_ece = 3 / 5 * abs(2 / 3 - 2.8 / 3) + 1 / 5 * 0.4 + 1 / 5 * 0.2
    want_brier = (0.1 ** 2 + 0.9 ** 2 + 0.4 ** 2 + 0.2 ** 2 + 0.0) / 5
    assert r["ece"] == pytest.approx(want_ece, abs=1e-12)
    assert r["brier"] == pytest.approx(want_brier, abs=1e-12)
    counts = [row["count"] for row in r["bins"]]
    assert counts == [0, 0, 1, 0, 0, 0, 1, 0, 0, 3] and r["words"] == 5
    assert r["bins"][0]["accuracy"] is None and r["bins"][9]["accuracy"] == pytest.approx(2 / 3)
    perfect = calibration([0.25] * 4 + [0.75] * 4, [1, 0, 0, 0, 1, 1, 1, 0], bins=4)
    assert perfect["ece"] == pytest.approx(0.0, abs=1e-12)


def with_probs(tmp_path, probs, wrong=()):
    """The gold sample with HeadProb = probs[k] on its k-th word, and the heads of the words in
    ``wrong`` (0-based over the file) moved; returns the prediction's path and the outcomes."""
    out, k, outcome = [], 0, []
    for s in read_conll(DATA / "sample_gold.conllu"):
        for j, line in enumerate(s.lines):
            cols = line.split("\t")
            if j in s.word_lines[1:]:
                if k in wrong:
                    cols[6] = "0" if cols[6] != "0" else "1"
                cols[9] = f"HeadProb={probs[k]}"
                outcome.append(k not in wrong)
                k += 1
            out.append("\t".join(cols))
        out.append("")
    path = tmp_path / "pred.conllu"
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path, outcome


def test_eval_calibration_json_and_diagrams(tmp_path):
    words = sum(s.n for s in read_conll(DATA / "sample_gold.conllu"))
    probs = [round(0.05 + 0.9 * (k % 10) / 10, 2) for k in range(words)]
    pred, outcome = with_probs(tmp_path, probs, wrong={0, 7, 13, 21})
    result = run("eval", "--json", "--calibration", tmp_path / "rel.svg", "--bins", "20",
                 DATA / "sample_gold.conllu", pred)
    assert result.exit_code == 0, result.stderr
    got = json.loads(result.stdout)["calibration"]["HeadProb"]
    want = calibration(probs, outcome, bins=20)
    assert got["ece"] == pytest.approx(want["ece"]) and got["brier"] == pytest.approx(want["brier"])
    assert sum(row["count"] for row in got["bins"]) == words and len(got["bins"]) == 20
    ET.fromstring((tmp_path / "rel.svg").read_text(encoding="utf-8"))  # valid XML
    text = run("eval", "--calibration", "", DATA / "sample_gold.conllu", pred)
    line = f"{'HeadProb ECE':<14} {100 * want['ece']:6.2f}  (Brier {want['brier']:.4f}, {words} words)"
    assert line in text.stdout.splitlines()
    html = tmp_path / "rel.html"
    assert run("eval", "--calibration", html, DATA / "sample_gold.conllu", pred).exit_code == 0
    assert html.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_png_needs_matplotlib(tmp_path, monkeypatch):
    pred, _ = with_probs(tmp_path, [0.5] * 44)
    png = tmp_path / "rel.png"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        result = run("eval", "--calibration", png, DATA / "sample_gold.conllu", pred)
        assert result.exit_code == 1 and "pip install 'bpparse[plots]'" in result.stderr
        return
    assert run("eval", "--calibration", png, DATA / "sample_gold.conllu", pred).exit_code == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)  # as if not installed
    result = run("eval", "--calibration", tmp_path / "again.png", DATA / "sample_gold.conllu", pred)
    assert result.exit_code == 1 and "pip install 'bpparse[plots]'" in result.stderr


def test_calibration_needs_probabilities_and_bins_need_calibration():
    gold = DATA / "sample_gold.conllu"
    result = run("eval", "--calibration", "", gold, gold)
    assert result.exit_code == 1 and "parse with --marginals" in result.stderr
    assert run("eval", "--bins", "20", gold, gold).exit_code == 2


def test_reliability_svg_is_valid_xml():
    r = {"HeadProb": calibration([0.1, 0.5, 0.9], [0, 1, 1]), "LabelProb": calibration([0.7], [1])}
    root = ET.fromstring(reliability_svg(r, title="<&>"))
    assert root.tag.endswith("svg")


# ---------------------------------------------------------------- the head temperature

def tempered_reference(mu, heads, t):
    """Each word's head column mu[:, m] (the word itself left out) raised to 1/t, renormalised,
    read at its head: the formula, computed the plain way."""
    out = np.zeros(mu.shape[0])
    for m in range(1, mu.shape[0]):
        col = np.delete(mu[:, m], m)
        k = heads[m] if heads[m] < m else heads[m] - 1
        w = col ** (1.0 / t)
        out[m] = w[k] / w.sum()
    return out


def random_marginals(rng, n, sharpness=1.0):
    """(n+1, n+1) columns that are head distributions (0 on the diagonal and in column 0)."""
    z = rng.normal(scale=2.0, size=(n + 1, n + 1)) * sharpness
    z[np.arange(n + 1), np.arange(n + 1)] = -np.inf
    mu = np.exp(z - z.max(axis=0))
    mu[:, 0] = 0.0
    mu[:, 1:] /= mu[:, 1:].sum(axis=0)
    return mu


@pytest.mark.parametrize("t", [0.5, 1.0, 2.7])
def test_tempered_head_probabilities_follow_the_formula(t):
    rng = np.random.default_rng(5)
    marginals, heads, kernel = [], [], []
    for n in (1, 2, 5, 9):
        mu = random_marginals(rng, n)
        if n > 1:  # a zero marginal stays out of the sum
            mu[0, n] = 0.0
            mu[:, n] /= mu[:, n].sum()
        h = np.array([-1] + [int(rng.choice(np.flatnonzero(mu[:, m]))) for m in range(1, n + 1)])
        probs = np.full(n + 1, -1.0)
        probs[0] = 0.0
        temper_head_probs(mu, h, probs, t)
        assert np.allclose(probs[1:], tempered_reference(mu, h, t)[1:], rtol=1e-12, atol=0)
        if t == 1.0:  # columns that sum to 1 are their own head distributions
            assert np.allclose(probs[1:], mu[h[1:], np.arange(1, n + 1)], rtol=1e-12)
        marginals.append(mu)
        heads.append(h)
        kernel.append(probs[1:])
    assert np.allclose(tempered_head_probs(marginals, heads, t), np.concatenate(kernel), rtol=1e-12)


def test_the_fitted_temperature_undoes_a_known_over_confidence():
    # words whose true head distribution is p = softmax(z) while the "model" reports
    # softmax(2.5 z): over-confident by a temperature of 2.5, which the fit must find
    rng = np.random.default_rng(11)
    truths, marginals, heads, gold = [], [], [], []
    for _ in range(400):
        n = int(rng.integers(3, 12))
        truth = random_marginals(rng, n)
        mu = truth ** 2.5
        mu[:, 1:] /= mu[:, 1:].sum(axis=0)
        truths.append(truth)
        marginals.append(mu)
        heads.append(np.concatenate([[-1], mu[:, 1:].argmax(axis=0)]))
        gold.append(np.concatenate([[-1], [rng.choice(n + 1, p=truth[:, m]) for m in range(1, n + 1)]]))
    t, before, after = fit_head_temperature(marginals, heads, gold)
    assert 2.2 < t < 2.8
    assert after["brier"] < before["brier"] and after["ece"] < 0.5 * before["ece"]
    assert after["ece"] < 0.03 and before["words"] == after["words"] == sum(h.shape[0] - 1 for h in heads)
    # the true distributions themselves are calibrated: T stays near 1
    t1, _, _ = fit_head_temperature(truths, heads, gold)
    assert 0.85 < t1 < 1.15


def test_the_fitted_label_temperature_undoes_a_known_over_confidence():
    # label scores s with true label distribution softmax(s), reported as softmax(1.6 s)
    rng = np.random.default_rng(4)
    scores, labels, gold, truths = [], [], [], []
    for _ in range(300):
        n = int(rng.integers(2, 10))
        s = rng.normal(scale=1.5, size=(n + 1, 6))
        p = np.exp(s - s.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        scores.append(1.6 * s)
        truths.append(s)
        labels.append(s.argmax(axis=1))
        gold.append(np.array([rng.choice(6, p=row) for row in p]))
    t, before, after = fit_label_temperature(scores, labels, gold)
    assert 1.4 < t < 1.8 and after["ece"] < 0.5 * before["ece"] and after["brier"] < before["brier"]
    assert 0.85 < fit_label_temperature(truths, labels, gold)[0] < 1.15
    # the tempered probability is the softmax of the scores / T at the chosen label
    probs = tempered_label_probs(scores[:3], labels[:3], 1.3)
    want = [np.exp(r / 1.3)[c] / np.exp(r / 1.3).sum() for s, y in zip(scores[:3], labels[:3])
            for r, c in zip(s[1:], y[1:])]
    assert np.allclose(probs, want, rtol=1e-12)


def test_parsing_tempers_the_probabilities_and_nothing_else(tiny_model):
    from bpparse.features import sentence_attributes, tree_label_scores
    from bpparse.model import Model
    from bpparse.parse import parse_sentences

    from test_labeler import random_labeler

    labeler = random_labeler(tiny_model, seed=4)
    calibrated = Model(tiny_model.config, tiny_model.vocabs, tiny_model.theta, labeler=labeler,
                       calibration={"head_temperature": 2.0, "label_temperature": 1.5})
    plain = Model(tiny_model.config, tiny_model.vocabs, tiny_model.theta, labeler=labeler)
    text = (DATA / "sample_gold.conllu").read_text(encoding="utf-8")
    tempered = parse_sentences(calibrated, text, marginals=True)
    raw = parse_sentences(calibrated, text, marginals=True, calibrated=False)
    untempered = parse_sentences(plain, text, marginals=True)
    record = plain.labeler_record
    for p, r, q in zip(tempered, raw, untempered, strict=True):
        assert np.array_equal(p.heads, q.heads) and p.deprels == q.deprels
        assert np.array_equal(p.marginals, q.marginals)
        m = np.arange(1, p.n + 1)
        # calibrated=False: the chosen arcs' marginals and the labeler's softmax, as without
        assert np.array_equal(r.head_probs, q.head_probs) and np.array_equal(r.label_probs, q.label_probs)
        assert np.array_equal(q.head_probs[1:], q.marginals[q.heads[1:], m])
        assert np.allclose(p.head_probs[1:], tempered_reference(p.marginals, p.heads, 2.0)[1:],
                           rtol=1e-12)
        scores = np.zeros((p.n + 1, len(plain.labels)))
        tree_label_scores(sentence_attributes(plain.encode(p.sentence).tokens, plain.fine_tags),
                          record, p.heads, scores)
        chosen = [plain.labels.index(d) for d in p.deprels[1:]]
        assert np.allclose(p.label_probs[1:], tempered_label_probs([scores], [[-1] + chosen], 1.5),
                           rtol=1e-12)
        assert np.allclose(q.label_probs[1:], tempered_label_probs([scores], [[-1] + chosen], 1.0),
                           rtol=1e-12)
        misc = [line.split("\t")[9] for line in p.text.splitlines() if line and line[0].isdigit()]
        for i, field in enumerate(misc, 1):
            items = dict(x.split("=") for x in field.split("|"))
            assert float(items["HeadProb"]) == pytest.approx(p.head_probs[i], rel=1e-3)
            assert float(items["LabelProb"]) == pytest.approx(p.label_probs[i], rel=1e-3)
    # T > 1: the chosen heads and labels lose probability
    for key in ("head_probs", "label_probs"):
        assert np.mean([getattr(p, key)[1:].mean() for p in tempered]) < \
            np.mean([getattr(q, key)[1:].mean() for q in untempered])


def test_calibrate_command_writes_the_temperatures_it_reports(tiny_model, tmp_path):
    from bpparse.errors import ModelFileError
    from bpparse.model import Model, load_model, save_model

    from test_labeler import random_labeler
    from test_model import forge

    path = tmp_path / "m.bpm"
    save_model(Model(tiny_model.config, tiny_model.vocabs, tiny_model.theta,
                     labeler=random_labeler(tiny_model, seed=4)), path)
    assert "as inferred (no temperature)" in run("info", path).stdout
    out = tmp_path / "calibrated.bpm"
    gold = DATA / "sample_gold.conllu"
    result = run("calibrate", "-m", path, "--dev", gold, "--out", out, "-j", "1")
    assert result.exit_code == 0, result.output
    model = load_model(out)
    assert model.calibration["dev"] == str(gold) and model.calibration["tags"] == "given"
    info = run("info", out).stdout
    parsed = parsed_file(tmp_path, run("parse", "-m", out, "--marginals", gold))
    measured = json.loads(run("eval", "--json", gold, parsed, "--calibration").stdout)["calibration"]
    for key, t in (("HeadProb", model.head_temperature), ("LabelProb", model.label_temperature)):
        assert f"{key} temperature {t:g} fitted" in result.stderr
        assert f"temperature {t:g} (fitted on dev, tags given" in info
        # what the fit reports is what `eval --calibration` measures on the same file
        assert 100 * measured[key]["ece"] == pytest.approx(model.calibration[key]["ece"][1], abs=0.03)
    assert run("parse", "-m", out, "--uncalibrated", gold).exit_code == 2  # without --marginals
    for key in ("head_temperature", "label_temperature"):
        for value in ("2", 0.0, 1e9, float("nan"), True) + ((None,) if key == "head_temperature" else ()):
            forged = forge(out, tmp_path / "forged.bpm",
                           lambda h, k=key, v=value: h["calibration"].update({k: v}))
            with pytest.raises(ModelFileError, match=f"malformed model file: {key.replace('_', ' ')}"):
                load_model(forged)


def parsed_file(tmp_path, result):
    assert result.exit_code == 0, result.output
    path = tmp_path / "parsed.conllu"
    path.write_text(result.stdout, encoding="utf-8")
    return path
