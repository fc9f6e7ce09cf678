"""Model file: round trip, clear failures on foreign, truncated, corrupted or other-version files."""
import struct
from pathlib import Path

import numpy as np
import pytest

from bpparse import features as F
from bpparse.config import load_config
from bpparse.conll import read_conll
from bpparse.encode import Vocabularies
from bpparse.errors import ModelFileError
from bpparse.parse import parse_encoded
from bpparse.scoring import encoded_scores
from bpparse.model import FORMAT_VERSION, MAGIC, Model, load_model, mask_words, round_weights, save_model

DATA = Path(__file__).resolve().parent / "data"


def small_model(config_name="full"):
    sentences = list(read_conll(DATA / "en_ewt_train_tiny.conllu"))
    vocabs = Vocabularies.build(sentences)
    config = load_config(config_name, {"features.hash_bits": 14, "features.second_order_hash_bits": 10,
                                       "features.label_hash_bits": 8, "features.fine_tags": True,
                                       "features.morph": False, "features.lemma": False})
    rng = np.random.default_rng(0)
    model = Model(config, vocabs, meta={"train_file": "x.conllu"})
    theta = np.where(rng.random(model.theta.shape[0]) < 0.3, rng.normal(size=model.theta.shape[0]), 0.0)
    model.theta = round_weights(theta)
    model.mask = rng.integers(0, 2**63, size=mask_words(model.layout), dtype=np.uint64)
    return model, sentences


def test_round_trip(tmp_path):
    model, sentences = small_model()
    path = tmp_path / "m.bpm"
    size = save_model(model, path)
    assert path.stat().st_size == size
    back = load_model(path)
    assert back.config == model.config
    assert back.vocabs == model.vocabs
    # every weight scoring reads comes back; those the gold-feature mask hides are dropped on load
    label_off = int(model.layout[F.LY_LAB_OFF])
    read = np.ones(model.theta.shape[0], dtype=bool)
    read[:label_off] = np.unpackbits(model.mask.view(np.uint8), bitorder="little")[:label_off]
    assert 0 < read.sum() < read.shape[0]
    assert np.array_equal(back.theta, np.where(read, model.theta, 0.0))
    assert np.array_equal(back.mask, model.mask)
    assert back.meta == model.meta
    e = model.encode(sentences[0])
    a, b = encoded_scores(model, e), encoded_scores(back, e)
    for x, y in zip(a, b):
        if isinstance(x, tuple):  # the CHILDSEQ record
            assert all(np.array_equal(u, v) for u, v in zip(x, y))
        else:
            assert np.array_equal(x, y)
    # the sparse file is much smaller than the dense float64 vector
    assert size < model.theta.nbytes / 2


def test_saved_model_parses_identically(tmp_path):
    model, sentences = small_model("second-order")
    save_model(model, tmp_path / "m.bpm")
    back = load_model(tmp_path / "m.bpm")
    encoded = [model.encode(s) for s in sentences[:6]]
    for (h1, l1), (h2, l2) in zip(parse_encoded(model, encoded), parse_encoded(back, encoded)):
        assert np.array_equal(h1, h2) and np.array_equal(l1, l2)
        assert h1[0] == -1 and sorted(h1[1:]) != list(range(1, len(h1)))  # a real head array


def test_a_loaded_model_reads_its_gold_feature_mask_from_its_file_when_asked(tmp_path):
    """Loading keeps no copy of the mask (parsing never reads it): `Model.mask` reads it from the
    file on first use, once, and refuses a file that changed since the model was loaded."""
    model, _ = small_model()
    path = tmp_path / "m.bpm"
    save_model(model, path)
    first, second = load_model(path), load_model(path)
    assert np.array_equal(first.mask, model.mask)
    save_model(small_model("first-order")[0], path)
    with pytest.raises(ModelFileError, match="m.bpm: the model file has changed since it was loaded"):
        second.mask
    assert np.array_equal(first.mask, model.mask)


def test_bad_files_fail_clearly(tmp_path):
    model, _ = small_model("first-order")
    good = tmp_path / "m.bpm"
    save_model(model, good)
    data = good.read_bytes()

    other = tmp_path / "other.bpm"
    other.write_bytes(b"hello, this is not a model\n" * 10)
    with pytest.raises(ModelFileError, match="not a bpparse model"):
        load_model(other)

    for cut in (len(MAGIC) + 2, len(MAGIC) + 10, len(data) // 2, len(data) - 5):
        trunc = tmp_path / f"t{cut}.bpm"
        trunc.write_bytes(data[:cut])
        with pytest.raises(ModelFileError, match="truncated|checksum"):
            load_model(trunc)

    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0xFF
    bad = tmp_path / "flip.bpm"
    bad.write_bytes(bytes(flipped))
    with pytest.raises(ModelFileError, match="checksum"):
        load_model(bad)

    version = bytearray(data)
    version[len(MAGIC):len(MAGIC) + 4] = struct.pack("<I", FORMAT_VERSION + 1)
    v = tmp_path / "v.bpm"
    v.write_bytes(bytes(version))
    with pytest.raises(ModelFileError, match="format version"):
        load_model(v)

    with pytest.raises(ModelFileError, match="not found"):
        load_model(tmp_path / "missing.bpm")


def test_describe_reports_the_model(tmp_path):
    model, _ = small_model()
    d = model.describe()
    assert d["name"] == "full" and d["factors"] == ["LINK", "GRAND", "SIB", "NOCROSS"]
    assert d["labels"] == len(model.labels) > 5
    assert d["nonzero_weights"] == int(np.count_nonzero(model.theta))
    assert d["meta"]["train_file"] == "x.conllu"


def forge(path, out, edit_header=None, payload=None, version=FORMAT_VERSION):
    """Rewrite a model file with an edited header / payload and a recomputed checksum (anyone can)."""
    import hashlib
    import json

    from bpparse.model import read_header

    header, old_payload = read_header(path)
    if edit_header:
        edit_header(header)
    payload = old_payload if payload is None else payload
    head = json.dumps(header, sort_keys=True).encode("utf-8")
    body = b"".join([MAGIC, struct.pack("<I", version), struct.pack("<Q", len(head)), head,
                     struct.pack("<Q", len(payload)), payload])
    out.write_bytes(body + hashlib.sha256(body).digest())
    return out


def test_version_1_files_load_the_same_weights(tmp_path):
    """Version 1 stored delta-coded positions; version 2 the held bits: the same compact store."""
    import io

    from bpparse.model import _stored_weights

    model, sentences = small_model("second-order")
    save_model(model, tmp_path / "m.bpm")
    nz, codebook, codes = _stored_weights(model.theta)
    buf = io.BytesIO()
    np.savez_compressed(buf, deltas=F.delta_code(nz), values=codes, codebook=codebook, mask=model.mask)
    old = load_model(forge(tmp_path / "m.bpm", tmp_path / "v1.bpm", payload=buf.getvalue(), version=1))
    new = load_model(tmp_path / "m.bpm")
    for name in ("codes", "codebook"):
        assert np.array_equal(getattr(old.weights, name), getattr(new.weights, name)), name
    assert (old.describe()["format_version"], new.describe()["format_version"]) == (1, 2)
    # each slot holds the code the file stores for it (+ 1), 0 where it stores none or where the
    # gold-feature mask hides the LINK+SECOND slot
    label_off = int(model.layout[F.LY_LAB_OFF])
    expected = np.zeros(int(model.layout[F.LY_SIZE]), dtype=np.uint8)
    mask = model.mask
    for slot, code in zip(nz.tolist(), codes.tolist()):
        if slot >= label_off or not mask.shape[0] or (int(mask[slot >> 6]) >> (slot & 63)) & 1:
            expected[slot] = code + 1
    assert np.array_equal(new.weights.codes, expected)
    assert np.count_nonzero(expected[:label_off]) > 100


def _v2_payload(model, **replace):
    import io

    from bpparse.model import _stored_weights

    nz, codebook, codes = _stored_weights(model.theta)
    held, codes, labels = F.held_arrays(nz, codes, model.layout, model.mask)
    arrays = dict(held=held, values=codes, labels=labels, codebook=codebook, mask=model.mask)
    arrays.update(replace)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue(), arrays


def test_held_weights_that_do_not_fit_are_refused(tmp_path):
    model, _ = small_model("first-order")
    save_model(model, tmp_path / "m.bpm")
    payload, good = _v2_payload(model)
    assert np.array_equal(load_model(forge(tmp_path / "m.bpm", tmp_path / "ok.bpm", payload=payload)).theta,
                          load_model(tmp_path / "m.bpm").theta)
    held, codes, mask = good["held"], good["values"], model.mask[:good["held"].shape[0]]

    def add_bit(bits, words):  # the lowest slot of the first word with one in ``words``
        w = int(np.flatnonzero(words)[0])
        slot = int(np.flatnonzero(np.unpackbits(words[w:w + 1].view(np.uint8), bitorder="little"))[0])
        bits = bits.copy()
        bits[w] |= np.uint64(1) << np.uint64(slot)
        return bits

    cases = [
        ("payload arrays", dict(held=held[:-1])),
        ("payload arrays", dict(labels=good["labels"][:-1])),
        (f"{codes.shape[0]} weights for {codes.shape[0] + 1} held slots", dict(held=add_bit(held, mask & ~held))),
        ("codes do not fit their codebook", dict(values=np.full_like(codes, 255))),
        ("held bits stored as int64", dict(held=held.view(np.int64))),
    ]
    for message, replace in cases:
        bad = forge(tmp_path / "m.bpm", tmp_path / "bad.bpm", payload=_v2_payload(model, **replace)[0])
        with pytest.raises(ModelFileError, match=f"malformed model file: .*{message}"):
            load_model(bad)
    # parsing never reads the mask: held bits outside it are refused where it is read (training,
    # saving)
    outside = dict(held=add_bit(held, ~mask), values=np.append(codes, codes[:1]))
    bad = load_model(forge(tmp_path / "m.bpm", tmp_path / "bad.bpm", payload=_v2_payload(model, **outside)[0]))
    with pytest.raises(ModelFileError, match="malformed model file: .*outside the gold-feature mask"):
        bad.mask
    assert np.array_equal(load_model(tmp_path / "m.bpm").mask, model.mask)
    import io

    buf = io.BytesIO()  # neither held bits nor positions
    np.savez(buf, values=codes, codebook=good["codebook"], mask=model.mask)
    with pytest.raises(ModelFileError, match="malformed model file: payload arrays"):
        load_model(forge(tmp_path / "m.bpm", tmp_path / "none.bpm", payload=buf.getvalue()))


def test_forged_counts_fail_before_allocating(tmp_path):
    # issue 15: a header claiming 10^13 weights used to end in a MemoryError traceback
    import io
    import time

    model, _ = small_model("first-order")
    save_model(model, tmp_path / "m.bpm")
    big = forge(tmp_path / "m.bpm", tmp_path / "big.bpm", lambda h: h.update(size=10**13))
    start = time.perf_counter()
    with pytest.raises(ModelFileError, match="malformed model file: header says 10000000000000 weights"):
        load_model(big)
    assert time.perf_counter() - start < 5.0
    # a config whose layout is that large, with the header's size and layout made to agree with it
    def huge(h):
        h["config"]["features"]["label_hash_bits"] = 30
        h["size"] = (1 << 14) + (1 << 10) + (1 << 30) * len(model.labels)
    with pytest.raises(ModelFileError, match="malformed model file: header claims [0-9,]+ weight slots"):
        load_model(forge(tmp_path / "m.bpm", tmp_path / "huge.bpm", huge))
    # payload arrays whose own headers claim more than the config allows
    nz = np.flatnonzero(model.theta)
    buf = io.BytesIO()
    np.savez_compressed(buf, deltas=np.ones(nz.size + 10**6, dtype=np.uint32),
                        values=np.ones(nz.size + 10**6, dtype=np.float16), mask=model.mask)
    with pytest.raises(ModelFileError, match="payload arrays"):
        load_model(forge(tmp_path / "m.bpm", tmp_path / "arrays.bpm", payload=buf.getvalue()))
    # positions past the end
    buf = io.BytesIO()
    np.savez_compressed(buf, deltas=np.array([model.theta.shape[0] + 5], dtype=np.uint32),
                        values=np.ones(1, dtype=np.float16), mask=model.mask)
    with pytest.raises(ModelFileError, match="out of range"):
        load_model(forge(tmp_path / "m.bpm", tmp_path / "pos.bpm", payload=buf.getvalue()))


def test_files_written_before_the_morph_switch_load_without_it(tmp_path):
    # features.morph defaults to "auto" now; a stored config without the key means it was off
    model, _ = small_model("first-order")
    save_model(model, tmp_path / "m.bpm")
    old = forge(tmp_path / "m.bpm", tmp_path / "old.bpm",
                 lambda h: h["config"]["features"].pop("morph"))
    loaded = load_model(old)
    assert loaded.config.features.morph is False
    assert np.array_equal(loaded.layout, model.layout)
    # the same for the tagger's lexicon (on by default since tagger format 2)
    assert load_model(tmp_path / "m.bpm").config.tagger.lexicon is True
    old = forge(tmp_path / "m.bpm", tmp_path / "old.bpm",
                lambda h: h["config"]["tagger"].pop("lexicon"))
    assert load_model(old).config.tagger.lexicon is False


def test_quantized_weights_are_the_nearest_levels():
    rng = np.random.default_rng(4)
    values = np.concatenate([rng.laplace(scale=0.15, size=20000), rng.normal(scale=2.0, size=50)])
    codebook, codes = F.quantize_values(values)
    assert codebook.dtype == np.float16 and codes.dtype == np.uint8
    assert 128 < codebook.shape[0] <= 256 and np.all(np.diff(codebook.astype(np.float64)) > 0)
    # each value's code is its nearest level (brute force over the codebook)
    half = values.astype(np.float16).astype(np.float64)
    dist = np.abs(half[:, None] - codebook.astype(np.float64)[None, :])
    assert np.allclose(dist[np.arange(half.shape[0]), codes], dist.min(axis=1), rtol=0, atol=1e-12)
    # the levels follow the data: the error is small against the weights, the tail included
    error = codebook.astype(np.float64)[codes] - half
    assert np.sqrt(np.mean(error ** 2)) < 0.02 * np.sqrt(np.mean(half ** 2))
    assert np.abs(error).max() < 0.1
    # quantized values (at most 256 distinct) are kept exactly: saving a saved model changes nothing
    again_book, again = F.quantize_values(codebook[codes])
    assert np.array_equal(again_book[again], codebook[codes])
    few = np.array([0.5, -1.25, 0.5, 3.0])
    book, c = F.quantize_values(few)
    assert np.array_equal(book[c].astype(np.float64), few)


def test_files_with_float16_weights_load(tmp_path):
    # model files written before the codebook store each weight as float16; they load unchanged
    import io

    model, _ = small_model("first-order")
    nz = np.flatnonzero(model.theta)
    buf = io.BytesIO()
    np.savez_compressed(buf, deltas=F.delta_code(nz), values=model.theta[nz].astype(np.float16),
                        mask=model.mask)
    save_model(model, tmp_path / "m.bpm")
    old = load_model(forge(tmp_path / "m.bpm", tmp_path / "old.bpm", payload=buf.getvalue()))
    assert np.array_equal(old.theta, load_model(tmp_path / "m.bpm").theta)
    # codes past the end of the codebook are refused, not read out of bounds
    buf = io.BytesIO()
    np.savez_compressed(buf, deltas=F.delta_code(nz), values=np.full(nz.size, 7, dtype=np.uint8),
                        codebook=np.ones(4, dtype=np.float16), mask=model.mask)
    with pytest.raises(ModelFileError, match="codes do not fit their codebook of 4 levels"):
        load_model(forge(tmp_path / "m.bpm", tmp_path / "codes.bpm", payload=buf.getvalue()))


def _brute_label_filter(sentences, vocabs):
    """The label filter by its definition, with dicts over the tags' strings."""
    upos, labels = vocabs.vocabs[4], vocabs.labels
    pair, child = {}, {}
    for s in sentences:
        for m in range(1, s.n + 1):
            h = s.heads[m]
            key = (s.upos[h], s.upos[m], m > h)
            pair.setdefault(key, set()).add(s.deprels[m])
            child.setdefault(key[1:], set()).add(s.deprels[m])
    allowed = {}
    for a in upos.strings:
        for b in upos.strings:
            for right in (False, True):
                allowed[a, b, right] = pair.get((a, b, right)) or child.get((b, right)) or set(labels)
    return allowed


def test_the_label_filter_keeps_the_labels_training_saw_with_the_tags_and_direction():
    from bpparse.encode import UPOS

    sentences = list(read_conll(DATA / "en_ewt_train_tiny.conllu"))
    vocabs = Vocabularies.build(sentences)
    encoded = [vocabs.encode(s) for s in sentences]
    table = F.label_filter([e.tokens[UPOS] for e in encoded], [e.heads for e in encoded],
                           [e.labels for e in encoded], len(vocabs.vocabs[UPOS]), len(vocabs.labels))
    expected = _brute_label_filter(sentences, vocabs)
    strings = vocabs.vocabs[UPOS].strings
    got = {(strings[a], strings[b], bool(d)): {vocabs.labels[r] for r in np.flatnonzero(table[a, b, d])}
           for a, b, d in np.ndindex(table.shape[:3])}
    assert got == expected
    sizes = [len(v) for v in expected.values()]
    assert min(sizes) >= 1 and 1 < np.mean(sizes) < len(vocabs.labels) / 2
    lists = F.label_lists(table)
    for index in np.ndindex(table.shape[:3]):
        count = lists[index][0]
        assert lists[index][1:1 + count].tolist() == np.flatnonzero(table[index]).tolist()


@pytest.mark.parametrize("compact", [False, True])
def test_filtered_label_scores_are_the_unfiltered_ones_on_the_labels_kept(tmp_path, compact):
    """Bit for bit on each kept label (same blocks, same order), -inf on the others; the arc score
    is the log-sum-exp over the kept labels."""
    from bpparse.encode import UPOS
    from bpparse.scoring import marginalise_labels

    model, sentences = small_model("first-order")
    encoded = [model.encode(s) for s in sentences]
    model.label_filter = F.label_filter([e.tokens[UPOS] for e in encoded], [e.heads for e in encoded],
                                        [e.labels for e in encoded], len(model.vocabs.vocabs[UPOS]),
                                        len(model.labels))
    if compact:
        save_model(model, tmp_path / "m.bpm")
        model = load_model(tmp_path / "m.bpm")
        assert model.weights.dense.shape[0] == 0 and model.label_filter is not None
    filtered = model.weights
    every = filtered._replace(label_lists=F.NO_LABEL_FILTER)
    left_out = 0
    for e in encoded[:20]:
        attrs = F.sentence_attributes(e.tokens, model.fine_tags)
        got, full = F.label_scores(attrs, filtered), F.label_scores(attrs, every)
        up = e.tokens[UPOS]
        for h, m in np.ndindex(got.shape[:2]):
            if m == 0 or h == m:
                continue
            keep = model.label_filter[up[h], up[m], int(m > h)]
            assert np.array_equal(got[h, m, keep], full[h, m, keep])
            assert np.all(got[h, m, ~keep] == -np.inf)
            left_out += int((~keep).sum())
        link = F.link_scores(attrs, filtered)
        upos = attrs[F.A_UTAG, 1:len(up) + 1]
        arc, logp = marginalise_labels(link, got.copy(), filtered.label_lists, upos)
        # reading only the kept labels gives what reading all of them (the others -inf) gives
        plain = marginalise_labels(link, got.copy(), F.NO_LABEL_FILTER, upos)
        assert np.array_equal(arc, plain[0]) and np.array_equal(logp, plain[1])
        for h, m in [(0, 1), (2, 1), (1, len(up) - 1)]:
            keep = model.label_filter[up[h], up[m], int(m > h)]
            assert arc[h, m] == pytest.approx(link[h, m] + np.logaddexp.reduce(full[h, m, keep]))
            assert np.exp(logp[h, m, keep]).sum() == pytest.approx(1.0)
    assert left_out > 0


def _assert_refused(model, tmp_path, member, bad, what):
    """A file of ``model`` whose payload also holds ``member`` = ``bad`` fails to load, saying
    ``what``."""
    import io

    payload, _ = _v2_payload(model)
    with np.load(io.BytesIO(payload)) as z:
        arrays = dict(z)
    buf = io.BytesIO()
    np.savez(buf, **arrays, **{member: bad})
    forged = forge(tmp_path / "m.bpm", tmp_path / "bad.bpm", payload=buf.getvalue())
    with pytest.raises(ModelFileError, match=f"malformed model file: .*{what}"):
        load_model(forged)


def test_a_label_filter_that_does_not_fit_the_model_is_refused(tmp_path):
    model, _ = small_model("first-order")
    shape = (len(model.vocabs.vocabs[4]),) * 2 + (2, len(model.labels))
    model.label_filter = np.ones(shape, dtype=bool)
    save_model(model, tmp_path / "m.bpm")
    assert load_model(tmp_path / "m.bpm").label_filter.all()
    for bad in (np.ones((3, 3, 2, len(model.labels)), dtype=bool), np.zeros(shape, dtype=bool),
                np.ones(shape, dtype=np.int8)):
        _assert_refused(model, tmp_path, "label_filter", bad, "label filter")
    with pytest.raises(ValueError, match="label filter"):
        model.label_filter = np.zeros(shape, dtype=bool)


def _arc_filter_of(model, encoded):
    from bpparse.encode import UPOS

    return F.arc_limits([e.tokens[UPOS] for e in encoded], [e.heads for e in encoded],
                        len(model.vocabs.vocabs[UPOS]))


def test_the_arc_filter_limits_each_tag_class_to_twice_its_longest_training_arc():
    from bpparse.encode import UPOS
    from bpparse.features.labels import ARC_SLACK

    sentences = list(read_conll(DATA / "en_ewt_train_tiny.conllu"))
    vocabs = Vocabularies.build(sentences)
    longest = {}
    for s in sentences:
        for m in range(1, s.n + 1):
            key = (s.upos[s.heads[m]], s.upos[m], m > s.heads[m])
            longest[key] = max(longest.get(key, 0), abs(m - s.heads[m]))
    table = F.arc_limits([e.tokens[UPOS] for e in map(vocabs.encode, sentences)],
                         [s.heads for s in sentences], len(vocabs.vocabs[UPOS]))
    strings = vocabs.vocabs[UPOS].strings
    specials = {"<root>", "<unk>"}
    for a, b, d in np.ndindex(table.shape):
        key = (strings[a], strings[b], bool(d))
        if specials & set(key[:2]):
            assert table[a, b, d] == np.iinfo(np.int32).max
        else:
            assert table[a, b, d] == ARC_SLACK * longest.get(key, 0), key
    assert 0 < np.count_nonzero(table[2:, 2:]) < table[2:, 2:].size


@pytest.mark.parametrize("compact", [False, True])
def test_filtered_arcs_score_as_unfiltered_ones_and_the_others_are_not_scored(tmp_path, compact):
    """LINK and label scores bit for bit on the arcs the filter keeps (adjacent, from ROOT, within
    their class's limit), LINK -inf and no label score on the others; the file keeps the table."""
    from bpparse.encode import UPOS

    model, sentences = small_model("first-order")
    encoded = [model.encode(s) for s in sentences]
    model.arc_filter = _arc_filter_of(model, encoded)
    if compact:
        save_model(model, tmp_path / "m.bpm")
        back = load_model(tmp_path / "m.bpm")
        assert back.weights.dense.shape[0] == 0
        assert np.array_equal(back.arc_filter, model.arc_filter)
        model = back
    filtered = model.weights
    every = filtered._replace(arc_limits=F.NO_ARC_FILTER)
    kept = left_out = 0
    for e in encoded[:20]:
        attrs = F.sentence_attributes(e.tokens, model.fine_tags)
        link, full_link = F.link_scores(attrs, filtered), F.link_scores(attrs, every)
        labels, full_labels = F.label_scores(attrs, filtered), F.label_scores(attrs, every)
        up = e.tokens[UPOS]
        for h, m in np.ndindex(link.shape):
            if m == 0 or h == m:
                continue
            allowed = h == 0 or abs(h - m) == 1 or abs(h - m) <= model.arc_filter[up[h], up[m], int(m > h)]
            if allowed:
                assert link[h, m] == full_link[h, m] and np.isfinite(link[h, m])
                assert np.array_equal(labels[h, m], full_labels[h, m])
                kept += 1
            else:
                assert link[h, m] == -np.inf and not labels[h, m].any()
                left_out += 1
    assert kept > 0 and left_out > 0


def test_an_arc_filter_that_keeps_no_class_still_parses_trees_of_adjacent_and_root_arcs():
    model, sentences = small_model("grand-childseq")
    limits = np.zeros((len(model.vocabs.vocabs[4]),) * 2 + (2,), dtype=np.int32)
    limits[0] = np.iinfo(np.int32).max  # ROOT's row, as `features.arc_limits` writes it
    model.arc_filter = limits
    for s, (heads, _) in zip(sentences, parse_encoded(model, [model.encode(s) for s in sentences])):
        assert sum(heads[1:] == 0) == 1, s.forms
        assert all(h == 0 or abs(h - m) == 1 for m, h in enumerate(heads) if m > 0)


def test_an_arc_filter_that_does_not_fit_the_model_is_refused(tmp_path):
    model, _ = small_model("first-order")
    shape = (len(model.vocabs.vocabs[4]),) * 2 + (2,)
    save_model(model, tmp_path / "m.bpm")
    assert load_model(tmp_path / "m.bpm").arc_filter is None
    for bad in (np.ones((3, 3, 2), dtype=np.int32), np.full(shape, -1, dtype=np.int32),
                np.ones(shape, dtype=np.int64)):
        _assert_refused(model, tmp_path, "arc_filter", bad, "an arc filter")
    with pytest.raises(ValueError, match="arc filter"):
        model.arc_filter = np.ones(shape, dtype=np.int16)


@pytest.mark.parametrize("config_name", ["grand-childseq", "second-order"])
def test_undamped_bp_from_prunings_marginals_is_dense_bp(config_name):
    """Undamped BP on a pruned graph (TREE's messages only to the arcs another factor reads, its
    first propagation taken from pruning's first-order marginals) gives the beliefs of BP that
    propagates every message, to rounding."""
    from bpparse.inference import bp_options_of, infer_scores
    from bpparse.kernels.bp_engine import PairFactors, beliefs_to_marginals, bp_full_graph
    from bpparse.scoring import sentence_scores

    model, sentences = small_model(config_name)
    settings = model.config.inference_settings("parse", iterations=6, damping=0.0, prune=0.01)
    options = bp_options_of(settings)
    assert options.sparse
    dense = options._replace(sparse=False)
    empty = np.empty(0, dtype=np.int64)
    worst = 0.0
    for s in sentences[:15]:
        attrs = F.sentence_attributes(model.encode(s).tokens, model.fine_tags)
        sc = sentence_scores(attrs, model.weights, settings, empty)
        assert sc.first_mu.shape == sc.arc.shape
        np.testing.assert_allclose(sc.first_mu[:, 1:].sum(axis=0), 1.0, atol=1e-12)
        got = infer_scores(sc, settings, False).mu
        pairs = PairFactors(sc.pair_a, sc.pair_b, sc.pair_w)
        bel = bp_full_graph(sc.arc, pairs, sc.cross_w, False, 0, sc.seq, dense, np.zeros((0, 0)))[0]
        want = beliefs_to_marginals(bel)
        worst = max(worst, float(np.abs(got - want).max()))
        assert got.shape == want.shape
    assert worst < 1e-9
