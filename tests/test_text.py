"""bpparse.text: tokenised and raw text read as CoNLL-U sentences; round trips and errors."""
import io

import pytest

from bpparse.conll import format_sentence, read_conll
from bpparse.errors import InputError
from bpparse.text import read_input, read_raw, read_text, read_tokens, split_sentences


def stream(text, name="in.txt"):
    s = io.StringIO(text)
    s.name = name
    return s


def round_trip(sentences):
    """The sentences written as CoNLL-U and read back by read_conll."""
    return list(read_conll(io.StringIO("".join(format_sentence(s) for s in sentences))))


def test_text_round_trips_to_conllu_with_the_tokens_as_forms():
    lines = ["The cat  sat on the mat .", "", "   ", "Colorless\tgreen ideas sleep furiously"]
    sentences = list(read_text(stream("\n".join(lines) + "\n")))
    assert [s.forms[1:] for s in sentences] == [lines[0].split(), lines[3].split()]
    back = round_trip(sentences)
    assert [s.forms[1:] for s in back] == [s.forms[1:] for s in sentences]
    text = format_sentence(sentences[1])
    assert "# sent_id = 2\n# text = Colorless green ideas sleep furiously\n" in text
    assert [s.upos[1:] for s in back] == [["_"] * 7, ["_"] * 5]
    assert [s.first_line for s in sentences] == [1, 4]  # errors name the text file's line


def test_text_errors_name_file_and_line():
    with pytest.raises(InputError, match=r"in\.txt:2: line of 1001 tokens is longer"):
        list(read_text(stream("a b\n" + "x " * 1001 + "\n")))
    with pytest.raises(InputError, match=r"in\.txt:1: .*control character U\+0007"):
        list(read_text(stream("a b\x07 c\n")))


def test_bad_utf8_in_text_is_an_error(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"fine line\nbad \xff byte\n")
    with pytest.raises(InputError, match=r"bad\.txt:2:"):
        list(read_input(str(path), "text"))


def test_raw_text_sentences_clitics_and_space_after():
    sentences = list(read_raw(stream("Mr. Smith doesn't know. He left at 5 p.m. today!\n")))
    assert [s.forms[1:] for s in sentences] == [
        ["Mr.", "Smith", "does", "n't", "know", "."],
        ["He", "left", "at", "5", "p.m.", "today", "!"]]
    text = format_sentence(sentences[0])
    assert "# text = Mr. Smith doesn't know.\n" in text
    assert "\n3-4\tdoesn't\t" in text
    assert "\n5\tknow\t_\t_\t_\t_\t_\t_\t_\tSpaceAfter=No\n" in text
    back = round_trip(sentences)
    assert [s.forms for s in back] == [s.forms for s in sentences]


@pytest.mark.parametrize("text, expected", [
    ("I said no. Then I left (quickly).",
     [["I", "said", "no", "."], ["Then", "I", "left", "(", "quickly", ")", "."]]),
    ("See fig. 3 and e.g. this.", [["See", "fig.", "3", "and", "e.g.", "this", "."]]),
    ("Wait... what?! No.", [["Wait", "...", "what", "?!"], ["No", "."]]),  # lowercase goes on
])
def test_sentence_splitting(text, expected):
    assert [[t.form for t in s] for s in split_sentences(text)] == expected


def test_tokens_from_python_lists():
    (s,) = read_tokens([["The", "cat", "sat", "."]])
    assert s.forms[1:] == ["The", "cat", "sat", "."]
    with pytest.raises(InputError, match="<tokens>:2: a sentence must be a list"):
        list(read_tokens([["ok"], "not a list"]))
    with pytest.raises(InputError, match="<tokens>:1: token ' x' is empty or has surrounding"):
        list(read_tokens([[" x"]]))
    with pytest.raises(InputError, match="empty sentence"):
        list(read_tokens([[]]))
