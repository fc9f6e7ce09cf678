"""Joint tagging and parsing by BP (Smith & Eisner 2008 §3; issue 13): UPOS variables in the
parser's factor graph, with the tagger's chain (TAG + BIGRAM) and TAGLINK factors.

The joint model is the parser, the tagger and a `bpparse.tagger.TagLink` weight table. The
parser's own templates read the pipeline's tags (the tagger's 1-best UPOS, XPOS, FEATS, as in
pipeline mode); the UPOS variables add, for every arc pruning keeps, a TAGLINK factor scoring the
arc together with each candidate tag pair (`features.taglink`). BP over the whole graph
(`kernels.joint`) gives arc beliefs that have looked at the tag alternatives and tag beliefs that
have looked at the parse. Candidates: a word's tags with pipeline chain marginal ≥ ``min_prob``,
at most ``max_candidates``.

Training (`bpparse.train_joint.train_taglink`, with the kernels here) fits the TAGLINK table on the
joint conditional log-likelihood of gold trees and gold UPOS, gradient = gold TAGLINK features −
BP's factor beliefs, with the parser and the tagger fixed. The tag ambiguity it learns from must be
the one seen at parse time: the training sentences are tagged, and get their chain potentials,
from K-fold jackknifed taggers.
"""
from typing import NamedTuple

import numpy as np

from bpparse import features as F
from bpparse.features.taglink import taglink_scatter, taglink_scores
from bpparse.inference import Inference, bp_options_of
from bpparse.jit import njit
from bpparse.kernels.bp_engine import (
    NO_GLOBAL,
    BPOptions,
    CrossFactors,
    PairFactors,
    beliefs_to_marginals,
    bp_factor_beliefs,
)
from bpparse.kernels.chain import chain_marginals
from bpparse.kernels.factors.hard import with_nand_pairs
from bpparse.kernels.factors.taglink import TagLinkFactors, taglink_beliefs
from bpparse.kernels.joint import joint_bp
from bpparse.scoring import arcs_above, kept_arcs, sentence_scores


@njit(cache=True, nogil=True)
def tag_candidates(unary, trans, max_c, min_prob, gold):
    """Candidate tags of every word from the chain's marginals: (cand int64 (n+1, max_c), cnt
    int64 (n+1,), masked unary float64 (n, g) with -inf outside the candidates). Row 0 is ROOT (tag
    -1). ``gold`` int64 (n,) tag ids that must be candidates (training), or empty. Candidates are
    listed by decreasing marginal (so cand[i, 0] is each word's most probable tag)."""
    n, g = unary.shape
    marg, _, _ = chain_marginals(unary, trans)
    cand = np.full((n + 1, max_c), -1, dtype=np.int64)
    cnt = np.zeros(n + 1, dtype=np.int64)
    cnt[0] = 1
    masked = np.full((n, g), -np.inf)
    for i in range(n):
        order = np.argsort(-marg[i])
        c = 0
        for k in range(g):
            t = order[k]
            if c == max_c or (c > 0 and marg[i, t] < min_prob):
                break
            cand[i + 1, c] = t
            c += 1
        if gold.shape[0] == n and gold[i] >= 0:
            present = False
            for k in range(c):
                present = present or cand[i + 1, k] == gold[i]
            if not present:
                if c == max_c:
                    c -= 1
                cand[i + 1, c] = gold[i]
                c += 1
        cnt[i + 1] = c
        for k in range(c):
            masked[i, cand[i + 1, k]] = unary[i, cand[i + 1, k]]
    return cand, cnt, masked


@njit(cache=True, nogil=True)
def joint_infer(attrs, weights, settings, heads, factor_beliefs, unary, trans, cand, cnt, taglink):
    """Joint inference for one sentence: (`Inference`, tag_bel float64 (n+1, C) log-beliefs over
    the candidates, `TagLinkFactors`, tl_prob float64 (F, C, C) their factor beliefs (zeros unless
    ``factor_beliefs``), the LINK scores float64 (n+1, n+1)).

    ``attrs``, ``weights``, ``settings``, ``heads`` (gold tree in training, else empty) as for
    `inference.infer`; ``unary`` float64 (n, g) the UPOS chain's unary log-potentials masked to the
    candidates ``cand`` / ``cnt`` (`tag_candidates`); ``trans`` (g+1, g+1); ``taglink``: `bpparse.tagger.TagLink`.
    """
    sc = sentence_scores(attrs, weights, settings, heads)
    arc = sc.arc
    n1 = arc.shape[0]
    n = n1 - 1
    if sc.first_mu.shape[0] == n1:  # pruning's marginals, when it computed them
        keep = arcs_above(sc.first_mu, taglink.prune, heads)
    else:
        keep = kept_arcs(arc, taglink.prune, settings.single_root, heads)
    arcs = np.flatnonzero(keep.ravel())
    phi = taglink_scores(attrs, taglink.table, arcs, cand, cnt)
    C = cand.shape[1]
    tl = TagLinkFactors(arcs, cand, cnt, phi, np.zeros(arcs.shape[0]), np.zeros((arcs.shape[0], C)),
                        np.zeros((arcs.shape[0], C)))
    pa, pb, pw = sc.pair_a, sc.pair_b, sc.pair_w
    if settings.not2 or settings.no2cycle:
        pa, pb, pw = with_nand_pairs(pa, pb, pw, n, settings.not2, settings.no2cycle)
    pairs = PairFactors(pa, pb, pw)
    cross_active = np.zeros((n1, n1), dtype=np.bool_)
    if settings.use_cross:
        for m in range(1, n1):
            for l in range(m + 1, n1):
                cross_active[m, l] = True
        cross = CrossFactors(sc.cross_w, cross_active, settings.cross_mode, np.zeros((n1, n1, n1)),
                             np.zeros((0, 0), dtype=np.bool_))
    else:
        cross = CrossFactors(np.zeros((n1, n1)), cross_active, settings.cross_mode,
                             np.zeros((0, 0, 0)), np.zeros((0, 0), dtype=np.bool_))
    base = bp_options_of(settings)
    options = BPOptions(base.constraint, base.projective, base.single_root,
                        max(base.max_iter, taglink.iterations), base.tol, base.damping, base.clip,
                        False)
    bel, active, msg_a, msg_b, global_msg, tag_bel, _, _ = joint_bp(
        arc, pairs, cross, sc.seq, options, unary, trans, tl)
    mu = beliefs_to_marginals(bel)
    n_struct = sc.pair_a.shape[0]
    pair_prob = np.zeros(0)
    crossings = np.zeros((n1, n1))
    seq_prob = np.zeros(sc.seq.w.shape[0])
    tl_prob = np.zeros((arcs.shape[0], C, C))
    if factor_beliefs:
        pair_prob, crossings, seq_prob = bp_factor_beliefs(bel, pairs, active, msg_a, msg_b, cross,
                                                           sc.seq)
        tl_prob = taglink_beliefs(bel, tag_bel, tl)
    map_scores = bel if settings.code == NO_GLOBAL else bel - global_msg
    res = Inference(mu, sc.label_logp, map_scores, pairs, sc.n_grand, n_struct, pair_prob,
                    cross.w, crossings, sc.seq, seq_prob)
    return res, tag_bel, tl, tl_prob, arc


@njit(cache=True, nogil=True)
def _gold_candidates(cand, cnt, gold):
    """int64 (n+1,) index of each word's gold tag among its candidates (-1: not a candidate; row 0:
    ROOT's pseudo-tag, 0)."""
    n1 = cand.shape[0]
    out = np.full(n1, -1, dtype=np.int64)
    out[0] = 0
    for i in range(1, n1):
        for c in range(cnt[i]):
            if cand[i, c] == gold[i - 1]:
                out[i] = c
    return out


class JointCorpus(NamedTuple):
    """Training sentences for `taglink_train_pass`: ``tokens`` int32 (NUM_FIELDS, total) encoded
    with their jackknifed tags, ``offsets`` int64 (S+1,) (ROOT columns included), ``heads`` int64
    (total,) gold trees; ``unary`` float64 (total, g) the jackknifed UPOS chain's unary potentials
    (ROOT rows unused), ``trans`` float64 (K, g+1, g+1) the transitions of the K fold taggers and
    ``fold`` int64 (S,) which one tagged each sentence; ``gold`` int64 (total,) gold UPOS ids
    (-1 unknown or ROOT)."""

    tokens: np.ndarray
    offsets: np.ndarray
    heads: np.ndarray
    unary: np.ndarray
    trans: np.ndarray
    fold: np.ndarray
    gold: np.ndarray


@njit(cache=True, nogil=True)
def taglink_gradient(attrs, weights, settings, heads, unary, trans, gold, taglink, grad):
    """Add one sentence's joint-CLL gradient with respect to the TAGLINK table into ``grad``
    (float64, the table's size): the gold TAGLINK features (gold arcs with both words' gold tags)
    minus BP's factor beliefs (gold tags are always candidates). ``unary`` float64 (n, g) and
    ``trans`` the sentence's chain potentials, ``gold`` int64 (n,) gold UPOS ids. Returns the
    objective proxy Σ_m log μ[gold head, m] + log belief of the gold tag."""
    cand, cnt, masked = tag_candidates(unary, trans, taglink.max_candidates, taglink.min_prob, gold)
    res, tag_bel, tl, tl_prob, _ = joint_infer(attrs, weights, settings, heads, True, masked,
                                               trans, cand, cnt, taglink)
    n1 = res.mu.shape[0]
    gi = _gold_candidates(cand, cnt, gold)
    coef = -tl_prob
    obj = 0.0
    for f in range(tl.arcs.shape[0]):
        h = tl.arcs[f] // n1
        m = tl.arcs[f] % n1
        if heads[m] == h and gi[h] >= 0 and gi[m] >= 0:
            coef[f, gi[h], gi[m]] += 1.0
    for m in range(1, n1):
        obj += np.log(max(res.mu[heads[m], m], 1e-300))
        if gi[m] >= 0:
            obj += tag_bel[m, gi[m]]
    taglink_scatter(attrs, grad, tl.arcs, cand, cnt, coef)
    return obj


@njit(cache=True, nogil=True)
def taglink_train_pass(corpus, weights, settings, taglink, order, g2, u, c, lr):
    """One pass of online AdaGrad (one step a sentence, on the weights it touches) over the
    sentences ``order`` of a `JointCorpus`; ``g2`` / ``u``: AdaGrad's squared-gradient sums and
    the averaging sums (θ̄ = θ − u / c); returns (c, Σ objective)."""
    table = taglink.table
    grad = np.zeros(table.shape[0])
    total = 0.0
    for s in order:
        a = corpus.offsets[s]
        b = corpus.offsets[s + 1]
        attrs = F.sentence_attributes(corpus.tokens[:, a:b], weights.fine)
        total += taglink_gradient(attrs, weights, settings, corpus.heads[a:b],
                                  corpus.unary[a + 1:b], corpus.trans[corpus.fold[s]],
                                  corpus.gold[a + 1:b], taglink, grad)
        nz = np.flatnonzero(grad)
        for j in nz:
            gr = grad[j]
            grad[j] = 0.0
            g2[j] += gr * gr
            d = lr * gr / (np.sqrt(g2[j]) + 1e-8)
            table[j] += d
            u[j] += c * d
        c += 1.0
    return c, total
