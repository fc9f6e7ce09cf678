"""Training: exact first-order gradient, fitting a tiny corpus, resume, gold-tree policies."""
import io
import json
from pathlib import Path

import numpy as np
import pytest
from oracle import all_trees, is_projective as oracle_is_projective

from bpparse import features as F
from bpparse.config import load_config
from bpparse.conll import read_conll, with_tags
from bpparse.encode import Vocabularies
from bpparse.model import Model, load_model
from bpparse.parse import evaluate_encoded, parse_encoded
from bpparse.scoring import encoded_scores
from bpparse.train import prepare_gold, projectivize, sentence_gradient, train

DATA = Path(__file__).resolve().parent / "data"
TINY = DATA / "en_ewt_train_tiny.conllu"
SMALL = {"features.hash_bits": 16, "features.second_order_hash_bits": 12, "features.label_hash_bits": 10}


def exact_log_likelihood(model, e, heads, single_root, margin=0.0):
    """log p(gold) by enumeration; with ``margin``, the softmax-margin objective: every tree t in
    the partition function scores ``margin`` more for each arc it gets wrong."""
    s = encoded_scores(model, e)
    n = e.tokens.shape[1] - 1
    labels = np.asarray(e.labels)
    gold = sum(s.arc[heads[m], m] + s.label_logp[heads[m], m, labels[m]] for m in range(1, n + 1))
    values = [sum(s.arc[t[m], m] + margin * (t[m] != heads[m]) for m in range(1, n + 1))
              for t in all_trees(n, False, single_root)]
    return gold - np.logaddexp.reduce(values)


@pytest.mark.slow
@pytest.mark.parametrize("single_root,margin", [(True, 0.0), (False, 0.0), (True, 0.7)])
def test_first_order_gradient_matches_finite_differences(single_root, margin):
    sentences = [s for s in read_conll(TINY) if s.n <= 5]
    vocabs = Vocabularies.build(list(read_conll(TINY)))
    config = load_config("first-order", {**SMALL, "features.fine_tags": True,
                                         "features.morph": False, "features.lemma": False,
                                         "features.gold_only": False, "model.single_root": single_root})
    model = Model(config, vocabs)
    rng = np.random.default_rng(1)
    model.theta = rng.normal(scale=0.3, size=model.theta.shape[0])
    e = model.encode(sentences[0])
    heads = np.asarray(e.heads, dtype=np.int64)
    attrs = F.sentence_attributes(e.tokens, model.fine_tags)
    grad = np.zeros_like(model.theta)
    dirty = np.zeros((grad.shape[0] >> F.DIRTY_SHIFT) + 1, dtype=np.uint8)
    sentence_gradient(attrs, model.weights, config.inference_settings("train"), heads,
                      np.asarray(e.labels), grad, dirty, 0.0, margin)
    touched = np.flatnonzero(grad)
    assert touched.size > 50
    base = model.theta.copy()
    eps = 1e-5
    for _ in range(4):
        v = np.zeros_like(base)
        v[touched] = rng.normal(size=touched.size)
        model.theta = base + eps * v
        up = exact_log_likelihood(model, e, heads, single_root, margin)
        model.theta = base - eps * v
        down = exact_log_likelihood(model, e, heads, single_root, margin)
        assert (up - down) / (2 * eps) == pytest.approx(grad @ v, rel=1e-5, abs=1e-7)
    # single coordinates too (a LINK weight and a label weight)
    for i in (touched[0], touched[-1]):
        v = np.zeros_like(base)
        v[i] = 1.0
        model.theta = base + eps * v
        up = exact_log_likelihood(model, e, heads, single_root, margin)
        model.theta = base - eps * v
        down = exact_log_likelihood(model, e, heads, single_root, margin)
        assert (up - down) / (2 * eps) == pytest.approx(grad[i], rel=1e-5, abs=1e-7)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["first-order", "second-order", "full", "childseq"])
def test_training_fits_a_tiny_corpus(tmp_path, name):
    config = load_config(name, {**SMALL, "train.epochs": 8 if name == "first-order" else 6,
                                "train.jobs": 2, "train.batch_size": 4})
    out = tmp_path / "m.bpm"
    model = train(config, TINY, out, progress=False, log=lambda msg: None)
    vocabs = model.vocabs
    encoded = [vocabs.encode(s) for s in read_conll(TINY)]
    scores = evaluate_encoded(model, encoded)
    assert scores["uas"] == 100.0
    assert scores["las"] > 95.0
    lines = [json.loads(x) for x in open(str(out) + ".log.jsonl")]
    assert [r["epoch"] for r in lines] == list(range(1, config.train.epochs + 1))
    assert lines[-1]["objective_per_word"] > lines[0]["objective_per_word"]
    back = load_model(out)
    assert back.meta["best_epoch"] == config.train.epochs
    assert np.array_equal(back.theta, model.theta)


@pytest.mark.slow
def test_resume_reaches_the_same_weights(tmp_path):
    over = {**SMALL, "train.jobs": 2, "train.batch_size": 3}
    full = train(load_config("second-order", {**over, "train.epochs": 3}), TINY, tmp_path / "a.bpm",
                 dev_path=TINY, progress=False, log=lambda m: None)
    train(load_config("second-order", {**over, "train.epochs": 1}), TINY, tmp_path / "b.bpm",
          dev_path=TINY, progress=False, log=lambda m: None)
    resumed = train(load_config("second-order", {**over, "train.epochs": 3}), TINY, tmp_path / "b.bpm",
                    dev_path=TINY, resume=True, progress=False, log=lambda m: None)
    assert np.array_equal(full.theta, resumed.theta)
    assert full.meta["best_epoch"] == resumed.meta["best_epoch"]
    assert len(open(tmp_path / "b.bpm.log.jsonl").readlines()) == 3
    # same seed and jobs -> identical; another seed -> different
    again = train(load_config("second-order", {**over, "train.epochs": 3}), TINY, tmp_path / "c.bpm",
                  dev_path=TINY, progress=False, log=lambda m: None)
    assert np.array_equal(full.theta, again.theta)
    other = train(load_config("second-order", {**over, "train.epochs": 3, "train.seed": 5}), TINY,
                  tmp_path / "d.bpm", dev_path=TINY, progress=False, log=lambda m: None)
    assert not np.array_equal(full.theta, other.theta)


def test_projectivize_lifts_to_a_projective_tree():
    rng = np.random.default_rng(3)
    n = 6
    trees = all_trees(n, projective=False, single_root=False)
    nonproj = [t for t in trees if not oracle_is_projective(t)]
    for t in [nonproj[i] for i in rng.choice(len(nonproj), 40, replace=False)]:
        new, lifted = projectivize(t)
        assert lifted >= 1 and oracle_is_projective(new)
        # lifting only moves a word up to an ancestor: every new head dominates the word
        for m in range(1, n + 1):
            v = t[m]
            anc = {v}
            while v > 0:
                v = t[v]
                anc.add(v)
            assert new[m] in anc | {t[m]}


@pytest.mark.slow
def test_gold_tree_policies_are_counted(tmp_path):
    class E:
        pass
    e = E()
    e.heads = np.array([-1, 2, 0, 4, 0, 2])  # two roots
    assert prepare_gold(e, True, False, "skip") == (None, "skipped_multiroot")
    assert prepare_gold(e, False, False, "skip")[1] == "ok"
    e.heads = np.array([-1, 3, 4, 0, 3])  # 1<-3 and 2<-4 cross
    assert prepare_gold(e, True, True, "skip") == (None, "skipped_nonprojective")
    heads, status = prepare_gold(e, True, True, "projectivize")
    assert status == "projectivized" and oracle_is_projective(heads)
    e.heads = np.array([-1, 2, -1])
    assert prepare_gold(e, True, False, "skip") == (None, "skipped_missing_heads")


@pytest.mark.slow
def test_cli_train_and_info(tmp_path):
    from click.testing import CliRunner

    from bpparse.cli import cli

    out = tmp_path / "m.bpm"
    args = ["train", "--config", "first-order", "--train", str(TINY), "--dev", str(TINY), "--out", str(out),
            "--epochs", "2", "--seed", "3", "--jobs", "1", "--no-progress"]
    for key, value in SMALL.items():
        args += ["--set", f"{key}={value}"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    model = load_model(out)
    assert model.config.train.epochs == 2 and model.config.train.seed == 3
    assert model.config.features.hash_bits == 16
    assert "dev UAS" in result.output
    # the temperatures are fitted on dev and stored
    assert model.calibration["dev"] == str(TINY)
    for key, t in (("HeadProb", model.head_temperature), ("LabelProb", model.label_temperature)):
        assert 0.25 <= t <= 16 and f"{key} temperature {t:g} fitted" in result.output
    info = CliRunner().invoke(cli, ["info", str(out)])
    assert info.exit_code == 0 and "first-order" in info.output and "best epoch" in info.output
    assert f"HeadProb   temperature {model.head_temperature:g} (fitted on dev" in info.output
    bad = tmp_path / "bad.bpm"
    bad.write_bytes(b"nonsense")
    info = CliRunner().invoke(cli, ["info", str(bad)])
    assert info.exit_code == 1 and "not a bpparse model" in info.output
    result = CliRunner().invoke(cli, ["train", "--config", "first-order", "--train", str(TINY), "--out",
                                      str(out), "--set", "train.constraint=FOREST"])
    assert result.exit_code == 1 and "unknown constraint" in result.output


@pytest.mark.slow
@pytest.mark.parametrize("constraint", ["PTREE", "EXACTLY1", "ATMOST1", "NOT2", "EXACTLY1+NO2CYCLE"])
def test_training_under_other_constraints(tmp_path, constraint):
    # Smith & Eisner Table 3: training (and parsing) with weaker constraints; decoding gives trees
    config = load_config("first-order", {**SMALL, "train.epochs": 6, "train.batch_size": 4,
                                         "train.constraint": constraint, "parse.constraint": constraint,
                                         "train.bp_iterations": 5, "parse.bp_iterations": 5})
    model = train(config, TINY, tmp_path / "m.bpm", progress=False, log=lambda msg: None)
    encoded = [model.vocabs.encode(s) for s in read_conll(TINY)]
    assert evaluate_encoded(model, encoded)["uas"] > 95.0
    heads, _ = parse_encoded(model, encoded[:1])[0]
    assert oracle_is_projective(heads) or constraint != "PTREE"


def test_kept_pairs_of_every_arc_are_all_pairs_in_order():
    from bpparse.graph import all_pairs
    from bpparse.scoring import kept_pairs

    for n in range(1, 7):
        pa, pb, n_grand = all_pairs(n)
        keep = ~np.eye(n + 1, dtype=bool)
        keep[:, 0] = False
        for grand, sib, single_root in ((True, True, True), (True, True, False),
                                        (True, False, True), (False, True, False)):
            on = np.zeros(pa.shape[0], dtype=bool)
            on[:n_grand] = grand
            # single root: ROOT's SIB factors (first arc from h = 0) are left out
            on[n_grand:] = sib & ~(single_root & (pa[n_grand:] < n + 1))
            got = kept_pairs(keep, grand, sib, single_root)
            np.testing.assert_array_equal(got[0], pa[on])
            np.testing.assert_array_equal(got[1], pb[on])
            assert got[2] == (n_grand if grand else 0)


def test_pruning_keeps_likely_and_gold_arcs_and_only_their_pairs():
    from oracle import brute_force_first_order

    from bpparse.scoring import kept_arcs, kept_pairs

    rng = np.random.default_rng(3)
    n = 6
    arc = rng.normal(scale=3.0, size=(n + 1, n + 1))
    np.fill_diagonal(arc, -np.inf)
    arc[:, 0] = -np.inf
    mu = brute_force_first_order(arc, projective=False, single_root=True)[0]
    gold = np.array([-1, 2, 0, 2, 3, 3, 5])
    keep = kept_arcs(arc, 0.05, True, gold)
    for m in range(1, n + 1):
        for h in range(n + 1):
            if h == m:
                assert not keep[h, m]
                continue
            wanted = mu[h, m] >= 0.05 or gold[m] == h or mu[h, m] == mu[:, m].max()
            assert keep[h, m] == wanted, (h, m, mu[h, m])
    pa, pb, n_grand = kept_pairs(keep, True, True, True)
    n1 = n + 1
    flat = keep.ravel()
    assert flat[pa].all() and flat[pb].all()
    # every pair over kept arcs is there: count GRAND g->h->m and SIB h->{m<s} (h > 0) directly
    grand = sum(keep[g, h] and keep[h, m] for h in range(1, n1) for g in range(n1) for m in range(1, n1)
                if len({g, h, m}) == 3)
    sib = sum(keep[h, m] and keep[h, s] for h in range(1, n1) for m in range(1, n1)
              for s in range(m + 1, n1))
    assert (n_grand, pa.shape[0] - n_grand) == (grand, sib)


@pytest.mark.slow
def test_training_log_dev_scores_equal_parse_then_eval(tmp_path):
    # the dev UAS / LAS training logs come from the parse pipeline itself, the over-long-sentence
    # first-order fallback included (issue 12): the dev file mixes short Bosque sentences with a
    # 201-word one, past the default limit of 100 words
    from click.testing import CliRunner

    from bpparse.cli import cli

    dev = tmp_path / "dev.conllu"
    dev.write_text((DATA / "pt_bosque_sample.conllu").read_text(encoding="utf-8")
                   + (DATA / "pt_bosque_long.conllu").read_text(encoding="utf-8"), encoding="utf-8")
    config = load_config("second-order", {**SMALL, "train.epochs": 2, "train.jobs": 1,
                                          "parse.prune": 0.01})
    out = tmp_path / "m.bpm"
    model = train(config, DATA / "pt_bosque_sample.conllu", out, dev_path=dev, progress=False,
                  log=lambda msg: None)
    logged = [json.loads(line) for line in open(str(out) + ".log.jsonl")]
    runner = CliRunner()
    parsed = runner.invoke(cli, ["parse", "-m", str(out), str(dev)])
    assert parsed.exit_code == 0, parsed.output
    assert "first-order inference" in parsed.stderr
    scored = runner.invoke(cli, ["eval", "--json", str(dev), "-"], input=parsed.stdout)
    assert scored.exit_code == 0, scored.output
    result = json.loads(scored.stdout)
    # the final model (parser, labeler, punctuation stage) scores what its metadata says, and the
    # best epoch logged the parser's own UAS (before the punctuation stage, which this data keeps)
    assert model.meta["dev_uas"] == pytest.approx(result["uas"], abs=0.006)
    assert model.meta["dev_las"] == pytest.approx(result["las"], abs=0.006)
    best = logged[model.meta["best_epoch"] - 1]
    assert model.meta["dev_uas_parser"] is not None
    assert best["dev_uas"] == pytest.approx(model.meta["dev_uas_parser"], abs=0.006)


def test_morph_templates_switch_on_with_the_treebanks_morphology():
    # features.morph and lemma = "auto" (the defaults): on for a treebank whose words carry 3
    # attribute values each, off for English (1.3 in the fixture); an explicit setting is kept
    from bpparse.train import _resolve_auto_features

    rich = "".join(f"{i}\tw{i}\tw\tNOUN\t_\tCase=Nom|Number=Sing|Person=3\t{i - 1}\tdep\t_\t_\n"
                   for i in range(1, 4)) + "\n"
    for sentences, expected in ((list(read_conll(DATA / "en_ewt_train_tiny.conllu")), False),
                                (list(read_conll(io.StringIO(rich))), True)):
        assert load_config("second-order").features.morph == "auto"
        resolved = _resolve_auto_features(load_config("second-order"), sentences)
        assert resolved.features.morph is expected
        assert resolved.features.lemma is expected  # lemma templates come with the morphology ones
        tagged = _resolve_auto_features(load_config("second-order", {"tagger.enabled": True}), sentences)
        assert tagged.features.morph is expected and tagged.features.lemma is False  # no lemmas predicted
        kept = _resolve_auto_features(load_config("second-order", {"features.morph": not expected}),
                                      sentences)
        assert kept.features.morph is (not expected)


def test_fine_tags_are_xpos_else_derived_from_feats_else_none(tmp_path):
    # features.fine_tags "auto": EWT has XPOS; Bosque has none but FEATS, so its fine tags are
    # derived from them; without either there are none. The model keeps the choice across saving.
    from bpparse.train import _resolve_auto_features

    bosque = list(read_conll(DATA / "pt_bosque_sample.conllu"))
    bare = [with_tags(s, feats=["_"] * (s.n + 1)) for s in bosque]
    for sentences, expected in ((list(read_conll(TINY)), True), (bosque, "derived"), (bare, False)):
        assert _resolve_auto_features(load_config("first-order"), sentences).features.fine_tags == expected
    out = tmp_path / "m.bpm"
    model = train(load_config("first-order", {**SMALL, "train.epochs": 2}), DATA / "pt_bosque_sample.conllu",
                  out, progress=False, log=lambda msg: None)
    assert model.config.features.fine_tags == "derived" and model.vocabs.derived_fine
    loaded = load_model(out)
    assert loaded.vocabs == model.vocabs and loaded.vocabs.derived_fine
    encoded = [loaded.encode(s) for s in bosque]
    assert np.array_equal(np.concatenate([e.tokens for e in encoded], axis=1),
                          np.concatenate([model.encode(s).tokens for s in bosque], axis=1))
    for (h1, l1), (h2, l2) in zip(parse_encoded(loaded, encoded), parse_encoded(model, encoded)):
        assert np.array_equal(h1, h2) and np.array_equal(l1, l2)
    with pytest.raises(ValueError, match="fine tags"):
        Model(load_config("first-order", {"features.fine_tags": "derived"}), Vocabularies.build(bosque))


def test_auto_epochs_follow_the_training_set_size_without_a_dev_file():
    from bpparse.train import _resolve_epochs

    config = load_config("second-order")
    assert config.train.epochs == "auto"
    # one epoch per 1,500 sentences, rounded up, in 2..10 (IMST, Bosque, EWT train sizes)
    sizes = {100: 2, 3435: 3, 7018: 5, 12544: 9, 40000: 10}
    assert {n: _resolve_epochs(config, n, False).train.epochs for n in sizes} == sizes
    assert _resolve_epochs(config, 100, True).train.epochs == 10  # dev: the best epoch is kept
    assert _resolve_epochs(config.replace({"train.epochs": 4}), 12544, False).train.epochs == 4


def test_rank_mask_emission():
    """Where emission puts a slot (`_index`): a plain mask gives the slot or -1, a `CompactSpace`
    rank mask the slot's rank among the set bits or -1, for every slot of a random mask; the space
    holds the kept slots in order, then the LABEL region."""
    from numba import njit

    from bpparse.features.hashing import _index

    @njit
    def indices(mask, ranked, n):
        out = np.empty(n, dtype=np.int64)
        for i in range(n):
            out[i] = _index(mask, ranked, i)
        return out

    rng = np.random.default_rng(5)
    layout = F.make_layout(10, 8, 8, 3, True, False, True)
    label_off, size = int(layout[F.LY_LAB_OFF]), int(layout[F.LY_SIZE])
    bits = rng.random(label_off) < 0.2
    mask = np.packbits(np.concatenate([bits, np.zeros(64, bool)]), bitorder="little").view(np.uint64)
    assert mask.shape[0] == (label_off >> 6) + 1
    slots = np.arange(label_off)
    assert np.array_equal(indices(mask, False, label_off), np.where(bits, slots, -1))
    assert np.array_equal(indices(np.empty(0, np.uint64), False, label_off), slots)
    space = F.compact_space(layout, mask)
    assert np.array_equal(indices(space.rank, True, label_off), np.where(bits, np.cumsum(bits) - 1, -1))
    assert np.array_equal(space.positions, np.concatenate([np.flatnonzero(bits), np.arange(label_off, size)]))
    assert space.sec_off == int(bits[:int(layout[F.LY_SEC_OFF])].sum())
    assert list(np.flatnonzero(space.layout != layout)) == [F.LY_LAB_OFF, F.LY_RANKED]
    assert int(space.layout[F.LY_LAB_OFF]) == bits.sum()
    vector = rng.normal(size=space.size) * (rng.random(space.size) < 0.5)
    full = F.dense_vector(F.dense_weights(True, space.layout, space.rank, vector, F.NO_LABEL_FILTER))
    assert full.shape == (size,) and np.array_equal(full[space.positions], vector)
    assert np.count_nonzero(full) == np.count_nonzero(vector)
    held, values = space.sparse(vector)
    assert np.array_equal(held, np.flatnonzero(full)) and np.array_equal(values, full[held])
    assert np.array_equal(space.entries(space.positions[::3]), np.arange(space.size)[::3])
    with pytest.raises(ValueError):
        space.entries(np.flatnonzero(~bits)[:1])
    every = F.compact_space(layout, np.empty(0, np.uint64))
    assert np.array_equal(every.positions, np.arange(size)) and every.sec_off == int(layout[F.LY_SEC_OFF])
    assert np.array_equal(indices(every.rank, True, label_off), slots)


@pytest.mark.parametrize("name,min_coef", [("second-order", 0.0), ("full", 0.0), ("childseq", 0.0),
                                           ("second-order", 0.05)])
def test_compact_gradient_is_the_slot_gradient_at_the_kept_slots(name, min_coef):
    """Training's vectors hold only the gold-feature mask's slots: a sentence's gradient computed
    there (features gathered a group at a time) equals the slot-space gradient (feature by
    feature) at those slots, and the slot-space one is 0 elsewhere; also when the terms of at
    most ``min_coef`` are skipped."""
    from bpparse.train import build_mask
    from bpparse.encode import pack

    sentences = list(read_conll(TINY))
    vocabs = Vocabularies.build(sentences)
    config = load_config(name, {**SMALL, "features.fine_tags": True, "features.morph": True,
                                "features.lemma": True})
    model = Model(config, vocabs)
    encoded = [model.encode(s) for s in sentences]
    tokens, offsets, heads, labels = pack(encoded, [np.asarray(e.heads, dtype=np.int64) for e in encoded])
    model.mask = build_mask(model, tokens, offsets, heads)
    space = F.compact_space(model.layout, model.mask)
    rng = np.random.default_rng(2)
    theta = rng.normal(scale=0.3, size=space.size)
    model.weights = F.dense_weights(model.fine_tags, space.layout, space.rank, theta, F.NO_LABEL_FILTER)
    model.theta = model.theta  # the full vector: scoring by slot, through the plain mask
    settings = config.inference_settings("train")
    compact = F.dense_weights(model.fine_tags, space.layout, space.rank, theta, F.NO_LABEL_FILTER)
    for e in encoded[:3]:
        attrs = F.sentence_attributes(e.tokens, model.fine_tags)
        args = (np.asarray(e.heads, dtype=np.int64), np.asarray(e.labels))
        slot_grad = np.zeros(model.size)
        slot_obj = sentence_gradient(attrs, model.weights, settings, *args, slot_grad,
                                     np.zeros((model.size >> F.DIRTY_SHIFT) + 1, np.uint8), min_coef, 0.0)
        grad = np.zeros(space.size)
        dirty = np.zeros((space.size >> F.DIRTY_SHIFT) + 1, np.uint8)
        obj = sentence_gradient(attrs, compact, settings, *args, grad, dirty, min_coef, 0.0)
        assert obj == slot_obj
        assert np.count_nonzero(grad) > 100
        assert np.array_equal(grad, slot_grad[space.positions])
        assert np.count_nonzero(slot_grad) == np.count_nonzero(grad)
        assert np.all(dirty[np.flatnonzero(grad) >> F.DIRTY_SHIFT] == 1)
