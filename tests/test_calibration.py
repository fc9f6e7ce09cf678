"""Calibration of the probabilities in MISC: ECE, Brier score and the reliability diagram."""
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from bpparse.calibration import calibration, reliability_svg
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
