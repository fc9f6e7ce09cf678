"""The punctuation stage: spans, candidates and crossing keys against direct recomputation on
random trees, re-attachment keeps a tree with its root and moves only punctuation, the choice is
the argmax of log mu + scale * w . f (checked in numpy), training learns its data, and the model
file stores the stage exactly (or refuses a bad one)."""
from pathlib import Path

import numpy as np
import pytest

from bpparse.encode import UPOS
from bpparse.errors import ModelFileError
from bpparse.features.store import sparse_table_of
from bpparse.features import sentence_attributes
from bpparse.features.layout import A_WORD, NUM_ATTRS
from bpparse.features.punct import (
    MIN_MARGINAL,
    N_KEYS,
    PunctAttacher,
    attach_punct,
    punct_candidates,
    punct_keys,
    punct_partners,
    subtree_spans,
)
from bpparse.model import Model, load_model, save_model
from bpparse.punct import (
    PunctStage,
    punct_accuracy,
    punct_from_arrays,
    punct_pairs,
    punct_tag,
    train_punct,
)
from bpparse.train import is_projective

TINY = str(Path(__file__).resolve().parent / "data" / "en_ewt_train_tiny.conllu")


def random_tree(rng, n):
    """int64 (n+1,) heads of a random tree over words 1..n with one word under ROOT."""
    order = rng.permutation(np.arange(1, n + 1))
    heads = np.zeros(n + 1, dtype=np.int64)
    for k, m in enumerate(order[1:], 1):
        heads[m] = order[rng.integers(0, k)]
    return heads


def random_projective_tree(rng, n):
    """int64 (n+1,) heads of a random projective tree over words 1..n (ROOT's arc included)."""
    heads = np.zeros(n + 1, dtype=np.int64)

    def hang(lo, hi, head):  # words lo..hi in consecutive pieces, each piece's root under head
        while lo <= hi:
            end = int(rng.integers(lo, hi + 1))
            root = int(rng.integers(lo, end + 1))
            heads[root] = head
            hang(lo, root - 1, root)
            hang(root + 1, end, root)
            lo = end + 1

    root = int(rng.integers(1, n + 1))
    hang(1, root - 1, root)
    hang(root + 1, n, root)
    return heads


def keeps_projective(heads, h, m):
    """Is the tree ``heads`` with m moved under h projective (`train.is_projective`)?"""
    moved = heads.copy()
    moved[m] = h
    return is_projective(moved)


def below(heads, x, h):
    while x > 0:
        if x == h:
            return True
        x = heads[x]
    return x == h


def crosses(a, b, c, d):
    (a, b), (c, d) = sorted((a, b)), sorted((c, d))
    return a < c < b < d or c < a < d < b


@pytest.mark.parametrize("seed", range(20))
def test_spans_and_candidates_against_direct_recomputation(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 12))
    heads = random_tree(rng, n)
    is_punct = np.zeros(n + 1, dtype=np.bool_)
    is_punct[1:] = rng.random(n) < 0.3
    lo, hi = subtree_spans(heads, is_punct)
    for h in range(1, n + 1):
        if is_punct[h]:
            continue
        # the non-punctuation words reached from h through non-punctuation words
        reached = [m for m in range(1, n + 1) if not is_punct[m] and below(heads, m, h) and all(
            not is_punct[x] for x in _path(heads, m, h))]
        assert (lo[h], hi[h]) == (min(reached), max(reached))
    for p in np.flatnonzero(is_punct):
        expect = [h for h in range(1, n + 1) if h != p and not is_punct[h] and not below(heads, h, p)]
        assert punct_candidates(heads, is_punct, p).tolist() == expect


def _path(heads, m, h):
    """The words from m up to h, h excluded."""
    out = []
    while m != h:
        out.append(m)
        m = heads[m]
    return out


def test_crossing_keys_fire_exactly_for_arcs_that_cross_the_other_words(tiny_model, tiny_encoded):
    rng = np.random.default_rng(5)
    for e in tiny_encoded[:20]:
        n1 = e.tokens.shape[1]
        attrs = sentence_attributes(e.tokens, False)
        heads = random_tree(rng, n1 - 1)
        is_punct = np.zeros(n1, dtype=np.bool_)
        is_punct[1:] = rng.random(n1 - 1) < 0.3
        labels = rng.integers(0, len(tiny_model.labels), n1)
        lo, hi = subtree_spans(heads, is_punct)
        partner = punct_partners(attrs, is_punct, punct_pairs(tiny_model.vocabs))
        keys = np.zeros((n1, N_KEYS), dtype=np.uint64)
        for p in np.flatnonzero(is_punct):
            cands = punct_candidates(heads, is_punct, p)
            punct_keys(attrs, heads, labels, is_punct, lo, hi, partner, len(tiny_model.labels), p,
                       cands, keys)
            for c, h in enumerate(cands):
                cross = any(crosses(h, p, heads[m], m) for m in range(1, n1) if not is_punct[m])
                assert (keys[c, 29] != 0) == cross and (keys[c, 30] != 0) == cross
                assert np.all(keys[c, :29] != 0) and np.all(keys[c, 31:] != 0)


@pytest.mark.parametrize("seed", range(10))
def test_partners_pair_brackets_by_nesting_and_quotes_by_order(seed):
    rng = np.random.default_rng(seed)
    n = 30
    forms = rng.choice([10, 11, 12, 13, 14, 5], size=n)  # ( ) " [ ] and a word
    pairs = np.array([[10, 11], [12, 12], [13, 14]], dtype=np.int64)
    attrs = np.zeros((NUM_ATTRS, n + 3), dtype=np.int64)
    attrs[A_WORD, 2:n + 2] = forms
    is_punct = np.zeros(n + 1, dtype=np.bool_)
    is_punct[1:] = forms != 5
    expect = np.full(n + 1, -1)
    for opening, closing in pairs.tolist():
        stack = []
        for i in range(1, n + 1):
            f = forms[i - 1]
            if opening == closing and f == opening:
                if stack:
                    o = stack.pop()
                    expect[o], expect[i] = i, o
                else:
                    stack.append(i)
            elif f == opening:
                stack.append(i)
            elif f == closing and stack:
                o = stack.pop()
                expect[o], expect[i] = i, o
    assert punct_partners(attrs, is_punct, pairs).tolist() == expect.tolist()


@pytest.mark.parametrize("projective", [False, True])
def test_attachment_is_the_argmax_and_keeps_a_tree_with_its_root(tiny_model, tiny_encoded,
                                                                 projective):
    rng = np.random.default_rng(11)
    # half the slots unset: the kernel reads the sparse table, the reference below the dense one
    dense = (rng.normal(size=1 << 10) * (rng.random(1 << 10) < 0.5)).astype(np.float32)
    stage = PunctAttacher(*sparse_table_of(dense), 0.7,
                          punct_tag(tiny_model.vocabs),
                          len(tiny_model.labels), punct_pairs(tiny_model.vocabs))
    moved = 0
    for e in tiny_encoded:
        n1 = e.tokens.shape[1]
        attrs = sentence_attributes(e.tokens, False)
        is_punct = np.asarray(e.tokens[UPOS]) == stage.punct_tag
        is_punct[0] = False
        heads = (random_projective_tree if projective else random_tree)(rng, n1 - 1)
        labels = rng.integers(0, len(tiny_model.labels), n1)
        mu = rng.random((n1, n1))
        before = heads.copy()
        prob = np.zeros(n1)
        changed = attach_punct(attrs, stage, mu, heads, labels, prob, projective)
        assert changed == int((heads != before).sum())
        moved += changed
        assert np.array_equal(heads[~is_punct], before[~is_punct])  # only punctuation moves
        assert list(heads[1:]).count(0) == 1 and np.array_equal(heads == 0, before == 0)
        for m in range(1, n1):  # a tree: every word reaches ROOT
            assert below(heads, m, 0)
        assert is_projective(heads) or not projective
        # the choice, recomputed in numpy on the decoded tree, candidates of the tree as it goes
        lo, hi = subtree_spans(before, is_punct)
        partner = punct_partners(attrs, is_punct, stage.pairs)
        keys = np.zeros((n1, N_KEYS), dtype=np.uint64)
        current = before.copy()
        for p in np.flatnonzero(is_punct):
            if before[p] == 0:
                continue
            cands = punct_candidates(current, is_punct, p)
            if len(cands) == 0:
                continue
            punct_keys(attrs, before, labels, is_punct, lo, hi, partner, len(tiny_model.labels), p,
                       cands, keys)
            k = keys[:len(cands)]
            w = np.where(k != 0, dense[(k & np.uint64(1023)).astype(np.int64)], 0.0)
            score = np.log(np.maximum(mu[cands, p], MIN_MARGINAL)) + stage.scale * w.sum(1)
            if projective:  # heads that would cross an arc are out; none left: p stays
                score[[h != current[p] and not keeps_projective(current, h, p) for h in cands]] = -np.inf
            if np.isfinite(score).any():
                current[p] = cands[int(np.argmax(score))]
            assert heads[p] == current[p] and prob[p] in (0.0, mu[heads[p], p])
    assert moved > 0


def test_training_learns_its_data_and_dev_decides_whether_the_stage_is_kept(tiny_model,
                                                                             tiny_encoded):
    stage = train_punct(tiny_model, tiny_encoded, epochs=8, hash_bits=14)
    assert stage is not None and stage.scale == 0.1 and stage.info["nonzero"] > 0
    # on gold trees with uninformative marginals the stage alone must recover most heads
    parsed = []
    for e in tiny_encoded:
        n1 = e.tokens.shape[1]
        parsed.append((np.asarray(e.heads, dtype=np.int64), np.asarray(e.labels, dtype=np.int64),
                       np.full((n1, n1), 0.5)))
    record = stage._replace(scale=1.0).record(tiny_model.vocabs)
    right, words = punct_accuracy(tiny_model, record, tiny_encoded, parsed)
    assert words > 20 and right > 90.0
    # a dev set whose trees are already right: no scale can beat them, the stage is dropped
    assert train_punct(tiny_model, tiny_encoded, dev=(tiny_encoded, parsed), epochs=2,
                       hash_bits=14) is None


def test_the_model_file_stores_the_stage_exactly_or_refuses_a_bad_one(tiny_model, tiny_encoded,
                                                                      tmp_path):
    from bpparse.parse import parse_encoded

    m = Model(tiny_model.config, tiny_model.vocabs, tiny_model.theta.copy())
    m.punct = train_punct(m, tiny_encoded, epochs=3, hash_bits=12)
    path = tmp_path / "p.bpm"
    save_model(m, path)
    loaded = load_model(path)
    assert loaded.punct.scale == m.punct.scale and all(
        np.array_equal(a, b) for a, b in zip(loaded.punct.table, m.punct.table))
    assert "punct" in loaded.describe() and loaded.describe()["punct"]["epochs"] == 3
    with_stage = parse_encoded(loaded, tiny_encoded)
    loaded.punct = None
    without = parse_encoded(loaded, tiny_encoded)
    assert any(not np.array_equal(a[0], b[0]) for a, b in zip(with_stage, without))
    again = parse_encoded(m, tiny_encoded)
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(with_stage, again))
    meta = {"hash_bits": 12, "scale": 0.1}
    with pytest.raises(ValueError, match="out of range"):
        punct_from_arrays(meta, np.array([5000], dtype=np.uint32), np.ones(1, dtype=np.float16))
    with pytest.raises(ValueError, match="not valid"):
        punct_from_arrays({"hash_bits": 30, "scale": 0.1}, np.zeros(0, np.uint32), np.zeros(0, np.float16))


def assert_forged_stage_refused(model, section, stage, path, what):
    """A model file whose ``section`` stage header claims a smaller table than it stores (1024
    weights stored, 256 claimed) fails as a malformed file naming ``what``."""
    from test_model import forge

    setattr(model, section, stage)
    save_model(model, path)
    forge(path, path, lambda header: header[section].update(hash_bits=8))
    with pytest.raises(ModelFileError, match=f"malformed model file \\({what}\\)"):
        load_model(path)


def test_a_forged_stage_header_fails_cleanly(tiny_model, tiny_encoded, tmp_path):
    m = Model(tiny_model.config, tiny_model.vocabs, tiny_model.theta.copy())
    assert_forged_stage_refused(m, "punct", PunctStage(10, sparse_table_of(np.ones(1 << 10)),
                                                       0.1, {}),
                                tmp_path / "p.bpm", "punctuation stage")


def run_stage_command(tmp_path, command, section, overrides):
    """Train a tiny model without the ``section`` stage, then add it with ``bpparse command``
    (``--set`` ``overrides``); returns (runner, the plain model's path, the output path, result)."""
    from click.testing import CliRunner

    from bpparse.cli import cli

    runner = CliRunner()
    plain = tmp_path / "plain.bpm"
    args = ["train", "--config", "first-order", "--train", TINY, "--out", str(plain), "--epochs",
            "2", "--no-progress", "--set", f"{section}.enabled=false", "--set",
            "features.hash_bits=16"]
    assert runner.invoke(cli, args).exit_code == 0
    assert getattr(load_model(plain), section) is None
    out = tmp_path / f"{section}.bpm"
    sets = [x for o in overrides for x in ("--set", o)]
    result = runner.invoke(cli, [command, "-m", str(plain), "--train", TINY, "--out", str(out),
                                 *sets])
    return runner, plain, out, result


def test_cli_train_punct_adds_the_stage_to_a_model_trained_without_it(tmp_path):
    from bpparse.cli import cli

    runner, plain, out, result = run_stage_command(tmp_path, "train-punct", "punct",
                                                   ["punct.hash_bits=12"])
    assert result.exit_code == 0, result.output
    stage = load_model(out).punct
    assert stage.hash_bits == 12 and stage.scale == 0.1
    info = runner.invoke(cli, ["info", str(out)])
    assert "punct      punctuation re-attached from the tree, 2^12 weights, scale 0.1" in info.output
    bad = runner.invoke(cli, ["train-punct", "-m", str(plain), "--train", TINY, "--out", str(out),
                              "--set", "train.epochs=3"])
    assert bad.exit_code != 0 and "punct.* keys only" in bad.output
    # temperatures fitted to the model's earlier probabilities are dropped without --dev
    calibrated = tmp_path / "calibrated.bpm"
    assert runner.invoke(cli, ["calibrate", "-m", str(plain), "--dev", TINY, "--out",
                               str(calibrated)]).exit_code == 0
    assert load_model(calibrated).calibration is not None
    result = runner.invoke(cli, ["train-punct", "-m", str(calibrated), "--train", TINY, "--out", str(out)])
    assert result.exit_code == 0 and "temperatures were dropped" in result.output
    assert load_model(out).calibration is None
