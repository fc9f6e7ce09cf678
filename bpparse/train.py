"""Training by stochastic gradient on the conditional log-likelihood with BP gradients (SE08 §7).

For one sentence the gradient of log p(gold tree, gold labels | sentence) is (DESIGN §4)

    LINK features of h -> m:       gold[h, m] - mu[h, m]                    (mu = sigma(B[h, m]))
    label features of h -> m, r:   gold[h, m] [r = gold label] - mu[h, m] p(r | h -> m)
    GRAND / SIB features:          gold pair - P_F(1, 1)                    (BP factor belief)
    NOCROSS features of m, l:      gold crossings - expected crossings

with BP's beliefs standing in for the exact marginals. Labels are nuisance variables inside the arc:
s[h, m] = logsumexp_r s[h, m, r]. Updates are AdaGrad (or plain SGD with a decaying rate) on the
hashed weights, optionally with L2 on the touched weights and with weight averaging.

Parallelism and determinism: a mini-batch is cut into ``jobs`` contiguous chunks; numba's prange runs
the chunks on the cores, each chunk adding its sentences' gradients in order into its own dense
buffer (touched 16-weight pages flagged); the update then sums the chunk buffers in chunk order.
The result depends on the seed and ``jobs`` only, not on thread scheduling. Epoch e visits the
sentences in the order ``default_rng([seed, e]).permutation``, so a run resumed from a checkpoint
reaches the same weights as an uninterrupted one.
"""
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit, prange

from bpparse import features as F
from bpparse.config import parse_constraint
from bpparse.errors import ConfigError, ModelFileError
from bpparse.kernels.bp_engine import (ATMOST1, EXACTLY1, NO_GLOBAL, TREE,
                                       beliefs_to_marginals, bp_factor_beliefs,
                                       bp_full_graph)
from bpparse.kernels.factors.hard import with_nand_pairs
from bpparse.kernels.matrix_tree import matrix_tree_marginals

CHECKPOINT_VERSION = 1
_CODES = {"TREE": TREE, "PTREE": TREE, "EXACTLY1": EXACTLY1, "ATMOST1": ATMOST1, "NOT2": NO_GLOBAL}


# ---------------------------------------------------------------- per-sentence kernels

@njit(cache=True)
def marginalise_labels(link, ls):
    """Labeled arc scores -> (arc, label_logp).

    link: float64 (n+1, n+1) unlabeled scores (-inf where no arc); ls: float64 (n+1, n+1, R) label
    scores. arc[h, m] = link[h, m] + logsumexp_r ls[h, m, r]; label_logp[h, m, r] = log p(r | h, m).
    """
    n1 = link.shape[0]
    R = ls.shape[2]
    arc = link.copy()
    lp = np.zeros((n1, n1, R))
    for h in range(n1):
        for m in range(1, n1):
            if link[h, m] == -np.inf:
                continue
            top = -np.inf
            for r in range(R):
                top = max(top, ls[h, m, r])
            z = 0.0
            for r in range(R):
                z += np.exp(ls[h, m, r] - top)
            lz = top + np.log(z)
            arc[h, m] += lz
            for r in range(R):
                lp[h, m, r] = ls[h, m, r] - lz
    return arc, lp


@njit(cache=True)
def arc_scores(attrs, layout, mask, theta):
    """(arc, label_logp): float64 (n+1, n+1) arc log-potentials (labels summed out) and float64
    (n+1, n+1, R) log p(label | arc) (R = 0 without labels)."""
    n1 = attrs.shape[1] - 2
    link = F.link_scores(attrs, layout, mask, theta)
    if layout[F.LY_NLAB] > 0:
        return marginalise_labels(link, F.label_scores(attrs, layout, theta))
    return link, np.zeros((n1, n1, 0))


@njit(cache=True)
def sentence_scores(attrs, layout, mask, theta, use_grand, use_sib, use_cross, single_root):
    """All log-potentials of one sentence: (arc, label_logp, pair_a, pair_b, pair_w, n_grand,
    cross_w); see `bpparse.model.SentenceScores` for shapes. ``single_root``: leave out the SIB
    factors of ROOT (see `kept_pairs`); pass the model's ``model.single_root``."""
    return pruned_sentence_scores(attrs, layout, mask, theta, use_grand, use_sib, use_cross,
                                  single_root, 0.0, np.empty(0, dtype=np.int64))


@njit(cache=True)
def kept_arcs(arc, threshold, single_root, heads):
    """Arcs that may carry second-order factors: bool (n+1, n+1), True where the first-order
    marginal of ``arc`` (matrix-tree, Koo & Collins 2010-style pruning) is at least ``threshold``,
    plus each word's most probable head and the arcs of ``heads`` (int64 (n+1,), gold tree in
    training; empty = none), so that gold pairs are never pruned."""
    n1 = arc.shape[0]
    mu = matrix_tree_marginals(arc, single_root)[0]
    keep = np.zeros((n1, n1), dtype=np.bool_)
    for m in range(1, n1):
        best = -1
        for h in range(n1):
            if h == m:
                continue
            if mu[h, m] >= threshold:
                keep[h, m] = True
            if best < 0 or mu[h, m] > mu[best, m]:
                best = h
        keep[best, m] = True
        if heads.shape[0] == n1 and heads[m] >= 0:
            keep[heads[m], m] = True
    return keep


@njit(cache=True)
def _fill_kept_pairs(keep, use_grand, use_sib, single_root, pa, pb):
    """Enumerate the pairs of `kept_pairs` into pa / pb (empty arrays: count only); returns
    (count, n_grand)."""
    n1 = keep.shape[0]
    fill = pa.shape[0] > 0
    i = 0
    if use_grand:
        for h in range(1, n1):
            for g in range(n1):
                if not keep[g, h]:
                    continue
                for m in range(1, n1):
                    if m != g and keep[h, m]:
                        if fill:
                            pa[i] = g * n1 + h
                            pb[i] = h * n1 + m
                        i += 1
    n_grand = i
    if use_sib:
        for h in range(1 if single_root else 0, n1):
            for m in range(1, n1):
                if not keep[h, m]:
                    continue
                for s in range(m + 1, n1):
                    if keep[h, s]:
                        if fill:
                            pa[i] = h * n1 + m
                            pb[i] = h * n1 + s
                        i += 1
    return i, n_grand


@njit(cache=True)
def kept_pairs(keep, use_grand, use_sib, single_root):
    """The GRAND / SIB factors both of whose arcs are in ``keep`` (bool (n+1, n+1), False on the
    diagonal and column 0), in
    `bpparse.graph.all_pairs` order: (pair_a, pair_b, n_grand). With ``single_root`` the SIB factors
    of ROOT are left out: two children of ROOT never co-occur in a tree, and BP would only count that
    constraint a second time next to TREE (which made second-order training diverge)."""
    empty = np.empty(0, dtype=np.int64)
    count, n_grand = _fill_kept_pairs(keep, use_grand, use_sib, single_root, empty, empty)
    pa = np.empty(count, dtype=np.int64)
    pb = np.empty(count, dtype=np.int64)
    if count > 0:
        _fill_kept_pairs(keep, use_grand, use_sib, single_root, pa, pb)
    return pa, pb, n_grand


@njit(cache=True)
def pruned_sentence_scores(attrs, layout, mask, theta, use_grand, use_sib, use_cross, single_root,
                           prune, heads):
    """`sentence_scores` with the GRAND / SIB factors restricted to `kept_arcs` (``prune``: the
    first-order marginal threshold, 0 = every factor; ``heads``: arcs always kept)."""
    n1 = attrs.shape[1] - 2
    arc, label_logp = arc_scores(attrs, layout, mask, theta)
    if prune > 0.0 and (use_grand or use_sib):
        pa, pb, n_grand = kept_pairs(kept_arcs(arc, prune, single_root, heads), use_grand, use_sib,
                                     single_root)
    else:
        every = np.ones((n1, n1), dtype=np.bool_)
        for h in range(n1):
            every[h, h] = False
            every[h, 0] = False
        pa, pb, n_grand = kept_pairs(every, use_grand, use_sib, single_root)
    pw = F.pair_scores(attrs, layout, mask, theta, pa, pb, n_grand)
    if use_cross:
        cross_w = F.cross_scores(attrs, layout, mask, theta)
    else:
        cross_w = np.zeros((0, 0))
    return arc, label_logp, pa, pb, pw, n_grand, cross_w


@njit(cache=True)
def infer_sentence(attrs, layout, mask, theta, code, projective, single_root, not2, no2cycle,
                   iterations, tol, damping, use_grand, use_sib, use_cross, cross_mode, prune, heads):
    """Scores + BP for one sentence.

    Returns (mu, label_logp, pair_a, pair_b, n_grand, n_struct, pair_prob, cross_w, crossings):
    mu float64 (n+1, n+1) arc marginals sigma(B); pair_prob P_F(1,1) for the first n_struct
    (GRAND+SIB) pairs; crossings float64 (n+1, n+1) expected crossings per NOCROSS group.
    ``code``: bp_engine constraint code; NOT2 / NO2CYCLE NAND pairs are appended when asked.
    ``prune``, ``heads``: as in `pruned_sentence_scores`.
    """
    n1 = attrs.shape[1] - 2
    n = n1 - 1
    arc, label_logp, pa, pb, pw, n_grand, cross_w = pruned_sentence_scores(
        attrs, layout, mask, theta, use_grand, use_sib, use_cross, single_root, prune, heads)
    n_struct = pa.shape[0]
    if not2 or no2cycle:
        pa, pb, pw = with_nand_pairs(pa, pb, pw, n, not2, no2cycle)
    bel, active, msg_a, msg_b, cw, cross_active, cross_msg, _ = bp_full_graph(
        arc, code, projective, single_root, pa, pb, pw, cross_w, use_cross, cross_mode, iterations,
        tol, damping)
    mu = beliefs_to_marginals(bel)
    if n_struct > 0 or use_cross:
        pair_prob, crossings = bp_factor_beliefs(bel, pa, pb, pw, active, msg_a, msg_b, cw,
                                                 cross_active, cross_mode, cross_msg)
    else:
        pair_prob = np.zeros(0)
        crossings = np.zeros((n1, n1))
    return mu, label_logp, pa, pb, n_grand, n_struct, pair_prob, cross_w, crossings


@njit(cache=True, inline="always")
def _crosses(h, m, k, l):
    """Do arcs h->m and k->l cross (one endpoint strictly inside, the other strictly outside)?"""
    lo = min(h, m)
    hi = max(h, m)
    if k == h or k == m or l == h or l == m:
        return False
    in_k = lo < k < hi
    in_l = lo < l < hi
    return in_k != in_l


@njit(cache=True)
def sentence_gradient(attrs, layout, mask, theta, heads, labels, code, projective, single_root,
                      not2, no2cycle, iterations, tol, damping, use_grand, use_sib, use_cross,
                      cross_mode, prune, grad, dirty, min_coef):
    """Add one sentence's CLL gradient (gold minus BP-expected counts) into ``grad``.

    heads: int64 (n+1,) gold heads; labels: int32 (n+1,) gold label ids (-1 = unknown: the label is
    then summed out). grad: float64 (len(theta),); dirty: uint8 page flags (see features).
    Returns the sentence's objective proxy: sum over words of log mu[gold head, m] + log p(gold label).
    """
    n1 = attrs.shape[1] - 2
    mu, label_logp, pa, pb, n_grand, n_struct, pair_prob, cross_w, crossings = infer_sentence(
        attrs, layout, mask, theta, code, projective, single_root, not2, no2cycle, iterations, tol,
        damping, use_grand, use_sib, use_cross, cross_mode, prune, heads)
    coef = -mu
    obj = 0.0
    for m in range(1, n1):
        h = heads[m]
        coef[h, m] += 1.0
        obj += np.log(max(mu[h, m], 1e-300))
    for h in range(n1):
        coef[h, 0] = 0.0
        coef[h, h] = 0.0
    F.link_scatter(attrs, layout, mask, coef, grad, dirty, min_coef)
    R = layout[F.LY_NLAB]
    if R > 0:
        lcoef = np.empty((n1, n1, R))
        weight = mu.copy()
        for h in range(n1):
            for m in range(n1):
                for r in range(R):
                    lcoef[h, m, r] = -mu[h, m] * np.exp(label_logp[h, m, r])
        for m in range(1, n1):
            h = heads[m]
            weight[h, m] = 1.0
            r = labels[m]
            if r >= 0:
                lcoef[h, m, r] += 1.0
                obj += label_logp[h, m, r]
            else:
                for q in range(R):
                    lcoef[h, m, q] += np.exp(label_logp[h, m, q])
        F.label_scatter(attrs, layout, lcoef, grad, dirty, weight, min_coef)
    if n_struct > 0:
        pcoef = -pair_prob[:n_struct]
        for p in range(n_struct):
            a = pa[p]
            b = pb[p]
            if heads[a % n1] == a // n1 and heads[b % n1] == b // n1:
                pcoef[p] += 1.0
        F.pair_scatter(attrs, layout, mask, pa[:n_struct], pb[:n_struct], n_grand, pcoef, grad,
                       dirty, min_coef)
    if use_cross:
        ccoef = -crossings
        for m in range(1, n1):
            for l in range(m + 1, n1):
                if _crosses(heads[m], m, heads[l], l):
                    ccoef[m, l] += 1.0
        F.cross_scatter(attrs, layout, mask, ccoef, grad, dirty, min_coef)
    return obj


@njit(cache=True, parallel=True)
def batch_gradient(tokens, offsets, heads, labels, batch, bounds, fine, layout, mask, theta,
                   code, projective, single_root, not2, no2cycle, iterations, tol, damping,
                   use_grand, use_sib, use_cross, cross_mode, prune, grads, dirty, min_coef, objective):
    """Gradients of the sentences ``batch`` (ids into the packed corpus), chunk c = batch[bounds[c]:
    bounds[c+1]] into grads[c] / dirty[c]; objective[j] receives sentence batch[j]'s objective.

    Packed corpus: tokens int32 (NUM_FIELDS, total) with sentence i in columns offsets[i] ..
    offsets[i+1]-1 (ROOT column included); heads int64 / labels int32 (total,) likewise.
    """
    for c in prange(bounds.shape[0] - 1):
        for j in range(bounds[c], bounds[c + 1]):
            s = batch[j]
            a = offsets[s]
            b = offsets[s + 1]
            attrs = F.sentence_attributes(tokens[:, a:b], fine)
            objective[j] = sentence_gradient(
                attrs, layout, mask, theta, heads[a:b], labels[a:b], code, projective, single_root,
                not2, no2cycle, iterations, tol, damping, use_grand, use_sib, use_cross, cross_mode,
                prune, grads[c], dirty[c], min_coef)


@njit(cache=True, parallel=True)
def apply_update(theta, accum, avg, grads, dirty, step, adagrad, lr, l2, eps, n_ranges,
                 sec_lo, sec_hi, sec_scale):
    """Sum the chunk gradients (in chunk order) on flagged pages and take one ascent step.

    theta, accum (AdaGrad sum of squared gradients), avg (sum of (step-1) * delta for averaging,
    Daume's trick: averaged weights = theta - avg / step): float64 (D,). grads: (C, D), dirty:
    (C, P) uint8; both are cleared on the pages visited. adagrad: AdaGrad (lr / sqrt(accum + eps))
    else SGD with rate lr; weights in [sec_lo, sec_hi) (the second-order region) step with
    lr * sec_scale. l2 is applied to touched weights only (lazy regulariser).
    """
    n_chunks = grads.shape[0]
    n_pages = dirty.shape[1]
    page = 1 << F.DIRTY_SHIFT
    D = theta.shape[0]
    per = (n_pages + n_ranges - 1) // n_ranges
    for r in prange(n_ranges):
        for p in range(r * per, min(n_pages, (r + 1) * per)):
            hit = False
            for c in range(n_chunks):
                if dirty[c, p] != 0:
                    hit = True
                    dirty[c, p] = 0
            if not hit:
                continue
            for i in range(p * page, min(D, (p + 1) * page)):
                g = 0.0
                for c in range(n_chunks):
                    g += grads[c, i]
                    grads[c, i] = 0.0
                if g == 0.0:
                    continue
                if l2 > 0.0:
                    g -= l2 * theta[i]
                rate = lr * sec_scale if sec_lo <= i < sec_hi else lr
                if adagrad:
                    accum[i] += g * g
                    delta = rate * g / np.sqrt(accum[i] + eps)
                else:
                    delta = rate * g
                theta[i] += delta
                avg[i] += (step - 1) * delta


# ---------------------------------------------------------------- decoding

def decode_marginals(mu, label_logp, projective, single_root):
    """MBR tree (max spanning tree over arc marginals; Eisner's algorithm if projective) and the most
    probable label of each chosen arc. Returns (heads int64 (n+1,), labels int64 (n+1,), -1 at 0)."""
    from bpparse.kernels.cle import mst_decode
    from bpparse.kernels.eisner import eisner_decode

    n1 = mu.shape[0]
    scores = mu.copy()
    scores[:, 0] = -np.inf
    np.fill_diagonal(scores, -np.inf)
    heads = eisner_decode(scores, single_root) if projective else mst_decode(scores, single_root)
    heads = np.asarray(heads, dtype=np.int64)
    labels = np.full(n1, -1, dtype=np.int64)
    if label_logp.shape[2] > 0:
        m = np.arange(1, n1)
        labels[1:] = np.argmax(label_logp[heads[1:], m], axis=1)
    return heads, labels


def inference_settings(config, phase, constraint=None, iterations=None, damping=None):
    """Arguments of `infer_sentence` after ``theta``, for phase "train" or "parse" of a config."""
    section = getattr(config, phase)
    base, no2cycle = parse_constraint(constraint or section.constraint)
    factors = config.model.factors
    return (_CODES[base], base == "PTREE", bool(config.model.single_root), base == "NOT2", no2cycle,
            int(iterations or section.bp_iterations), float(section.tolerance),
            float(section.damping if damping is None else damping),
            "GRAND" in factors, "SIB" in factors, "NOCROSS" in factors,
            0 if config.model.nocross == "grouped" else 1, float(section.prune))


# ---------------------------------------------------------------- gold trees

def is_projective(heads):
    """True if no two arcs of the tree cross (ROOT arcs included)."""
    n1 = len(heads)
    arcs = [(min(heads[m], m), max(heads[m], m)) for m in range(1, n1)]
    for i, (a, b) in enumerate(arcs):
        for c, d in arcs[i + 1:]:
            if a < c < b < d or c < a < d < b:
                return False
    return True


def projectivize(heads):
    """Lift non-projective arcs (Nivre & Nilsson 2005 style): while some arc is crossed, reattach
    the child of the shortest crossed arc to its head's head. Arcs from ROOT are never lifted (of
    two crossing arcs at most one leaves ROOT), and lifts that would attach a word to ROOT come last,
    so a single-rooted tree stays single-rooted when possible. Returns (new heads, arcs lifted)."""
    heads = np.array(heads, dtype=np.int64)
    n1 = len(heads)
    lifted = 0
    while True:
        best = None
        for m in range(1, n1):
            h = heads[m]
            if h == 0:
                continue
            a, b = min(h, m), max(h, m)
            for l in range(1, n1):
                k = heads[l]
                c, d = min(k, l), max(k, l)
                if a < c < b < d or c < a < d < b:
                    key = (heads[h] == 0, b - a, m)
                    if best is None or key < best:
                        best = key
                    break
        if best is None:
            return heads, lifted
        m = best[2]
        heads[m] = heads[heads[m]]
        lifted += 1


def prepare_gold(encoded, single_root, projective, policy):
    """(heads or None, status) for one training sentence: status "ok", "projectivized",
    "skipped_nonprojective", "skipped_multiroot" or "skipped_missing_heads"."""
    heads = np.asarray(encoded.heads, dtype=np.int64)
    if heads.shape[0] < 2 or np.any(heads[1:] < 0):
        return None, "skipped_missing_heads"
    if single_root and int(np.sum(heads[1:] == 0)) != 1:
        return None, "skipped_multiroot"
    if projective and not is_projective(heads):
        if policy == "projectivize":
            new, _ = projectivize(heads)
            return new, "projectivized"
        return None, "skipped_nonprojective"
    return heads, "ok"


# ---------------------------------------------------------------- corpus packing

def pack(encoded, heads_list):
    """Concatenate sentences into (tokens int32 (NUM_FIELDS, total), offsets int64, heads, labels)."""
    sizes = [e.tokens.shape[1] for e in encoded]
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    tokens = np.concatenate([e.tokens for e in encoded], axis=1) if encoded else np.zeros((8, 0), np.int32)
    heads = np.concatenate(heads_list) if encoded else np.zeros(0, np.int64)
    labels = np.concatenate([np.asarray(e.labels, dtype=np.int32) for e in encoded]) if encoded \
        else np.zeros(0, np.int32)
    return np.ascontiguousarray(tokens, dtype=np.int32), offsets, heads.astype(np.int64), labels


def build_mask(model, tokens, offsets, heads):
    """Gold-feature bit mask over the LINK+SECOND regions from every gold tree of the packed corpus."""
    from bpparse.model import mask_words

    mask = np.zeros(mask_words(model.layout), dtype=np.uint64)
    _mark_all(tokens, offsets, heads, model.fine_tags, model.layout, model.config.second_order,
              model.config.nocross, mask)
    return mask


@njit(cache=True)
def _mark_all(tokens, offsets, heads, fine, layout, second_order, nocross, mask):
    for s in range(offsets.shape[0] - 1):
        a = offsets[s]
        b = offsets[s + 1]
        attrs = F.sentence_attributes(tokens[:, a:b], fine)
        F.mark_gold_features(attrs, layout, heads[a:b], second_order, nocross, mask)


# ---------------------------------------------------------------- evaluation

def evaluate_encoded(model, encoded, constraint=None):
    """UAS and LAS (percent, punctuation counted) of MBR parses of encoded gold sentences."""
    total = correct = labeled = 0
    for e in encoded:
        heads, labels = model.parse_encoded(e, constraint)
        gold = np.asarray(e.heads)
        ok = heads[1:] == gold[1:]
        total += len(ok)
        correct += int(ok.sum())
        labeled += int((ok & (labels[1:] == np.asarray(e.labels)[1:])).sum())
    return {"uas": 100.0 * correct / max(total, 1), "las": 100.0 * labeled / max(total, 1),
            "words": total}


# ---------------------------------------------------------------- the trainer

def _resolve_fine_tags(config, vocabs):
    ft = config.features.fine_tags
    if ft == "auto":
        xpos = vocabs.vocabs[5]
        real = [s for s in xpos.strings[2:] if s != "_"]
        ft = len(real) > 1
    return config.replace({"features.fine_tags": bool(ft)})


def _save_checkpoint(path, state):
    tmp = str(path) + ".tmp"
    with open(tmp, "wb") as fh:
        np.savez(fh, **state)
    os.replace(tmp, path)


def _sparse(x):
    nz = np.flatnonzero(x)
    return nz, x[nz]


def _dense(idx, val, size):
    out = np.zeros(size)
    out[idx] = val
    return out


def train(config, train_path, out_path, dev_path=None, resume=False, progress=True, log=None):
    """Train a model and write it to ``out_path``; returns the final `Model`.

    ``config``: a `Config` (CLI overrides already applied). Writes beside the model:
    ``<out>.log.jsonl`` (one JSON object per epoch) and ``<out>.ckpt`` (checkpoint after each epoch,
    used by ``resume=True``). With a dev file, the model kept is the epoch best on dev UAS (early
    stopping, SE08 §8.3); otherwise the last epoch.
    """
    from tqdm import tqdm

    from bpparse.conll import read_conll
    from bpparse.encode import Vocabularies
    from bpparse.model import Model, round_weights, save_model

    say = log or (lambda msg: print(msg, file=sys.stderr))
    out_path = Path(out_path)
    log_path = Path(str(out_path) + ".log.jsonl")
    ckpt_path = Path(str(out_path) + ".ckpt")
    t_start = time.time()

    sentences = list(read_conll(train_path))
    vocabs = Vocabularies.build(sentences, config.features.min_count)
    config = _resolve_fine_tags(config, vocabs)
    encoded_all = [vocabs.encode(s) for s in sentences]
    base, _ = parse_constraint(config.train.constraint)
    counts = {"sentences": len(encoded_all), "ok": 0, "projectivized": 0, "skipped_nonprojective": 0,
              "skipped_multiroot": 0, "skipped_missing_heads": 0}
    encoded, gold_heads = [], []
    for e in encoded_all:
        heads, status = prepare_gold(e, config.model.single_root, base == "PTREE",
                                     config.train.unreachable_gold)
        counts[status] += 1
        if heads is not None:
            encoded.append(e)
            gold_heads.append(heads)
    if not encoded:
        raise ConfigError(f"{train_path}: no usable training sentence ({counts})")
    if counts["ok"] != len(encoded_all):
        say("gold trees the training constraint cannot produce: " + ", ".join(
            f"{k} {v}" for k, v in counts.items() if k not in ("sentences", "ok") and v))
    dev = None
    if dev_path:
        dev = [vocabs.encode(s) for s in read_conll(dev_path)]

    model = Model(config, vocabs)
    tokens, offsets, heads, labels = pack(encoded, gold_heads)
    if config.features.gold_only:
        model.mask = build_mask(model, tokens, offsets, heads)
    D = model.theta.shape[0]
    theta = model.theta
    accum = np.zeros(D)
    avg = np.zeros(D)
    step = 1
    first_epoch = 0
    best = {"epoch": 0, "uas": -1.0, "las": -1.0}
    best_theta = None
    tr = config.train
    opt = config.optimizer
    if resume:
        if not ckpt_path.exists():
            raise ModelFileError(f"{ckpt_path}: no checkpoint to resume from")
        with np.load(ckpt_path) as z:
            if int(z["version"]) != CHECKPOINT_VERSION or int(z["size"]) != D:
                raise ModelFileError(f"{ckpt_path}: checkpoint does not match this config and data")
            saved = json.loads(str(z["info"]))
            if saved["config"] != config.replace({"train.epochs": saved["config"]["train"]["epochs"]}).to_dict():
                raise ModelFileError(f"{ckpt_path}: checkpoint was written with another config")
            theta[:] = _dense(z["theta_i"], z["theta_v"], D)
            accum = _dense(z["accum_i"], z["accum_v"], D)
            avg = _dense(z["avg_i"], z["avg_v"], D)
            if z["best_i"].shape[0] or saved["best"]["epoch"]:
                best_theta = _dense(z["best_i"], z["best_v"], D)
            step = int(z["step"])
            first_epoch = int(z["epoch"])
            best = saved["best"]
        say(f"resuming after epoch {first_epoch}")
    elif log_path.exists():
        log_path.unlink()

    jobs = max(1, int(tr.jobs))
    n_pages = (D >> F.DIRTY_SHIFT) + 1
    grads = np.zeros((jobs, D))
    dirty = np.zeros((jobs, n_pages), dtype=np.uint8)
    settings = inference_settings(config, "train")
    N = len(encoded)
    sizes = np.diff(offsets)
    for epoch in range(first_epoch, tr.epochs):
        t0 = time.time()
        order = np.random.default_rng([tr.seed, epoch]).permutation(N)
        objective = 0.0
        words = 0
        bar = tqdm(total=N, desc=f"epoch {epoch + 1}/{tr.epochs}", unit="sent", file=sys.stderr,
                   disable=not progress, leave=False, mininterval=0.5)
        for start in range(0, N, tr.batch_size):
            batch = order[start:start + tr.batch_size].astype(np.int64)
            bounds = _chunk_bounds(sizes[batch], jobs)
            obj = np.zeros(batch.shape[0])
            batch_gradient(tokens, offsets, heads, labels, batch, bounds, model.fine_tags,
                           model.layout, model.mask, theta, *settings, grads, dirty,
                           float(tr.min_coef), obj)
            if opt.method == "adagrad":
                lr = opt.learning_rate
            else:
                lr = opt.learning_rate / (1.0 + opt.lr_decay * (step - 1))
            apply_update(theta, accum, avg, grads, dirty, float(step), opt.method == "adagrad", lr,
                         float(opt.l2), float(opt.adagrad_eps), 4 * jobs, int(model.layout[F.LY_SEC_OFF]),
                         int(model.layout[F.LY_LAB_OFF]), float(opt.second_order_lr_scale))
            step += 1
            objective += float(obj.sum())
            words += int(sizes[batch].sum() - batch.shape[0])
            bar.update(batch.shape[0])
            bar.set_postfix(obj=f"{objective / max(words, 1):.4f}", refresh=False)
        bar.close()
        seconds = time.time() - t0
        final = theta - avg / max(step - 1, 1) if opt.averaging else theta.copy()
        model.theta = round_weights(final)
        record = {"epoch": epoch + 1, "objective_per_word": objective / max(words, 1),
                  "seconds": round(seconds, 2), "sentences_per_second": round(N / max(seconds, 1e-9), 1),
                  "updates": step - 1, "gold": counts}
        if dev is not None:
            scores = evaluate_encoded(model, dev)
            record.update(dev_uas=round(scores["uas"], 2), dev_las=round(scores["las"], 2))
            if scores["uas"] > best["uas"]:
                best = {"epoch": epoch + 1, "uas": round(scores["uas"], 2), "las": round(scores["las"], 2)}
                best_theta = model.theta.copy()
            say(f"epoch {epoch + 1}: objective {record['objective_per_word']:.4f}/word, "
                f"dev UAS {scores['uas']:.2f} LAS {scores['las']:.2f}, {seconds:.0f}s")
        else:
            best = {"epoch": epoch + 1, "uas": None, "las": None}
            best_theta = model.theta.copy()
            say(f"epoch {epoch + 1}: objective {record['objective_per_word']:.4f}/word, {seconds:.0f}s")
        record["best_epoch"] = best["epoch"]
        with open(log_path, "a") as fh:
            fh.write(json.dumps(record) + "\n")
        state = {"version": CHECKPOINT_VERSION, "size": D, "step": step, "epoch": epoch + 1,
                 "info": json.dumps({"config": config.to_dict(), "best": best})}
        for name, arr in (("theta", theta), ("accum", accum), ("avg", avg),
                          ("best", best_theta if best_theta is not None else np.zeros(0))):
            state[name + "_i"], state[name + "_v"] = _sparse(arr)
        _save_checkpoint(ckpt_path, state)

    if best_theta is not None:
        model.theta = best_theta
    elif tr.epochs == 0:
        model.theta = round_weights(theta)
    model.meta = {
        "train_file": str(train_path), "dev_file": str(dev_path) if dev_path else None,
        "train_sentences": counts["sentences"], "gold": counts, "epochs_run": tr.epochs,
        "best_epoch": best["epoch"], "dev_uas": best.get("uas"), "dev_las": best.get("las"),
        "train_seconds": round(time.time() - t_start, 1),
        "created": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    save_model(model, out_path)
    return model


def _chunk_bounds(sizes, jobs):
    """Cut a batch into ``jobs`` contiguous chunks of about equal cubic cost (n^3 dominates)."""
    cost = sizes.astype(np.float64) ** 3
    total = cost.sum()
    bounds = [0]
    acc = 0.0
    for j, c in enumerate(cost):
        acc += c
        if len(bounds) < jobs and acc >= total * len(bounds) / jobs and j + 1 < len(cost):
            bounds.append(j + 1)
    bounds.append(len(cost))
    return np.array(bounds, dtype=np.int64)
