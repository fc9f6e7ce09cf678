"""The second-stage labeler: context keys read exactly the tree around an arc, labels and their
probabilities are the argmax / softmax of the table's scores (checked in numpy), parsing labels the
decoded tree with it, training fits, and the model file stores it exactly (or refuses a bad one)."""
from pathlib import Path

import numpy as np
import pytest

from bpparse.errors import ModelFileError
from bpparse.features import sentence_attributes
from bpparse.features.context import (
    context_capacity,
    context_label_keys,
    relabel_tree,
    tree_label_scores,
)
from bpparse.features.hashing import _slot
from bpparse.features.labels import label_keys
from bpparse.labeler import (
    label_accuracy,
    labeler_from_arrays,
    labeler_to_arrays,
    pack_trees,
    sparse_labeler,
    train_labeler,
)
from bpparse.model import load_model, save_model
from bpparse.parse import parse_encoded

DATA = Path(__file__).resolve().parent / "data"
TINY = DATA / "en_ewt_train_tiny.conllu"
SMALL = {"features.hash_bits": 16, "features.second_order_hash_bits": 12,
         "features.label_hash_bits": 10, "features.fine_tags": True, "features.morph": False,
         "features.lemma": False}


def random_labeler(tiny_model, bits=10, seed=0):
    """A labeler with float16-exact random weights, about a third of them zero (a sparse table)."""
    rng = np.random.default_rng(seed)
    shape = (1 << bits, len(tiny_model.labels))
    table = rng.normal(size=shape).astype(np.float16).astype(np.float32)
    table[rng.random(table.shape) < 0.3] = 0.0
    return sparse_labeler(table, {"feats": True, "morph": True, "lemma": False}, {"epochs": 0})


def keys_of(tiny_model, e, heads, h, m, layout=None):
    attrs = sentence_attributes(e.tokens, tiny_model.fine_tags)
    out = np.empty(context_capacity(heads.shape[0]), dtype=np.int64)
    k = context_label_keys(attrs, tiny_model.layout if layout is None else layout, heads, h, m, out)
    return out[:k]


def test_context_keys_read_the_dependents_of_the_child_and_the_head_and_nothing_else(
        tiny_model, tiny_encoded):
    e = next(e for e in tiny_encoded if e.n >= 8)
    n = e.n
    heads = np.asarray(e.heads, dtype=np.int64)
    attrs = sentence_attributes(e.tokens, tiny_model.fine_tags)
    buf = np.empty(64, dtype=np.int64)
    for m in range(1, n + 1):
        h = heads[m]
        own = label_keys(attrs, tiny_model.layout, h, m, buf)
        deps = int(np.sum(heads[1:] == m))
        others = int(np.sum(heads[1:] == h)) - 1
        keys = keys_of(tiny_model, e, heads, h, m)
        assert keys[:own].tolist() == buf[:own].tolist()
        assert keys.shape[0] == own + 2 * (deps + others) + (deps == 0) + 1
        # moving a word that is neither m, h, h's head nor a dependent of m or h, to another
        # such attachment, leaves the keys of h -> m as they were
        near = {m, h, heads[h] if h > 0 else -1}
        for d in range(1, n + 1):
            if d in near or heads[d] in (m, h):
                continue
            for new in range(0, n + 1):
                if new in (m, h, d, heads[d]):
                    continue
                moved = heads.copy()
                moved[d] = new
                assert keys_of(tiny_model, e, moved, h, m).tolist() == keys.tolist()
                break
        # and giving m one more dependent adds exactly that dependent's keys
        extra = next((d for d in range(1, n + 1) if d not in near and heads[d] not in (m, h)), None)
        if extra is not None:
            moved = heads.copy()
            moved[extra] = m
            assert keys_of(tiny_model, e, moved, h, m).shape[0] == keys.shape[0] + 2 - (deps == 0)


@pytest.mark.parametrize("temperature", [1.0, 1.7])
def test_relabel_is_the_argmax_and_softmax_of_the_table_scores(tiny_model, tiny_encoded, temperature):
    labeler = random_labeler(tiny_model)
    record = labeler.record(tiny_model.layout)
    table = labeler.dense()
    for e in tiny_encoded[:6]:
        heads = np.asarray(e.heads, dtype=np.int64)
        labels = np.full(e.n + 1, -5, dtype=np.int64)
        prob = np.full(e.n + 1, -5.0)
        attrs = sentence_attributes(e.tokens, tiny_model.fine_tags)
        relabel_tree(attrs, record, heads, labels, prob, temperature)
        assert labels[0] == -5 and prob[0] == -5.0
        all_scores = np.full((e.n + 1, len(tiny_model.labels)), -5.0)
        tree_label_scores(attrs, record, heads, all_scores)
        assert np.all(all_scores[0] == -5.0)
        for m in range(1, e.n + 1):
            keys = keys_of(tiny_model, e, heads, heads[m], m, record.layout)
            rows = [_slot(np.uint64(k), table.shape[0]) for k in keys]
            scores = table[rows].astype(np.float64).sum(axis=0)
            assert np.allclose(all_scores[m], scores, rtol=1e-6, atol=1e-6)
            p = np.exp((scores - scores.max()) / temperature)
            p /= p.sum()
            assert labels[m] == int(np.argmax(scores))
            assert prob[m] == pytest.approx(p[labels[m]], rel=1e-5)


def test_an_empty_table_keeps_the_parsers_labels(tiny_model, tiny_encoded):
    e = tiny_encoded[0]
    labels = np.arange(e.n + 1)
    prob = np.linspace(0, 1, e.n + 1)
    relabel_tree(sentence_attributes(e.tokens, tiny_model.fine_tags), tiny_model.labeler_record,
                 np.asarray(e.heads, dtype=np.int64), labels, prob, 1.0)
    assert labels.tolist() == list(range(e.n + 1)) and prob.tolist() == np.linspace(0, 1, e.n + 1).tolist()


def test_parsing_labels_the_decoded_tree_with_the_labeler(tiny_model, tiny_encoded, tmp_path):
    plain = parse_encoded(tiny_model, tiny_encoded)
    tiny_model.labeler = random_labeler(tiny_model, seed=4)
    try:
        relabelled = parse_encoded(tiny_model, tiny_encoded)
        record = tiny_model.labeler_record
        changed = 0
        for e, (heads, labels), (heads2, labels2) in zip(tiny_encoded, plain, relabelled):
            assert heads2.tolist() == heads.tolist()  # the labeler never moves a head
            expect = np.full(e.n + 1, -1, dtype=np.int64)
            relabel_tree(sentence_attributes(e.tokens, tiny_model.fine_tags), record, heads, expect,
                         np.zeros(e.n + 1), 1.0)
            assert labels2[1:].tolist() == expect[1:].tolist()
            changed += int(np.sum(labels2[1:] != labels[1:]))
        assert changed > 0
        # stored and loaded: the same labels
        save_model(tiny_model, tmp_path / "m.bpm")
        back = load_model(tmp_path / "m.bpm")
        assert back.labeler.templates == tiny_model.labeler.templates
        assert np.array_equal(back.labeler.dense(), tiny_model.labeler.dense())
        assert back.labeler.values.shape[0] < back.labeler.dense().size * 0.8
        assert back.describe()["labeler"]["hash_bits"] == 10
    finally:
        tiny_model.labeler = None


def test_training_fits_the_gold_labels_of_a_tiny_corpus(tiny_model, tiny_encoded):
    say = []
    labeler = train_labeler(tiny_model, tiny_encoded, dev=tiny_encoded[:8], epochs=6, hash_bits=14,
                            say=say.append)
    packed = pack_trees(tiny_encoded)
    assert label_accuracy(tiny_model, labeler.record(tiny_model.layout), packed) > 97.0
    assert labeler.info["best_epoch"] >= 1 and labeler.info["dev_label_accuracy"] > 90.0
    logliks = [float(line.split("log-likelihood ")[1].split("/")[0]) for line in say]
    assert logliks[-1] > logliks[0]
    untrained = sparse_labeler(np.zeros_like(labeler.dense()), labeler.templates, {})
    assert label_accuracy(tiny_model, untrained.record(tiny_model.layout), packed) < 50.0
    # what the file stores is what was trained
    meta, arrays = labeler_to_arrays(labeler)
    back = labeler_from_arrays(meta, arrays["deltas"], arrays["values"], len(tiny_model.labels))
    assert np.array_equal(back.dense(), labeler.dense()) and back.templates == labeler.templates


def test_a_malformed_stored_labeler_is_refused(tiny_model, tmp_path):
    meta, arrays = labeler_to_arrays(random_labeler(tiny_model))
    n_labels = len(tiny_model.labels)
    with pytest.raises(ValueError, match="does not fit"):
        labeler_from_arrays(meta, arrays["deltas"], arrays["values"], n_labels + 1)
    far = arrays["deltas"].astype(np.uint32)  # room for a position past the end
    far[-1] += np.uint32(1 << 30)
    with pytest.raises(ValueError, match="out of range"):
        labeler_from_arrays(meta, far, arrays["values"], n_labels)
    repeated = arrays["deltas"].copy()
    repeated[1] = 0
    with pytest.raises(ValueError, match="repeated"):
        labeler_from_arrays(meta, repeated, arrays["values"], n_labels)
    with pytest.raises(ValueError, match="does not fit"):
        labeler_from_arrays(dict(meta, hash_bits=40), arrays["deltas"], arrays["values"], n_labels)
    tiny_model.labeler = random_labeler(tiny_model)
    try:
        save_model(tiny_model, tmp_path / "m.bpm")
    finally:
        tiny_model.labeler = None
    from test_model import forge

    forged = forge(tmp_path / "m.bpm", tmp_path / "f.bpm", lambda h: h["labeler"].update(labels=2))
    with pytest.raises(ModelFileError, match="labeler"):
        load_model(forged)


def test_cli_train_labeler_adds_it_to_a_model_trained_without_one(tmp_path):
    from click.testing import CliRunner

    from bpparse.cli import cli

    runner = CliRunner()
    plain = tmp_path / "plain.bpm"
    args = ["train", "--config", "first-order", "--train", str(TINY), "--out", str(plain),
            "--epochs", "2", "--no-progress", "--set", "labeler.enabled=false"]
    for key, value in SMALL.items():
        args += ["--set", f"{key}={str(value).lower()}"]
    assert runner.invoke(cli, args).exit_code == 0
    assert load_model(plain).labeler is None
    out = tmp_path / "labeled.bpm"
    result = runner.invoke(cli, ["train-labeler", "-m", str(plain), "--train", str(TINY), "--dev",
                                 str(TINY), "--out", str(out), "--set", "labeler.hash_bits=12"])
    assert result.exit_code == 0, result.output
    labeled = load_model(out)
    assert labeled.labeler.hash_bits == 12 and labeled.config.labeler.hash_bits == 12
    assert "with the labeler" in result.output
    # the new labels get their temperature, fitted on --dev
    assert load_model(plain).calibration is None and labeled.calibration["dev"] == str(TINY)
    assert f"LabelProb temperature {labeled.label_temperature:g} fitted" in result.output
    info = runner.invoke(cli, ["info", str(out)])
    assert "labeler    tree-context labels, 2^12 rows" in info.output
    # dev read once: from stdin too, with the same temperatures as from the file
    piped = tmp_path / "piped.bpm"
    result = runner.invoke(cli, ["train-labeler", "-m", str(plain), "--train", str(TINY), "--dev",
                                 "-", "--out", str(piped), "--set", "labeler.hash_bits=12"],
                           input=TINY.read_text())
    assert result.exit_code == 0, result.output
    assert load_model(piped).label_temperature == labeled.label_temperature
    bad = runner.invoke(cli, ["train-labeler", "-m", str(plain), "--train", str(TINY), "--out",
                              str(out), "--set", "train.epochs=3"])
    assert bad.exit_code != 0 and "labeler.* keys only" in bad.output
