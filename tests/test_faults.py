"""Faults a user meets: files that must not be lost, broken input, scores of any scale, full disks,
interrupts, options that do not apply (issue 20, items 1-8). Future features add their own fault
tests here: full disk via /dev/full, unwritable paths, output = input, SIGINT in a subprocess, bad
models.
"""
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import bpparse
from bpparse import bundled
from bpparse.cli import cli
from bpparse.config import load_config
from bpparse.conll import read_conll
from bpparse.encode import Vocabularies
from bpparse.errors import BpparseError, ModelFileError
from bpparse.model import Model, load_model, round_weights, save_model

DATA = Path(__file__).parent / "data"
SAMPLE = DATA / "en_ewt_sample.conllu"
GOLD5 = DATA / "sample_gold.conllu"
TINY = DATA / "en_ewt_train_tiny.conllu"
SMALL = {"features.hash_bits": 16, "features.second_order_hash_bits": 14, "features.label_hash_bits": 14,
         "features.fine_tags": True, "features.morph": False, "features.lemma": False}


def run_cli(*args, input=None):
    try:
        runner = CliRunner(mix_stderr=False)
    except TypeError:
        runner = CliRunner()
    return runner.invoke(cli, [str(a) for a in args], input=input)


def bpparse_process(*args, **kw):
    """A real `bpparse` process (SIGINT at its default, whatever the test runner ignores)."""
    return subprocess.Popen([sys.executable, "-m", "bpparse", *map(str, args)],
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), **kw)


def one_error_line(stderr):
    lines = [line for line in stderr.splitlines() if line.startswith("bpparse: error:")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    vocabs = Vocabularies.build(list(read_conll(TINY)))
    model = Model(load_config("second-order", SMALL), vocabs)
    model.theta = round_weights(np.random.default_rng(5).normal(scale=0.3, size=model.theta.shape[0]))
    path = tmp_path_factory.mktemp("faults") / "m.bpm"
    save_model(model, path)
    return path


@pytest.fixture(scope="module")
def big_input(tmp_path_factory):
    """Enough sentences that a parse is still running when it is interrupted."""
    path = tmp_path_factory.mktemp("faults") / "big.conllu"
    path.write_text(TINY.read_text(encoding="utf-8") * 1500, encoding="utf-8")
    return path


def leftovers(directory):
    return [p.name for p in Path(directory).iterdir() if p.name.endswith(".tmp")]


# ---------------------------------------------------------------- item 1: data loss through -o

def test_output_that_is_an_input_is_refused_before_reading(tmp_path, model_file):
    x = tmp_path / "x.conllu"
    x.write_bytes(SAMPLE.read_bytes())
    for args in (("parse", "-m", model_file, x, "-o", x), ("relax", "-m", model_file, x, "-o", x),
                 ("parse", "-m", model_file, x, "--marginals-file", x)):
        result = run_cli(*args)
        assert result.exit_code == 1
        assert "is also an input" in result.stderr
        assert x.read_bytes() == SAMPLE.read_bytes()


@pytest.mark.parametrize("bad", ["missing.conllu", "bad_columns.conllu"])
def test_failed_run_leaves_an_existing_output_untouched(tmp_path, model_file, bad):
    out = tmp_path / "out.conllu"
    out.write_text("precious\n")
    result = run_cli("parse", "-m", model_file, DATA / bad, "-o", out)
    assert result.exit_code == 1
    assert out.read_text() == "precious\n"
    assert leftovers(tmp_path) == []


# ---------------------------------------------------------------- item 2: training on broken trees

def loop_file(tmp_path):
    text = TINY.read_text(encoding="utf-8").split("\n")
    first_word = next(i for i, line in enumerate(text) if line[:2] == "1\t")
    cols = text[first_word].split("\t")
    cols[6] = "2"  # word 1 -> 2 -> 1: a cycle, reported at word 1's line
    text[first_word] = "\t".join(cols)
    cols = text[first_word + 1].split("\t")
    cols[6] = "1"
    text[first_word + 1] = "\t".join(cols)
    path = tmp_path / "loop.conllu"
    path.write_text("\n".join(text), encoding="utf-8")
    return path, first_word + 1


def test_training_refuses_a_cycle_naming_file_and_line(tmp_path):
    path, line = loop_file(tmp_path)
    result = run_cli("train", "--config", "first-order", "--train", path, "--out", tmp_path / "m.bpm",
                     "--epochs", "1", "--set", "features.hash_bits=12", "--no-progress")
    assert result.exit_code == 1
    assert one_error_line(result.stderr).startswith(f"bpparse: error: {path}:{line}: cycle in HEAD")
    assert "--skip-bad-trees" in result.stderr
    assert not (tmp_path / "m.bpm").exists()


@pytest.mark.slow
def test_skip_bad_trees_trains_on_the_others_and_counts_them(tmp_path):
    path, _ = loop_file(tmp_path)
    out = tmp_path / "m.bpm"
    result = run_cli("train", "--config", "first-order", "--train", path, "--out", out, "--epochs", "1",
                     "--set", "features.hash_bits=12", "--no-progress", "--skip-bad-trees")
    assert result.exit_code == 0, result.stderr
    assert "skipped 1 training sentence(s) that are not trees" in result.stderr
    meta = load_model(out).meta
    assert meta["gold"]["skipped_bad_tree"] == 1
    assert meta["gold"]["sentences"] == len(list(read_conll(TINY)))


# ---------------------------------------------------------------- item 4: training fails early

@pytest.mark.parametrize("out", ["missing-dir/m.bpm", "/proc/m.bpm"])
def test_unwritable_model_path_fails_before_reading(tmp_path, out):
    out = out if out.startswith("/") else tmp_path / out
    result = run_cli("train", "--config", "first-order", "--train", DATA / "missing.conllu", "--out", out)
    assert result.exit_code == 1
    assert one_error_line(result.stderr).startswith(f"bpparse: error: {out}: cannot write")


def test_epochs_must_be_positive(tmp_path):
    result = run_cli("train", "--config", "first-order", "--train", TINY, "--out", tmp_path / "m.bpm",
                     "--epochs", "0")
    assert result.exit_code == 2
    result = run_cli("train", "--config", "first-order", "--train", TINY, "--out", tmp_path / "m.bpm",
                     "--set", "train.epochs=0")
    assert result.exit_code == 1 and "train.epochs >= 1" in result.stderr


def test_full_disk_during_training_leaves_the_old_model_whole(tmp_path, model_file):
    out = tmp_path / "m.bpm"
    out.write_bytes(Path(model_file).read_bytes())

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    command = [sys.executable, "-m", "bpparse", "train", "--config", "first-order", "--train", str(TINY),
               "--epochs", "1", "--no-progress", "--set", "features.hash_bits=14", "--out"]
    # a cold numba cache would hit the limit first, writing its own files: warm it without one
    subprocess.run(command + [str(tmp_path / "warm.bpm")], capture_output=True, check=True)
    (tmp_path / "warm.bpm").unlink()
    proc = subprocess.run(command + [str(out)], preexec_fn=limit, capture_output=True, text=True)
    assert proc.returncode == 1
    assert "cannot write" in one_error_line(proc.stderr)
    assert out.read_bytes() == Path(model_file).read_bytes()
    assert leftovers(tmp_path) == []


def test_save_model_is_atomic(tmp_path, model_file):
    model = load_model(model_file)
    with pytest.raises(BpparseError, match="/dev/full: cannot write"):
        save_model(model, "/dev/full")
    target = tmp_path / "m.bpm"
    target.write_bytes(b"old")
    with pytest.raises(BpparseError, match="is a directory"):
        save_model(model, tmp_path)
    save_model(model, target)
    assert load_model(target).theta.tobytes() == model.theta.tobytes()
    assert leftovers(tmp_path) == []


# ---------------------------------------------------------------- item 5: no tracebacks

@pytest.mark.parametrize("args", [
    ("parse", "-m", "{model}", "{sample}"),
    ("relax", "-m", "{model}", "{sample}"),
    ("eval", "{sample}", "{sample}"),
    ("check", "{sample}"),
])
def test_full_disk_on_stdout_is_one_line(args, model_file):
    args = [a.format(model=model_file, sample=SAMPLE) for a in args]
    with open("/dev/full", "w") as full:
        proc = bpparse_process(*args, stdout=full, stderr=subprocess.PIPE, text=True)
        _, err = proc.communicate(timeout=600)
    assert proc.returncode == 1
    assert "No space left on device" in one_error_line(err)


@pytest.mark.parametrize("out", ["/dev/full", "/proc/version"])
def test_unwritable_output_file_is_one_line(out, model_file):
    result = run_cli("parse", "-m", model_file, SAMPLE, "-o", out)
    assert result.exit_code == 1
    assert one_error_line(result.stderr).startswith(f"bpparse: error: {out}: cannot write")


def test_unreadable_model_is_a_clean_error(monkeypatch, model_file):
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(model_file))

    monkeypatch.setattr("bpparse.model.open", refuse, raising=False)
    with pytest.raises(ModelFileError, match="cannot read the model file: Permission denied"):
        load_model(model_file)


def test_info_accepts_bundled_names():
    if bundled.DEFAULT_MODEL not in bundled.bundled_models():
        pytest.skip("no bundled model installed")
    for name in (bundled.DEFAULT_MODEL, bundled.DEFAULT_MODEL + ".bpm", ""):
        result = run_cli("info", *([name] if name else []))
        assert result.exit_code == 0, result.stderr
        assert "second-order" in result.stdout or "config" in result.stdout


@pytest.mark.parametrize("args", [
    ("parse", "--tolerance", "nan"), ("parse", "--damping", "nan"), ("parse", "--prune", "nan"),
    ("relax", "--threshold", "nan"), ("relax", "--threshold", "-1"),
    ("parse", "--threshold", "0.1"), ("parse", "--method", "joint"), ("parse", "--max-rounds", "3"),
])
def test_bad_or_inapplicable_option_values_are_usage_errors(args, model_file):
    result = run_cli(*args, "-m", model_file, SAMPLE)
    assert result.exit_code == 2, result.stdout
    assert "Traceback" not in result.stderr


# ---------------------------------------------------------------- items 5, 6, 8: Ctrl-C

def interrupt_after_output(args, watch):
    """Start `bpparse ARGS` with stdout to ``watch`` (or with ``-o watch`` among ARGS), send SIGINT
    once ``watch`` or its temporary file has data (the parse is under way); (status, stderr)."""
    with open(watch if "-o" not in args else os.devnull, "w") as stdout:
        proc = bpparse_process(*args, stdout=stdout, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 600
        while not any(p.stat().st_size for p in Path(watch).parent.glob(f"*{Path(watch).name}*")
                      if p.name != Path(watch).name or "-o" not in args):
            assert proc.poll() is None and time.time() < deadline, proc.stderr.read()
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=600)
    return proc.returncode, err


@pytest.mark.slow
@pytest.mark.parametrize("command", ["parse", "relax"])
def test_ctrl_c_exits_130_and_leaves_files_as_they_were(tmp_path, model_file, big_input, command):
    out = tmp_path / "out.conllu"
    out.write_text("precious\n")
    status, err = interrupt_after_output([command, "-m", model_file, big_input, "-o", out], out)
    assert status == 130, err
    assert "Traceback" not in err and err.rstrip().endswith("bpparse: interrupted")
    assert out.read_text() == "precious\n"
    assert leftovers(tmp_path) == []


@pytest.mark.slow
def test_ctrl_c_streaming_keeps_marginals_and_output_in_step(tmp_path, model_file, big_input):
    marginals = tmp_path / "m.npz"
    out = tmp_path / "streamed.conllu"
    status, err = interrupt_after_output(["parse", "-m", model_file, big_input, "--marginals-file",
                                          marginals], out)
    assert status == 130, err
    written = list(read_conll(out))
    assert 0 < len(written) < 1500 * len(list(read_conll(TINY)))
    with np.load(marginals) as z:
        assert len(z.files) == len(written)
        assert [z[name].shape[0] - 1 for name in sorted(z.files)] == [s.n for s in written]


@pytest.mark.slow
def test_ctrl_c_during_training_exits_130_without_a_model(tmp_path, big_input):
    out = tmp_path / "m.bpm"
    proc = bpparse_process("train", "--config", "first-order", "--train", big_input, "--out", out,
                           "--set", "features.hash_bits=14", "--no-progress", stderr=subprocess.PIPE,
                           text=True)
    log = Path(f"{out}.log.jsonl")  # written after each epoch: then training is under way, 9 to go
    deadline = time.time() + 600
    while not log.exists():
        assert proc.poll() is None and time.time() < deadline, proc.stderr.read()
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert not out.exists() and leftovers(tmp_path) == []


# ---------------------------------------------------------------- item 6: DEPS

def test_deps_cleared_when_heads_change_unless_kept(model_file):
    parsed = run_cli("parse", "-m", model_file, GOLD5)
    kept = run_cli("parse", "-m", model_file, GOLD5, "--keep-deps")
    assert parsed.exit_code == kept.exit_code == 0
    gold = [s.lines[s.word_lines[i]].split("\t")[8] for s in read_conll(GOLD5) for i in range(1, s.n + 1)]
    io = __import__("io")
    deps = [s.lines[s.word_lines[i]].split("\t")[8] for s in read_conll(io.StringIO(parsed.stdout))
            for i in range(1, s.n + 1)]
    kept_deps = [s.lines[s.word_lines[i]].split("\t")[8] for s in read_conll(io.StringIO(kept.stdout))
                 for i in range(1, s.n + 1)]
    assert set(deps) == {"_"} and set(gold) != {"_"}
    assert kept_deps == gold


# ---------------------------------------------------------------- item 8: input errors

@pytest.mark.parametrize("edit, line, problem", [
    (lambda lines: lines.insert(6, "   "), 7, "line holds only whitespace"),
    (lambda lines: lines.__setitem__(12, "\ufeff" + lines[12]), 13, "byte-order mark (U+FEFF)"),
    (lambda lines: lines.__setitem__(4, lines[4].replace("Google", "Goo\x00gle")), 5, "NUL byte"),
    (lambda lines: lines.__setitem__(4, lines[4].replace("\tGoogle\t", "\t\t")), 5,
     "column 2 (FORM) is empty"),
])
def test_malformed_lines_are_named_exactly(tmp_path, edit, line, problem):
    lines = GOLD5.read_text(encoding="utf-8").split("\n")
    edit(lines)
    path = tmp_path / "bad.conllu"
    path.write_text("\n".join(lines), encoding="utf-8")
    result = run_cli("check", path)
    assert result.exit_code == 1
    assert one_error_line(result.stderr).startswith(f"bpparse: error: {path}:{line}: {problem}")


def test_cr_only_line_ends_are_named(tmp_path):
    path = tmp_path / "mac.conllu"
    path.write_bytes(GOLD5.read_bytes().replace(b"\n", b"\r"))
    result = run_cli("check", path)
    assert result.exit_code == 1
    assert "CR-only (old Mac) line ends" in one_error_line(result.stderr)


def test_eval_of_empty_files_is_an_error(tmp_path):
    empty = tmp_path / "empty.conllu"
    empty.write_text("")
    result = run_cli("eval", empty, empty)
    assert result.exit_code == 1
    assert one_error_line(result.stderr) == f"bpparse: error: {empty}: no sentences to evaluate"


def test_no_usable_training_sentence_message_is_readable(tmp_path):
    multi = tmp_path / "multi.conllu"
    multi.write_text((DATA / "multi_root.conllu").read_text().split("\n\n")[1] + "\n\n")
    result = run_cli("train", "--config", "first-order", "--train", multi, "--out", tmp_path / "m.bpm",
                     "--set", "features.hash_bits=12", "--epochs", "1")
    assert result.exit_code == 1
    line = one_error_line(result.stderr)
    assert "no usable training sentence" in line and "{" not in line and "skipped_multiroot" in line


# ---------------------------------------------------------------- item 3: numerics

@pytest.mark.parametrize("offset", [1e3, -1e3, 1e6, -1e6])
def test_bp_is_invariant_to_offsets_of_a_childs_scores(offset):
    s = np.random.default_rng(0).normal(0, 2, (21, 21))
    base = bpparse.bp_marginals(s)
    shifted = bpparse.bp_marginals(s + offset)
    np.testing.assert_allclose(shifted.marginals, base.marginals, atol=1e-9)
    np.testing.assert_allclose(shifted.marginals[:, 1:].sum(axis=0), 1.0, atol=1e-9)
    assert shifted.converged == base.converged
    # LINK + TREE is exact whatever the scale
    exact, _ = bpparse.tree_marginals(s)
    np.testing.assert_allclose(shifted.marginals, exact, atol=1e-9)


@pytest.mark.parametrize("constraint", ["tree", "exactly1"])
def test_second_order_bp_and_relaxation_are_invariant_to_per_child_offsets(constraint):
    rng = np.random.default_rng(1)
    n1 = 9
    s = rng.normal(0, 2, (n1, n1))
    grand = rng.normal(0, 0.5, (n1, n1, n1))
    sib = rng.normal(0, 0.5, (n1, n1, n1))
    offsets = rng.choice([1e3, -1e3, 1e6, -1e6, 0.0], size=n1)
    kw = dict(max_iter=20, damping=0.3, constraint=constraint)
    base = bpparse.bp_marginals(s, grand, sib, **kw)
    moved = bpparse.bp_marginals(s + offsets[None, :], grand, sib, **kw)
    np.testing.assert_allclose(moved.marginals, base.marginals, atol=1e-8)
    rbase = bpparse.relaxed_marginals(s, grand, sib, threshold=1e-3, constraint=constraint)
    rmoved = bpparse.relaxed_marginals(s + offsets[None, :], grand, sib, threshold=1e-3,
                                       constraint=constraint)
    np.testing.assert_allclose(rmoved.marginals, rbase.marginals, atol=1e-8)
