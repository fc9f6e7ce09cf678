import numpy as np
import pytest

from bpparse import features as F
from bpparse.encode import MORPH, NUM_FIELDS as N_FIELDS


def _w(layout, mask, theta):
    """Dense `Weights` over ``theta``."""
    return F.dense_weights(bool(layout[F.LY_FINE]), layout, mask, theta, F.NO_LABEL_FILTER)


def random_tokens(rng, n, vocab=40, tags=6, xtags=9, morph_values=3):
    tok = np.zeros((N_FIELDS, n + 1), dtype=np.int32)
    tok[:, 1:] = rng.integers(2, vocab, size=(N_FIELDS, n))
    tok[4, 1:] = rng.integers(2, tags, size=n)
    tok[5, 1:] = rng.integers(2, xtags, size=n)
    # attribute rows: 0 = the word lacks the attribute, else a value id
    tok[MORPH:, 1:] = rng.integers(0, morph_values + 1, size=(N_FIELDS - MORPH, n)) * (rng.random((N_FIELDS - MORPH, n)) < 0.5)
    return tok


def layout(fine=True, lemma=True, feats=True, n_labels=5, bits=(14, 10, 8), second_words=False,
           morph=False, context_words=False):
    return F.make_layout(bits[0], bits[1], bits[2], n_labels, fine, lemma, feats, second_words, morph,
                         context_words)


def all_pairs(n):
    n1 = n + 1
    a, b = [], []
    for g in range(n1):
        for h in range(1, n1):
            for m in range(1, n1):
                if len({g, h, m}) == 3:
                    a.append(g * n1 + h)
                    b.append(h * n1 + m)
    n_grand = len(a)
    for h in range(n1):
        for m in range(1, n1):
            for s in range(m + 1, n1):
                if h not in (m, s):
                    a.append(h * n1 + m)
                    b.append(h * n1 + s)
    return np.array(a, dtype=np.int64), np.array(b, dtype=np.int64), n_grand


def arc_feature_list(attrs, ly, mask, h, m):
    between = np.empty(F.between_capacity(attrs), dtype=np.int64)
    nb = F.arc_between_tags(attrs, ly, h, m, between)
    out = np.empty(F.MAX_FIXED_LINK_FEATURES + 2 * between.shape[0], dtype=np.int64)
    keys = np.empty(F.MAX_FIXED_LINK_FEATURES // 2 + between.shape[0], dtype=np.uint64)
    k = F.link_features(attrs, ly, mask, h, m, between, nb, out, keys)
    return out[:k].copy()


MASK64 = (1 << 64) - 1


def reference_hash(values):
    # FNV-1a over 64-bit words, splitmix64 finaliser: the documented hash, in plain Python
    h = ((0xCBF29CE484222325 ^ (values[0] & MASK64)) * 0x100000001B3) & MASK64
    for v in values[1:]:
        h = ((h ^ (v & MASK64)) * 0x100000001B3) & MASK64
    z = h
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def test_hash_matches_reference_and_is_unsalted():
    rng = np.random.default_rng(0)
    for _ in range(20):
        key = rng.integers(-5, 1 << 40, size=rng.integers(1, 6)).astype(np.int64)
        assert int(F.hash_key(key)) == reference_hash([int(v) for v in key])
    assert int(F.hash_key(np.array([7, 1, 2], dtype=np.int64))) == reference_hash([7, 1, 2])
    assert F.hash_key(np.array([1, 2], dtype=np.int64)) != F.hash_key(np.array([2, 1], dtype=np.int64))


@pytest.mark.parametrize("fine", [True, False])
def test_link_sweep_equals_per_arc_enumeration(fine):
    rng = np.random.default_rng(1)
    ly = layout(fine=fine)
    theta = rng.normal(size=ly[F.LY_SIZE])
    tok = random_tokens(rng, 9)
    attrs = F.sentence_attributes(tok, fine)
    nomask = np.empty(0, dtype=np.uint64)
    s = F.link_scores(attrs, _w(ly, nomask, theta))
    n1 = tok.shape[1]
    for h in range(n1):
        assert np.isneginf(s[h, 0]) and np.isneginf(s[h, h])
        for m in range(1, n1):
            if m != h:
                idx = arc_feature_list(attrs, ly, nomask, h, m)
                assert idx.min() >= 0 and idx.max() < ly[F.LY_SEC_OFF]
                assert s[h, m] == pytest.approx(theta[idx].sum(), abs=1e-9)


def test_between_tags_are_distinct_and_complete():
    rng = np.random.default_rng(2)
    ly = layout()
    tok = random_tokens(rng, 12, tags=4, xtags=5)
    attrs = F.sentence_attributes(tok, True)
    between = np.empty(F.between_capacity(attrs), dtype=np.int64)
    for h, m in [(0, 12), (3, 9), (9, 3), (4, 5)]:
        nb = F.arc_between_tags(attrs, ly, h, m, between)
        lo, hi = min(h, m), max(h, m)
        want = {int(t) * 2 for t in tok[4, lo + 1:hi]} | {int(t) * 2 + 1 for t in tok[5, lo + 1:hi]}
        assert sorted(between[:nb]) == sorted(want)


def assert_dirty_covers(grad, dirty):
    touched = np.flatnonzero(grad)
    assert touched.size > 0 and np.all(dirty[touched >> F.DIRTY_SHIFT] == 1)


@pytest.mark.parametrize("second_words", [False, True])
def test_scatter_is_the_transpose_of_scoring(second_words):
    # <scatter(C), theta> == sum C * scores(theta) for every family: scores and gradients
    # use one enumeration
    rng = np.random.default_rng(3)
    ly = layout(second_words=second_words)
    n = 7
    tok = random_tokens(rng, n)
    attrs = F.sentence_attributes(tok, True)
    theta = rng.normal(size=ly[F.LY_SIZE])
    nomask = np.empty(0, dtype=np.uint64)
    n1 = n + 1
    C = rng.normal(size=(n1, n1))
    s = F.link_scores(attrs, _w(ly, nomask, theta))
    grad = np.zeros_like(theta)
    dirty = np.zeros((ly[F.LY_SIZE] >> F.DIRTY_SHIFT) + 1, dtype=np.uint8)
    F.link_scatter(attrs, ly, nomask, C, grad, dirty, 0.0)
    assert_dirty_covers(grad, dirty)
    fin = np.isfinite(s)
    assert grad @ theta == pytest.approx((C[fin] * s[fin]).sum(), rel=1e-10)

    R = ly[F.LY_NLAB]
    C3 = rng.normal(size=(n1, n1, R))
    ls = F.label_scores(attrs, _w(ly, nomask, theta))
    grad[:] = 0
    dirty[:] = 0
    F.label_scatter(attrs, ly, C3, grad, dirty, np.ones((n1, n1)), 0.0)
    assert_dirty_covers(grad, dirty)
    assert grad @ theta == pytest.approx((C3 * ls)[fin].sum(), rel=1e-10)
    assert np.all(grad[: ly[F.LY_LAB_OFF]] == 0)

    pa, pb, ng = all_pairs(n)
    w = F.pair_scores(attrs, _w(ly, nomask, theta), pa, pb, ng)
    cp = rng.normal(size=pa.shape[0])
    grad[:] = 0
    F.pair_scatter(attrs, ly, nomask, pa, pb, ng, cp, grad, np.empty(0, dtype=np.uint8), 0.0)
    assert grad @ theta == pytest.approx(cp @ w, rel=1e-10)
    assert np.all(grad[: ly[F.LY_SEC_OFF]] == 0) and np.all(grad[ly[F.LY_LAB_OFF]:] == 0)

    cw = F.cross_scores(attrs, _w(ly, nomask, theta))
    assert np.all(np.tril(cw) == 0)
    grad[:] = 0
    dirty[:] = 0
    F.cross_scatter(attrs, ly, nomask, C, grad, dirty, 0.0)
    assert_dirty_covers(grad, dirty)
    assert grad @ theta == pytest.approx((np.triu(C, 1) * cw)[1:, 1:].sum(), rel=1e-10)


def test_link_features_are_local():
    # an arc's features see only the two words, their neighbours and the tags in between
    rng = np.random.default_rng(4)
    ly = layout()
    tok = random_tokens(rng, 10)
    nomask = np.empty(0, dtype=np.uint64)
    a0 = F.sentence_attributes(tok, True)
    base = arc_feature_list(a0, ly, nomask, 2, 5)
    tok2 = tok.copy()
    tok2[:, 8] = 39  # far outside the arc's window
    tok2[1:4, 4] = 38  # word (not tags) of a token between
    assert np.array_equal(base, arc_feature_list(F.sentence_attributes(tok2, True), ly, nomask, 2, 5))
    tok3 = tok.copy()
    tok3[4, 4] = 1  # coarse tag between changes
    assert not np.array_equal(base, arc_feature_list(F.sentence_attributes(tok3, True), ly, nomask, 2, 5))
    # direction and distance matter
    assert not np.array_equal(base, arc_feature_list(a0, ly, nomask, 5, 2))


def test_gold_mask_keeps_gold_features_only():
    rng = np.random.default_rng(5)
    ly = layout()
    n = 8
    tok = random_tokens(rng, n)
    attrs = F.sentence_attributes(tok, True)
    heads = np.array([-1, 2, 0, 2, 5, 3, 5, 8, 6], dtype=np.int64)
    mask = np.zeros(ly[F.LY_LAB_OFF] // 64 + 1, dtype=np.uint64)
    F.mark_gold_features(attrs, ly, heads, True, True, True, mask)
    nomask = np.empty(0, dtype=np.uint64)
    theta = rng.normal(size=ly[F.LY_SIZE])
    full = F.link_scores(attrs, _w(ly, nomask, theta))
    filt = F.link_scores(attrs, _w(ly, mask, theta))
    for m in range(1, n + 1):
        assert filt[heads[m], m] == pytest.approx(full[heads[m], m])
        for h in range(n + 1):
            if h not in (m, heads[m]):
                kept = set(arc_feature_list(attrs, ly, mask, h, m))
                assert kept <= set(arc_feature_list(attrs, ly, nomask, h, m))
    # some non-gold arc loses features (its word bigram never occurs in gold)
    assert not np.allclose(np.nan_to_num(full, neginf=0), np.nan_to_num(filt, neginf=0))
    pa, pb, ng = all_pairs(n)
    wf = F.pair_scores(attrs, _w(ly, mask, theta), pa, pb, ng)
    w0 = F.pair_scores(attrs, _w(ly, nomask, theta), pa, pb, ng)
    n1 = n + 1
    for p in range(ng):  # gold GRAND pairs keep all their features
        g, h, m = pa[p] // n1, pa[p] % n1, pb[p] % n1
        if heads[h] == g and heads[m] == h:
            assert wf[p] == pytest.approx(w0[p])


@pytest.mark.parametrize("fine,second_words", [(True, False), (False, False), (True, True)])
def test_tabled_pair_features_equal_the_templates(fine, second_words):
    rng = np.random.default_rng(6)
    ly = layout(fine=fine, second_words=second_words)
    n = 7
    tok = random_tokens(rng, n, tags=4, xtags=6)
    attrs = F.sentence_attributes(tok, fine)
    mask = np.zeros(ly[F.LY_LAB_OFF] // 64 + 1, dtype=np.uint64)
    F.mark_gold_features(attrs, ly, np.array([-1, 2, 0, 2, 5, 3, 5, 6, 6]), True, False, False,
                         mask)
    tables = F.pair_tables(attrs, ly)
    pa, pb, ng = all_pairs(n)
    out = np.empty(F.MAX_PAIR_FEATURES, dtype=np.int64)
    ref = np.empty(F.MAX_PAIR_FEATURES, dtype=np.int64)
    n1 = n + 1
    for msk in (np.empty(0, dtype=np.uint64), mask):
        for p in range(pa.shape[0]):
            k = F.pair_features_tabled(attrs, ly, msk, tables, pa[p], pb[p], n1, p < ng, out)
            if p < ng:
                r = F.grand_features(attrs, ly, msk, pa[p] // n1, pa[p] % n1, pb[p] % n1, ref)
            else:
                r = F.sib_features(attrs, ly, msk, pa[p] // n1, pa[p] % n1, pb[p] % n1, ref)
            assert list(out[:k]) == list(ref[:r])


def _block(ly, key):
    return int(ly[F.LY_LINK_OFF]) + (reference_hash(key) % int(ly[F.LY_LINK_BLOCKS])) * F.BLOCK


def test_context_word_templates_read_the_words_beside_both_ends():
    # each arc gains exactly the keys (template, head UPOS, child UPOS, neighbour's word) of the
    # words just before and after the child and the head, the sentence's edges included
    rng = np.random.default_rng(9)
    ly_on = layout(bits=(26, 10, 8), context_words=True)
    ly_off = layout(bits=(26, 10, 8))
    nomask = np.empty(0, dtype=np.uint64)
    tok = random_tokens(rng, 8)
    attrs = F.sentence_attributes(tok, True)
    for h in range(9):
        for m in range(1, 9):
            if h == m:
                continue
            on = set(arc_feature_list(attrs, ly_on, nomask, h, m).tolist())
            off = set(arc_feature_list(attrs, ly_off, nomask, h, m).tolist())
            hu, cu = int(attrs[F.A_UTAG, h + 1]), int(attrs[F.A_UTAG, m + 1])
            blocks = {_block(ly_on, [t, hu, cu, int(attrs[F.A_WORD, col])])
                      for t, col in ((601, m), (602, m + 2), (603, h), (604, h + 2))}
            assert off <= on and blocks <= on
            assert all(any(b <= i < b + F.BLOCK for b in blocks) for i in on - off)
    # the word before the child matters with the templates, not without
    tok2 = tok.copy()
    tok2[1:4, 4] = 38
    changed = F.sentence_attributes(tok2, True)
    assert set(arc_feature_list(changed, ly_on, nomask, 2, 5)) != set(
        arc_feature_list(attrs, ly_on, nomask, 2, 5))
    assert np.array_equal(arc_feature_list(changed, ly_off, nomask, 2, 5),
                          arc_feature_list(attrs, ly_off, nomask, 2, 5))


def _morph_arcs(seed):
    """(tok, attrs, ly_on, h, m, on, off, hu, cu) for every arc of a random 8-word sentence: the arc's
    LINK features with the morphology templates (on) and without (off), in a LINK region large
    enough that two different keys almost never share a block."""
    rng = np.random.default_rng(seed)
    ly_on, ly_off = layout(morph=True, bits=(26, 10, 8)), layout(morph=False, bits=(26, 10, 8))
    nomask = np.empty(0, dtype=np.uint64)
    tok = random_tokens(rng, 8)
    attrs = F.sentence_attributes(tok, True)
    for h in range(9):
        for m in range(1, 9):
            if h != m:
                on = set(arc_feature_list(attrs, ly_on, nomask, h, m).tolist())
                off = set(arc_feature_list(attrs, ly_off, nomask, h, m).tolist())
                yield (tok, attrs, ly_on, h, m, on, off, int(attrs[F.A_UTAG, h + 1]),
                       int(attrs[F.A_UTAG, m + 1]))


def test_morph_templates_fire_exactly_where_the_words_have_the_attribute():
    # issue 19: per attribute, the child's value, the head's value and agreement (both have it)
    n_attr = N_FIELDS - MORPH
    checked = {"child": 0, "head": 0, "agree": 0, "absent": 0}
    for tok, _, ly_on, h, m, on, off, hu, cu in _morph_arcs(7):
        assert off <= on  # the morphology templates only add features
        for a in range(n_attr):
            hv, cv = int(tok[MORPH + a, h]), int(tok[MORPH + a, m])
            if h == 0:
                assert hv == 0  # ROOT has no attribute values
            child = _block(ly_on, [1000 + a, cv, hu, cu])
            head = _block(ly_on, [1100 + a, hv, hu, cu])
            agree = _block(ly_on, [1200 + a, int(hv == cv), hu, cu])
            assert (child in on) == (cv > 0) or child in off
            assert (head in on) == (hv > 0) or head in off
            assert (agree in on) == (hv > 0 and cv > 0) or agree in off
            if hv > 0 and cv > 0:
                checked["agree"] += 1
            elif hv == 0 and cv == 0:
                checked["absent"] += 1
            checked["child"] += cv > 0
            checked["head"] += hv > 0
    assert min(checked.values()) > 5


def test_possessive_agreement_fires_exactly_on_possessed_heads():
    # a genitive child of a head marked for its possessor (Turkish "masanın kenarı"): the child's
    # Case and Person / Number against the head's Person[psor] / Number[psor]
    from bpparse.encode import MORPH_ATTRS

    row = {a: MORPH + i for i, a in enumerate(MORPH_ATTRS)}
    fired = absent = 0
    for tok, _, ly_on, h, m, on, off, hu, cu in _morph_arcs(9):
        hpp = int(tok[row["Person[psor]"], h])
        case = _block(ly_on, [1304, int(tok[row["Case"], m]), hpp, hu, cu])
        agree = _block(ly_on, [1305, int(tok[row["Person"], m]), hpp, int(tok[row["Number"], m]),
                               int(tok[row["Number[psor]"], h])])
        assert (case in on) == (hpp > 0) or case in off
        assert (agree in on) == (hpp > 0) or agree in off
        fired += hpp > 0
        absent += hpp == 0
    assert fired > 5 and absent > 5


def test_morph_label_templates_read_case_feats_and_lemma():
    # with morph on, an arc's label blocks include the child's Case with the head's VerbForm and
    # the head's lemma with the child's Case (issue 19: a stronger labeler); off, they are absent
    from bpparse.encode import MORPH_ATTRS

    rng = np.random.default_rng(10)
    tok = random_tokens(rng, 6)
    attrs = F.sentence_attributes(tok, True)
    out = np.empty(F.MAX_LABEL_TEMPLATES, dtype=np.int64)
    h, m = 2, 4
    ly_on, ly_off = layout(morph=True, n_labels=4), layout(morph=False, n_labels=4)
    on = set(out[:F.label_blocks(attrs, ly_on, h, m, out)].tolist())
    off = set(out[:F.label_blocks(attrs, ly_off, h, m, out)].tolist())
    hu, cu = int(attrs[F.A_UTAG, h + 1]), int(attrs[F.A_UTAG, m + 1])
    case = int(tok[MORPH + MORPH_ATTRS.index("Case"), m])
    verbform = int(tok[MORPH + MORPH_ATTRS.index("VerbForm"), h])

    def block(key):
        nblk = int(ly_on[F.LY_LAB_BLOCKS])
        return int(ly_on[F.LY_LAB_OFF]) + (reference_hash(key) % nblk) * int(ly_on[F.LY_NLAB])

    wanted = {block([1421, 1, hu, cu, case, verbform]),
              block([1426, 1, int(attrs[F.A_LEMMA, h + 1]), cu]),
              block([1427, 1, int(attrs[F.A_LEMMA, h + 1]), case])}
    assert wanted <= on
    assert not wanted & off
    assert len(on) > len(off)


def test_morph_templates_score_like_their_enumeration():
    rng = np.random.default_rng(8)
    ly = layout(morph=True)
    theta = rng.normal(size=ly[F.LY_SIZE])
    tok = random_tokens(rng, 7)
    attrs = F.sentence_attributes(tok, True)
    nomask = np.empty(0, dtype=np.uint64)
    s = F.link_scores(attrs, _w(ly, nomask, theta))
    for h in range(8):
        for m in range(1, 8):
            if h != m:
                assert s[h, m] == pytest.approx(theta[arc_feature_list(attrs, ly, nomask, h, m)].sum())
    # the same sentence without any attribute value scores as the layout without the templates
    # except for the suffix templates, which every arc has
    bare = tok.copy()
    bare[MORPH:] = 0
    attrs_bare = F.sentence_attributes(bare, True)
    on = set(arc_feature_list(attrs_bare, ly, nomask, 2, 3).tolist())
    off = set(arc_feature_list(attrs_bare, layout(), nomask, 2, 3).tolist())
    assert len(on - off) <= 6
