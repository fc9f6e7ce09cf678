"""Punctuation attachment read from the decoded tree: the punctuation stage's features and kernels.

Where a comma or a quote attaches in UD depends on the phrase it delimits (UD: the head of the
clause or phrase it belongs to, without crossing its arcs), which an arc-factored score cannot see.
After the tree of the other words is decoded, each punctuation word p chooses its head h among the
non-punctuation words by

    score(h) = log mu[h, p] + scale * w . f(h, p, tree)

mu: the parser's arc marginals; f: hashed indicator keys of how h's subtree (its non-punctuation
words) lies around p (p inside its span, just before it or just after it, or apart), h's UPOS and
label and its head's label, whether the words beside p belong to h's subtree and their labels,
p's form, side, distance and rank of h among the candidates, whether h -> p would cross an arc
of the other words, and whether p's partner (the other bracket or quote of its pair) is attached
to h (UD attaches both to the same word); w: averaged-perceptron weights trained on gold trees
(`punct_train_pass`), ``scale`` chosen on dev (`bpparse.punct`). Words are punctuation by their
UPOS (PUNCT). A candidate never makes a cycle (p's own descendants are excluded) and the root word
keeps its place, so the result is a tree with the same root.
"""
from typing import NamedTuple

import numpy as np

from bpparse.features.attributes import sentence_attributes
from bpparse.features.hashing import _fin, _h0, _hc, _in_word, _word
from bpparse.features.layout import A_UTAG, A_WORD
from bpparse.jit import LEAF, njit

N_KEYS = 33  # keys a candidate has (the crossing keys 29, 30: 0 when the arc crosses nothing)
MAX_RANK, MAX_DISTANCE, MAX_CANDIDATES = 4, 6, 6
MIN_MARGINAL = 1e-6  # log mu is floored here: a head BP all but excludes can still be chosen


class PunctAttacher(NamedTuple):
    """The punctuation stage as kernels read it: ``index`` and ``weights`` its weights'
    `features.store.SparseTable` (an empty index: no stage, the parser's heads are kept),
    ``scale`` (weight of w . f against log mu), ``punct_tag`` the UPOS id of PUNCT in the
    model's vocabulary, ``n_labels`` R (labels R, R+1, R+2 stand for "before the sentence",
    "after it" and "h is the root word"), ``pairs`` int64 (k, 2) the lower-cased form ids of
    opening and closing marks of a pair (the same id twice: a quote that opens and closes)."""

    index: np.ndarray
    weights: np.ndarray
    scale: float
    punct_tag: int
    n_labels: int
    pairs: np.ndarray


def no_punct_stage(n_labels=0):
    """The `PunctAttacher` of "no punctuation stage"."""
    return PunctAttacher(np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.float32), 0.0, -1,
                         int(n_labels), np.zeros((0, 2), dtype=np.int64))


@njit(cache=True)
def punct_partners(attrs, is_punct, pairs):
    """int64 (n+1,): each punctuation word's partner, the other mark of its pair (-1: none).
    Brackets pair by nesting (``pairs`` rows with two ids), quotes that open and close alike by
    order (first with second, third with fourth, ...)."""
    n1 = is_punct.shape[0]
    partner = np.full(n1, -1, dtype=np.int64)
    stack = np.empty(n1, dtype=np.int64)
    for t in range(pairs.shape[0]):
        opening, closing = pairs[t, 0], pairs[t, 1]
        top = 0
        for i in range(1, n1):
            if not is_punct[i]:
                continue
            form = attrs[A_WORD, i + 1]
            if opening == closing and form == opening:
                if top == 1:
                    partner[stack[0]], partner[i] = i, stack[0]
                    top = 0
                else:
                    stack[0], top = i, 1
            elif form == opening:
                stack[top] = i
                top += 1
            elif form == closing and top > 0:
                top -= 1
                partner[stack[top]], partner[i] = i, stack[top]
    return partner


@njit(cache=True)
def subtree_spans(heads, is_punct):
    """(lo, hi) int64 (n+1,): the first and last word of each word's subtree of non-punctuation
    words (reached through non-punctuation words only); a word's own position when it has none."""
    n1 = heads.shape[0]
    lo = np.arange(n1)
    hi = np.arange(n1)
    for m in range(1, n1):
        if is_punct[m]:
            continue
        y = m
        for _ in range(n1):  # bounded: a malformed input cannot loop
            lo[y] = min(lo[y], m)
            hi[y] = max(hi[y], m)
            if y == 0 or is_punct[y]:
                break
            y = heads[y]
    return lo, hi


@njit(cache=True, inline="always")
def _descends(heads, x, h):
    """True when word ``x`` is ``h`` or below it in ``heads``."""
    n1 = heads.shape[0]
    for _ in range(n1):
        if x == h:
            return True
        if x <= 0:
            return False
        x = heads[x]
    return False


@njit(cache=True, inline="always")
def _crosses(a, b, c, d):
    lo1, hi1 = min(a, b), max(a, b)
    lo2, hi2 = min(c, d), max(c, d)
    return (lo1 < lo2 < hi1 < hi2) or (lo2 < lo1 < hi2 < hi1)


@njit(cache=True, **LEAF)
def keeps_projective(heads, h, m):
    """Does the arc h -> m cross no other arc of the tree ``heads`` (m's own arc ignored, ROOT's
    included)? Then moving m under h keeps a projective tree projective."""
    for d in range(1, heads.shape[0]):
        if d != m and _crosses(h, m, heads[d], d):
            return False
    return True


@njit(cache=True)
def punct_candidates(heads, is_punct, p):
    """int64 array of the words p may attach to in ``heads``: the non-punctuation words other than
    p that are not below p (no cycle), in increasing order."""
    n1 = heads.shape[0]
    out = np.empty(n1, dtype=np.int64)
    k = 0
    for h in range(1, n1):
        if h != p and not is_punct[h] and not _descends(heads, h, p):
            out[k] = h
            k += 1
    return out[:k]


@njit(cache=True, **LEAF)
def punct_keys(attrs, heads, labels, is_punct, lo, hi, partner, n_labels, p, cands, keys):
    """Hashed keys (uint64, ``keys`` (len(cands), N_KEYS); 0 = none) of attaching punctuation
    word ``p`` to each candidate, in the tree ``heads`` with ``labels`` (int64 (n+1,)), ``lo`` /
    ``hi`` from `subtree_spans`, ``partner`` from `punct_partners`."""
    n1 = heads.shape[0]
    n = n1 - 1
    bos, eos, root = n_labels, n_labels + 1, n_labels + 2
    pf = attrs[A_WORD, p + 1]
    prev_u = attrs[A_UTAG, p]
    next_u = attrs[A_UTAG, p + 2]
    left = p - 1
    while left >= 1 and is_punct[left]:
        left -= 1
    right = p + 1
    while right <= n and is_punct[right]:
        right += 1
    lrel = labels[left] if left >= 1 else bos
    rrel = labels[right] if right <= n else eos
    nc = cands.shape[0]
    ncand = min(nc, MAX_CANDIDATES)
    for c in range(nc):
        h = cands[c]
        d = abs(h - p)
        rank = 0
        for c2 in range(nc):  # candidates nearer p (ties: the left one first)
            d2 = abs(cands[c2] - p)
            if d2 < d or (d2 == d and c2 < c):
                rank += 1
        rank = min(rank, MAX_RANK)
        side = 0 if h < p else 1
        edge = 0 if lo[h] < p < hi[h] else (1 if p < lo[h] else 2)
        adj = 0
        if p < lo[h]:
            adj = 1
            for q in range(p + 1, lo[h]):
                if not is_punct[q]:
                    adj = 0
        elif p > hi[h]:
            adj = 2
            for q in range(hi[h] + 1, p):
                if not is_punct[q]:
                    adj = 0
        hu = attrs[A_UTAG, h + 1]
        rel = labels[h]
        hrel = labels[heads[h]] if heads[h] > 0 else root
        in_l = 1 if left >= 1 and _descends(heads, left, h) else 0
        in_r = 1 if right <= n and _descends(heads, right, h) else 0
        inside = in_l * 2 + in_r
        dist = min(d, MAX_DISTANCE)
        cross = False
        for m in range(1, n1):
            if not is_punct[m] and _crosses(h, p, heads[m], m):
                cross = True
                break
        shape = _hc(_hc(_hc(_hc(_h0(0), rel), edge), adj), side)
        k = keys[c]
        atoms = (pf, hu, rel, edge, adj, side, rank)
        for a in range(7):
            k[2 * a] = _fin(_hc(_h0(1 + a), atoms[a]))
            k[2 * a + 1] = _fin(_hc(_hc(_h0(11 + a), atoms[a]), pf))
        k[14] = _fin(shape)
        k[15] = _fin(_hc(shape, pf))
        k[16] = _fin(_hc(_hc(_hc(_hc(_hc(_h0(20), hu), edge), adj), side), pf))
        k[17] = _fin(_hc(_hc(_hc(_h0(21), rank), side), pf))
        k[18] = _fin(_hc(_hc(_hc(_h0(22), dist), side), pf))
        k[19] = _fin(_hc(_hc(_hc(_hc(_hc(_h0(23), prev_u), next_u), pf), side), adj))
        k[20] = _fin(_hc(_hc(_hc(_hc(_h0(24), hrel), rel), side), edge))
        k[21] = _fin(_hc(_hc(_h0(25), 1 if p == 1 else 0), pf))
        k[22] = _fin(_hc(_hc(_h0(26), 1 if p == n else 0), pf))
        ins = _hc(_hc(_h0(27), inside), side)
        k[23] = _fin(_hc(ins, pf))
        k[24] = _fin(_hc(_hc(ins, pf), rel))
        k[25] = _fin(_hc(_hc(_hc(ins, pf), lrel), rrel))
        k[26] = _fin(_hc(_hc(_hc(ins, 1000), rel), rrel))
        k[27] = _fin(_hc(_hc(_hc(ins, 2000), rel), lrel))
        k[28] = _fin(_hc(_hc(_hc(_h0(28), ncand), side), rank))
        k[29] = _fin(_h0(29)) if cross else np.uint64(0)
        k[30] = _fin(_hc(_h0(30), pf)) if cross else np.uint64(0)
        q = partner[p]
        pair = 0 if q < 0 else (1 if heads[q] == h else 2)
        k[31] = _fin(_hc(_hc(_h0(31), pair), pf))
        k[32] = _fin(_hc(_hc(_hc(_h0(32), pair), pf), side))


@njit(cache=True, inline="always")
def keys_score(index, weights, keys, count):
    """Sum of the weights at the first ``count`` hashed ``keys`` (0 = none): of the dense table
    ``weights`` (2^bits,) when ``index`` is empty (training), else of the `SparseTable` (index,
    weights) (parsing; an unset slot is 0, so both give the same sum)."""
    s = 0.0
    if index.shape[0] == 0:
        mask = np.uint64(weights.shape[0] - 1)
        for j in range(count):
            if keys[j] != 0:
                s += weights[keys[j] & mask]
    else:
        mask = np.uint64(32 * index.shape[0] - 1)
        for j in range(count):
            if keys[j] != 0:
                i = keys[j] & mask
                bits, first = _word(index, True, i)
                r = _in_word(bits, first, i & np.uint64(63), True)
                if r >= 0:
                    s += weights[r]
    return s


@njit(cache=True, inline="always")
def perceptron_update(weights, acc, gold_keys, gold_count, wrong_keys, wrong_count, step):
    """The averaged perceptron's mistake update at ``step``: +1 on the gold choice's keys, -1 on
    the wrong one's (0 = none); ``acc`` += step · update (averaged: weights - acc / step)."""
    mask = np.uint64(weights.shape[0] - 1)
    for j in range(gold_count):
        if gold_keys[j] != 0:
            weights[gold_keys[j] & mask] += 1.0
            acc[gold_keys[j] & mask] += step
    for j in range(wrong_count):
        if wrong_keys[j] != 0:
            weights[wrong_keys[j] & mask] -= 1.0
            acc[wrong_keys[j] & mask] -= step


@njit(cache=True)
def punct_mask(attrs, n1, punct_tag):
    """bool (n+1,): the words whose UPOS is ``punct_tag``."""
    is_punct = np.zeros(n1, dtype=np.bool_)
    for i in range(1, n1):
        is_punct[i] = attrs[A_UTAG, i + 1] == punct_tag
    return is_punct


@njit(cache=True)
def attach_punct(attrs, stage, mu, heads, labels, head_prob, projective):
    """Re-attach every punctuation word of the tree ``heads`` (int64 (n+1,), changed in place) by
    the `PunctAttacher` ``stage`` (no weights: nothing changes), reading ``labels`` and the arc
    marginals ``mu`` float64 (n+1, n+1); ``head_prob[p]`` becomes mu[new head, p]. Features read
    the tree as decoded (every word's choice sees the same tree); the root word stays put; with
    ``projective`` only heads that keep the tree projective (`keeps_projective`) are chosen.
    Returns how many heads changed."""
    if stage.index.shape[0] == 0:
        return 0
    changed = 0
    n1 = heads.shape[0]
    is_punct = punct_mask(attrs, n1, stage.punct_tag)
    tree = heads.copy()
    lo, hi = subtree_spans(tree, is_punct)
    partner = punct_partners(attrs, is_punct, stage.pairs)
    keys = np.zeros((n1, N_KEYS), dtype=np.uint64)
    for p in range(1, n1):
        if not is_punct[p] or tree[p] == 0:
            continue
        cands = punct_candidates(heads, is_punct, p)
        if cands.shape[0] == 0:
            continue
        punct_keys(attrs, tree, labels, is_punct, lo, hi, partner, stage.n_labels, p, cands, keys)
        best, best_score = -1, -np.inf
        for c in range(cands.shape[0]):
            if projective and cands[c] != heads[p] and not keeps_projective(heads, cands[c], p):
                continue
            w = keys_score(stage.index, stage.weights, keys[c], N_KEYS)
            s = np.log(max(mu[cands[c], p], MIN_MARGINAL)) + stage.scale * w
            if s > best_score:
                best, best_score = cands[c], s
        if best >= 0 and heads[p] != best:
            heads[p] = best
            head_prob[p] = mu[best, p]
            changed += 1
    return changed


@njit(cache=True)
def punct_train_pass(corpus, labels, order, punct_tag, n_labels, pairs, weights, acc, step):
    """One epoch of the averaged perceptron over the punctuation words of the gold trees of the
    sentences ``order`` of an `encode.Corpus` (``labels``: its labels as int64; ``pairs`` as in
    `PunctAttacher`): for each word
    whose gold head is a candidate, the highest-scoring candidate by ``weights`` float64 (2^bits,)
    alone; on a mistake +1 on the gold head's keys, -1 on the prediction's. ``acc`` accumulates
    step · update (averaged weights = weights - acc / step); returns (step after, mistakes,
    words)."""
    dense = np.zeros(0, dtype=np.uint64)  # keys_score's "no index": ``weights`` is the table
    mistakes = words = 0
    for j in range(order.shape[0]):
        s = order[j]
        a = corpus.offsets[s]
        b = corpus.offsets[s + 1]
        n1 = b - a
        attrs = sentence_attributes(corpus.tokens[:, a:b], False)
        tree = corpus.heads[a:b]
        is_punct = punct_mask(attrs, n1, punct_tag)
        lo, hi = subtree_spans(tree, is_punct)
        partner = punct_partners(attrs, is_punct, pairs)
        keys = np.zeros((n1, N_KEYS), dtype=np.uint64)
        for p in range(1, n1):
            if not is_punct[p] or tree[p] <= 0 or is_punct[tree[p]]:
                continue
            cands = punct_candidates(tree, is_punct, p)
            gold = -1
            for c in range(cands.shape[0]):
                if cands[c] == tree[p]:
                    gold = c
            if gold < 0:
                continue
            punct_keys(attrs, tree, labels[a:b], is_punct, lo, hi, partner, n_labels, p, cands,
                       keys)
            best, best_score = 0, -np.inf
            for c in range(cands.shape[0]):
                sc = keys_score(dense, weights, keys[c], N_KEYS)
                if sc > best_score:
                    best, best_score = c, sc
            words += 1
            step += 1.0
            if best != gold:
                mistakes += 1
                perceptron_update(weights, acc, keys[gold], N_KEYS, keys[best], N_KEYS, step)
    return step, mistakes, words
