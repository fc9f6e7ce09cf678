"""The re-attachment stage: candidates and ranked heads against numpy, keys that read exactly the
dependents they should, re-attachment = the argmax of log mu + scale * w . f recomputed word by
word, a tree with its root and its punctuation kept, training learns its data, dev decides whether
the stage is kept, the model file stores it exactly (or refuses a bad one), and the CLI adds it."""
from pathlib import Path

import numpy as np
import pytest

from bpparse.encode import UPOS
from bpparse.features import sentence_attributes
from bpparse.features.punct import MIN_MARGINAL
from bpparse.features.context import ContextLabeler, relabel_tree
from bpparse.features.reattach import (
    FIXED_KEYS,
    Reattacher,
    arc_label,
    rank_heads,
    reattach_candidates,
    reattach_keys,
    reattach_tree,
)
from bpparse.model import Model, load_model, save_model
from bpparse.punct import punct_tag
from bpparse.reattach import (
    ReattachStage,
    heads_accuracy,
    reattach_from_arrays,
    train_reattach,
    verb_tags,
)
from bpparse.train import is_projective
from test_punct import (
    assert_forged_stage_refused,
    below,
    keeps_projective,
    random_projective_tree,
    random_tree,
    run_stage_command,
)

TINY = str(Path(__file__).resolve().parent / "data" / "en_ewt_train_tiny.conllu")


def numpy_candidates(mu, heads, is_punct, m, k):
    n1 = heads.shape[0]
    order = sorted(range(1, n1), key=lambda h: (-mu[h, m], h))
    return [h for h in order if h != m and not is_punct[h] and not below(heads, h, m)][:k]


@pytest.mark.parametrize("seed", range(20))
def test_candidates_and_ranked_heads_against_numpy(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 14))
    heads = random_tree(rng, n)
    is_punct = np.zeros(n + 1, dtype=np.bool_)
    is_punct[1:] = rng.random(n) < 0.2
    mu = np.round(rng.random((n + 1, n + 1)), 1)  # ties on purpose
    ranked = rank_heads(mu, 5)
    for m in range(1, n + 1):
        k = int(rng.integers(1, 6))
        assert reattach_candidates(mu, heads, is_punct, m, k).tolist() == numpy_candidates(
            mu, heads, is_punct, m, k)
        expect = sorted((h for h in range(1, n + 1) if h != m), key=lambda h: (-mu[h, m], h))[:5]
        assert ranked[m].tolist() == expect + [-1] * (5 - len(expect))
    assert ranked[0].tolist() == [-1] * 5


def test_keys_read_the_dependents_of_both_words(tiny_model, tiny_encoded):
    rng = np.random.default_rng(2)
    tag = punct_tag(tiny_model.vocabs)
    verbs = verb_tags(tiny_model.vocabs)
    for e in tiny_encoded[:20]:
        n1 = e.tokens.shape[1]
        attrs = sentence_attributes(e.tokens, False)
        is_punct = np.asarray(e.tokens[UPOS]) == tag
        is_punct[0] = False
        heads = random_tree(rng, n1 - 1)
        labels = rng.integers(0, len(tiny_model.labels), n1)
        keys = np.zeros(FIXED_KEYS + 5 * n1, dtype=np.uint64)
        for m in range(1, n1):
            for h in range(1, n1):
                if h == m:
                    continue
                label = int(rng.integers(-1, len(tiny_model.labels)))
                count = reattach_keys(attrs, heads, labels, verbs, is_punct, h, m, label, keys)
                kept = [c for c in range(1, n1) if c != m and not is_punct[c]]
                others = sum(1 for c in kept if heads[c] == h)
                own = sum(1 for c in kept if heads[c] == m)
                assert count == FIXED_KEYS + 3 * others + 2 * own
                assert np.all(keys[:count] != 0)
                # the keys do not depend on where m itself hangs
                saved = heads[m]
                heads[m] = h if not below(heads, h, m) else saved
                again = keys[:count].copy()
                assert reattach_keys(attrs, heads, labels, verbs, is_punct, h, m, label,
                                     keys) == count
                assert np.array_equal(keys[:count], again)
                heads[m] = saved
                # the label h -> m would take enters its own keys and the valency key only
                reattach_keys(attrs, heads, labels, verbs, is_punct, h, m, label + 1, keys)
                changed = np.flatnonzero(keys[:count] != again)
                assert changed.tolist() == [13, 14]


def random_labeler(rng, model, bits=8):
    """A `ContextLabeler` with every row of its (2^bits, R) table set at random."""
    R = len(model.labels)
    rows = 1 << bits
    return ContextLabeler(np.arange(0, rows * R + 1, R, dtype=np.int64),
                          np.tile(np.arange(R, dtype=np.int32), rows),
                          rng.normal(size=rows * R).astype(np.float32), R,
                          np.asarray(model.layout, dtype=np.int64))


def test_arc_label_is_the_labelers_label_with_the_word_moved(tiny_model, tiny_encoded):
    rng = np.random.default_rng(4)
    labeler = random_labeler(rng, tiny_model)
    for e in tiny_encoded[:15]:
        n1 = e.tokens.shape[1]
        attrs = sentence_attributes(e.tokens, tiny_model.fine_tags)
        heads = random_tree(rng, n1 - 1)
        buffer = np.empty(4 * n1 + 64, dtype=np.int64)
        scores = np.empty(labeler.n_labels)
        for m in range(1, n1):
            for h in range(1, n1):
                if h == m or below(heads, h, m):
                    continue
                before = heads.copy()
                label = arc_label(attrs, labeler, heads, h, m, buffer, scores)
                assert np.array_equal(heads, before)
                moved = heads.copy()
                moved[m] = h
                labels, prob = np.zeros(n1, dtype=np.int64), np.zeros(n1)
                relabel_tree(attrs, labeler, moved, labels, prob)
                assert label == labels[m]
    empty = tiny_model.labeler_record
    assert arc_label(attrs, empty, heads, heads[1], 1, buffer, scores) == -1


@pytest.mark.parametrize("projective", [False, True])
def test_reattachment_is_the_argmax_word_by_word_and_keeps_a_tree(tiny_model, tiny_encoded,
                                                                  projective):
    rng = np.random.default_rng(7)
    labeler = random_labeler(rng, tiny_model)
    tag = punct_tag(tiny_model.vocabs)
    stage = Reattacher(rng.normal(size=1 << 10).astype(np.float32), 0.8, 3, tag,
                       verb_tags(tiny_model.vocabs))
    moved = 0
    for e in tiny_encoded:
        n1 = e.tokens.shape[1]
        attrs = sentence_attributes(e.tokens, tiny_model.fine_tags)
        is_punct = np.asarray(e.tokens[UPOS]) == tag
        is_punct[0] = False
        heads = (random_projective_tree if projective else random_tree)(rng, n1 - 1)
        labels = rng.integers(0, len(tiny_model.labels), n1)
        mu = rng.random((n1, n1))
        before = heads.copy()
        prob = np.zeros(n1)
        changed = reattach_tree(attrs, stage, labeler, mu, heads, labels, prob, projective)
        assert changed == int((heads != before).sum())
        moved += changed
        assert np.array_equal(heads[is_punct], before[is_punct])  # punctuation stays
        assert np.array_equal(heads == 0, before == 0)  # so does the root word
        for m in range(1, n1):
            assert below(heads, m, 0)
        assert is_projective(heads) or not projective
        # recomputed: left to right, each word's candidates and keys in the tree as it goes
        current = before.copy()
        keys = np.zeros(FIXED_KEYS + 5 * n1, dtype=np.uint64)
        buffer = np.empty(4 * n1 + 64, dtype=np.int64)
        scores_buf = np.empty(labeler.n_labels)
        for m in range(1, n1):
            if is_punct[m] or current[m] == 0:
                continue
            cands = numpy_candidates(mu, current, is_punct, m, 3) + [int(current[m])]
            if projective:
                cands = [h for h in cands if h == current[m] or keeps_projective(current, h, m)]
            scores = []
            for h in cands:
                label = arc_label(attrs, labeler, current, h, m, buffer, scores_buf)
                count = reattach_keys(attrs, current, labels, stage.verb_tags, is_punct, h, m,
                                      label, keys)
                w = stage.weights[(keys[:count] & np.uint64(1023)).astype(np.int64)].sum()
                scores.append(np.log(max(mu[h, m], MIN_MARGINAL)) + stage.scale * w)
            current[m] = cands[int(np.argmax(scores))]
            assert heads[m] == current[m]
            assert prob[m] == (mu[heads[m], m] if heads[m] != before[m] else 0.0)
    assert moved > 0
    empty = Reattacher(np.zeros(0, dtype=np.float32), 0.8, 3, tag, stage.verb_tags)
    e = tiny_encoded[0]
    n1 = e.tokens.shape[1]
    heads = random_tree(rng, n1 - 1)
    assert reattach_tree(sentence_attributes(e.tokens, False), empty, labeler, np.ones((n1, n1)),
                         heads, np.zeros(n1, dtype=np.int64), np.zeros(n1), False) == 0


def gold_parsed(encoded):
    """(heads, labels, mu) per sentence: the gold trees with uninformative marginals."""
    out = []
    for e in encoded:
        n1 = e.tokens.shape[1]
        out.append((np.asarray(e.heads, dtype=np.int64), np.asarray(e.labels, dtype=np.int64),
                    np.full((n1, n1), 0.5)))
    return out


def test_training_learns_its_data_and_dev_decides_whether_the_stage_is_kept(tiny_model,
                                                                             tiny_encoded):
    parsed = gold_parsed(tiny_encoded)
    marginals = [mu for _, _, mu in parsed]
    stage = train_reattach(tiny_model, tiny_encoded, marginals, epochs=6, hash_bits=14,
                           candidates=4)
    assert stage is not None and stage.scale == 0.1 and stage.info["nonzero"] > 0
    # from a wrong tree (each word under a random earlier word) with uninformative marginals,
    # the stage alone must move many words back to their training heads
    rng = np.random.default_rng(1)
    wrong = []
    for e, (heads, labels, mu) in zip(tiny_encoded, parsed):
        h = heads.copy()
        for m in range(1, h.shape[0]):
            if h[m] > 0 and rng.random() < 0.3:
                cand = [x for x in range(1, h.shape[0]) if x != m and not below(h, x, m)]
                h[m] = cand[int(rng.integers(0, len(cand)))]
        wrong.append((h, labels, mu))
    base = heads_accuracy(tiny_model, tiny_encoded, wrong)
    after = heads_accuracy(tiny_model, tiny_encoded, wrong,
                           stage._replace(scale=1.0).record(tiny_model.vocabs))
    assert after > base + 5.0
    # a dev set whose trees are already right: no scale can beat them, the stage is dropped
    assert train_reattach(tiny_model, tiny_encoded, marginals, dev=(tiny_encoded, parsed),
                          epochs=2, hash_bits=14) is None


def test_the_model_file_stores_the_stage_exactly_or_refuses_a_bad_one(tiny_model, tiny_encoded,
                                                                      tmp_path):
    from bpparse.parse import parse_encoded

    m = Model(tiny_model.config, tiny_model.vocabs, tiny_model.theta.copy())
    marginals = [t[2] for t in parse_encoded(m, tiny_encoded, marginals=True)]
    m.reattach = train_reattach(m, tiny_encoded, marginals, epochs=3, hash_bits=12)
    path = tmp_path / "r.bpm"
    save_model(m, path)
    loaded = load_model(path)
    assert loaded.reattach.scale == m.reattach.scale
    assert np.array_equal(loaded.reattach.weights, m.reattach.weights)
    assert loaded.describe()["reattach"]["candidates"] == 4
    with_stage = parse_encoded(loaded, tiny_encoded)
    loaded.reattach = None
    without = parse_encoded(loaded, tiny_encoded)
    assert any(not np.array_equal(a[0], b[0]) for a, b in zip(with_stage, without))
    again = parse_encoded(m, tiny_encoded)
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(with_stage, again))
    with pytest.raises(ValueError, match="candidates is not valid"):
        reattach_from_arrays({"hash_bits": 12, "scale": 0.1, "candidates": 40},
                             np.zeros(0, np.uint32), np.zeros(0, np.float16))
    # a forged header (a table smaller than what is stored) fails as a malformed file
    assert_forged_stage_refused(m, "reattach", ReattachStage(
        10, np.ones(1 << 10, dtype=np.float32), 0.1, {"candidates": 4}), path,
        "re-attachment stage")


def test_a_projective_parse_stays_projective_through_both_stages(tiny_model, tiny_encoded):
    from bpparse.parse import parse_encoded, parse_settings
    from bpparse.punct import PunctStage

    rng = np.random.default_rng(5)
    m = Model(tiny_model.config, tiny_model.vocabs, tiny_model.theta.copy())
    settings = parse_settings(m, constraint="PTREE")
    without = parse_encoded(m, tiny_encoded, settings)
    m.reattach = ReattachStage(10, rng.normal(size=1 << 10).astype(np.float32), 2.0,
                               {"candidates": 4})
    m.punct = PunctStage(10, rng.normal(size=1 << 10).astype(np.float32), 2.0, {})
    with_stages = parse_encoded(m, tiny_encoded, settings)
    assert any(not np.array_equal(a[0], b[0]) for a, b in zip(with_stages, without))
    assert all(is_projective(heads) for heads, _ in without + with_stages)


def test_cli_train_reattach_adds_the_stage_to_a_model_trained_without_it(tmp_path):
    from bpparse.cli import cli

    runner, plain, out, result = run_stage_command(
        tmp_path, "train-reattach", "reattach", ["reattach.hash_bits=12", "reattach.candidates=3"])
    assert result.exit_code == 0, result.output
    stage = load_model(out).reattach
    assert stage.hash_bits == 12 and stage.info["candidates"] == 3
    info = runner.invoke(cli, ["info", str(out)])
    assert ("reattach   words re-attached from the labelled tree, 2^12 weights, 3 candidates, "
            "scale 0.1") in info.output
    bad = runner.invoke(cli, ["train-reattach", "-m", str(plain), "--train", TINY, "--out",
                              str(out), "--set", "punct.epochs=3"])
    assert bad.exit_code != 0 and "reattach.* keys only" in bad.output
