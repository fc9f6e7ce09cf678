"""The command line: help and version, `bpparse eval`, `bpparse check`, clean errors, closed pipes."""
import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from bpparse.cli import cli

DATA = os.path.join(os.path.dirname(__file__), "data")
GOLD = os.path.join(DATA, "en_ewt_sample.conllu")


def data(name):
    return os.path.join(DATA, name)


def run(*args, input=None):
    try:
        runner = CliRunner(mix_stderr=False)  # click < 8.2 mixes stderr into output by default
    except TypeError:
        runner = CliRunner()
    return runner.invoke(cli, list(args), input=input)


def test_version_and_help():
    from bpparse import __version__

    result = run("--version")
    assert result.exit_code == 0 and result.stdout == f"bpparse {__version__}\n"
    result = run("--help")
    assert result.exit_code == 0 and "eval" in result.stdout and "check" in result.stdout
    for command in cli.commands:
        result = run(command, "--help")
        assert result.exit_code == 0 and f"Usage: cli {command}" in result.stdout
        assert len(result.stdout.splitlines()) > 5


def test_help_imports_no_heavy_module():
    code = ("import sys\nfrom bpparse.cli import main\ntry:\n    main(['eval', '--help'])\n"
            "except SystemExit:\n    pass\nprint(sorted(m for m in ('numpy', 'numba', 'conllu') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().endswith("[]")


def test_eval_identical_files():
    result = run("eval", GOLD, GOLD)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split()[:2] == ["words", "652"] and "punctuation counted" in lines[0]
    assert lines[2].split() == ["UAS", "100.00"] and lines[3].split() == ["LAS", "100.00"]


def test_eval_json_with_prediction_on_stdin():
    pred = open(data("pt_bosque_sample.conllu"), encoding="utf-8").read().replace("\tnsubj\t", "\tobj\t")
    result = run("eval", "--json", "--details", "--no-punct", data("pt_bosque_sample.conllu"), "-", input=pred)
    assert result.exit_code == 0, result.stderr
    r = json.loads(result.stdout)
    assert r["uas"] == 100.0 and r["las"] < 100.0 and r["sentences"] == 18
    assert r["by_deprel"]["nsubj"]["las"] == 0.0 and r["by_deprel"]["nsubj"]["uas"] == 100.0
    assert "punct" not in r["by_deprel"]
    both = json.loads(run("eval", "--json", data("pt_bosque_sample.conllu"), "-", input=pred).stdout)
    assert both["words"] > r["words"]


def test_eval_details_text():
    result = run("eval", "--details", GOLD, GOLD)
    assert result.exit_code == 0
    assert "by sentence length" in result.stdout and "by gold DEPREL" in result.stdout
    assert any(line.split()[0] == "nsubj" for line in result.stdout.splitlines() if line.strip())


def test_eval_mismatch_is_a_clean_error():
    result = run("eval", GOLD, data("pt_bosque_sample.conllu"))
    assert result.exit_code == 1
    assert result.stderr == (f"bpparse: error: {data('pt_bosque_sample.conllu')}:5: word 1 of sentence 1 is "
                             f"'Pequenos' but 'From' in gold ({GOLD}:5)\n")
    assert result.stdout == ""


def test_eval_both_stdin_is_a_usage_error():
    result = run("eval", "-", "-", input="")
    assert result.exit_code == 2 and "cannot both be -" in result.stderr


MALFORMED = [
    ("bad_columns.conllu", "expected 10 tab-separated columns, found 9"),
    ("bad_id.conllu", "ID '4a' is not an integer, a range (like 3-4) or a decimal (like 5.1)"),
    ("bad_order.conllu", "ID 5 out of order: expected 4"),
    ("bad_head_range.conllu", "HEAD 8 out of range 0..7"),
    ("bad_head_value.conllu", "HEAD 'six' is not an integer"),
    ("bad_mwt.conllu", "multiword token ID 5-6 out of order: expected a range starting at 4"),
    ("bad_utf8.conllu", "not valid UTF-8 (byte 4 of the line)"),
    ("cycle.conllu", "cycle in HEAD: 4 -> 6 -> 4"),
    ("self_head.conllu", "HEAD of word 4 is the word itself"),
    ("head_missing.conllu", "HEAD is '_': training data needs a complete tree"),
]


@pytest.mark.parametrize("name,msg", MALFORMED)
def test_check_malformed_exact_message_and_status(name, msg):
    result = run("check", data(name))
    assert result.exit_code == 1
    assert result.stderr == f"bpparse: error: {data(name)}:16: {msg}\n"


def test_check_good_files_and_warnings():
    result = run("check", data("multi_root.conllu"), data("empty.conllu"), data("no_final_blank.conllu"))
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        f"{data('multi_root.conllu')}: 2 sentences, 14 words, 1 with several roots",
        f"{data('empty.conllu')}: 0 sentences, 0 words, 0 with several roots",
        f"{data('no_final_blank.conllu')}: 2 sentences, 14 words, 0 with several roots",
    ]
    assert result.stderr == f"bpparse: warning: {data('multi_root.conllu')}:11: sentence has 2 roots (words 3, 7)\n"
    result = run("check", "--no-trees", data("cycle.conllu"))
    assert result.exit_code == 0 and result.stdout == f"{data('cycle.conllu')}: 2 sentences, 14 words\n"


def test_missing_file():
    result = run("eval", data("nope.conllu"), GOLD)
    assert result.exit_code == 1
    assert result.stderr == f"bpparse: error: {data('nope.conllu')}: cannot read: No such file or directory\n"


def console(*args, **kwargs):
    """The installed entry point, as users run it."""
    return [sys.executable, "-c", "from bpparse.cli import main; main()", *args]


def test_real_process_error_has_no_traceback():
    proc = subprocess.run(console("eval", data("bad_head_range.conllu"), data("bad_head_range.conllu")), capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr == f"bpparse: error: {data('bad_head_range.conllu')}:16: HEAD 8 out of range 0..7\n"


SHOUT = """
import sys
from bpparse.cli import cli, main
@cli.command()
def shout():
    sys.stdout.write("x" * 100)  # buffered: the failing write is the final flush
main()
"""


@pytest.mark.parametrize("args", [
    console("eval", "--details", GOLD, GOLD),
    [sys.executable, "-c", SHOUT, "shout"],
])
def test_closed_pipe_exits_quietly(args):
    """Like `bpparse ... | head` once head has exited: the reader is gone before we write."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(args, stdout=write_end, stderr=subprocess.PIPE)
    finally:
        os.close(write_end)
    assert proc.returncode == 1
    assert proc.stderr == b""
