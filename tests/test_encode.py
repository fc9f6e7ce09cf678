"""Vocabularies and sentence encoding: decoding the arrays gives back the sentence's strings."""
import io
import json
import os
from collections import Counter

import numpy as np
import pytest

from bpparse.conll import read_conll
from bpparse.encode import (
    FEATS, FORM, LEMMA, LOWER, MORPH, MORPH_ATTRS, NUM_FIELDS, PREFIX, SUFFIX, UNK_ID, UPOS, XPOS,
    Vocab, Vocabularies, derived_fine_tags, encode_corpus, morph_rows,
)
from bpparse.errors import ModelFileError

DATA = os.path.join(os.path.dirname(__file__), "data")


def sentences(name):
    return list(read_conll(os.path.join(DATA, name)))


def test_vocab_order_specials_and_min_count():
    v = Vocab.build(Counter({"b": 2, "a": 2, "c": 5, "rare": 1, "<unk>": 9}), min_count=2)
    assert v.strings == ["<root>", "<unk>", "c", "a", "b"]
    assert (v.id("c"), v.id("a"), v.id("rare"), v.id("never"), len(v)) == (2, 3, UNK_ID, UNK_ID, 5)
    assert Vocab.from_list(v.to_list()) == v
    with pytest.raises(ValueError):
        Vocab.from_list(["a", "b"])


def test_encode_decodes_back_to_strings():
    train = sentences("en_ewt_sample.conllu")
    vocabs = Vocabularies.build(train)
    for s, enc in zip(train, encode_corpus(train, vocabs)):
        n = s.n
        assert enc.tokens.shape == (NUM_FIELDS, n + 1) and enc.tokens.dtype == np.int32
        assert enc.n == n and not enc.tokens[:, 0].any()
        assert enc.heads.dtype == np.int64 and enc.heads.tolist() == s.heads.tolist()
        assert enc.labels.dtype == np.int32 and enc.labels[0] == -1
        assert enc.has_tags

        def decode(field):
            return [vocabs[field].strings[k] for k in enc.tokens[field, 1:]]

        lower = [f.lower() for f in s.forms[1:]]
        assert decode(FORM) == s.forms[1:]
        assert decode(LOWER) == lower
        assert decode(PREFIX) == [w[:5] for w in lower]
        assert decode(SUFFIX) == [w[-3:] for w in lower]
        assert decode(UPOS) == s.upos[1:] and decode(XPOS) == s.xpos[1:]
        assert decode(LEMMA) == s.lemmas[1:] and decode(FEATS) == s.feats[1:]
        assert [decode(MORPH + a) for a in range(len(MORPH_ATTRS))] == morph_rows(s.feats[1:])
        assert [vocabs.labels[k] for k in enc.labels[1:]] == s.deprels[1:]
    assert vocabs.labels == sorted(set(vocabs.labels))


def test_unknown_words_and_labels():
    vocabs = Vocabularies.build(sentences("en_ewt_sample.conllu"), min_count=2)
    counts = Counter(f for s in sentences("en_ewt_sample.conllu") for f in s.forms[1:])
    for s in sentences("en_ewt_sample.conllu")[:5]:
        enc = vocabs.encode(s)
        for i, form in enumerate(s.forms[1:], 1):
            assert (enc.tokens[FORM, i] == UNK_ID) == (counts[form] < 2)
    # Portuguese: mostly unknown words, some unknown labels, tags kept regardless of min_count
    labels = set(vocabs.labels)
    for s in sentences("pt_bosque_sample.conllu"):
        enc = vocabs.encode(s)
        for i, d in enumerate(s.deprels[1:], 1):
            assert (enc.labels[i] == -1) == (d not in labels)
    assert len(vocabs[UPOS]) == 2 + len({t for s in sentences("en_ewt_sample.conllu") for t in s.upos[1:]})


def test_untagged_input():
    s = sentences("multi_root.conllu")[0]
    lines = ["\t".join(c if k != 3 else "_" for k, c in enumerate(line.split("\t")))
             if not line.startswith("#") else line for line in s.lines]
    (untagged,) = read_conll(io.StringIO("\n".join(lines) + "\n"))
    vocabs = Vocabularies.build([s])
    assert vocabs.encode(s).has_tags and not vocabs.encode(untagged).has_tags


def test_vocabularies_json_round_trip():
    train = sentences("da_ddt_sample.conllu")
    vocabs = Vocabularies.build(train, min_count=2)
    again = Vocabularies.from_dict(json.loads(json.dumps(vocabs.to_dict())))
    assert again == vocabs
    for s in train:
        a, b = vocabs.encode(s), again.encode(s)
        assert np.array_equal(a.tokens, b.tokens) and np.array_equal(a.labels, b.labels)
    # a loaded model holds one object per string that FORM and the later lexical rows share
    form = {w: w for w in again[FORM].strings}
    shared = [w for f in (LOWER, PREFIX, LEMMA) for w in again[f].strings if w in form]
    assert len(shared) > 50 and all(w is form[w] for w in shared)
    with pytest.raises(ModelFileError):
        Vocabularies.from_dict({"format": 1, "fields": {}, "labels": []})
    with pytest.raises(ModelFileError):
        Vocabularies.from_dict({"format": 99})


def test_derived_fine_tags_are_the_upos_with_its_syntactic_attributes():
    assert derived_fine_tags(
        ["AUX", "DET", "NOUN", "PRON", "ADP"],
        ["Mood=Ind|Number=Plur|Person=3|Tense=Pres|VerbForm=Fin",
         "Definite=Def|Gender=Fem|Number=Plur|PronType=Art", "Gender=Masc|Number=Plur",
         "Case=Acc|Gender=Masc|Number=Sing|Person=3|PronType=Prs", "_"],
    ) == ["AUX|VerbForm=Fin|Mood=Ind", "DET|PronType=Art|Definite=Def", "NOUN",
          "PRON|PronType=Prs|Case=Acc", "ADP"]
    # a treebank without XPOS (Bosque): with derived_fine the XPOS row holds them, and only it
    train = sentences("pt_bosque_sample.conllu")
    plain = Vocabularies.build(train)
    derived = Vocabularies.build(train, derived_fine=True)
    assert set(plain[XPOS].strings[2:]) == {"_"}
    for s in train:
        a, b = plain.encode(s), derived.encode(s)
        rows = [r for r in range(NUM_FIELDS) if r != XPOS]
        assert np.array_equal(a.tokens[rows], b.tokens[rows])
        assert [derived[XPOS].strings[i] for i in b.tokens[XPOS, 1:]] == derived_fine_tags(s.upos[1:], s.feats[1:])
    again = Vocabularies.from_dict(json.loads(json.dumps(derived.to_dict())), derived_fine=True)
    assert again == derived and again != Vocabularies.from_dict(derived.to_dict())


def test_morph_rows_split_feats_into_attribute_values():
    from bpparse.encode import MORPH, MORPH_ATTRS, morph_rows

    rows = morph_rows(["Case=Acc|Number=Sing|Foo=Bar", "_", "Number[psor]=Plur|Person=3"])
    row = {a: r for a, r in zip(MORPH_ATTRS, rows)}
    assert row["Case"] == ["Acc", "<root>", "<root>"]
    assert row["Number"] == ["Sing", "<root>", "<root>"]
    assert row["Number[psor]"] == ["<root>", "<root>", "Plur"]
    assert row["Person"] == ["<root>", "<root>", "3"]
    assert all(r == ["<root>"] * 3 for a, r in row.items()
               if a not in ("Case", "Number", "Number[psor]", "Person"))
    # encoded: a word without the attribute has id 0, like ROOT
    sentences = list(read_conll(os.path.join(DATA, "en_ewt_sample.conllu")))
    vocabs = Vocabularies.build(sentences)
    e = vocabs.encode(sentences[0])
    case = MORPH + MORPH_ATTRS.index("Number")
    for i, feats in enumerate(sentences[0].feats[1:], start=1):
        has = "Number=" in feats.replace("Number[", "X[")
        assert (e.tokens[case, i] > 0) == has
    assert e.tokens[MORPH:, 0].tolist() == [0] * len(MORPH_ATTRS)


def test_encoding_morph_attributes_is_the_same_from_the_cache():
    """`encode` remembers each FEATS string's MORPH ids: a second encoding, a FEATS string first
    seen in another sentence, and a repeated attribute (the last value counts, as in
    `morph_rows`) all give what `morph_rows` says."""
    from bpparse.conll import with_tags

    train = sentences("en_ewt_sample.conllu")
    vocabs = Vocabularies.build(train)
    s = train[0]
    feats = ["Number=Sing|Number=Plur"] + s.feats[2:]
    repeated = with_tags(s, feats=[None] + feats)
    for sentence in (s, s, repeated, repeated):
        e = vocabs.encode(sentence)
        rows = morph_rows(sentence.feats[1:])
        assert [[vocabs[MORPH + a].strings[k] for k in e.tokens[MORPH + a, 1:]]
                for a in range(len(MORPH_ATTRS))] == rows
    number = MORPH + MORPH_ATTRS.index("Number")
    assert vocabs[number].strings[vocabs.encode(repeated).tokens[number, 1]] == "Plur"


def test_morph_density_counts_attribute_values_per_word():
    from bpparse.encode import morph_density

    text = ("1\ta\ta\tNOUN\t_\tCase=Acc|Number=Sing|Foo=Bar\t0\troot\t_\t_\n"
            "2\tb\tb\tPUNCT\t_\t_\t1\tpunct\t_\t_\n"
            "3\tc\tc\tNOUN\t_\tNumber[psor]=Plur|Person=3|Case=Gen\t1\tnmod\t_\t_\n\n")
    sentences = list(read_conll(io.StringIO(text)))
    assert morph_density(sentences) == pytest.approx(5 / 3)  # Foo is not one of MORPH_ATTRS
    assert morph_density([]) == 0.0


def test_vocabularies_of_older_files_lack_attribute_rows():
    from bpparse.encode import FIELD_NAMES

    sentences = list(read_conll(os.path.join(DATA, "en_ewt_sample.conllu")))
    d = Vocabularies.build(sentences).to_dict()
    for name in FIELD_NAMES[8:]:
        del d["fields"][name]
    old = Vocabularies.from_dict(d)
    e = old.encode(sentences[0])
    assert e.tokens.shape[0] == len(FIELD_NAMES)
    assert set(e.tokens[8:, 1:].ravel().tolist()) <= {0, 1}
