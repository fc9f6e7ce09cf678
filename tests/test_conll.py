"""CoNLL-U / CoNLL-X reading and writing: round trips, fields against conllu, every error class."""
import gzip
import io
import lzma
import os
import sys

import conllu
import numpy as np
import pytest

from bpparse.conll import format_sentence, open_output, read_conll, write_conll
from bpparse.errors import InputError
from oracle import is_tree

DATA = os.path.join(os.path.dirname(__file__), "data")
SAMPLE = os.path.join(os.path.dirname(__file__), "..", "bpparse", "data", "sample.conllu")
GOOD = ["en_ewt_sample.conllu", "en_ewt_empty_nodes.conllu", "pt_bosque_sample.conllu",
        "pt_bosque_long.conllu", "da_ddt_sample.conllu", "en_ewt_sample.conllx"]


def data(name):
    return os.path.join(DATA, name)


def read_text(path):
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


@pytest.mark.parametrize("name", GOOD + [SAMPLE])
def test_round_trip_is_byte_identical(name):
    path = data(name)
    out = io.StringIO()
    assert write_conll(read_conll(path), out) > 0
    assert out.getvalue().encode("utf-8") == open(path, "rb").read()


@pytest.mark.parametrize("name", GOOD)
def test_words_agree_with_conllu_library(name):
    """Our own field split gives what conllu.parse_incr gives, word by word."""
    with open(data(name), encoding="utf-8") as f:
        reference = list(conllu.parse_incr(f))
    ours = list(read_conll(data(name)))
    assert len(ours) == len(reference)
    for s, ref in zip(ours, reference):
        words = [t for t in ref if isinstance(t["id"], int)]
        assert s.n == len(words)
        assert s.forms[1:] == [t["form"] for t in words]
        assert s.lemmas[1:] == [t["lemma"] for t in words]
        assert s.upos[1:] == [t["upos"] for t in words]
        assert s.deprels == ["<root>"] + [t["deprel"] for t in words]
        assert s.heads.tolist() == [-1] + [t["head"] for t in words]
        assert s.heads.dtype == np.int64
        # every column at once, as encoding reads them: the same words, without the ROOT entry
        columns = s.word_columns()
        assert len(columns) == 10
        assert [list(c) for c in columns[1:4]] == [s.forms[1:], s.lemmas[1:], s.upos[1:]]
        assert list(columns[7]) == s.deprels[1:] and list(columns[5]) == s.feats[1:]
        assert [int(h) if h != "_" else -1 for h in columns[6]] == s.heads.tolist()[1:]


@pytest.mark.parametrize("name", GOOD[:5])
def test_tokens_match_conllu_and_keep_every_comment(name):
    with open(data(name), encoding="utf-8") as f:
        reference = list(conllu.parse_incr(f))
    for s, ref in zip(read_conll(data(name)), reference):
        assert list(s.tokens) == list(ref)
        for key, value in ref.metadata.items():
            assert s.tokens.metadata[key] == value
        assert len(s.comments) == sum(1 for line in s.lines if line.startswith("#"))


def test_line_numbers_and_word_lines():
    path = data("en_ewt_sample.conllu")
    file_lines = read_text(path).split("\n")
    n_mwt = n_empty = 0
    for s in read_conll(path):
        assert file_lines[s.first_line - 1] == s.lines[0]
        assert s.word_lines[0] == -1 and len(s.word_lines) == s.n + 1
        for i in range(1, s.n + 1):
            line = file_lines[s.line_of(i) - 1]
            assert line == s.lines[s.word_lines[i]]
            assert line.split("\t")[0] == str(i)
        ids = [line.split("\t")[0] for line in s.lines if not line.startswith("#")]
        n_mwt += sum("-" in i for i in ids)
        n_empty += sum("." in i for i in ids)
    assert n_mwt > 0 and n_empty > 0


def test_special_forms_are_plain_strings():
    sentences = list(read_conll(data("en_ewt_sample.conllu")))
    forms = [f for s in sentences for f in s.forms[1:]]
    assert "_" in forms and "#" in forms and "#audiobooks" in forms
    danish = [f for s in read_conll(data("da_ddt_sample.conllu")) for f in s.forms[1:]]
    assert any(not f.isascii() for f in danish)


def test_long_sentence():
    (s,) = read_conll(data("pt_bosque_long.conllu"), check_trees=True)
    assert s.n == 201 and len(s.heads) == 202
    assert is_tree(s.heads)


def test_sent_id_and_roots():
    s = next(read_conll(data("multi_root.conllu")))
    assert s.sent_id == "good-1" and s.roots == [3]


def test_format_sentence_replaces_only_head_deprel_misc():
    for s in read_conll(data("pt_bosque_sample.conllu")):
        heads = np.zeros(s.n + 1, dtype=np.int64)
        heads[0] = -1
        heads[2:] = 1
        labels = ["x"] * (s.n + 1)
        misc = [None] + ["P=0.5" if i % 2 else None for i in range(1, s.n + 1)]
        text = format_sentence(s, heads, labels, misc)
        lines = text.split("\n")
        assert text.endswith("\n\n") and lines[:-2] != s.lines and len(lines) == len(s.lines) + 2
        for j, (old, new) in enumerate(zip(s.lines, lines)):
            if j not in s.word_lines:
                assert old == new
                continue
            i = s.word_lines.index(j)
            a, b = old.split("\t"), new.split("\t")
            assert a[:6] == b[:6] and a[8] == b[8]
            assert b[6] == ("0" if i == 1 else "1") and b[7] == "x"
            assert b[9] == (misc[i] if misc[i] is not None else a[9])
        (back,) = read_conll(io.StringIO(text))
        assert back.heads.tolist() == heads.tolist() and back.deprels[1:] == labels[1:]
        assert format_sentence(s) == s.text


def test_format_sentence_checks_lengths_and_writes_underscores():
    s = next(read_conll(data("multi_root.conllu")))
    with pytest.raises(ValueError):
        format_sentence(s, heads=[-1, 0])
    text = format_sentence(s, heads=[-1] * (s.n + 1), labels=[None] * (s.n + 1))
    (back,) = read_conll(io.StringIO(text))
    assert back.heads.tolist() == [-1] * (s.n + 1) and back.deprels[1:] == ["_"] * s.n


def test_conllx_detected_and_misc_left_alone():
    sentences = list(read_conll(data("en_ewt_sample.conllx")))
    assert {s.format for s in sentences} == {"conllx"}
    s = sentences[0]
    assert "phead" in s.tokens[0] and "misc" not in s.tokens[0]
    text = format_sentence(s, misc=["M"] * (s.n + 1))
    assert text == s.text
    assert {s.format for s in read_conll(data("en_ewt_sample.conllu"))} == {"conllu"}
    forced = next(read_conll(data("en_ewt_sample.conllx"), format="conllu"))
    assert forced.format == "conllu" and forced.forms == s.forms


def test_conllx_rejects_multiword_tokens():
    with pytest.raises(InputError) as e:
        list(read_conll(data("en_ewt_sample.conllu"), format="conllx"))
    assert "not CoNLL-X" in e.value.msg


def test_compressed_input_and_output(tmp_path):
    text = read_text(data("pt_bosque_sample.conllu"))
    for suffix, opener in ((".gz", gzip.open), (".xz", lzma.open)):
        path = tmp_path / f"in.conllu{suffix}"
        with opener(path, "wt", encoding="utf-8") as f:
            f.write(text)
        out_path = tmp_path / f"out.conllu{suffix}"
        write_conll(read_conll(path), str(out_path))
        with opener(out_path, "rt", encoding="utf-8") as f:
            assert f.read() == text


def test_stdin_and_streams(monkeypatch):
    raw = open(data("da_ddt_sample.conllu"), "rb").read()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8"))
    sentences = list(read_conll("-"))
    assert sentences[0].path == "<stdin>"
    assert "".join(s.text for s in sentences).encode("utf-8") == raw
    assert [s.text for s in read_conll(io.BytesIO(raw))] == [s.text for s in sentences]
    assert [s.text for s in read_conll(io.StringIO(raw.decode("utf-8")))] == [s.text for s in sentences]


def test_open_output_dash_is_stdout(capsys):
    s = next(read_conll(data("multi_root.conllu")))
    with open_output("-") as out:
        write_conll([s, format_sentence(s, labels=["dep"] * (s.n + 1))], out)
    written = capsys.readouterr().out
    assert written.startswith(s.text) and written.count("\tdep\t") == s.n


def test_bom_and_crlf_are_read(tmp_path):
    text = read_text(data("multi_root.conllu"))
    path = tmp_path / "dos.conllu"
    path.write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode("utf-8"))
    assert [s.text for s in read_conll(path)] == [s.text for s in read_conll(data("multi_root.conllu"))]


def test_empty_and_unterminated_files():
    assert list(read_conll(data("empty.conllu"))) == []
    sentences = list(read_conll(data("no_final_blank.conllu")))
    assert len(sentences) == 2
    assert "".join(s.text for s in sentences) == read_text(data("no_final_blank.conllu")) + "\n\n"


def test_reading_is_streaming():
    """The good first sentence comes out before the malformed second one is read."""
    reader = read_conll(data("bad_columns.conllu"))
    assert next(reader).sent_id == "good-1"
    with pytest.raises(InputError):
        next(reader)


# every malformed file has its defect on line 16 (word 4 of the second sentence)
MALFORMED = [
    ("bad_columns.conllu", False, "expected 10 tab-separated columns, found 9"),
    ("bad_id.conllu", False, "ID '4a' is not an integer, a range (like 3-4) or a decimal (like 5.1)"),
    ("bad_order.conllu", False, "ID 5 out of order: expected 4"),
    ("bad_head_range.conllu", False, "HEAD 8 out of range 0..7"),
    ("bad_head_value.conllu", False, "HEAD 'six' is not an integer"),
    ("bad_mwt.conllu", False, "multiword token ID 5-6 out of order: expected a range starting at 4"),
    ("bad_utf8.conllu", False, "not valid UTF-8 (byte 4 of the line)"),
    ("cycle.conllu", True, "cycle in HEAD: 4 -> 6 -> 4"),
    ("self_head.conllu", True, "HEAD of word 4 is the word itself"),
    ("head_missing.conllu", True, "HEAD is '_': training data needs a complete tree"),
]


@pytest.mark.parametrize("name,check_trees,msg", MALFORMED)
def test_malformed_input(name, check_trees, msg):
    with pytest.raises(InputError) as e:
        list(read_conll(data(name), check_trees=check_trees))
    assert (e.value.path, e.value.line, e.value.msg) == (data(name), 16, msg)
    assert str(e.value) == f"{data(name)}:16: {msg}"


@pytest.mark.parametrize("name", ["cycle.conllu", "self_head.conllu", "head_missing.conllu"])
def test_tree_errors_only_for_training_data(name):
    assert len(list(read_conll(data(name)))) == 2


def test_several_roots_are_accepted_and_reported():
    messages = []
    sentences = list(read_conll(data("multi_root.conllu"), check_trees=True, on_warning=messages.append))
    assert len(sentences) == 2 and sentences[1].roots == [3, 7]
    assert messages == [f"{data('multi_root.conllu')}:11: sentence has 2 roots (words 3, 7)"]
    messages.clear()
    list(read_conll(data("multi_root.conllu"), on_warning=messages.append))
    assert messages == []


def block(*rows):
    return io.StringIO("\n".join(rows) + "\n\n")


W = "\t".join(["{}", "w", "w", "X", "X", "_", "{}", "dep", "_", "_"])
MWT = "\t".join(["{}", "ww"] + ["_"] * 8)


@pytest.mark.parametrize("rows,line,msg", [
    ([W.format(1, 0), W.format(2, 1), W.format("2.1", "_"), W.format("2.3", "_")], 4,
     "empty node ID 2.3 out of order: expected 2.2"),
    ([W.format(1, 0), W.format("3.1", "_")], 2, "empty node ID 3.1 out of order: expected 1.1"),
    ([W.format(1, 0), MWT.format("2-3"), W.format(2, 1)], 2,
     "multiword token ends at word 3 but the sentence has 2 words"),
    ([W.format(1, 0), MWT.format("2-2"), W.format(2, 1)], 2, "multiword token ID 2-2 does not span two or more words"),
    (["# only a comment"], 1, "sentence has no word lines"),
    ([W.format(1, -1)], 1, "HEAD -1 out of range 0..1"),
])
def test_id_errors(rows, line, msg):
    with pytest.raises(InputError) as e:
        list(read_conll(block(*rows)))
    assert (e.value.line, e.value.msg) == (line, msg)


def test_valid_empty_nodes_and_missing_heads():
    (s,) = read_conll(block("# c", W.format("0.1", "_"), W.format(1, "_"), W.format("1.1", "_"),
                            W.format("1.2", "_"), MWT.format("2-3"), W.format(2, 1), W.format(3, 2)))
    assert s.n == 3 and s.heads.tolist() == [-1, -1, 1, 2] and s.word_lines == [-1, 2, 6, 7]


def test_missing_file_and_bad_format():
    with pytest.raises(InputError) as e:
        list(read_conll(data("no-such-file.conllu")))
    assert e.value.line is None and "cannot read" in e.value.msg
    with pytest.raises(ValueError):
        read_conll(data("empty.conllu"), format="csv")


def test_open_output_is_atomic(tmp_path):
    # issue 20: a failed run never touches an existing file; success replaces it whole
    target = tmp_path / "out.conllu"
    target.write_text("precious\n", encoding="utf-8")
    with pytest.raises(RuntimeError):
        with open_output(target) as out:
            out.write("half")
            raise RuntimeError("interrupted")
    assert target.read_text(encoding="utf-8") == "precious\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.conllu"]
    with open_output(target) as out:
        out.write("new\n")
    assert target.read_text(encoding="utf-8") == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.conllu"]


@pytest.mark.parametrize("path, problem", [("/dev/full", "No space left"),
                                           ("/nonexistent-dir/x.conllu", "cannot write")])
def test_open_output_errors_name_the_path(path, problem):
    from bpparse.errors import BpparseError

    with pytest.raises(BpparseError, match=problem) as info:
        with open_output(path) as out:
            out.write("x" * 100000)
    assert str(info.value).startswith(path)
