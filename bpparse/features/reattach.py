"""Re-attaching words from the decoded, labelled tree: the re-attachment stage's keys and kernels.

BP's factors are at most second order and unlabelled: no factor sees that a verb already has a
subject, that a noun has its own preposition (an ``obl`` or ``nmod``, not an ``obj``), or that a
verb lies between a word and its head. After the tree is decoded and labelled, each non-punctuation
word m (not the root word) chooses its head again among the K non-punctuation words with the
highest arc marginals that are not below it (no cycle), by

    score(h) = log mu[h, m] + scale * w . f(h, m, tree)

f: hashed indicator keys of both words' UPOS with direction and distance, the labels, sides and
forms of h's other dependents, how many it has, the labels and forms of m's own dependents (or
none: a preposition or conjunction below m tells where m goes), the label the labeler would give
h -> m (with both UPOS, with distance, with the verbs in between) and whether h has a dependent
with that label already (a second subject), the labels of the siblings m would have next to it on
either side, h's label and its head's UPOS, how many verbs and how many punctuation marks lie
between h and m, whether h -> m crosses an arc of the tree, and the two words' lower-cased forms;
w: averaged-perceptron weights trained on the gold trees, choosing among the K candidates the
parser's marginals give each training word (`reattach_train_pass`); ``scale`` is chosen on dev
(`bpparse.reattach`). Words are decided left to right, each seeing the tree as the words before it
left it, in two passes. Stages of the first version (files without ``version``) keep their
templates: no sibling keys, one pass.
"""
from typing import NamedTuple

import numpy as np

from bpparse.features.attributes import sentence_attributes
from bpparse.features.context import context_capacity, context_label_scores
from bpparse.features.hashing import _fin, _h0, _hc
from bpparse.features.layout import A_UTAG, A_WORD
from bpparse.features.punct import (
    MIN_MARGINAL,
    _crosses,
    _descends,
    keeps_projective,
    keys_score,
    perceptron_update,
    punct_mask,
)
from bpparse.jit import LEAF, njit

FIXED_KEYS = 15  # keys every candidate has; then 3 per other dependent of h and 2 per one of m
SIBLING_KEYS = 4  # and, from templates version 2, these last
KEY_ROOM = FIXED_KEYS + SIBLING_KEYS  # + 5 (n+1): the length of a keys buffer
MAX_SIBLINGS, MAX_VERBS, MAX_BUCKET = 4, 3, 10
# a word that moved can open a better head to a word before it: a second pass (EWT dev +0.06 UAS,
# a third changes nothing)
PASSES = 2
VERSION = 2  # the stage's templates: 1 the first (15 keys, one pass), 2 these (files say which)


class Reattacher(NamedTuple):
    """The re-attachment stage as kernels read it: ``index`` and ``weights`` its weights'
    `features.store.SparseTable` (an empty index: no stage, the parser's heads are kept),
    ``scale`` (weight of w . f against log mu), ``candidates`` K, ``punct_tag`` the UPOS id of
    PUNCT (-1: none), ``verb_tags`` int64 the UPOS ids of VERB and AUX that the model knows,
    ``version`` the templates it was trained with (1: no sibling keys, one pass; 2: `VERSION`)."""

    index: np.ndarray
    weights: np.ndarray
    scale: float
    candidates: int
    punct_tag: int
    verb_tags: np.ndarray
    version: int


class ArcLabels(NamedTuple):
    """The labels `arc_label` gave candidate arcs during one `reattach_tree`, and its scratch:
    ``label`` int64 (n+1, n+1) [h, m], ``stamp`` int64 (n+1, n+1) version[h] + version[m] when
    it was given (-1: not yet), ``version`` int64 (n+1,) how often each word's dependents or
    head changed since; ``buffer`` int64 (`context_capacity`) and ``scores`` float64 (R,) for
    `arc_label`. The label of h -> m reads only the dependents of h and of m and
    h's head (`features.context.context_label_keys`), so it holds while neither version moves
    (both only grow: an unchanged sum means both unchanged). The second pass asks the labeler
    again only near the words that moved (EWT test: 31% fewer labeler calls in the stage, with
    the current arcs' labels that `relabel_tree` gave)."""

    label: np.ndarray
    stamp: np.ndarray
    version: np.ndarray
    buffer: np.ndarray
    scores: np.ndarray


@njit(cache=True, inline="always")
def _known_label(attrs, labeler, heads, h, m, known):
    """`arc_label` of h -> m, from ``known`` (`ArcLabels`) while it holds."""
    stamp = known.version[h] + known.version[m]
    if known.stamp[h, m] != stamp:
        known.label[h, m] = arc_label(attrs, labeler, heads, h, m, known.buffer, known.scores)
        known.stamp[h, m] = stamp
    return known.label[h, m]


def no_reattach_stage():
    """The `Reattacher` of "no re-attachment stage"."""
    return Reattacher(np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.float32), 0.0, 0, -1,
                      np.zeros(0, dtype=np.int64), VERSION)


@njit(cache=True, inline="always")
def _bucket(d):
    return d if d < 5 else (5 if d < MAX_BUCKET else 6)


@njit(cache=True, **LEAF)
def reattach_keys(attrs, heads, labels, verb_tags, is_punct, h, m, label, keys, version):
    """Write the hashed keys (uint64) of attaching word ``m`` to ``h`` in the tree ``heads`` (int64
    (n+1,), m's own arc ignored) with ``labels`` (int64 (n+1,)) and ``label`` the label h -> m
    would get (`arc_label`) into ``keys`` (length at least
    KEY_ROOM + 5 (n+1)); returns how many: the `SIBLING_KEYS` last from templates ``version`` 2.
    Punctuation dependents are not read."""
    n1 = heads.shape[0]
    um = attrs[A_UTAG, m + 1]
    uh = attrs[A_UTAG, h + 1]
    side = 0 if h < m else 1
    lo, hi = min(h, m), max(h, m)
    pair = _hc(_hc(_hc(_h0(100), uh), um), side)
    keys[0] = _fin(pair)
    keys[1] = _fin(_hc(pair, _bucket(hi - lo)))
    verbs = 0
    for q in range(lo + 1, hi):
        for t in verb_tags:
            if attrs[A_UTAG, q + 1] == t:
                verbs += 1
    keys[2] = _fin(_hc(_hc(pair, 1000), min(verbs, MAX_VERBS)))
    cross = 0
    for d in range(1, n1):
        if d != m and not is_punct[d] and _crosses(h, m, heads[d], d):
            cross = 1
            break
    keys[3] = _fin(_hc(_hc(_hc(_h0(101), um), side), cross))
    keys[4] = _fin(_hc(_hc(_hc(_h0(102), attrs[A_WORD, m + 1]), uh), side))
    keys[5] = _fin(_hc(_hc(_hc(_h0(103), attrs[A_WORD, h + 1]), um), side))
    hlab = labels[h] if h > 0 else -2
    keys[6] = _fin(_hc(_hc(_hc(_h0(104), hlab), um), side))
    g = heads[h] if h > 0 else 0
    keys[7] = _fin(_hc(_hc(_hc(_h0(105), attrs[A_UTAG, g + 1] if h > 0 else -2), uh), um))
    k = FIXED_KEYS
    siblings = 0
    same = 0
    leaf = 1
    for c in range(1, n1):
        if c == m or is_punct[c]:
            continue
        if heads[c] == h:
            siblings += 1
            same += labels[c] == label
            cside = 0 if c < h else 1
            keys[k] = _fin(_hc(_hc(_hc(_hc(_h0(106), labels[c]), cside), um), side))
            keys[k + 1] = _fin(_hc(_hc(_hc(_h0(107), labels[c]), uh), um))
            keys[k + 2] = _fin(_hc(_hc(_hc(_h0(113), labels[c]), attrs[A_WORD, c + 1]), um))
            k += 3
        elif heads[c] == m:
            leaf = 0
            keys[k] = _fin(_hc(_hc(_hc(_hc(_h0(108), labels[c]), uh), um), side))
            # the dependent's form too: a preposition or conjunction tells where m goes
            keys[k + 1] = _fin(_hc(_hc(_hc(_h0(112), labels[c]), attrs[A_WORD, c + 1]), uh))
            k += 2
    keys[8] = _fin(_hc(_hc(_hc(_h0(109), min(siblings, MAX_SIBLINGS)), uh), um))
    keys[9] = _fin(_hc(_hc(pair, 2000), leaf))
    keys[10] = _fin(_hc(_hc(_h0(110), um), side))
    keys[11] = _fin(_hc(_h0(111), uh))
    commas = 0
    for q in range(lo + 1, hi):
        if is_punct[q]:
            commas += 1
    keys[12] = _fin(_hc(_hc(pair, 4000), min(commas, 2)))
    # the label m would take under h, and whether h has one such dependent already (valency)
    keys[13] = _fin(_hc(_hc(pair, 5000), label))
    keys[14] = _fin(_hc(_hc(_hc(_h0(116), label), min(same, 2)), side))
    if version < 2:
        return k
    # the adjacent siblings m would have under h: the nearest dependent of h between them, and
    # the nearest beyond m on that side (-1: none)
    inner = outer = -1
    step = 1 if h < m else -1  # from h towards m
    c = m - step
    while c != h:
        if not is_punct[c] and heads[c] == h:
            inner = labels[c]
            break
        c -= step
    c = m + step
    while 0 < c < n1:
        if not is_punct[c] and heads[c] == h:
            outer = labels[c]
            break
        c += step
    keys[k] = _fin(_hc(_hc(_hc(_hc(_h0(117), inner), label), um), side))
    keys[k + 1] = _fin(_hc(_hc(_hc(_hc(_h0(118), outer), label), um), side))
    keys[k + 2] = _fin(_hc(_hc(pair, 6000), _hc(label, min(verbs, MAX_VERBS))))
    keys[k + 3] = _fin(_hc(_hc(_hc(_h0(119), label), _bucket(hi - lo)), side))
    return k + SIBLING_KEYS


@njit(cache=True, **LEAF)
def arc_label(attrs, labeler, heads, h, m, buffer, scores):
    """The label the `features.context.ContextLabeler` ``labeler`` gives h -> m in the tree
    ``heads`` with m moved under h (restored before returning); -1 without a labeler.
    ``buffer``: int64 of `context_capacity`, ``scores``: float64 (R,)."""
    if labeler.starts.shape[0] <= 1:
        return -1
    old = heads[m]
    heads[m] = h
    context_label_scores(attrs, labeler, heads, m, buffer, scores)
    heads[m] = old
    return np.argmax(scores)


@njit(cache=True)
def reattach_candidates(mu, heads, is_punct, m, k):
    """int64 array of at most ``k`` heads for word ``m``: the non-punctuation words other than m,
    not below it in ``heads``, by decreasing marginal mu[h, m] (ties: the leftmost first)."""
    n1 = heads.shape[0]
    out = np.empty(k, dtype=np.int64)
    taken = np.zeros(n1, dtype=np.bool_)
    count = 0
    while count < k:
        best, best_mu = -1, -1.0
        for h in range(1, n1):
            if not taken[h] and h != m and not is_punct[h] and mu[h, m] > best_mu:
                best, best_mu = h, mu[h, m]
        if best < 0:
            break
        taken[best] = True
        if not _descends(heads, best, m):
            out[count] = best
            count += 1
    return out[:count]


@njit(cache=True)
def _best_head(attrs, stage, labeler, mu, heads, labels, is_punct, m, projective, keys, known):
    """The head of word m maximising log mu[h, m] + scale * w . f among its candidates and its
    current head (`reattach_tree`; ``known``: its `ArcLabels`)."""
    cands = reattach_candidates(mu, heads, is_punct, m, stage.candidates)
    best, best_score = heads[m], -np.inf
    current = False
    for c in range(cands.shape[0] + 1):  # the current head last, if not among the candidates
        if c == cands.shape[0] and current:
            break
        h = cands[c] if c < cands.shape[0] else heads[m]
        current |= h == heads[m]
        if projective and h != heads[m] and not keeps_projective(heads, h, m):
            continue
        label = _known_label(attrs, labeler, heads, h, m, known)
        count = reattach_keys(attrs, heads, labels, stage.verb_tags, is_punct, h, m, label, keys,
                              stage.version)
        w = keys_score(stage.index, stage.weights, keys, count)
        s = np.log(max(mu[h, m], MIN_MARGINAL)) + stage.scale * w
        if s > best_score:
            best, best_score = h, s
    return best


@njit(cache=True)
def reattach_tree(attrs, stage, labeler, mu, heads, labels, head_prob, projective,
                  labelled=False):
    """Re-attach the non-punctuation words of the tree ``heads`` (int64 (n+1,), changed in place)
    by the `Reattacher` ``stage`` (no weights: nothing changes), reading ``labels``, the labels
    ``labeler`` (`features.context.ContextLabeler`) gives each candidate arc, and the arc
    marginals ``mu`` float64 (n+1, n+1); ``head_prob[m]`` becomes mu[new head, m]. Each word's
    candidates are `reattach_candidates` and its current head (with ``projective``, only those
    that keep the tree projective: `keeps_projective`). The root word and the punctuation words
    keep their heads. Words are decided left to right, each seeing the tree as the words before
    it left it, in up to `PASSES` passes (templates version 1: one pass). ``labelled``: ``labels``
    are the labeler's for ``heads`` (`features.context.relabel_tree` just ran), so the current
    arcs' labels need not be asked for again. Returns how many heads changed."""
    if stage.index.shape[0] == 0:
        return 0
    n1 = heads.shape[0]
    is_punct = punct_mask(attrs, n1, stage.punct_tag)
    keys = np.zeros(KEY_ROOM + 5 * n1, dtype=np.uint64)
    known = ArcLabels(np.empty((n1, n1), dtype=np.int64), np.full((n1, n1), -1),
                      np.zeros(n1, dtype=np.int64), np.empty(context_capacity(n1), dtype=np.int64),
                      np.empty(max(labeler.n_labels, 1)))
    if labelled and labeler.starts.shape[0] > 1:
        for m in range(1, n1):
            if heads[m] >= 0:
                known.label[heads[m], m] = labels[m]
                known.stamp[heads[m], m] = 0
    changed = 0
    # the number of moves when each word was last decided: a word that sees the tree it saw then
    # keeps its head, and so does every word after it in the pass (they saw that tree too)
    seen = np.full(n1, -1)
    for _ in range(PASSES if stage.version >= 2 else 1):
        moved = 0
        for m in range(1, n1):
            if is_punct[m] or heads[m] <= 0:
                continue
            if seen[m] == changed + moved:
                break
            seen[m] = changed + moved
            best = _best_head(attrs, stage, labeler, mu, heads, labels, is_punct, m, projective,
                              keys, known)
            if best != heads[m]:
                for w in (heads[m], best, m):  # their dependents or head changed
                    known.version[w] += 1
                heads[m] = best
                head_prob[m] = mu[best, m]
                moved += 1
        if moved == 0:
            break
        changed += moved
    return changed


@njit(cache=True)
def reattach_train_pass(corpus, labels, ranked, order, fine, stage, labeler, weights, acc, step):
    """One epoch of the averaged perceptron over the non-punctuation, non-root words of the gold
    trees of the sentences ``order`` of an `encode.Corpus` (``labels`` its labels as int64):
    candidates = the first ``stage.candidates`` heads of ``ranked`` (int64 (total, R): each token
    column's heads by decreasing parser marginal, -1 padded) not below the word in the gold tree,
    plus the gold head; the highest-scoring by ``weights`` float64 (2^bits,) alone; on a mistake +1
    on the gold head's keys, -1 on the prediction's. ``acc`` accumulates step · update (averaged
    weights = weights - acc / step); returns (step after, mistakes, words)."""
    dense = np.zeros(0, dtype=np.uint64)  # keys_score's "no index": ``weights`` is the table
    mistakes = words = 0
    for j in range(order.shape[0]):
        s = order[j]
        a = corpus.offsets[s]
        b = corpus.offsets[s + 1]
        n1 = b - a
        attrs = sentence_attributes(corpus.tokens[:, a:b], fine)
        tree = corpus.heads[a:b]
        lab = labels[a:b]
        buffer = np.empty(context_capacity(n1), dtype=np.int64)
        scores = np.empty(max(labeler.n_labels, 1))
        is_punct = punct_mask(attrs, n1, stage.punct_tag)
        keys = np.zeros((stage.candidates + 1, KEY_ROOM + 5 * n1), dtype=np.uint64)
        counts = np.zeros(stage.candidates + 1, dtype=np.int64)
        cands = np.empty(stage.candidates + 1, dtype=np.int64)
        for m in range(1, n1):
            gold = tree[m]
            if is_punct[m] or gold <= 0 or is_punct[gold]:
                continue
            nc = 0
            has_gold = False
            for r in range(ranked.shape[1]):
                h = ranked[a + m, r]
                if nc == stage.candidates or h < 0:
                    break
                if is_punct[h] or _descends(tree, h, m):
                    continue
                cands[nc] = h
                has_gold |= h == gold
                nc += 1
            if not has_gold:
                cands[nc] = gold
                nc += 1
            best, best_score, gold_c = 0, -np.inf, 0
            for c in range(nc):
                label = arc_label(attrs, labeler, tree, cands[c], m, buffer, scores)
                counts[c] = reattach_keys(attrs, tree, lab, stage.verb_tags, is_punct, cands[c], m,
                                          label, keys[c], stage.version)
                sc = keys_score(dense, weights, keys[c], counts[c])
                if sc > best_score:
                    best, best_score = c, sc
                if cands[c] == gold:
                    gold_c = c
            words += 1
            step += 1.0
            if best != gold_c:
                mistakes += 1
                perceptron_update(weights, acc, keys[gold_c], counts[gold_c], keys[best],
                                  counts[best], step)
    return step, mistakes, words


@njit(cache=True)
def rank_heads(mu, rows):
    """int64 (n+1, rows): each word's heads 1..n (never itself) by decreasing mu[h, m] (ties: the
    leftmost first), -1 padded; row 0 (the root) all -1. The training candidates of
    `reattach_train_pass`."""
    n1 = mu.shape[0]
    out = np.full((n1, rows), -1, dtype=np.int64)
    for m in range(1, n1):
        taken = np.zeros(n1, dtype=np.bool_)
        for r in range(min(rows, n1 - 2)):
            best, best_mu = -1, -1.0
            for h in range(1, n1):
                if h != m and not taken[h] and mu[h, m] > best_mu:
                    best, best_mu = h, mu[h, m]
            taken[best] = True
            out[m, r] = best
    return out
