"""Tree-context label templates: the second-stage labeler's features (`bpparse.labeler`).

The parser's own label templates (`features.labels`) see an arc h -> m alone, because labels are
marginalised inside the arc score. Once a tree is decoded, the label of h -> m can read the tree
around it, which is what tells most confusable labels apart: an ``obl`` has its own ``case``
preposition where an ``obj`` has none, a ``conj`` its ``cc``, an ``nsubj:pass`` a head with a
passive auxiliary (McDonald et al. 2006's second-stage labeler, with these context templates).
Keys: the arc's own label templates (`label_keys`), then for each dependent d of m its UPOS (with
its side of m) and its UPOS with its form; for each other dependent d of h the same, with h's and
m's UPOS and d's side of m; m without dependents; h's head's UPOS with h's and m's. Each key
selects a row of R weights of the labeler's table (`ContextLabeler`: its nonzero weights, by row).
"""
from typing import NamedTuple

import numpy as np

from bpparse.features.attributes import sentence_attributes
from bpparse.features.hashing import _h0, _hc, _prefetch, _slot
from bpparse.features.labels import label_keys
from bpparse.features.layout import A_UTAG, A_WORD, MAX_LABEL_TEMPLATES
from bpparse.jit import LEAF, njit

ROOT_HEAD = -7  # the UPOS value "h is the root: no head" (no UPOS id is negative)


class ContextLabeler(NamedTuple):
    """The labeler as kernels read it: the nonzero entries of its (2^hash_bits, R) weight table by
    row (compressed sparse rows: training leaves most of a row at zero, so this is a tenth of the
    dense table), row i's being ``values[starts[i]:starts[i+1]]`` (float32) for the labels
    ``columns[...]`` (uint16); ``starts`` int32 (2^hash_bits + 1,), a single 0 for "no labeler";
    ``n_labels`` R; ``layout`` the model's layout with the labeler's template switches (LY_FEATS,
    LY_MORPH, LY_LEMMA: what `label_keys` reads)."""

    starts: np.ndarray
    columns: np.ndarray
    values: np.ndarray
    n_labels: int
    layout: np.ndarray


@njit(cache=True, inline="always")
def context_capacity(n1):
    """Keys an arc of a sentence of ``n1`` token columns (ROOT included) may have."""
    return MAX_LABEL_TEMPLATES + 2 * n1 + 2


@njit(cache=True, **LEAF)
def context_label_keys(attrs, layout, heads, h, m, out):
    """Keys (unslotted hashes as int64) of arc h -> m in the tree ``heads`` (int64 (n+1,), heads[0]
    unused) into ``out`` (at least `context_capacity` long); returns their number."""
    k = label_keys(attrs, layout, h, m, out)
    n1 = heads.shape[0]
    dr = 1 if m > h else 0
    hu = attrs[A_UTAG, h + 1]
    cu = attrs[A_UTAG, m + 1]
    leaf = True
    for d in range(1, n1):
        if d == m or (heads[d] != m and heads[d] != h):
            continue
        side = 1 if d > m else 0
        du = attrs[A_UTAG, d + 1]
        dw = attrs[A_WORD, d + 1]
        if heads[d] == m:
            leaf = False
            out[k] = _hc(_hc(_hc(_hc(_h0(1601), dr), cu), du), side)
            out[k + 1] = _hc(_hc(_hc(_hc(_h0(1602), dr), cu), du), dw)
        else:
            out[k] = _hc(_hc(_hc(_hc(_hc(_h0(1604), dr), hu), cu), du), side)
            out[k + 1] = _hc(_hc(_hc(_hc(_hc(_hc(_h0(1605), dr), hu), cu), du), dw), side)
        k += 2
    if leaf:
        out[k] = _hc(_hc(_h0(1603), dr), cu)
        k += 1
    gu = attrs[A_UTAG, heads[h] + 1] if h > 0 else ROOT_HEAD
    out[k] = _hc(_hc(_hc(_hc(_h0(1606), dr), gu), hu), cu)
    return k + 1


@njit(cache=True, inline="always")
def _row(key, nrows):
    return _slot(np.uint64(key), nrows)


@njit(cache=True, **LEAF)
def context_label_scores(attrs, labeler, heads, m, keys, scores):
    """scores[r] = the `ContextLabeler`'s score of label r for the arc heads[m] -> m (``keys``: a
    scratch buffer of `context_capacity`, left holding the keys' rows). Every row's start is
    prefetched before any is read, then every row's first entry: the cache misses of an arc's
    30-odd keys overlap instead of following one another (25% less time in a microbenchmark
    over EWT test; the same sums, in the same order)."""
    k = context_label_keys(attrs, labeler.layout, heads, heads[m], m, keys)
    scores[:] = 0.0
    # read once: a record's array taken inside the loop costs two atomic reference counts an entry
    starts, columns, values = labeler.starts, labeler.columns, labeler.values
    nrows = starts.shape[0] - 1
    for i in range(k):
        keys[i] = _row(keys[i], nrows)
        _prefetch(starts, keys[i])
    for i in range(k):
        first = starts[keys[i]]
        _prefetch(columns, first)
        _prefetch(values, first)
    for i in range(k):
        row = keys[i]
        for j in range(starts[row], starts[row + 1]):
            scores[columns[j]] += values[j]


@njit(cache=True)
def relabel_tree(attrs, labeler, heads, labels, label_prob, temperature):
    """Label every word of the tree ``heads`` by the `ContextLabeler` (with an empty table
    ``labels`` and ``label_prob`` stay as they are): labels[m] = argmax_r of its scores s,
    label_prob[m] = that label's probability under softmax(s / ``temperature``) (1: the model's;
    `bpparse.calibration`). Column 0 (ROOT) is left alone."""
    if labeler.starts.shape[0] <= 1:
        return
    n1 = heads.shape[0]
    keys = np.empty(context_capacity(n1), dtype=np.int64)
    scores = np.empty(labeler.n_labels)
    for m in range(1, n1):
        context_label_scores(attrs, labeler, heads, m, keys, scores)
        best = np.argmax(scores)
        labels[m] = best
        z = 0.0  # np.sum(np.exp((scores - scores[best]) / temperature)) without its temporaries
        for r in range(scores.shape[0]):
            z += np.exp((scores[r] - scores[best]) / temperature)
        label_prob[m] = 1.0 / z


@njit(cache=True)
def tree_label_scores(attrs, labeler, heads, scores):
    """scores[m, r] = the `ContextLabeler`'s score of label r for the arc heads[m] -> m, for every
    word m >= 1 of the tree ``heads`` (``scores`` float64 (n+1, R); row 0 untouched)."""
    keys = np.empty(context_capacity(heads.shape[0]), dtype=np.int64)
    for m in range(1, heads.shape[0]):
        context_label_scores(attrs, labeler, heads, m, keys, scores[m])


@njit(cache=True)
def relabel_corpus(corpus, fine, labeler, labels, label_prob):
    """`relabel_tree` on the trees of every sentence of an `encode.Corpus` (its labels unread)."""
    for s in range(corpus.offsets.shape[0] - 1):
        a = corpus.offsets[s]
        b = corpus.offsets[s + 1]
        relabel_tree(sentence_attributes(corpus.tokens[:, a:b], fine), labeler,
                     corpus.heads[a:b], labels[a:b], label_prob[a:b], 1.0)


@njit(cache=True)
def labeler_train_pass(corpus, order, fine, layout, table, sq, acc, step, learning_rate, eps,
                       min_update):
    """One epoch of AdaGrad on the labels' conditional log-likelihood over the gold trees of the
    sentences ``order`` of an `encode.Corpus`, updating the dense ``table`` float64 (2^bits, R)
    in place (``layout``: as `ContextLabeler.layout`): per arc, softmax over the R labels of the
    sum of its keys' rows, gradient p - onehot(gold) on each key's row, where it is
    larger than ``min_update`` (so labels an arc never makes probable keep zero weights there: a
    sparse table). ``sq``: the squared-gradient sums, ``acc``: sum of step · update (averaged
    weights = table - acc / steps); ``step``: arcs seen before; returns (steps after,
    log-likelihood sum)."""
    R = table.shape[1]
    nrows = table.shape[0]
    scores = np.empty(R)
    loglik = 0.0
    for j in range(order.shape[0]):
        s = order[j]
        a = corpus.offsets[s]
        b = corpus.offsets[s + 1]
        attrs = sentence_attributes(corpus.tokens[:, a:b], fine)
        tree = corpus.heads[a:b]
        keys = np.empty(context_capacity(b - a), dtype=np.int64)
        for m in range(1, b - a):
            k = context_label_keys(attrs, layout, tree, tree[m], m, keys)
            scores[:] = 0.0
            for i in range(k):
                scores += table[_row(keys[i], nrows)]
            top = scores.max()
            p = np.exp(scores - top)
            z = p.sum()
            p /= z
            gold = corpus.labels[a + m]
            if gold < 0:  # a label the model does not know: no gradient
                continue
            loglik += scores[gold] - top - np.log(z)
            p[gold] -= 1.0
            for i in range(k):
                row = _row(keys[i], nrows)
                for r in range(R):
                    g = p[r]
                    if abs(g) <= min_update:
                        continue
                    sq[row, r] += g * g
                    delta = -learning_rate * g / (np.sqrt(sq[row, r]) + eps)
                    table[row, r] += delta
                    acc[row, r] += step * delta
            step += 1
    return step, loglik
