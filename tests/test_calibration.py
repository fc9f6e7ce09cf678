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
    reliability_svg,
    tempered_head_probs,
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


def test_parsing_tempers_head_probabilities_and_nothing_else(tiny_model):
    from bpparse.model import Model
    from bpparse.parse import parse_sentences

    calibrated = Model(tiny_model.config, tiny_model.vocabs, tiny_model.theta,
                       calibration={"head_temperature": 2.0})
    text = (DATA / "sample_gold.conllu").read_text(encoding="utf-8")
    tempered = parse_sentences(calibrated, text, marginals=True)
    raw = parse_sentences(calibrated, text, marginals=True, head_temperature=1)
    plain = parse_sentences(tiny_model, text, marginals=True)
    for p, r, q in zip(tempered, raw, plain, strict=True):
        assert np.array_equal(p.heads, q.heads) and p.deprels == q.deprels
        assert np.array_equal(p.marginals, q.marginals) and np.array_equal(p.label_probs, q.label_probs)
        m = np.arange(1, p.n + 1)
        assert np.array_equal(r.head_probs, q.head_probs)  # T = 1: the chosen arcs' marginals
        assert np.array_equal(q.head_probs[1:], q.marginals[q.heads[1:], m])
        assert np.allclose(p.head_probs[1:], tempered_reference(p.marginals, p.heads, 2.0)[1:],
                           rtol=1e-12)
        misc = [line.split("\t")[9] for line in p.text.splitlines() if line and line[0].isdigit()]
        for i, field in enumerate(misc, 1):
            items = dict(x.split("=") for x in field.split("|"))
            assert float(items["HeadProb"]) == pytest.approx(p.head_probs[i], rel=1e-3)
    # over-confident words get softer: the most probable head loses probability
    top = [p.head_probs[i] for p in tempered for i in range(1, p.n + 1)]
    raw_top = [q.head_probs[i] for q in plain for i in range(1, q.n + 1)]
    assert np.mean(top) < np.mean(raw_top)


def test_calibrate_command_writes_the_temperature_it_reports(tiny_model, tmp_path):
    from bpparse.errors import ModelFileError
    from bpparse.model import load_model, save_model

    from test_model import forge

    path = tmp_path / "m.bpm"
    save_model(tiny_model, path)
    assert "no head temperature" in run("info", path).stdout
    out = tmp_path / "calibrated.bpm"
    result = run("calibrate", "-m", path, "--dev", DATA / "sample_gold.conllu", "--out", out, "-j", "1")
    assert result.exit_code == 0, result.output
    model = load_model(out)
    t = model.head_temperature
    assert model.calibration["dev"] == str(DATA / "sample_gold.conllu")
    assert model.calibration["tags"] == "given" and f"head temperature {t:g} fitted" in result.stderr
    assert f"head temperature {t:g} (dev, tags given" in run("info", out).stdout
    # what the fit reports is what `eval --calibration` measures on the same file
    parsed = run("parse", "-m", out, "--marginals", DATA / "sample_gold.conllu")
    measured = run("eval", "--json", DATA / "sample_gold.conllu", parsed_file(tmp_path, parsed),
                   "--calibration")
    ece = json.loads(measured.stdout)["calibration"]["HeadProb"]["ece"]
    assert 100 * ece == pytest.approx(model.calibration["ece"][1], abs=0.02)
    bad = run("parse", "-m", out, "--head-temperature", "0", DATA / "sample_gold.conllu")
    assert bad.exit_code == 2
    for value in ("2", 0.0, 1e9, float("nan"), None, True):
        forged = forge(out, tmp_path / "forged.bpm",
                       lambda h, v=value: h["calibration"].update(head_temperature=v))
        with pytest.raises(ModelFileError, match="malformed model file: head temperature"):
            load_model(forged)


def parsed_file(tmp_path, result):
    assert result.exit_code == 0, result.output
    path = tmp_path / "parsed.conllu"
    path.write_text(result.stdout, encoding="utf-8")
    return path
