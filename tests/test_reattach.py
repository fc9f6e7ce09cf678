"""The re-attachment stage: candidates and ranked heads against numpy, keys that read exactly the
dependents (and adjacent siblings) they should, re-attachment = the argmax of log mu + scale * w . f
recomputed word by word and pass by pass, a tree with its root and its punctuation kept,
first-version stages as they were, training learns its data, dev decides whether the stage is kept,
the model file stores it exactly (or refuses a bad one), and the CLI adds it."""
from pathlib import Path

import numpy as np
import pytest

from bpparse.encode import UPOS
from bpparse.features import sentence_attributes
from bpparse.features.context import ContextLabeler, relabel_tree
from bpparse.features.punct import MIN_MARGINAL
from bpparse.features.reattach import (
    FIXED_KEYS,
    KEY_ROOM,
    PASSES,
    SIBLING_KEYS,
    VERSION,
    Reattacher,
    arc_label,
    rank_heads,
    reattach_candidates,
    reattach_keys,
    reattach_tree,
)
from bpparse.features.store import SparseTable, sparse_table_of
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


def random_labelled_trees(model, encoded, seed):
    """(attributes, PUNCT mask, random tree, random labels) of the first 20 sentences."""
    rng = np.random.default_rng(seed)
    tag = punct_tag(model.vocabs)
    for e in encoded[:20]:
        n1 = e.tokens.shape[1]
        is_punct = np.asarray(e.tokens[UPOS]) == tag
        is_punct[0] = False
        yield (sentence_attributes(e.tokens, False), is_punct, random_tree(rng, n1 - 1),
               rng.integers(0, len(model.labels), n1))


def test_keys_read_the_dependents_of_both_words(tiny_model, tiny_encoded):
    rng = np.random.default_rng(2)
    verbs = verb_tags(tiny_model.vocabs)
    for attrs, is_punct, heads, labels in random_labelled_trees(tiny_model, tiny_encoded, 2):
        n1 = heads.shape[0]
        keys = np.zeros(KEY_ROOM + 5 * n1, dtype=np.uint64)
        for m in range(1, n1):
            for h in range(1, n1):
                if h == m:
                    continue
                label = int(rng.integers(-1, len(tiny_model.labels)))
                first = reattach_keys(attrs, heads, labels, verbs, is_punct, h, m, label, keys, 1)
                first_keys = keys[:first].copy()
                count = reattach_keys(attrs, heads, labels, verbs, is_punct, h, m, label, keys,
                                      VERSION)
                kept = [c for c in range(1, n1) if c != m and not is_punct[c]]
                others = sum(1 for c in kept if heads[c] == h)
                own = sum(1 for c in kept if heads[c] == m)
                assert first == FIXED_KEYS + 3 * others + 2 * own
                assert count == first + SIBLING_KEYS  # the first version's keys, then these
                assert np.array_equal(keys[:first], first_keys)
                assert np.all(keys[:count] != 0)
                # the keys do not depend on where m itself hangs
                saved = heads[m]
                heads[m] = h if not below(heads, h, m) else saved
                again = keys[:count].copy()
                assert reattach_keys(attrs, heads, labels, verbs, is_punct, h, m, label,
                                     keys, VERSION) == count
                assert np.array_equal(keys[:count], again)
                heads[m] = saved
                # the label h -> m would take enters its own keys (with the pair, valency,
                # the adjacent siblings, verbs between, distance) and no other
                reattach_keys(attrs, heads, labels, verbs, is_punct, h, m, label + 1, keys,
                              VERSION)
                changed = np.flatnonzero(keys[:count] != again)
                assert changed.tolist() == [13, 14] + list(range(first, count))
                # the adjacent siblings: h's nearest dependent between h and m enters the first
                # sibling key, its nearest beyond m on that side the second, no farther sibling
                side = [c for c in kept if heads[c] == h and (c < h) == (m < h)]
                between = sorted((c for c in side if min(h, m) < c < max(h, m)),
                                 key=lambda c: abs(c - m))
                beyond = sorted((c for c in side if c not in between), key=lambda c: abs(c - m))
                for c in side:
                    saved = labels[c]
                    labels[c] = saved + 1
                    reattach_keys(attrs, heads, labels, verbs, is_punct, h, m, label, keys,
                                  VERSION)
                    labels[c] = saved
                    assert (keys[first] != again[first]) == (c in between[:1])
                    assert (keys[first + 1] != again[first + 1]) == (c in beyond[:1])


def random_labeler(rng, model, bits=8):
    """A `ContextLabeler` with every row of its (2^bits, R) table set at random."""
    R = len(model.labels)
    rows = 1 << bits
    return ContextLabeler(np.arange(0, rows * R + 1, R, dtype=np.int32),
                          np.tile(np.arange(R, dtype=np.uint16), rows),
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
                relabel_tree(attrs, labeler, moved, labels, prob, 1.0)
                assert label == labels[m]
    empty = tiny_model.labeler_record
    assert arc_label(attrs, empty, heads, heads[1], 1, buffer, scores) == -1


def reference_stage(attrs, stage, labeler, mu, heads, labels, is_punct, projective):
    """`reattach_tree` recomputed: left to right, each word's candidates and keys in the tree as it
    goes, again while a pass moves a word (`PASSES`; one pass for version 1). Returns (heads,
    head_prob, heads changed)."""
    n1 = heads.shape[0]
    current = heads.copy()
    prob, changed = np.zeros(n1), 0
    keys = np.zeros(KEY_ROOM + 5 * n1, dtype=np.uint64)
    buffer = np.empty(4 * n1 + 64, dtype=np.int64)
    scores_buf = np.empty(labeler.n_labels)
    dense = SparseTable(stage.index, stage.weights).dense()
    mask = np.uint64(dense.shape[0] - 1)

    def w(count):
        return dense[(keys[:count] & mask).astype(np.int64)].sum()

    def log_mu(h, m):
        return np.log(max(mu[h, m], MIN_MARGINAL))

    for _ in range(PASSES if stage.version >= 2 else 1):
        moved = 0
        for m in range(1, n1):
            if is_punct[m] or current[m] == 0:
                continue
            cands = numpy_candidates(mu, current, is_punct, m, stage.candidates) + [
                int(current[m])]
            if projective:
                cands = [h for h in cands if h == current[m] or keeps_projective(current, h, m)]
            scores = []
            for h in cands:
                label = arc_label(attrs, labeler, current, h, m, buffer, scores_buf)
                count = reattach_keys(attrs, current, labels, stage.verb_tags, is_punct, h, m,
                                      label, keys, stage.version)
                scores.append(log_mu(h, m) + stage.scale * w(count))
            best = cands[int(np.argmax(scores))]
            if best != current[m]:
                current[m] = best
                prob[m] = mu[best, m]
                moved += 1
        changed += moved
        if moved == 0:
            break
    return current, prob, changed


@pytest.mark.parametrize("projective,version,labelled", [
    (False, VERSION, False), (True, VERSION, False), (False, 1, False), (False, VERSION, True),
    (True, VERSION, True)])
def test_reattachment_is_the_argmax_word_by_word_and_keeps_a_tree(tiny_model, tiny_encoded,
                                                                  projective, version, labelled):
    rng = np.random.default_rng(7)
    labeler = random_labeler(rng, tiny_model)
    tag = punct_tag(tiny_model.vocabs)
    # half the slots unset: the kernel reads the sparse table, `reference_stage` the dense one
    table = sparse_table_of((rng.normal(size=1 << 10) * (rng.random(1 << 10) < 0.5)).astype(np.float32))
    stage = Reattacher(*table, 0.8, 3, tag,
                       verb_tags(tiny_model.vocabs), version)
    moved = 0
    for e in tiny_encoded:
        n1 = e.tokens.shape[1]
        attrs = sentence_attributes(e.tokens, tiny_model.fine_tags)
        is_punct = np.asarray(e.tokens[UPOS]) == tag
        is_punct[0] = False
        heads = (random_projective_tree if projective else random_tree)(rng, n1 - 1)
        labels = rng.integers(0, len(tiny_model.labels), n1)
        if labelled:  # the labeler's labels of this tree: the stage reuses the current arcs'
            relabel_tree(attrs, labeler, heads, labels, np.zeros(n1), 1.0)
        mu = rng.random((n1, n1))
        before = heads.copy()
        expect, expect_prob, expect_changed = reference_stage(attrs, stage, labeler, mu, heads,
                                                              labels, is_punct, projective)
        prob = np.zeros(n1)
        changed = reattach_tree(attrs, stage, labeler, mu, heads, labels, prob, projective,
                                labelled)
        assert np.array_equal(heads, expect)
        assert np.array_equal(prob, expect_prob)
        assert changed == expect_changed
        moved += changed
        assert np.array_equal(heads[is_punct], before[is_punct])  # punctuation stays
        assert np.array_equal(heads == 0, before == 0)  # so does the root word
        for m in range(1, n1):
            assert below(heads, m, 0)
        assert is_projective(heads) or not projective
    assert moved > 0
    empty = stage._replace(index=np.zeros(0, dtype=np.uint64), weights=np.zeros(0, dtype=np.float32))
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
    assert stage.info["version"] == VERSION
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
    assert loaded.reattach.info["version"] == VERSION
    assert all(np.array_equal(a, b) for a, b in zip(loaded.reattach.table, m.reattach.table))
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
    with pytest.raises(ValueError, match="version 3 is not known"):
        reattach_from_arrays({"hash_bits": 12, "scale": 0.1, "candidates": 4, "version": 3},
                             np.zeros(0, np.uint32), np.zeros(0, np.float16))
    # a file of the first stage (no version) keeps its templates: no sibling keys, one pass
    first = reattach_from_arrays({"hash_bits": 12, "scale": 0.1, "candidates": 4},
                                 np.zeros(0, np.uint32), np.zeros(0, np.float16))
    assert first.record(m.vocabs).version == 1
    # a forged header (a table smaller than what is stored) fails as a malformed file
    assert_forged_stage_refused(m, "reattach", ReattachStage(
        10, sparse_table_of(np.ones(1 << 10)), 0.1, {"candidates": 4}), path,
        "re-attachment stage")


def test_a_projective_parse_stays_projective_through_both_stages(tiny_model, tiny_encoded):
    from bpparse.parse import parse_encoded, parse_settings
    from bpparse.punct import PunctStage

    rng = np.random.default_rng(5)
    m = Model(tiny_model.config, tiny_model.vocabs, tiny_model.theta.copy())
    settings = parse_settings(m, constraint="PTREE")
    without = parse_encoded(m, tiny_encoded, settings)
    m.reattach = ReattachStage(10, sparse_table_of(rng.normal(size=1 << 10)), 2.0,
                               {"candidates": 4})
    m.punct = PunctStage(10, sparse_table_of(rng.normal(size=1 << 10)), 2.0, {})
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
