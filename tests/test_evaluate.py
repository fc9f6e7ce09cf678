"""Attachment scores: hand-counted figures, random perturbations against a direct count, mismatches."""
import io
import os

import numpy as np
import pytest

from bpparse.conll import format_sentence, read_conll
from bpparse.errors import InputError
from bpparse.evaluate import evaluate, format_report, length_bin

DATA = os.path.join(os.path.dirname(__file__), "data")
GOLD = os.path.join(DATA, "en_ewt_sample.conllu")


def read(path_or_text):
    if path_or_text.endswith(".conllu"):
        return list(read_conll(path_or_text))
    return list(read_conll(io.StringIO(path_or_text)))


def test_identical_files_score_100():
    r = evaluate(read(GOLD), read(GOLD), details=True)
    words = sum(s.n for s in read(GOLD))
    assert r["words"] == words == 652 and r["sentences"] == 29
    for key in ("uas", "las", "label_acc", "exact_uas", "exact_las"):
        assert r[key] == 100.0
    assert sum(b["words"] for b in r["by_length"].values()) == words
    assert sum(d["words"] for d in r["by_deprel"].values()) == words


def test_hand_counted_sentence():
    """multi_root.conllu sentence 1: The cat sat on the mat . (words 1-7, word 7 PUNCT)."""
    gold = read(os.path.join(DATA, "multi_root.conllu"))[:1]
    s = gold[0]
    heads = s.heads
    heads[4] = 3            # wrong head, right label
    heads[7] = 6            # wrong head (PUNCT)
    labels = s.deprels
    labels[5] = "amod"      # right head, wrong label
    labels[4] = "obl"       # already wrong head: wrong label too
    pred = read(format_sentence(s, heads, labels))
    r = evaluate(gold, pred)
    assert (r["words"], r["sentences"]) == (7, 1)
    assert r["uas"] == pytest.approx(100 * 5 / 7)
    assert r["las"] == pytest.approx(100 * 4 / 7)
    assert r["label_acc"] == pytest.approx(100 * 5 / 7)
    assert r["exact_uas"] == 0.0 and r["exact_las"] == 0.0
    r = evaluate(gold, pred, punct=False)
    assert r["words"] == 6
    assert r["uas"] == pytest.approx(100 * 5 / 6) and r["las"] == pytest.approx(100 * 4 / 6)
    # only the PUNCT head wrong: exact without punctuation, not with it
    heads = s.heads
    heads[7] = 6
    pred = read(format_sentence(s, heads))
    assert evaluate(gold, pred, punct=False)["exact_uas"] == 100.0
    assert evaluate(gold, pred)["exact_uas"] == 0.0


@pytest.mark.parametrize("punct", [True, False])
def test_random_predictions_against_direct_count(punct):
    rng = np.random.default_rng(7)
    gold = read(os.path.join(DATA, "pt_bosque_sample.conllu"))
    labels_seen = sorted({d for s in gold for d in s.deprels[1:]})
    pred_text = []
    heads_ok = both_ok = label_ok = words = exact = 0
    by_deprel = {}
    for s in gold:
        heads = s.heads
        labels = s.deprels
        flip = rng.random(s.n + 1) < 0.3
        relabel = rng.random(s.n + 1) < 0.2
        for i in range(1, s.n + 1):
            if flip[i]:
                heads[i] = rng.integers(0, s.n + 1)
            if relabel[i]:
                labels[i] = labels_seen[rng.integers(len(labels_seen))]
        pred_text.append(format_sentence(s, heads, labels))
        mask = np.ones(s.n + 1, bool)
        mask[0] = False
        if not punct:
            mask &= np.array(s.upos) != "PUNCT"
        h = (heads == s.heads) & mask
        lab = (np.array(labels) == np.array(s.deprels)) & mask
        heads_ok += h.sum()
        label_ok += lab.sum()
        both_ok += (h & lab).sum()
        words += mask.sum()
        exact += h.sum() == mask.sum()
        for i in np.flatnonzero(mask):
            d = by_deprel.setdefault(s.deprels[i], [0, 0])
            d[0] += 1
            d[1] += bool(h[i])
    r = evaluate(gold, read("".join(pred_text)), punct=punct, details=True)
    assert r["words"] == words
    assert r["uas"] == pytest.approx(100 * heads_ok / words)
    assert r["las"] == pytest.approx(100 * both_ok / words)
    assert r["label_acc"] == pytest.approx(100 * label_ok / words)
    assert r["exact_uas"] == pytest.approx(100 * exact / len(gold))
    assert r["uas"] < 90
    assert set(r["by_deprel"]) == set(by_deprel)
    for d, (n, ok) in by_deprel.items():
        assert r["by_deprel"][d]["words"] == n
        assert r["by_deprel"][d]["uas"] == pytest.approx(100 * ok / n)
    assert sum(b["sentences"] for b in r["by_length"].values()) == len(gold)
    report = format_report(r, punct=punct)
    assert f"{r['uas']:.2f}" in report and "by gold DEPREL" in report


def test_length_bins():
    assert [length_bin(n) for n in (1, 10, 11, 50, 51, 201)] == ["1-10", "1-10", "11-20", "41-50", "51+", "51+"]


def test_first_difference_is_reported():
    gold = read(GOLD)
    k = 5
    s, i = gold[k], 3
    lines = "".join(g.text for g in gold).split("\n")
    cols = lines[s.line_of(i) - 1].split("\t")
    cols[1] = "CHANGED"
    lines[s.line_of(i) - 1] = "\t".join(cols)
    with pytest.raises(InputError) as e:
        evaluate(gold, read("\n".join(lines)))
    assert e.value.path == "<stream>" and e.value.line == s.line_of(i)
    assert e.value.msg == (f"word {i} of sentence {k + 1} is 'CHANGED' but {s.forms[i]!r} in gold "
                           f"({GOLD}:{s.line_of(i)})")


def test_different_numbers_of_sentences_and_words():
    gold = read(GOLD)
    with pytest.raises(InputError) as e:
        evaluate(gold, gold[:-1])
    assert e.value.path == GOLD and e.value.line == gold[-1].first_line
    assert e.value.msg == "sentence 29 is missing from the prediction, which has 28 sentences"
    with pytest.raises(InputError) as e:
        evaluate(gold[:2], gold[:3])
    assert e.value.msg == "sentence 3 is not in gold, which has 2 sentences"
    with pytest.raises(InputError) as e:
        evaluate(gold[:2], [gold[0], gold[2]])
    assert e.value.line == gold[2].line_of(1)


def test_gold_without_heads_is_an_error():
    s = read(GOLD)[0]
    unparsed = read(format_sentence(s, heads=[-1] * (s.n + 1)))
    assert evaluate([s], unparsed)["uas"] == 0.0
    with pytest.raises(InputError) as e:
        evaluate(unparsed, [s])
    assert e.value.msg == "gold HEAD is '_'"


def test_tag_accuracies_hand_counted():
    # issue 13: UPOS / XPOS / FEATS / AllTags when the prediction carries tags; FEATS as sets
    gold = read(os.path.join(DATA, "multi_root.conllu"))[:1]
    lines = gold[0].text.rstrip("\n").split("\n")
    words = [i for i, line in enumerate(lines) if line and line[0].isdigit()]
    rows = [lines[i].split("\t") for i in words]
    rows[0][3] = "PROPN"                    # UPOS wrong (word 1)
    rows[1][4] = "XX"                       # XPOS wrong (word 2)
    rows[2][5] = "VerbForm=Fin|Tense=Past|Mood=Ind"  # the same set, reordered
    rows[3][5] = "Case=Acc"                 # FEATS wrong (word 4)
    for i, row in zip(words, rows):
        lines[i] = "\t".join(row)
    pred = read("\n".join(lines) + "\n\n")
    r = evaluate(gold, pred)
    assert gold[0].feats[3] != rows[2][5] and set(gold[0].feats[3].split("|")) == set(rows[2][5].split("|"))
    assert r["upos"] == pytest.approx(100 * 6 / 7)
    assert r["xpos"] == pytest.approx(100 * 6 / 7)
    assert r["feats"] == pytest.approx(100 * 6 / 7)
    assert r["alltags"] == pytest.approx(100 * 4 / 7)
    assert "AllTags" in format_report(r)
    # an untagged prediction reports no tag scores
    for row in rows:
        row[3:6] = ["_", "_", "_"]
    for i, row in zip(words, rows):
        lines[i] = "\t".join(row)
    assert "upos" not in evaluate(gold, read("\n".join(lines) + "\n\n"))
