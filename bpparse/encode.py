"""Vocabularies and the encoding of a ``Sentence`` into the integer arrays the kernels read.

Rows of ``EncodedSentence.tokens`` (int32, shape ``(NUM_FIELDS, n+1)``, column 0 = ROOT):
FORM, LOWER (lower-cased form), PREFIX (first 5 chars of LOWER), SUFFIX (last 3 chars of LOWER),
UPOS, XPOS, LEMMA, FEATS (the whole FEATS string), then one row per attribute of MORPH_ATTRS
holding the word's value of that attribute (``Case=Acc`` -> the id of ``Acc`` in the Case row).
In every vocabulary id 0 is ``<root>`` (column 0 of every row; in an attribute row also every word
without that attribute) and id 1 is ``<unk>`` (any string not seen in training, or too rare);
``_`` is an ordinary string. Dependency labels are indexed separately: ``Vocabularies.labels`` is the sorted
DEPREL set of the training data and an unknown or missing label encodes as -1.
"""
from collections import Counter
from typing import NamedTuple

import numpy as np

from bpparse.conll import DEPREL_COL, FEATS_COL, FORM_COL, LEMMA_COL, UPOS_COL, XPOS_COL
from bpparse.errors import ModelFileError

FORM, LOWER, PREFIX, SUFFIX, UPOS, XPOS, LEMMA, FEATS = range(8)
# the morphological attributes with a row of their own (UD's universal features that agreement,
# government and case marking are made of; others stay inside the FEATS string)
MORPH_ATTRS = ("Case", "Number", "Gender", "Person", "VerbForm", "Mood", "Tense", "Aspect", "Voice",
               "Definite", "PronType", "Poss", "Number[psor]", "Person[psor]", "Polarity", "Degree")
MORPH = 8  # row of MORPH_ATTRS[0]
# what a derived fine tag adds to the UPOS in the XPOS row (features.fine_tags "derived", for
# treebanks without XPOS): the attributes that tell a UPOS's syntactic kinds apart (finite,
# infinitive and participle verbs; articles, relative and personal pronouns; a pronoun's case; the
# part of speech of a multiword expression)
FINE_ATTRS = ("VerbForm", "Mood", "PronType", "Definite", "Case", "ExtPos")
NUM_FIELDS = MORPH + len(MORPH_ATTRS)
FIELD_NAMES = ("form", "lower", "prefix", "suffix", "upos", "xpos", "lemma", "feats",
               *(f"feat:{a}" for a in MORPH_ATTRS))

ROOT_ID, UNK_ID = 0, 1
SPECIALS = ("<root>", "<unk>")
_ABSENT = SPECIALS[ROOT_ID]
MORPH_CACHE = 1 << 16  # distinct FEATS strings `encode` remembers (cleared when full)
PREFIX_LEN, SUFFIX_LEN = 5, 3
# rows whose rare strings become <unk> (min_count); tag rows keep every string seen
LEXICAL_FIELDS = (FORM, LOWER, LEMMA)
VOCAB_FORMAT = 1


class Vocab:
    """Strings <-> ids: 0 = ``<root>``, 1 = ``<unk>``, then known strings by decreasing count, ties by
    string. ``vocab.id(s)`` maps an unknown string to 1."""

    __slots__ = ("strings", "index")

    def __init__(self, strings):
        strings = list(strings)
        if tuple(strings[:2]) != SPECIALS:
            raise ValueError(f"a vocabulary starts with {SPECIALS}, not {tuple(strings[:2])}")
        self.strings = strings
        self.index = dict(zip(strings, range(len(strings))))
        if len(self.index) != len(strings):
            raise ValueError("duplicate strings in vocabulary")

    @classmethod
    def build(cls, counter, min_count=1):
        """From a Counter (or dict) string -> count, keeping strings seen at least ``min_count`` times."""
        known = [(-c, s) for s, c in counter.items() if c >= min_count and s not in SPECIALS]
        known.sort()
        return cls(list(SPECIALS) + [s for _, s in known])

    def id(self, s):
        return self.index.get(s, UNK_ID)

    def ids(self, strings):
        get = self.index.get
        return [get(s, UNK_ID) for s in strings]

    def __len__(self):
        return len(self.strings)

    def __contains__(self, s):
        return s in self.index

    def __eq__(self, other):
        return isinstance(other, Vocab) and self.strings == other.strings

    def __repr__(self):
        return f"<Vocab {len(self)} strings>"

    def to_list(self):
        return list(self.strings)

    @classmethod
    def from_list(cls, strings):
        return cls(strings)


class EncodedSentence(NamedTuple):
    """tokens: int32 (NUM_FIELDS, n+1), column 0 = ROOT (id 0); heads: int64 (n+1,), heads[0] = -1,
    -1 where unknown; labels: int32 (n+1,) indices into ``Vocabularies.labels``, -1 at 0 and where
    unknown; has_tags: False when every UPOS is ``_``."""

    tokens: np.ndarray
    heads: np.ndarray
    labels: np.ndarray
    has_tags: bool

    @property
    def n(self):
        return self.tokens.shape[1] - 1


def morph_values(feats):
    """(row, i, value) for each MORPH_ATTRS attribute (its index ``row``) that word i of a list of
    FEATS strings has, in FEATS order (a repeated attribute: the last one counts)."""
    for i, value in enumerate(feats):
        if value == "_":
            continue
        for pair in value.split("|"):
            attr, _, v = pair.partition("=")
            row = _MORPH_ROW.get(attr)
            if row is not None:
                yield row, i, v


def morph_rows(feats):
    """One row per MORPH_ATTRS attribute of a list of FEATS strings: each word's value, or
    ``<root>`` (id 0) where the word does not have that attribute."""
    rows = [[_ABSENT] * len(feats) for _ in MORPH_ATTRS]
    for row, i, v in morph_values(feats):
        rows[row][i] = v
    return rows


_MORPH_ROW = {a: i for i, a in enumerate(MORPH_ATTRS)}


def morph_density(sentences):
    """Mean number of MORPH_ATTRS attribute values a word of ``sentences`` carries in FEATS."""
    words = absent = 0
    for s in sentences:
        feats = s.feats[1:]
        words += len(feats)
        absent += sum(row.count(_ABSENT) for row in morph_rows(feats))
    return len(MORPH_ATTRS) - absent / words if words else 0.0


def derived_fine_tags(upos, feats):
    """The fine tags of words without XPOS: each UPOS with its FINE_ATTRS values, in that order
    (``VERB|VerbForm=Inf``, ``DET|PronType=Art|Definite=Def``; a plain ``NOUN`` where it has none)."""
    tags = []
    for tag, value in zip(upos, feats):
        if value != "_":
            pairs = dict(pair.partition("=")[::2] for pair in value.split("|"))
            tag += "".join(f"|{a}={pairs[a]}" for a in FINE_ATTRS if a in pairs)
        tags.append(tag)
    return tags


def field_strings(sentence, derived_fine=False, morph=True, columns=None):
    """The NUM_FIELDS string rows of a sentence's n words (no ROOT column), in field-row order; the
    XPOS row holds `derived_fine_tags` with ``derived_fine``; without ``morph`` only the rows
    before the MORPH_ATTRS ones. ``columns``: the sentence's `word_columns`, if at hand."""
    columns = columns or sentence.word_columns()
    forms, feats, upos = columns[FORM_COL], columns[FEATS_COL], columns[UPOS_COL]
    lower = [f.lower() for f in forms]
    return (
        forms,
        lower,
        [w[:PREFIX_LEN] for w in lower],
        [w[-SUFFIX_LEN:] for w in lower],
        upos,
        derived_fine_tags(upos, feats) if derived_fine else columns[XPOS_COL],
        columns[LEMMA_COL],
        feats,
        *(morph_rows(feats) if morph else ()),
    )


def _shared_strings(strings, canonical):
    """``strings`` with each one that ``canonical`` (dict string -> the object to use) holds replaced
    by that object: LOWER, PREFIX and LEMMA repeat most of FORM's words, and shared objects save
    1.7 MB of the bundled model's 5.4 MB of vocabularies. ``map`` calls ``dict.get`` without a
    Python loop (the bundled model's vocabularies load in 18-30 ms instead of 27-52)."""
    return list(map(canonical.get, strings, strings))


class Vocabularies:
    """One ``Vocab`` per field row (``vocabs[FORM]`` ... ``vocabs[FEATS]``) and the label set;
    ``derived_fine``: the XPOS row encodes `derived_fine_tags` (the model's features.fine_tags is
    "derived"), not the XPOS column."""

    def __init__(self, vocabs, labels, derived_fine=False):
        if len(vocabs) != NUM_FIELDS:
            raise ValueError(f"need {NUM_FIELDS} vocabularies, got {len(vocabs)}")
        self.vocabs = list(vocabs)
        self.labels = list(labels)
        self.label_index = {label: i for i, label in enumerate(self.labels)}
        self.derived_fine = derived_fine
        self._morph_cells = {}  # FEATS string -> ((token row, id), ...): what `encode` sets

    @classmethod
    def build(cls, sentences, min_count=1, derived_fine=False):
        """Count strings over training sentences; ``min_count`` applies to FORM, LOWER and LEMMA.
        Labels: every DEPREL seen except ``_``, sorted."""
        counters = [Counter() for _ in range(NUM_FIELDS)]
        labels = set()
        for sentence in sentences:
            for counter, row in zip(counters, field_strings(sentence, derived_fine)):
                counter.update(row)
            labels.update(sentence.deprels[1:])
        labels.discard("_")
        vocabs = [
            Vocab.build(counters[f], min_count if f in LEXICAL_FIELDS else 1) for f in range(NUM_FIELDS)
        ]
        return cls(vocabs, sorted(labels), derived_fine)

    def __getitem__(self, field):
        return self.vocabs[field]

    def __eq__(self, other):
        return (isinstance(other, Vocabularies) and self.vocabs == other.vocabs and self.labels == other.labels
                and self.derived_fine == other.derived_fine)

    def label_id(self, label):
        return self.label_index.get(label, -1)

    def encode(self, sentence):
        """EncodedSentence of one ``Sentence``."""
        n = sentence.n
        tokens = np.full((NUM_FIELDS, n + 1), ROOT_ID, dtype=np.int32)
        columns = sentence.word_columns()
        rows = field_strings(sentence, self.derived_fine, morph=False, columns=columns)
        tokens[:MORPH, 1:] = [vocab.ids(row) for vocab, row in zip(self.vocabs, rows)]
        # the MORPH_ATTRS rows of `morph_rows`, looked up only where a word has the attribute
        # (ROOT_ID, the id of <root>, elsewhere): 18 lookups a word fewer, and once per distinct
        # FEATS string (a few hundred in a treebank)
        cells = self._morph_cells
        for i, value in enumerate(columns[FEATS_COL], 1):
            if value != "_":
                found = cells.get(value)
                if found is None:
                    if len(cells) >= MORPH_CACHE:
                        cells.clear()
                    found = cells[value] = tuple(
                        (MORPH + row, self.vocabs[MORPH + row].id(v))
                        for row, _, v in morph_values((value,)))
                for row, vid in found:
                    tokens[row, i] = vid
        get = self.label_index.get
        labels = np.array([-1] + [get(d, -1) for d in columns[DEPREL_COL]], dtype=np.int32)
        has_tags = any(t != "_" for t in columns[UPOS_COL])
        return EncodedSentence(tokens, sentence.heads, labels, has_tags)

    def to_dict(self):
        """JSON-able form for the model file."""
        return {
            "format": VOCAB_FORMAT,
            "fields": {name: v.to_list() for name, v in zip(FIELD_NAMES, self.vocabs)},
            "labels": list(self.labels),
        }

    @classmethod
    def from_dict(cls, d, derived_fine=False):
        try:
            if d.get("format") != VOCAB_FORMAT:
                raise ModelFileError(f"vocabulary format {d.get('format')!r} is not {VOCAB_FORMAT}")
            # files written before the attribute rows existed have no vocabulary for them: every
            # value is then <unk>
            fields = d["fields"]
            vocabs = []
            canonical = {}  # FORM's and LOWER's strings, to share with the later lexical rows
            for i, name in enumerate(FIELD_NAMES):
                strings = fields[name] if i < MORPH else fields.get(name, SPECIALS)
                if canonical and (i in LEXICAL_FIELDS or i == PREFIX):
                    strings = _shared_strings(strings, canonical)
                vocabs.append(Vocab.from_list(strings))
                if i in (FORM, LOWER):
                    canonical.update(zip(strings, strings))
            return cls(vocabs, d["labels"], derived_fine)
        except (KeyError, TypeError, AttributeError, ValueError) as e:
            raise ModelFileError(f"malformed vocabularies in model file: {e!r}") from None


def encode_corpus(sentences, vocabs):
    """List of EncodedSentence for an iterable of sentences."""
    encode = vocabs.encode
    return [encode(s) for s in sentences]


class Corpus(NamedTuple):
    """Packed sentences with trees: ``tokens`` int32 (NUM_FIELDS, total) with sentence i in
    columns ``offsets[i]`` .. ``offsets[i+1]-1`` (ROOT column included); ``heads`` int64 and
    ``labels`` int32 (total,) the trees likewise (`pack`)."""

    tokens: np.ndarray
    offsets: np.ndarray
    heads: np.ndarray
    labels: np.ndarray


def pack(encoded, heads_list):
    """The `Corpus` of `EncodedSentence` objects with the trees ``heads_list`` (int64 (n+1,) each)
    and their own labels."""
    sizes = [e.tokens.shape[1] for e in encoded]
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    tokens = np.concatenate([e.tokens for e in encoded], axis=1) if encoded else np.zeros((8, 0), np.int32)
    heads = np.concatenate(heads_list) if encoded else np.zeros(0, np.int64)
    labels = np.concatenate([np.asarray(e.labels, dtype=np.int32) for e in encoded]) if encoded \
        else np.zeros(0, np.int32)
    return Corpus(np.ascontiguousarray(tokens, dtype=np.int32), offsets, heads.astype(np.int64), labels)
