"""Plain-text input: tokenised text (one sentence per line) and raw text, read as CoNLL-U sentences.

`read_text` and `read_raw` yield `bpparse.conll.Sentence` objects built from CoNLL-U lines
(``# sent_id = N``, ``# text = ...``, ten tab-separated columns, ``_`` everywhere but ID, FORM and,
for raw text, ``SpaceAfter=No`` in MISC) exactly as `read_conll` would build them from those lines,
except that ``line_of`` gives the line of the text file the sentence came from, so that errors
(a missing tag, ...) name the user's file and line. `read_input` dispatches on the format name.

The raw-text tokenizer (`tokenize`, `surface_tokens`, `split_sentences`) is a small rule tokenizer,
approximate by design; its rules are in `surface_tokens`' docstring, its accuracy on UD English EWT
test in README.md (``scripts/tokenizer_f1.py`` measures it).
"""
import functools
import re
import sys
import unicodedata
from typing import NamedTuple

import numpy as np

from bpparse.conll import (
    FORMATS,
    NUM_COLUMNS,
    Sentence,
    _lines,
    _open_source,
    _source_name,
    read_conll,
)
from bpparse.errors import InputError

TEXT_FORMATS = ("text", "raw")
INPUT_FORMATS = FORMATS + TEXT_FORMATS
DEFAULT_MAX_TOKENS = 1000

# tokens ending in "." that are kept whole; those in NO_BREAK never end a sentence
ABBREVIATIONS = frozenset("""
mr. mrs. ms. dr. prof. st. jr. sr. rev. gen. col. lt. sgt. capt. gov. sen. rep. hon. messrs. mt.
vs. etc. e.g. i.e. cf. al. approx. ca. viz. no. nos. vol. pp. p. fig. ed. eds. est. dept. univ.
inc. ltd. co. corp. bros. assn. ave. blvd. rd. jan. feb. mar. apr. jun. jul. aug. sep. sept. oct.
nov. dec. mon. tue. tues. wed. thu. thur. thurs. fri. sat. sun. a.m. p.m. u.s. u.k. u.n. d.c.
""".split())
NO_BREAK = frozenset("""
mr. mrs. ms. dr. prof. st. jr. sr. rev. gen. col. lt. sgt. capt. gov. sen. rep. hon. messrs. mt.
vs. e.g. i.e. cf. al. approx. ca. viz. no. nos. vol. pp. p. fig.
""".split())
# abbreviations that are also words ("I said no."): their period is kept only before a number
NUMBER_ABBREVIATIONS = frozenset("no. nos. vol. pp. p. fig. ca. est. ed. sat. sun. wed. mar.".split())
# English clitics, split into syntactic words as UD EWT does ("don't" -> do n't, "I'm" -> I 'm)
_CLITIC = re.compile(r"(?i)(.+?)(n['’]t|['’](?:s|m|d|re|ve|ll))")
# hyphenated words kept whole (EWT splits most others between letters)
HYPHEN_PREFIXES = frozenset("e anti pre re co counter non post pro self ex mid multi inter sub "
                            "super semi over under".split())
_FUSED = {"cannot": 3, "gonna": 3, "gotta": 3, "wanna": 3}  # split after this many letters
_FINAL = set(".!?…。！？؟।॥۔")
_NO_SPACE_FINAL = set("。！？")           # end a sentence without a following space
_OPENING = set("\"'“‘«„‹([{¿¡")
_CLOSING = set("\"'”’»›)]}")


class Token(NamedTuple):
    """A surface token of raw text: ``form`` = ``text[start:end]``; ``words``: its syntactic words
    (one, or several for a multiword token such as "don't" = ("do", "n't"))."""

    form: str
    start: int
    end: int
    words: tuple


@functools.lru_cache(maxsize=1)
def _patterns():
    """The tokenizer's regular expressions (built once: the mark class needs a scan of Unicode)."""
    marks = []
    start = None
    for cp in range(sys.maxunicode + 1):
        inside = unicodedata.category(chr(cp))[0] == "M" or cp in (0x200C, 0x200D)
        if inside and start is None:
            start = cp
        elif not inside and start is not None:
            marks.append((start, cp - 1))
            start = None
    wc = r"\w" + "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" if b > a else re.escape(chr(a))
                         for a, b in marks)
    w = f"[{wc}]"
    word = (f"{w}+(?:(?:[.&'’]|(?<=\\d)[,:/-]|[-/](?=\\d))(?={w}){w}+)*")
    return {
        "url": re.compile(r"(?:(?:https?|ftp)://|www\.)[^\s]+"),
        "email": re.compile(f"[{wc}.+-]+@{w}+(?:[.-]{w}+)*\\.{w}+"),
        "emoticon": re.compile(r"[:;=][-']?[()DPp](?![\w])"),
        "initials": re.compile(r"(?:[^\W\d_]\.){2,}"),
        "lead_clitic": re.compile(r"(?i)['’](?:s|m|d|re|ve|ll)(?![\w])"),
        "word": re.compile(word),
        "punct_run": re.compile(r"[.!?]+|(.)\1*"),
    }


def _words(form, language):
    """Syntactic words of a surface word token (English clitics split)."""
    if language != "en":
        return (form,)
    low = form.lower()
    if low in _FUSED:
        k = _FUSED[low]
        return (form[:k], form[k:])
    m = _CLITIC.fullmatch(form)
    if m and not m.group(1)[-1].isdigit() and m.group(1)[-1] not in "'’":
        return (m.group(1), m.group(2))  # can't -> ca n't, won't -> wo n't, as EWT
    return (form,)


def _abbreviation(form, text, after):
    """Is ``form`` + "." an abbreviation here (``after``: the index after the period)?"""
    key = f"{form.lower()}."
    if key in NUMBER_ABBREVIATIONS:
        rest = text[after:after + 8].lstrip()
        return rest[:1].isdigit()
    return key in ABBREVIATIONS


def _chunk_tokens(text, start, end, language, pat):
    """Tokens of one whitespace-free stretch text[start:end]."""
    out = []
    i = start
    while i < end:
        m = pat["url"].match(text, i, end)
        if m:
            j = m.end()
            while j > i + 4 and text[j - 1] in ".,;:!?)]}\"'”’»":
                j -= 1
            out.append(Token(text[i:j], i, j, (text[i:j],)))
            i = j
            continue
        for name in ("email", "emoticon", "initials", "lead_clitic"):
            m = pat[name].match(text, i, end)
            if m and (name != "emoticon" or i == start):
                break
        else:
            m = None
        if m:
            out.append(Token(m.group(), i, m.end(), (m.group(),)))
            i = m.end()
            continue
        m = pat["word"].match(text, i, end)
        if m:
            j = m.end()
            while j + 1 < end and text[j] == "-" and text[i:j].lower() in HYPHEN_PREFIXES:
                nxt = pat["word"].match(text, j + 1, end)
                if not nxt:
                    break
                j = nxt.end()
            form = text[i:j]
            if j < end and text[j] == "." and (_abbreviation(form, text, j + 1) or (
                    len(form) == 1 and form.isupper())):
                j += 1
                form += "."
            out.append(Token(form, i, j, _words(form, language)))
            i = j
            continue
        m = pat["punct_run"].match(text, i, end)
        out.append(Token(m.group(), i, m.end(), (m.group(),)))
        i = m.end()
    return out


def surface_tokens(text, language="en"):
    """The surface tokens of raw text, as `Token` (form, start, end, words).

    Rules, in order, on each whitespace-separated stretch:
    - URLs (``http://``, ``https://``, ``ftp://``, ``www.``) up to the next space, without trailing
      punctuation; e-mail addresses; emoticons ``:)`` ``;-)`` ``:D`` at the start of a stretch.
    - Words: runs of letters, digits and combining marks (any script) with inner ``.``, ``&`` and
      apostrophes (``Space.com``, ``AT&T``, ``O'Brien``), inner ``,`` and ``:`` after a digit
      (``1,000``, ``3.14``, ``10:30``) and ``-`` / ``/`` next to a digit (``9/11``,
      ``853-7906``); between letters ``-`` and ``/`` are split off, as EWT mostly does
      (``long - term``), except after a prefix of ``HYPHEN_PREFIXES`` (``e-mail``, ``anti-war``). Dotted initials (``U.S.``, ``e.g.``), a capital letter with its period
      (``J.``) and the words of ``ABBREVIATIONS`` (``Mr.``, ``etc.``, ``Inc.``) keep their period;
      those that are also words (``NUMBER_ABBREVIATIONS``: ``no.``, ``fig.``, ``Sat.``) only
      before a number (``No. 5``).
    - Every other character (Unicode punctuation and symbols: ``$``, ``%``, ``"``, ``«``, ``،``) is
      a token of its own; a run of the same character (``--``, ``**``) and a run of ``.!?``
      (``...``, ``?!``) are one token.
    - English (``language="en"``): a word ending in ``n't``, ``'s``, ``'m``, ``'d``, ``'re``,
      ``'ve``, ``'ll`` (straight or curly apostrophe) is one multiword token of two syntactic
      words, as in UD EWT: "don't" = do + n't, "can't" = ca + n't, "I'm" = I + 'm, "John's" = John
      + 's (not after a digit: "80's"); "cannot", "gonna", "gotta", "wanna" likewise (can + not,
      gon + na). A clitic after a space ("John 's") is one token.

    Limits: scripts written without spaces (Chinese, Japanese, Thai) are not segmented (a run of
    their letters is one token); clitics of other languages (French l', Spanish del, Arabic
    proclitics) are not split; ambiguous periods after words not in ``ABBREVIATIONS`` are split
    off; hyphenated words are always split between letters (EWT keeps about a quarter whole).
    """
    pat = _patterns()
    tokens = []
    for m in re.finditer(r"\S+", text):
        tokens.extend(_chunk_tokens(text, m.start(), m.end(), language, pat))
    return tokens


def tokenize(text, language="en"):
    """The syntactic words of raw text (``"I don't know."`` -> I do n't know .); see
    `surface_tokens` for the rules."""
    return [w for t in surface_tokens(text, language) for w in t.words]


def _ends_sentence(token):
    form = token.form
    if all(c in _FINAL for c in form):
        return True
    # an abbreviation that may also end a sentence ("etc.", "Inc.", "U.S.")
    return form.endswith(".") and len(form) > 2 and form.lower() not in NO_BREAK


def _starts_sentence(token):
    c = token.form[0]
    if c in _OPENING:
        return True
    return c.isalpha() and not c.islower()


def split_sentences(text, language="en"):
    """The sentences of one line of raw text, as lists of `Token`.

    A sentence ends after a token of sentence-final punctuation (``.``, ``!``, ``?``, ``…``, runs
    such as ``?!``, and ``。！？؟।۔``) or an abbreviation that can end one (``etc.``, ``Inc.``;
    not ``Mr.``, ``e.g.``, ``J.``), with any closing quotes and brackets right after it, when the next
    token follows a space and starts with a capital or uncased letter (any script) or an opening
    quote or bracket (``。！？`` end a sentence without the space). Line breaks always end one
    (`read_raw`), so hard-wrapped text is cut at every line.
    """
    tokens = surface_tokens(text, language)
    sentences = []
    current = []
    k = 0
    while k < len(tokens):
        token = tokens[k]
        current.append(token)
        k += 1
        if not _ends_sentence(token):
            continue
        while k < len(tokens) and tokens[k].start == current[-1].end and all(
                c in _CLOSING or c in _FINAL for c in tokens[k].form):
            current.append(tokens[k])
            k += 1
        if k == len(tokens):
            break
        nxt = tokens[k]
        spaced = nxt.start > current[-1].end
        if (spaced and _starts_sentence(nxt)) or token.form[-1] in _NO_SPACE_FINAL:
            sentences.append(current)
            current = []
    if current:
        sentences.append(current)
    return sentences


# ---------------------------------------------------------------------------------------------
# sentences

class TextSentence(Sentence):
    """A `Sentence` built from one line of a text file: ``line_of`` is that line for every word."""

    __slots__ = ()

    def line_of(self, word_index):
        return self.first_line


def _build(tokens, sent_id, text, path, lineno, space_after=None):
    """A TextSentence from surface tokens: a list of word tuples; ``space_after[k]`` False gives
    token k ``SpaceAfter=No``."""
    lines = [f"# sent_id = {sent_id}", f"# text = {text}"]
    rows = []
    word_lines = [-1]
    blank = ["_"] * (NUM_COLUMNS - 2)
    for k, words in enumerate(tokens):
        misc = "_" if space_after is None or space_after[k] else "SpaceAfter=No"
        n = len(rows)
        if len(words) > 1:
            lines.append("\t".join([f"{n + 1}-{n + len(words)}", "".join(words)] + blank[:-1] + [misc]))
        for j, word in enumerate(words):
            cols = [str(len(rows) + 1), word] + blank[:-1] + [misc if len(words) == 1 else "_"]
            word_lines.append(len(lines))
            lines.append("\t".join(cols))
            rows.append(cols)
    heads = np.full(len(rows) + 1, -1, dtype=np.int64)
    return TextSentence(lines, rows, word_lines, heads, path, lineno, "conllu")


def _check_form(form, path, lineno):
    for c in form:
        if c in "\t\n\r\x00" or unicodedata.category(c) == "Cc" or c in "\u2028\u2029\x85":
            raise InputError(path, lineno, f"token {form!r} holds a control character "
                             f"U+{ord(c):04X}")


def _check_length(n, max_tokens, path, lineno, what):
    if n > max_tokens:
        raise InputError(path, lineno, f"{what} of {n} tokens is longer than the maximum of "
                         f"{max_tokens} (one sentence per line?)")


def read_text(source, max_tokens=DEFAULT_MAX_TOKENS):
    """Stream tokenised text, one sentence per line, tokens separated by whitespace, as sentences.

    source: a path (``.gz`` / ``.xz`` decompressed), ``"-"`` for stdin, or an open stream; UTF-8.
    Each sentence gets ``# sent_id = N`` (N counts sentences from 1) and ``# text`` = its tokens
    joined by single spaces; blank lines are skipped. A line of more than ``max_tokens`` tokens,
    a control character, a NUL byte or bytes that are not UTF-8 raise InputError(path, line).
    """
    path = _source_name(source)
    stream, must_close = _open_source(source, path)
    try:
        count = 0
        for lineno, line in enumerate(_lines(stream, path), 1):
            forms = line.split()
            if not forms:
                continue
            _check_length(len(forms), max_tokens, path, lineno, "line")
            for form in forms:
                _check_form(form, path, lineno)
            count += 1
            yield _build([(f,) for f in forms], count, " ".join(forms), path, lineno)
    finally:
        if must_close:
            stream.close()


def read_raw(source, language="en", max_tokens=DEFAULT_MAX_TOKENS):
    """Stream raw (untokenised) text as sentences: each line is cut into sentences and tokens by
    `split_sentences` (see `surface_tokens` for the rules; English clitics become multiword
    tokens). ``# text`` is the sentence as written (runs of whitespace as one space), MISC
    ``SpaceAfter=No`` marks tokens followed by no space inside the sentence, as in UD.
    source and errors as in `read_text` (a sentence of more than ``max_tokens`` words included).
    """
    path = _source_name(source)
    stream, must_close = _open_source(source, path)
    try:
        count = 0
        for lineno, line in enumerate(_lines(stream, path), 1):
            for tokens in split_sentences(line, language):
                n = sum(len(t.words) for t in tokens)
                _check_length(n, max_tokens, path, lineno, "sentence")
                for t in tokens:
                    _check_form(t.form, path, lineno)
                text = " ".join(line[tokens[0].start:tokens[-1].end].split())
                space = [tokens[k + 1].start > t.end for k, t in enumerate(tokens[:-1])] + [True]
                count += 1
                yield _build([t.words for t in tokens], count, text, path, lineno, space)
    finally:
        if must_close:
            stream.close()


def read_tokens(token_lists, path="<tokens>", max_tokens=DEFAULT_MAX_TOKENS, first=1):
    """Sentences from lists of token strings (``[["The", "cat", "sat", "."]]``), built as by
    `read_text`; the k-th list (counting from ``first``) gets ``# sent_id = k``, and its errors
    name ``path`` and k as the line."""
    for k, forms in enumerate(token_lists, first):
        if isinstance(forms, str) or not all(isinstance(f, str) for f in forms):
            raise InputError(path, k, "a sentence must be a list of token strings")
        forms = list(forms)
        if not forms:
            raise InputError(path, k, "empty sentence (no tokens)")
        _check_length(len(forms), max_tokens, path, k, "sentence")
        for form in forms:
            if not form or form != form.strip():
                raise InputError(path, k, f"token {form!r} is empty or has surrounding whitespace")
            _check_form(form, path, k)
        yield _build([(f,) for f in forms], k, " ".join(forms), path, k)


def read_input(source, fmt="auto", language="en"):
    """Sentences of one input in format ``fmt``: `read_conll` for "auto" / "conllu" / "conllx",
    `read_text` for "text", `read_raw` for "raw"."""
    if fmt == "text":
        return read_text(source)
    if fmt == "raw":
        return read_raw(source, language)
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {INPUT_FORMATS}, not {fmt!r}")
    return read_conll(source, fmt)
