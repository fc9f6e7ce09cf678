"""Streaming CoNLL-U / CoNLL-X reader and a writer that changes only HEAD, DEPREL and MISC.

Every sentence keeps its raw lines (comments, multiword-token lines ``3-4`` and empty nodes ``5.1``
included), so writing a sentence back without changes is byte-identical to its input block.

Speed: the ten fields of each word line are split and validated here, which reads the 12,544
sentences of EWT train in about a second; ``conllu.parse_incr`` alone takes 3.5 s on the same file,
and its ``parse_line`` also splits on runs of two spaces, which would break FORMs that contain
spaces. The conllu ``TokenList`` (``Sentence.tokens``) is therefore built lazily on first access,
from the fields split here and with conllu's own field and comment parsers.

Both formats have ten tab-separated columns with the same meaning for 1-8 (ID, FORM, LEMMA,
UPOS/CPOSTAG, XPOS/POSTAG, FEATS, HEAD, DEPREL); CoNLL-X has no comments, multiword tokens or empty
nodes, and its columns 9-10 are PHEAD/PDEPREL instead of DEPS/MISC.
"""
import gzip
import io
import logging
import lzma
import os
import re
import sys
import tempfile
from contextlib import contextmanager

import numpy as np

from bpparse.errors import BpparseError, InputError

FORMATS = ("auto", "conllu", "conllx")
CONLLU_FIELDS = ("id", "form", "lemma", "upos", "xpos", "feats", "head", "deprel", "deps", "misc")
CONLLX_FIELDS = ("id", "form", "lemma", "cpostag", "postag", "feats", "head", "deprel", "phead", "pdeprel")
NUM_COLUMNS = 10
ID_COL, FORM_COL, LEMMA_COL, UPOS_COL, XPOS_COL, FEATS_COL, HEAD_COL, DEPREL_COL, DEPS_COL, MISC_COL = range(10)
ROOT = "<root>"

ID_RANGE = re.compile(r"([1-9][0-9]*)-([1-9][0-9]*)")
ID_DECIMAL = re.compile(r"(0|[1-9][0-9]*)\.([1-9][0-9]*)")
INTEGER = re.compile(r"-?[0-9]+")

logger = logging.getLogger("bpparse.conll")


class Sentence:
    """One sentence as read: its raw lines and the split fields of its n syntactic words.

    Per-word accessors (``forms``, ``upos``, ``xpos``, ``lemmas``, ``feats``, ``deprels``, ``misc``,
    ``heads``) have n+1 entries indexed by word ID, entry 0 standing for ROOT (``"<root>"``, head -1).
    ``word_lines[i]`` is the index into ``lines`` of word i's line (``word_lines[0] == -1``).
    ``format`` is "conllu" or "conllx". Values are the strings of the file (``"_"`` included).
    """

    __slots__ = ("lines", "path", "first_line", "word_lines", "n", "format", "_rows", "_heads", "_tokens")

    def __init__(self, lines, rows, word_lines, heads, path, first_line, format):
        self.lines = lines
        self.path = path
        self.first_line = first_line
        self.word_lines = word_lines
        self.n = len(rows)
        self.format = format
        self._rows = rows
        self._heads = heads
        self._tokens = None

    def __len__(self):
        return self.n

    def __repr__(self):
        return f"<Sentence {self.path}:{self.first_line} n={self.n}>"

    def line_of(self, word_index):
        """1-based line number in the file of word ``word_index`` (0: the sentence's first line)."""
        if word_index == 0:
            return self.first_line
        return self.first_line + self.word_lines[word_index]

    def _column(self, col):
        return [ROOT] + [row[col] for row in self._rows]

    def word_columns(self):
        """The NUM_COLUMNS columns of the n words as tuples, without the ROOT entry: all of
        them for the price of building one list (what encoding reads)."""
        return list(zip(*self._rows)) if self._rows else [()] * NUM_COLUMNS

    @property
    def forms(self):
        return self._column(FORM_COL)

    @property
    def lemmas(self):
        return self._column(LEMMA_COL)

    @property
    def upos(self):
        return self._column(UPOS_COL)

    @property
    def xpos(self):
        return self._column(XPOS_COL)

    @property
    def feats(self):
        return self._column(FEATS_COL)

    @property
    def deprels(self):
        return self._column(DEPREL_COL)

    @property
    def misc(self):
        return self._column(MISC_COL)

    @property
    def heads(self):
        """int64 (n+1,): HEAD of each word, heads[0] = -1, -1 where HEAD is ``_`` (a fresh copy)."""
        return self._heads.copy()

    @property
    def roots(self):
        """The words attached to ROOT (HEAD = 0), in order."""
        return [int(i) for i in np.flatnonzero(self._heads == 0)]

    @property
    def comments(self):
        return [line for line in self.lines if line.startswith("#")]

    @property
    def sent_id(self):
        """The value of a ``# sent_id = ...`` comment, or None."""
        for line in self.lines:
            if line.startswith("# sent_id"):
                key, _, value = line[1:].partition("=")
                if key.strip() == "sent_id":
                    return value.strip()
        return None

    @property
    def text(self):
        """The block as read, with its terminating blank line."""
        return "\n".join(self.lines) + "\n\n"

    @property
    def tokens(self):
        """conllu.models.TokenList of the block, built on first access with conllu's field parsers.

        All lines, word or not, are tokens, in file order; every comment is in ``tokens.metadata``
        (one without ``=`` maps its text to None).
        """
        if self._tokens is None:
            self._tokens = _token_list(self)
        return self._tokens


def _keep_comment(key, value):
    return key, value


def _token_list(sentence):
    from conllu.exceptions import ParseException
    from conllu.models import Metadata, Token, TokenList
    from conllu.parser import DEFAULT_FIELD_PARSERS, parse_comment_line

    conllu = sentence.format == "conllu"
    fields = CONLLU_FIELDS if conllu else CONLLX_FIELDS
    parsers = dict(DEFAULT_FIELD_PARSERS)
    if not conllu:
        parsers["phead"] = parsers["head"]
    metadata = Metadata()
    tokens = []
    for j, line in enumerate(sentence.lines):
        try:
            if line.startswith("#"):
                for key, value in parse_comment_line(line, {"__fallback__": _keep_comment}):
                    metadata[key] = value
                continue
            cols = line.split("\t")
            token = Token()
            for i, field in enumerate(fields):
                parser = parsers.get(field)
                token[field] = parser(cols, i) if parser is not None else cols[i]
            tokens.append(token)
        except ParseException as e:
            raise InputError(sentence.path, sentence.first_line + j, f"conllu: {e}") from None
    return TokenList(tokens, metadata, default_fields=fields)


# ---------------------------------------------------------------------------------------------
# reading

def read_conll(source, format="auto", check_trees=False, on_warning=None):
    """Stream the sentences of a CoNLL-U or CoNLL-X file, in order, as ``Sentence`` objects.

    source: a path (str or os.PathLike; ``.gz`` / ``.xz`` are decompressed), ``"-"`` for stdin, or an
      open stream (text or binary). Input is UTF-8; a leading byte-order mark is dropped; CRLF line
      ends are read as LF.
    format: "auto" (CoNLL-X when the first sentence has no comment, multiword token or empty node and
      its column 9 holds integers (PHEAD) or its column 10 labels without ``=`` (PDEPREL); CoNLL-U
      otherwise), "conllu" or "conllx".
    check_trees: for training data: HEAD ``_``, HEAD = self and cycles become errors. A sentence with
      several roots is accepted and reported through ``on_warning``.
    on_warning: callable receiving one message string ``"<file>:<line>: ..."`` per reported sentence;
      None logs it on the ``bpparse.conll`` logger at WARNING level.

    Raises InputError(path, line, problem) on malformed input, when the bad sentence is reached.
    An empty file yields no sentences; a missing blank line at the end of the file is accepted.
    """
    if format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, not {format!r}")
    report = on_warning if on_warning is not None else logger.warning
    return _read(source, format, check_trees, report)


def _source_name(source):
    if isinstance(source, (str, os.PathLike)):
        return "<stdin>" if str(source) == "-" else os.fspath(source)
    return str(getattr(source, "name", "<stream>"))


def _open_source(source, path):
    """(stream, must_close) for a path, "-" or an open stream; binary where possible."""
    if isinstance(source, (str, os.PathLike)):
        if str(source) == "-":
            return getattr(sys.stdin, "buffer", sys.stdin), False
        try:
            if path.endswith(".gz"):
                return gzip.open(path, "rb"), True
            if path.endswith(".xz"):
                return lzma.open(path, "rb"), True
            return open(path, "rb"), True
        except OSError as e:
            raise InputError(path, None, f"cannot read: {e.strerror or e}") from None
    if not hasattr(source, "read") and not hasattr(source, "__iter__"):
        raise TypeError(f"read_conll needs a path, '-' or a stream, not {type(source).__name__}")
    return source, False


def _lines(stream, path):
    """Yield the lines of a stream without their line ends, decoding bytes as UTF-8."""
    lineno = 0
    try:
        for raw in stream:
            lineno += 1
            if isinstance(raw, bytes):
                try:
                    raw = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise InputError(path, lineno, f"not valid UTF-8 (byte {e.start + 1} of the line)") from None
            if lineno == 1 and raw.startswith("\ufeff"):
                raw = raw[1:]
            line = raw.rstrip("\r\n")
            if "\r" in line:
                raise InputError(path, lineno, "carriage return inside a line: the file has CR-only "
                                 "(old Mac) line ends; convert them to LF")
            if "\ufeff" in line:
                raise InputError(path, lineno, "byte-order mark (U+FEFF) inside the file (files "
                                 "concatenated with their BOMs?)")
            if "\x00" in line:
                raise InputError(path, lineno, "NUL byte in the line (a binary or UTF-16 file?)")
            yield line
    except (OSError, EOFError, lzma.LZMAError) as e:
        raise InputError(path, lineno + 1, f"cannot read: {e}") from None


def _read(source, format, check_trees, report):
    path = _source_name(source)
    stream, must_close = _open_source(source, path)
    try:
        block = []
        start = 0
        lineno = 0
        for lineno, line in enumerate(_lines(stream, path), 1):
            if line and line.isspace():
                raise InputError(path, lineno, "line holds only whitespace (sentences are separated "
                                 "by empty lines)")
            if line:
                if not block:
                    start = lineno
                block.append(line)
            elif block:
                if format == "auto":
                    format = detect_format(block)
                yield _parse_block(block, path, start, format, check_trees, report)
                block = []
        if block:
            if format == "auto":
                format = detect_format(block)
            yield _parse_block(block, path, start, format, check_trees, report)
    finally:
        if must_close:
            stream.close()


def detect_format(lines):
    """"conllx" or "conllu" for one sentence's lines (see ``read_conll``'s ``format="auto"``)."""
    evidence = False
    for line in lines:
        if line.startswith("#"):
            return "conllu"
        cols = line.split("\t")
        if not cols[0].isdecimal():
            return "conllu"
        if len(cols) == NUM_COLUMNS:
            phead, pdeprel = cols[DEPS_COL], cols[MISC_COL]
            if (phead.isdecimal() and phead.isascii()) or (pdeprel != "_" and "=" not in pdeprel):
                evidence = True
    return "conllx" if evidence else "conllu"


def _parse_block(lines, path, start, format, check_trees, report):
    """Validate one sentence block and split its word lines; ``start`` is the line number of lines[0]."""
    rows = []
    word_lines = [-1]
    expected = 1          # ID of the next syntactic word
    expected_id = "1"
    mwt_end = 0           # last word covered by the latest multiword token
    mwt_line = 0
    empty_last = 0        # decimal part of the latest empty node after word expected-1
    for j, line in enumerate(lines):
        if line[0] == "#":
            continue
        cols = line.split("\t")
        if len(cols) != NUM_COLUMNS:
            raise InputError(path, start + j, f"expected {NUM_COLUMNS} tab-separated columns, found {len(cols)}")
        if "" in cols:
            names = CONLLX_FIELDS if format == "conllx" else CONLLU_FIELDS
            raise InputError(path, start + j, f"column {cols.index('') + 1} ({names[cols.index('')].upper()}) "
                             f"is empty (a missing value is _)")
        wid = cols[0]
        if wid == expected_id:
            rows.append(cols)
            word_lines.append(j)
            expected += 1
            expected_id = str(expected)
            empty_last = 0
            continue
        if INTEGER.fullmatch(wid):
            raise InputError(path, start + j, f"ID {wid} out of order: expected {expected}")
        m_range = ID_RANGE.fullmatch(wid)
        m_decimal = ID_DECIMAL.fullmatch(wid) if m_range is None else None
        if m_range is None and m_decimal is None:
            raise InputError(path, start + j,
                             f"ID '{wid}' is not an integer, a range (like 3-4) or a decimal (like 5.1)")
        if format == "conllx":
            raise InputError(path, start + j,
                             f"ID '{wid}': multiword tokens and empty nodes are not CoNLL-X (use --format conllu)")
        if m_range is not None:
            first, last = int(m_range.group(1)), int(m_range.group(2))
            if first != expected:
                raise InputError(path, start + j,
                                 f"multiword token ID {wid} out of order: expected a range starting at {expected}")
            if last <= first:
                raise InputError(path, start + j, f"multiword token ID {wid} does not span two or more words")
            mwt_end, mwt_line = last, start + j
        else:
            word, sub = int(m_decimal.group(1)), int(m_decimal.group(2))
            if word != expected - 1 or sub != empty_last + 1:
                raise InputError(path, start + j,
                                 f"empty node ID {wid} out of order: expected {expected - 1}.{empty_last + 1}")
            empty_last = sub
    n = len(rows)
    if n == 0:
        raise InputError(path, start, "sentence has no word lines")
    if mwt_end > n:
        raise InputError(path, mwt_line, f"multiword token ends at word {mwt_end} but the sentence has {n} words")

    heads = np.empty(n + 1, dtype=np.int64)
    heads[0] = -1
    for i in range(1, n + 1):
        h = rows[i - 1][HEAD_COL]
        if h.isdecimal() and h.isascii():
            value = int(h)
        elif h == "_":
            value = -1
        elif INTEGER.fullmatch(h):
            value = int(h)
        else:
            raise InputError(path, start + word_lines[i], f"HEAD '{h}' is not an integer")
        if value > n or (value < 0 and h != "_"):
            raise InputError(path, start + word_lines[i], f"HEAD {value} out of range 0..{n}")
        heads[i] = value
    sentence = Sentence(lines, rows, word_lines, heads, path, start, format)
    if check_trees:
        check_tree(sentence, report)
    return sentence


def check_tree(sentence, report):
    """Training data: every HEAD given, none pointing to itself, no cycle (else `InputError` at the
    word's line); several roots reported through ``report(message)``."""
    heads = sentence._heads
    n = sentence.n
    for i in range(1, n + 1):
        if heads[i] < 0:
            raise InputError(sentence.path, sentence.line_of(i), "HEAD is '_': training data needs a complete tree")
        if heads[i] == i:
            raise InputError(sentence.path, sentence.line_of(i), f"HEAD of word {i} is the word itself")
    # state: 0 unvisited, 1 on the current path, 2 known to reach ROOT
    state = np.zeros(n + 1, dtype=np.int8)
    state[0] = 2
    for i in range(1, n + 1):
        path = []
        k = i
        while state[k] == 0:
            state[k] = 1
            path.append(k)
            k = heads[k]
        if state[k] == 1:
            cycle = path[path.index(k):]
            words = " -> ".join(str(w) for w in cycle + [k])
            raise InputError(sentence.path, sentence.line_of(min(cycle)), f"cycle in HEAD: {words}")
        for w in path:
            state[w] = 2
    roots = sentence.roots
    if len(roots) > 1:
        listed = ", ".join(str(r) for r in roots)
        report(f"{sentence.path}:{sentence.first_line}: sentence has {len(roots)} roots (words {listed})")


# ---------------------------------------------------------------------------------------------
# writing

def format_sentence(sentence, heads=None, labels=None, misc=None, keep_deps=False):
    """The sentence's block as text, with HEAD, DEPREL and MISC replaced on word lines where given.

    heads: int sequence (n+1,), entry 0 ignored, -1 written as ``_``. A word whose HEAD is written
      gets DEPS ``_`` (CoNLL-U), since the input's enhanced dependencies would contradict the new
      tree, unless ``keep_deps``.
    labels: n+1 strings (entry 0 ignored); None or "" is written as ``_``.
    misc: n+1 strings or None entries (None keeps the line's MISC); CoNLL-U only: for CoNLL-X
      sentences (column 10 is PDEPREL) ``misc`` is ignored.
    Every other byte is kept; with no arguments the result equals the input block (lines joined by
    "\\n", then the terminating blank line).
    """
    if heads is None and labels is None and misc is None:
        return "\n".join(sentence.lines) + "\n\n"
    n = sentence.n
    for name, values in (("heads", heads), ("labels", labels), ("misc", misc)):
        if values is not None and len(values) != n + 1:
            raise ValueError(f"{name} has {len(values)} entries; the sentence needs n+1 = {n + 1}")
    misc_ok = sentence.format == "conllu"  # CoNLL-X has PHEAD / PDEPREL where these columns are
    if not misc_ok:
        misc = None
    lines = list(sentence.lines)
    for i in range(1, n + 1):
        j = sentence.word_lines[i]
        cols = lines[j].split("\t")
        if heads is not None:
            h = int(heads[i])
            cols[HEAD_COL] = "_" if h < 0 else str(h)
            if misc_ok and not keep_deps:
                cols[DEPS_COL] = "_"
        if labels is not None:
            cols[DEPREL_COL] = labels[i] or "_"
        if misc is not None and misc[i] is not None:
            cols[MISC_COL] = misc[i] or "_"
        lines[j] = "\t".join(cols)
    return "\n".join(lines) + "\n\n"


def with_tags(sentence, upos=None, xpos=None, feats=None):
    """A copy of the sentence with its UPOS / XPOS / FEATS columns replaced where given.

    Each argument is None (keep the column) or n+1 strings (entry 0 ignored; None keeps that
    word's value). The copy's lines carry the new values, so writing it writes them; every other
    byte is kept.
    """
    n = sentence.n
    lines = list(sentence.lines)
    rows = []
    for i in range(1, n + 1):
        cols = list(sentence._rows[i - 1])
        for col, values in ((UPOS_COL, upos), (XPOS_COL, xpos), (FEATS_COL, feats)):
            if values is not None and values[i] is not None:
                cols[col] = values[i]
        rows.append(cols)
        lines[sentence.word_lines[i]] = "\t".join(cols)
    return Sentence(lines, rows, sentence.word_lines, sentence._heads, sentence.path,
                    sentence.first_line, sentence.format)


class AtomicOutput:
    """A file written atomically: data goes to a temporary file beside ``path``; `commit` renames
    it over ``path`` (keeping an existing file's permissions), `discard` removes it, so an
    existing file of that name is either replaced whole or left untouched. Special files (a device
    such as /dev/null, a FIFO) are written in place. ``.stream`` is a UTF-8 text stream with LF line
    ends (gzip/xz-compressed when the name ends in ``.gz`` / ``.xz``), or with ``binary`` the raw
    binary file. I/O errors become `BpparseError` naming the path.
    """

    def __init__(self, path, binary=False):
        self.path = path = os.fspath(path)
        self._target = None
        try:
            if os.path.isdir(path):
                raise IsADirectoryError(21, "is a directory")
            if os.path.exists(path) and not os.path.isfile(path):
                raw = open(path, "wb")
            else:
                directory, name = os.path.split(os.path.abspath(path))
                try:
                    fd, self._target = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp",
                                                        dir=directory)
                except OSError as e:
                    raise BpparseError(f"{path}: cannot write: cannot create a file in "
                                       f"{directory}: {e.strerror or e}") from None
                raw = os.fdopen(fd, "wb")
        except OSError as e:
            raise BpparseError(f"{path}: cannot write: {e.strerror or e}") from None
        self._raw = raw
        if binary:
            self.stream = raw
        elif path.endswith(".gz"):
            self.stream = gzip.open(raw, "wt", encoding="utf-8", newline="\n")
        elif path.endswith(".xz"):
            self.stream = lzma.open(raw, "wt", encoding="utf-8", newline="\n")
        else:
            self.stream = io.TextIOWrapper(raw, encoding="utf-8", newline="\n")

    def commit(self):
        """Close and move the data into place."""
        try:
            self.stream.close()
            self._raw.close()
            if self._target is not None:
                if os.path.exists(self.path):
                    os.chmod(self._target, os.stat(self.path).st_mode & 0o7777)
                else:
                    os.chmod(self._target, 0o666 & ~_umask())
                os.replace(self._target, self.path)
                self._target = None
        except OSError as e:
            self.discard()
            raise BpparseError(f"{self.path}: cannot write: {e.strerror or e}") from None

    def discard(self):
        """Close and remove what was written; an existing file stays as it was."""
        _close_quietly(self.stream, self._raw)
        if self._target is not None:
            try:
                os.unlink(self._target)
            except OSError:
                pass
            self._target = None


@contextmanager
def open_output(path_or_dash, binary=False):
    """Text stream for writing UTF-8 with LF line ends (``binary``: a binary file): stdout for "-"
    or None (not closed), else an `AtomicOutput`'s stream: committed when the ``with`` block ends
    normally, discarded if it raises (an error, Ctrl-C), so an existing file is never left
    half-written. I/O errors become `BpparseError` naming the path."""
    if path_or_dash is None or str(path_or_dash) == "-":
        yield sys.stdout.buffer if binary else sys.stdout
        sys.stdout.flush()
        return
    out = AtomicOutput(path_or_dash, binary)
    try:
        yield out.stream
    except OSError as e:
        out.discard()
        raise BpparseError(f"{out.path}: cannot write: {e.strerror or e}") from None
    except BaseException:
        out.discard()
        raise
    out.commit()


def check_writable(path):
    """`BpparseError` naming ``path`` unless a file can be written there: for outputs that come at
    the end of long work (a trained model), checked before the work starts."""
    AtomicOutput(path, binary=True).discard()


def same_file(a, b):
    """Do two paths name the same file (also when one does not exist yet)?"""
    try:
        if os.path.exists(a) and os.path.exists(b):
            return os.path.samefile(a, b)
    except OSError:
        pass
    return os.path.realpath(a) == os.path.realpath(b)


def check_outputs(inputs, outputs):
    """BpparseError if an output path (not "-") is one of the input paths: writing it would
    destroy the input it reads. Call before reading anything."""
    for out in outputs:
        if out is None or str(out) == "-" or hasattr(out, "write"):
            continue
        for path in inputs:
            if str(path) != "-" and same_file(os.fspath(path), os.fspath(out)):
                raise BpparseError(f"{out}: is also an input; write the output to another file")


def _close_quietly(*streams):
    for stream in streams:
        try:
            stream.close()
        except (OSError, ValueError):
            pass


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_conll(sentences, out):
    """Write sentences (``Sentence`` objects, written unchanged, or block strings from
    ``format_sentence``) to ``out``: an open text stream, a path or "-". Returns the number written."""
    if isinstance(out, (str, os.PathLike)):
        with open_output(out) as stream:
            return write_conll(sentences, stream)
    count = 0
    for item in sentences:
        out.write(item if isinstance(item, str) else format_sentence(item))
        count += 1
    return count
