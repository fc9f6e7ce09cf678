"""`bpparse show`: arc diagrams that hold every word and arc, survive any input, and render."""
import io
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from bpparse.cli import cli
from bpparse.config import load_config
from bpparse.conll import read_conll
from bpparse.encode import Vocabularies
from bpparse.model import Model, round_weights, save_model
from bpparse.show import page, sentence_html, sentence_svg

DATA = Path(__file__).parent / "data"
SVG = "{http://www.w3.org/2000/svg}"


def run(*args, input=None):
    try:
        runner = CliRunner(mix_stderr=False)
    except TypeError:
        runner = CliRunner()
    return runner.invoke(cli, [str(a) for a in args], input=input)


def parts(svg):
    """(forms, tree arcs, alternative arcs) drawn in one SVG string, which must be valid XML."""
    root = ET.fromstring(svg)
    forms = [t.text for t in root.iter(SVG + "text") if t.get("class") == "form"]
    arcs = [g for g in root.iter(SVG + "g") if g.get("class") == "arc"]
    dashed = [g for g in arcs if g.find(SVG + "path").get("stroke-dasharray")]
    return forms, len(arcs) - len(dashed), len(dashed)


def svgs_of(html):
    return re.findall(r"<svg .*?</svg>", html, flags=re.S)


@pytest.mark.parametrize("name", ["en_ewt_sample.conllu", "en_ewt_empty_nodes.conllu",
                                  "pt_bosque_sample.conllu", "pt_bosque_long.conllu"])
def test_every_word_and_arc_is_drawn(name):
    for sentence in read_conll(DATA / name):
        forms, arcs, dashed = parts(sentence_svg(sentence))
        assert forms == sentence.forms[1:]
        assert arcs == int(np.sum(sentence.heads[1:] >= 0)) and dashed == 0


def nasty_sentence(n=150):
    words = ['<b>&amp;"\'</b>', "שלום", "مرحبا", "a\x01b", "&", "]]>", "x" * 40]
    lines = ["# sent_id = nasty <&>", "# text = " + " ".join(words[i % len(words)] for i in range(n)),
             "1-2\t<tok>\t_\t_\t_\t_\t_\t_\t_\t_"]
    for i in range(1, n + 1):
        head = 0 if i == 1 else (i - 1 if i % 3 else 1)
        lines.append(f"{i}\t{words[(i - 1) % len(words)]}\t_\tX&\t_\t_\t{head}\tdep<{i}>\t_\tHeadProb=0.5")
        if i == 5:
            lines.append("5.1\tghost\t_\t_\t_\t_\t_\t_\t4:dep\t_")
    return next(read_conll(io.StringIO("\n".join(lines) + "\n\n")))


def test_unusual_input_renders_without_breaking_the_page():
    sentence = nasty_sentence()
    html = page([sentence_html(sentence, number=1)], title="<t&t>")
    (svg,) = svgs_of(html)
    forms, arcs, _ = parts(svg)
    assert len(forms) == 150 and arcs == 150
    assert forms[0] == '<b>&amp;"\'</b>' and forms[3] == "a\ufffdb"  # control char replaced
    assert "<b>" not in html.replace("<body>", "")  # nothing from the input becomes markup
    assert "nasty &lt;&amp;&gt;" in html and "empty node 5.1 ghost" in html and "1-2 &lt;tok&gt;" in html
    assert 'class="scroll"' in html  # long sentences scroll sideways
    assert "<script" not in html and "http" not in html.replace("http://www.w3.org/2000/svg", "")


def test_alternatives_are_the_other_heads_above_the_threshold():
    sentence = next(read_conll(DATA / "sample_gold.conllu"))
    n = sentence.n
    rng = np.random.default_rng(0)
    mu = rng.dirichlet(np.ones(n + 1), size=n + 1).T  # columns sum to 1
    mu[:, 0] = 0.0
    heads = sentence.heads
    for p in (0.05, 0.2, 0.5):
        _, arcs, dashed = parts(sentence_svg(sentence, mu, p))
        want = sum(1 for m in range(1, n + 1) for h in range(n + 1)
                   if h not in (m, heads[m]) and mu[h, m] >= p)
        assert arcs == n and dashed == want
    with pytest.raises(ValueError, match="shape"):
        sentence_svg(sentence, mu[:-1, :-1], 0.1)


def test_marker_ids_are_unique_in_a_page():
    sentences = list(read_conll(DATA / "sample_gold.conllu"))
    html = page([sentence_html(s, number=k) for k, s in enumerate(sentences, 1)])
    ids = re.findall(r' id="([^"]+)"', html)
    assert len(ids) == len(set(ids)) == 2 * len(sentences)


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    vocabs = Vocabularies.build(list(read_conll(DATA / "en_ewt_train_tiny.conllu")))
    model = Model(load_config("second-order", {"features.hash_bits": 14, "features.fine_tags": True,
                                                "features.morph": False, "features.lemma": False,
                                                "features.second_order_hash_bits": 12,
                                                "features.label_hash_bits": 12}), vocabs)
    model.theta = round_weights(np.random.default_rng(3).normal(scale=0.3, size=model.theta.shape[0]))
    path = tmp_path_factory.mktemp("show") / "m.bpm"
    save_model(model, path)
    return path


def test_cli_parse_marginals_file_and_selection(tmp_path, model_file):
    sample = DATA / "sample_gold.conllu"
    out = tmp_path / "page.html"
    result = run("show", "--parse", "-m", model_file, "--alternatives", "0.2", sample, "-o", out)
    assert result.exit_code == 0, result.stderr
    html = out.read_text(encoding="utf-8")
    sentences = list(read_conll(sample))
    assert html.count("<section>") == len(sentences)
    assert sum(len(parts(svg)[0]) for svg in svgs_of(html)) == sum(s.n for s in sentences)
    assert "stroke-opacity" in html  # HeadProb from the parse

    # the same picture from a parse written to files
    parsed, marginals = tmp_path / "p.conllu", tmp_path / "p.npz"
    assert run("parse", "-m", model_file, "--marginals", "--marginals-file", marginals, sample,
               "-o", parsed).exit_code == 0
    again = run("show", parsed, "--marginals-file", marginals, "--alternatives", "0.2")
    assert again.exit_code == 0
    assert [parts(s) for s in svgs_of(again.stdout)] == [parts(s) for s in svgs_of(html)]

    one = run("show", parsed, "--sent-id", sentences[2].sent_id)
    assert one.stdout.count("<section>") == 1 and sentences[2].sent_id in one.stdout
    assert run("show", parsed, "--range", "2:3").stdout.count("<section>") == 2
    assert run("show", parsed, "--range", "4:").stdout.count("<section>") == len(sentences) - 3

    svg_dir = tmp_path / "svg"
    assert run("show", parsed, "--format", "svg", "-o", svg_dir).exit_code == 0
    files = sorted(svg_dir.iterdir())
    assert len(files) == len(sentences) and files[0].name.startswith("000001-")
    for f, s in zip(files, sentences, strict=True):
        assert parts(f.read_text(encoding="utf-8"))[0] == s.forms[1:]


@pytest.mark.parametrize("args, code", [
    (("--alternatives", "0.1"), 2), (("-m", "x.bpm"), 2), (("--range", "3:1"), 2),
    (("--sent-id", "nope"), 1), (("--format", "svg"), 2),
])
def test_cli_errors(args, code):
    result = run("show", DATA / "sample_gold.conllu", *args)
    assert result.exit_code == code, result.stdout


def test_cli_refuses_to_overwrite_its_input(tmp_path):
    x = tmp_path / "x.conllu"
    x.write_bytes((DATA / "sample_gold.conllu").read_bytes())
    assert run("show", x, "-o", x).exit_code == 1
    assert x.read_bytes() == (DATA / "sample_gold.conllu").read_bytes()


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


@pytest.mark.skipif(chromium() is None, reason="no Chromium on this machine (apt-get install chromium)")
def test_a_real_browser_renders_the_page(tmp_path):
    html = page([sentence_html(nasty_sentence(60), number=1)] +
                [sentence_html(s, number=k) for k, s in enumerate(read_conll(DATA / "en_ewt_sample.conllu"), 2)])
    path = tmp_path / "page.html"
    path.write_text(html, encoding="utf-8")
    shot = tmp_path / "shot.png"
    subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,900",
                    f"--screenshot={shot}", path.as_uri()], capture_output=True, timeout=120)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000  # a picture, not a blank page
