"""The tag chain (bpparse.kernels.chain) against brute-force enumeration, and the tagger cascade:
training, storage round trip, filling in missing tags."""
import io
import itertools
from collections import Counter, defaultdict
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from bpparse.cli import cli
from bpparse.conll import read_conll
from bpparse.errors import InputError, ModelFileError
from bpparse.features.store import csr_rows
from bpparse.kernels.chain import (
    AdaGrad,
    ColumnData,
    ColumnParams,
    chain_log_marginals,
    chain_marginals,
    chain_viterbi,
    column_loglik_grad,
    column_train_pass,
)
from bpparse.features import tags as FT
from bpparse.tagger import (
    LEXICON_FOLDS,
    LEXICON_SHARE,
    _train_lexicon,
    tag,
    tagger_from_arrays,
    tagger_to_arrays,
    train_tagger,
)
from bpparse.tagging import fill_tags, needs_tags

DATA = Path(__file__).parent / "data"
TINY = DATA / "en_ewt_train_tiny.conllu"


def brute_force(unary, trans):
    """(marginals (n, g), pair counts (g+1, g+1), logZ, argmax sequence) by enumerating sequences."""
    n, g = unary.shape
    marg = np.zeros((n, g))
    counts = np.zeros((g + 1, g + 1))
    scores = {}
    for seq in itertools.product(range(g), repeat=n):
        path = (g,) + seq + (g,)
        scores[seq] = sum(unary[i, t] for i, t in enumerate(seq)) + sum(
            trans[a, b] for a, b in zip(path, path[1:]))
    finite = {s: v for s, v in scores.items() if v > -np.inf}
    top = max(finite.values())
    logz = top + np.log(sum(np.exp(v - top) for v in finite.values()))
    for seq, v in finite.items():
        p = np.exp(v - logz)
        path = (g,) + seq + (g,)
        for i, t in enumerate(seq):
            marg[i, t] += p
        for a, b in zip(path, path[1:]):
            counts[a, b] += p
    best = max(finite, key=lambda s: (finite[s], tuple(-t for t in s)))
    return marg, counts, logz, np.array(best)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("scale", [1.0, 1e4])
def test_chain_against_enumeration(seed, scale):
    rng = np.random.default_rng(seed)
    n, g = 1 + seed % 5, 3
    unary = rng.normal(0, scale, (n, g))
    trans = rng.normal(0, scale, (g + 1, g + 1))
    if seed % 2:  # candidate restrictions and a forbidden bigram
        unary[rng.random((n, g)) < 0.3] = -np.inf
        unary[:, 0] = np.where(np.isinf(unary).all(1), 0.0, unary[:, 0])
        trans[1, 2] = -np.inf
    expected = brute_force(unary, trans)
    marg, counts, logz = chain_marginals(unary, trans)
    if expected[2] == -np.inf:
        assert logz == -np.inf
        return
    rel = max(1.0, abs(expected[2])) * 1e-9
    assert logz == pytest.approx(expected[2], abs=rel)
    np.testing.assert_allclose(marg, expected[0], atol=1e-9)
    np.testing.assert_allclose(counts, expected[1], atol=1e-9)
    log_marg, logz2 = chain_log_marginals(unary, trans)
    np.testing.assert_allclose(np.exp(log_marg), expected[0], atol=1e-9)
    if scale == 1.0:  # continuous scores: no ties
        np.testing.assert_array_equal(chain_viterbi(unary, trans), expected[3])


def test_long_chains_with_large_scores_stay_finite():
    rng = np.random.default_rng(1)
    unary = rng.normal(0, 1e4, (250, 17))
    trans = rng.normal(0, 1e4, (18, 18))
    marg, counts, logz = chain_marginals(unary, trans)
    assert np.isfinite(logz) and np.isfinite(marg).all()
    np.testing.assert_allclose(marg.sum(1), 1.0, atol=1e-9)


@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("l2", [0.0, 0.1])
def test_a_training_step_follows_the_full_gradient(order, l2):
    """column_train_pass sums a sentence's gradient over the tokens' allowed tags only and, without
    L2, updates a block on its tokens' allowed tags only: the step must still be AdaGrad's on the
    full gradient (`column_loglik_grad`) over the touched blocks and the transitions."""
    rng = np.random.default_rng(7 + order)
    g, rows, nblocks, K, n = 6, 3, 12, 4, 9
    allowed = rng.random((rows, g)) < 0.5
    allowed[:, 0] = True
    cond = rng.integers(-1, rows, n)
    gold = np.array([rng.choice(np.flatnonzero(allowed[c])) if c >= 0 else rng.integers(g) for c in cond])
    blocks = rng.integers(-1, nblocks, (n, K))
    bases = np.where(blocks >= 0, blocks * g, -1)
    data = ColumnData(bases, np.array([0, n]), gold, cond, allowed,
                      *csr_rows(np.flatnonzero(allowed), g, rows))
    empty = (np.empty(0, np.int32), np.empty(0, np.int16), np.empty(0, np.float32))
    theta0 = rng.normal(size=nblocks * g + (g + 1) ** 2)
    grad = np.zeros_like(theta0)
    column_loglik_grad(data, ColumnParams(theta0.copy(), g, order, *empty), grad)
    theta = theta0.copy()
    opt = AdaGrad(np.full_like(theta, 0.5), np.zeros_like(theta), 0.1, 1e-8, l2, 0.0)
    column_train_pass(data, ColumnParams(theta, g, order, *empty), opt, np.array([0]), 1.0)
    moved = np.zeros(theta.shape[0], dtype=bool)
    for b in np.unique(bases[bases >= 0]):
        moved[b:b + g] = True
    if order == 1:
        moved[nblocks * g:] = True
    step = grad - l2 * theta0
    expected = np.where(moved & (step != 0), theta0 + 0.1 * step / (np.sqrt(0.5 + step ** 2) + 1e-8), theta0)
    np.testing.assert_allclose(theta, expected, rtol=0, atol=1e-12)
    assert np.count_nonzero(theta != theta0) > 2 * g  # the step means something


@pytest.fixture(scope="module")
def trained():
    sentences = list(read_conll(TINY))
    return sentences, train_tagger(sentences, epochs=8, hash_bits=14)


def test_tagger_learns_its_training_data(trained):
    sentences, tagger = trained
    assert set(tagger.columns) == {"upos", "xpos", "feats"}
    tagged = tag(tagger, sentences)
    for name in ("upos", "xpos", "feats"):
        gold = [t for s in sentences for t in getattr(s, name)[1:]]
        pred = [t for x in tagged for t in getattr(x, name)]
        assert np.mean(np.array(gold) == np.array(pred)) > 0.9, name
    for x in tagged:
        np.testing.assert_allclose(x.upos_prob.sum(1), 1.0, atol=1e-9)


def test_sparse_updates_keep_the_tagger_small_and_accurate(trained):
    """min_update: weights whose gradients never exceed it stay exactly 0, so the stored tagger
    holds fewer weights, and it still tags its training data."""
    sentences, dense = trained
    sparse = train_tagger(sentences, epochs=8, hash_bits=14, min_update=0.01)
    for name in ("upos", "xpos", "feats"):
        assert np.count_nonzero(sparse.columns[name].theta) < \
            0.9 * np.count_nonzero(dense.columns[name].theta), name
    tagged = tag(sparse, sentences)
    for name in ("upos", "xpos", "feats"):
        gold = [t for s in sentences for t in getattr(s, name)[1:]]
        pred = [t for x in tagged for t in getattr(x, name)]
        assert np.mean(np.array(gold) == np.array(pred)) > 0.9, name


def test_stored_tagger_tags_exactly_as_the_trained_one(trained):
    sentences, tagger = trained
    meta, arrays = tagger_to_arrays(tagger)
    loaded = tagger_from_arrays(meta, arrays)
    for a, b in zip(tag(tagger, sentences), tag(loaded, sentences), strict=True):
        assert (a.upos, a.xpos, a.feats) == (b.upos, b.xpos, b.feats)
        np.testing.assert_array_equal(a.upos_prob, b.upos_prob)
    for name, m in loaded.columns.items():  # tags with the nonzero weights only
        p = m.params()
        assert p.row_starts.shape == (m.nblocks + 1,) and p.theta.shape == ((m.g + 1) ** 2,)
        assert p.row_values.shape[0] == np.count_nonzero(tagger.columns[name].theta[:-p.theta.shape[0]])
    resaved = tagger_to_arrays(loaded)[1]  # a loaded tagger stores the same arrays
    assert all(np.array_equal(resaved[k], a) for k, a in arrays.items())
    assert loaded.columns["upos"].theta.dtype == np.float32  # half the memory, same values


def test_training_over_the_touched_blocks_gives_the_weights_of_training_over_all(monkeypatch):
    """Columns train over only the weight blocks their training tokens touch (renumbered, dev
    tokens' other blocks switched off): the same weights as training over every block."""
    import bpparse.tagger as T

    sentences = list(read_conll(TINY))
    train, dev = sentences[:-8], sentences[-8:]
    options = dict(epochs=3, hash_bits=14, dev=dev, min_count=2, min_update=0.01)
    compact = train_tagger(train, **options)
    used = []
    touched = T._touched_blocks

    def counting(*args):
        blocks, dev_data = touched(*args)
        used.append(blocks.shape[0])
        return blocks, dev_data

    monkeypatch.setattr(T, "_touched_blocks", counting)
    monkeypatch.setattr(T, "_train_column", partial(T._train_column, compact=False))
    everything = train_tagger(train, **options)
    assert used == [1 << 14, 1 << 14, 1 << 12]  # every block of UPOS, XPOS, FEATS
    a, b = tagger_to_arrays(compact)[1], tagger_to_arrays(everything)[1]
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    for name, m in compact.columns.items():
        pos = m.nonzero()[0]
        blocks = np.unique(pos[pos < m.nblocks * m.g] // m.g)
        assert 0 < blocks.shape[0] < m.nblocks // 2, name  # the comparison means something


def test_stored_tagger_with_a_wrong_weight_count_is_refused(trained):
    _, tagger = trained
    meta, arrays = tagger_to_arrays(tagger)
    meta["columns"][0]["size"] += 1
    with pytest.raises(ModelFileError, match="m.bpm: malformed model file: tagger column upos"):
        tagger_from_arrays(meta, arrays, source="m.bpm")


@pytest.mark.parametrize("deltas", [[10**9], [3, 0]])
def test_stored_tagger_weights_out_of_range_or_repeated_are_refused(trained, deltas):
    _, tagger = trained
    meta, arrays = tagger_to_arrays(tagger)
    arrays["upos.deltas"] = np.array(deltas, dtype=np.uint32)
    arrays["upos.values"] = np.ones(len(deltas), dtype=np.float16)
    loaded = tagger_from_arrays(meta, arrays, source="m.bpm")
    with pytest.raises(ModelFileError, match="m.bpm: malformed model file: tagger column upos"):
        loaded.columns["upos"].theta


def _reference_class(counter):
    """A word's (ambiguity class, top tag) from its tag Counter, by the documented rule."""
    total = sum(counter.values())
    members = sorted(t for t, c in counter.items() if c >= LEXICON_SHARE * total)
    return tuple(members), max(sorted(counter), key=lambda t: counter[t])


def test_lexicon_features_of_training_tokens_come_from_the_other_folds():
    sentences = [s for s in read_conll(TINY) if s.n > 0]
    attrs, starts = FT.token_attributes(sentences)
    tags = sorted({u for s in sentences for u in s.upos[1:]})
    gold = np.array([tags.index(u) for s in sentences for u in s.upos[1:]])
    lexicon = _train_lexicon(attrs, starts, gold, tags)
    # every value names one class: the same set of tags gives the same value, others differ
    amb_of, top_of = {}, {}

    def check(value, key, seen):
        assert seen.setdefault(key, value) == value and \
            sum(v == value for v in seen.values()) == 1, key

    for k in range(LEXICON_FOLDS):
        counts = defaultdict(Counter)
        for j, s in enumerate(sentences):
            if j % LEXICON_FOLDS != k:
                for f, u in zip(s.forms[1:], s.upos[1:]):
                    counts[f.lower()][u] += 1
        for j in range(k, len(sentences), LEXICON_FOLDS):
            for i, f in enumerate(sentences[j].forms[1:]):
                row = attrs[starts[j] + i]
                if f.lower() not in counts:
                    assert row[FT.T_AMB] == row[FT.T_TOP] == FT.UNKNOWN, f
                    continue
                members, top = _reference_class(counts[f.lower()])
                check(row[FT.T_AMB], members, amb_of)
                check(row[FT.T_TOP], top, top_of)
    # the stored lexicon has every training word, with its classes over all the data
    counts = defaultdict(Counter)
    for s in sentences:
        for f, u in zip(s.forms[1:], s.upos[1:]):
            counts[f.lower()][u] += 1
    assert sorted(lexicon.forms) == sorted(FT.string_id(w) for w in counts)
    new = np.zeros_like(attrs)
    new[:, FT.T_LOWER] = attrs[:, FT.T_LOWER]
    new[-1, FT.T_LOWER] = FT.string_id("a word of no training sentence")
    FT.fill_lexicon(new, *lexicon)
    assert new[-1, FT.T_AMB] == new[-1, FT.T_TOP] == FT.UNKNOWN
    words = [f.lower() for s in sentences for f in s.forms[1:]]
    for w, row in zip(words[:-1], new[:-1]):
        members, top = _reference_class(counts[w])
        check(row[FT.T_AMB], members, amb_of)
        check(row[FT.T_TOP], top, top_of)


def test_tagger_without_lexicon_from_an_older_file_still_tags(trained):
    """A tagger stored before the lexicon (format version 1) loads and tags as it was trained."""
    sentences, _ = trained
    old = train_tagger(sentences[:40], epochs=2, hash_bits=12, lexicon=())
    meta, arrays = tagger_to_arrays(old)
    assert old.lexicon is None and "lexicon" not in meta
    meta["version"] = 1
    for c in meta["columns"]:
        del c["use_lexicon"]
    loaded = tagger_from_arrays(meta, arrays)
    for a, b in zip(tag(old, sentences), tag(loaded, sentences), strict=True):
        assert (a.upos, a.xpos, a.feats) == (b.upos, b.xpos, b.feats)


@pytest.mark.parametrize("damage", ["short", "unsorted", "missing"])
def test_stored_lexicon_that_does_not_fit_is_refused(trained, damage):
    _, tagger = trained
    meta, arrays = tagger_to_arrays(tagger)
    assert tagger.columns["upos"].use_lexicon and meta["lexicon"] == len(tagger.lexicon.forms)
    if damage == "short":
        arrays["lexicon.amb"] = arrays["lexicon.amb"][:-1]
    elif damage == "unsorted":
        arrays["lexicon.forms"] = arrays["lexicon.forms"][::-1].copy()
    else:
        del meta["lexicon"]
    with pytest.raises(ModelFileError, match="m.bpm: malformed model file: .*lexicon"):
        tag(tagger_from_arrays(meta, arrays, source="m.bpm"), list(read_conll(TINY))[:1])


def test_fill_tags_keeps_what_the_user_gave(trained):
    sentences, tagger = trained
    s = sentences[0]
    assert not needs_tags(tagger, s)
    (kept,), (probs,) = fill_tags(tagger, [s])
    assert kept is s and probs is None
    # UPOS of word 1 missing, the rest given: only that value is predicted
    lines = list(s.lines)
    cols = lines[s.word_lines[1]].split("\t")
    cols[3] = "_"
    lines[s.word_lines[1]] = "\t".join(cols)
    (partial,) = read_conll(iter([line + "\n" for line in lines]))
    assert needs_tags(tagger, partial)
    (filled,), (beliefs,) = fill_tags(tagger, [partial])
    probs, dist = beliefs
    assert filled.upos[2:] == s.upos[2:] and filled.xpos == s.xpos and filled.feats == s.feats
    assert filled.upos[1] != "_" and 0 < probs[1] <= 1 and np.isnan(probs[2:]).all()
    assert dist[1].sum() == pytest.approx(1.0) and np.isnan(dist[2:]).all()
    assert probs[1] == dist[1, tagger.upos_tags.index(filled.upos[1])]
    (retagged,), _ = fill_tags(tagger, [partial], retag=True)
    assert retagged.upos[1:] == tag(tagger, [s])[0].upos


# ---------------------------------------------------------------- parsing with the model's tagger

@pytest.fixture(scope="module")
def tagged_model(tmp_path_factory):
    """A first-order model with a tagger, trained on the tiny fixture and read back from its file."""
    from bpparse.config import load_config
    from bpparse.model import load_model
    from bpparse.train import train

    path = tmp_path_factory.mktemp("tagged") / "m.bpm"
    config = load_config("first-order", {"features.hash_bits": 16, "train.epochs": 2,
                                         "tagger.enabled": True, "tagger.epochs": 4,
                                         "tagger.hash_bits": 14, "tagger.feats_hash_bits": 12})
    train(config, TINY, path, progress=False, log=lambda message: None)
    model = load_model(path)
    model.path = path
    return model


def strip(sentence, columns=(3, 4, 5), words=None):
    """The sentence's CoNLL-U lines with the given columns of the given words (all) set to _."""
    lines = list(sentence.lines)
    for i in words or range(1, sentence.n + 1):
        cols = lines[sentence.word_lines[i]].split("\t")
        for c in columns:
            cols[c] = "_"
        lines[sentence.word_lines[i]] = "\t".join(cols)
    return "\n".join(lines) + "\n\n"


def test_the_model_file_keeps_its_tagger(tagged_model):
    sentences = list(read_conll(TINY))
    assert tagged_model.tagger is not None
    assert set(tagged_model.tagger.columns) == {"upos", "xpos", "feats"}
    assert all(t.upos for t in tag(tagged_model.tagger, sentences))
    result = CliRunner().invoke(cli, ["info", str(tagged_model.path)])
    assert "tagger     UPOS (13 values), XPOS (" in result.output


def test_a_forged_lexicon_size_is_refused_when_the_model_loads(tagged_model, tmp_path):
    from bpparse.model import load_model
    from test_model import forge

    def grow(header):
        header["tagger"]["lexicon"] += 1

    forged = forge(tagged_model.path, tmp_path / "m.bpm", grow)
    with pytest.raises(ModelFileError, match="m.bpm: malformed model file: the tagger's lexicon "
                                             "claims [0-9]+ words"):
        load_model(forged)


def test_a_loaded_tagger_reads_its_weights_from_the_file_when_first_used(tagged_model, tmp_path):
    """The loaded model keeps no compressed payload: the tagger's columns are read again from the
    file on first use, and a file that changed in between is refused, not mixed with the parser."""
    import shutil

    from bpparse.model import load_model, save_model

    sentences = list(read_conll(TINY))[:5]
    path = tmp_path / "m.bpm"
    shutil.copy(tagged_model.path, path)
    first, second = load_model(path), load_model(path)
    assert [t.upos for t in tag(first.tagger, sentences)] == \
        [t.upos for t in tag(tagged_model.tagger, sentences)]
    first.meta = {**(first.meta or {}), "note": "another model"}
    save_model(first, path)  # after tagging: the columns, not kept, are read from the file again
    with pytest.raises(ModelFileError, match="m.bpm: the model file has changed since it was loaded"):
        tag(second.tagger, sentences)
    assert [t.upos for t in tag(load_model(path).tagger, sentences)] == \
        [t.upos for t in tag(tagged_model.tagger, sentences)]


def test_untagged_conllu_gets_the_taggers_tags_and_keeps_the_given_ones(tagged_model):
    from bpparse.parse import parse_sentences

    gold = list(read_conll(TINY))[:4]
    text = strip(gold[0]) + strip(gold[1], columns=(3,), words=[2]) + "".join(
        strip(s, columns=()) for s in gold[2:])
    parsed = parse_sentences(tagged_model, text, marginals=True)
    predicted = tag(tagged_model.tagger, gold)
    out = [p.tokens for p in parsed]
    assert [t["upos"] for t in out[0]] == predicted[0].upos              # untagged: all predicted
    assert [t["xpos"] for t in out[0]] == predicted[0].xpos
    assert [t["upos"] for t in out[1]] == [predicted[1].upos[1] if i == 2 else u  # one word
                                           for i, u in enumerate(gold[1].upos[1:], 1)]
    assert [t["xpos"] for t in out[1]] == gold[1].xpos[1:]
    for p, s in zip(parsed[2:], gold[2:]):                               # tagged: kept
        assert p.sentence.upos == s.upos and p.upos_probs is None
        assert "UposProb" not in p.text
    assert "UposProb=" in parsed[0].text
    uposprob = [float(t["misc"]["UposProb"]) for t in out[1] if t["misc"] and "UposProb" in t["misc"]]
    assert len(uposprob) == 1 and 0 < uposprob[0] <= 1
    retagged = parse_sentences(tagged_model, "".join(strip(s, columns=()) for s in gold), retag=True)
    assert [p.sentence.upos[1:] for p in retagged] == [t.upos for t in predicted]


def test_text_and_token_lists_parse_into_full_conllu(tagged_model, tmp_path):
    tokens = [["The", "cat", "sat", "on", "the", "mat", "."], ["Colorless", "ideas", "sleep"]]
    by_list = tagged_model.parse(tokens)
    text = tmp_path / "in.txt"
    text.write_text("\n".join(" ".join(t) for t in tokens) + "\n")
    try:
        runner = CliRunner(mix_stderr=False)  # click < 8.2 mixes stderr into stdout by default
    except TypeError:
        runner = CliRunner()
    result = runner.invoke(cli, ["parse", "-m", str(tagged_model.path), "--format", "text",
                                      str(text)])
    assert result.exit_code == 0, result.output
    stdout = result.stdout
    back = list(read_conll(io.StringIO(stdout)))
    assert [s.forms[1:] for s in back] == tokens
    assert all("_" not in s.upos[1:] and s.heads[1:].min() >= 0 for s in back)
    assert "".join(p.text for p in by_list) == stdout


def test_a_model_without_tagger_names_the_untagged_word():
    from bpparse.parse import parse_sentences

    from bpparse.model import load_model

    model = load_model(None)
    model.tagger = None
    (s,) = list(read_conll(TINY))[:1]
    with pytest.raises(InputError, match=r":\d+: UPOS is '_' and this model has no tagger"):
        parse_sentences(model, strip(s))


def test_the_bundled_model_parses_plain_text():
    # the README's first example: tokens in, full CoNLL-U out, tags and a tree for every word
    try:
        runner = CliRunner(mix_stderr=False)
    except TypeError:
        runner = CliRunner()
    result = runner.invoke(cli, ["parse", "--format", "text", "-"], input="The cat sat on the mat .\n")
    assert result.exit_code == 0, result.output
    (s,) = read_conll(io.StringIO(result.stdout))
    assert s.forms[1:] == "The cat sat on the mat .".split()
    assert s.upos[1:] == ["DET", "NOUN", "VERB", "ADP", "DET", "NOUN", "PUNCT"]
    assert s.heads[1:].tolist() == [2, 3, 0, 6, 6, 3, 3]


def test_what_counts_as_missing(trained):
    from bpparse.tagging import missing

    sentences, tagger = trained
    s = sentences[0]
    n = s.n
    none = [False] * (n + 1)

    def lacks(text):
        (sentence,) = read_conll(io.StringIO(text))
        return missing(tagger, sentence)

    assert lacks(strip(s, columns=())) == {"upos": none, "xpos": none, "feats": none}
    assert lacks(strip(s)) == {name: [False] + [True] * n for name in ("upos", "xpos", "feats")}
    one = [False, True] + [False] * (n - 1)
    assert lacks(strip(s, columns=(3,), words=[1])) == {"upos": one, "xpos": none, "feats": none}
    assert lacks(strip(s, columns=(3, 4), words=[1])) == {"upos": one, "xpos": one, "feats": none}
    assert lacks(strip(s, columns=(5,))) == {"upos": none, "xpos": none, "feats": none}  # no features
    assert lacks(strip(s, columns=(4, 5))) == {"upos": none, "xpos": [False] + [True] * n,
                                               "feats": [False] + [True] * n}  # UPOS only given
