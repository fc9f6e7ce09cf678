"""Inference: one sentence's scores → its factor graph → BP or exact first-order inference.

`infer` is the one inference function of bpparse: training (gradients), parsing (decoding), the
training log's dev scores and relaxation's full-graph comparisons all call it. The graph holds the
model's factor families under the settings' constraint (`bpparse.config.InferenceSettings`): LINK
scores with labels marginalised inside the arc, GRAND / SIB factors and CHILDSEQ automata on the arcs
pruning keeps, the NAND pairs of a NOT2 / NO2CYCLE constraint, NOCROSS groups. A graph of LINK factors alone under
TREE / PTREE needs no BP: its marginals are computed exactly by the matrix-tree theorem / Eisner's
inside-outside (docs/design.md §3); one BP iteration would give the same numbers up to rounding.
"""
from typing import NamedTuple

import numpy as np

from bpparse import features as F
from bpparse.jit import njit
from bpparse.kernels.bp_engine import (DEFAULT_CLIP, NO_GLOBAL, TREE, BPOptions, CrossFactors,
                                       PairFactors, beliefs_to_marginals, bp_factor_beliefs,
                                       bp_full_graph)
from bpparse.kernels.codes import CROSS_GROUPED
from bpparse.kernels.eisner import eisner_marginals
from bpparse.kernels.factors.childseq import ChildSeqFactors, dense_transition_values
from bpparse.kernels.factors.hard import with_nand_pairs
from bpparse.kernels.matrix_tree import matrix_tree_marginals
from bpparse.kernels.relax_kernels import RelaxOptions, relaxed_bp
from bpparse.scoring import arcs_above, sentence_scores


class Inference(NamedTuple):
    """What `infer` returns for one sentence.

    ``mu``: float64 (n+1, n+1) arc marginals (σ of the BP beliefs, docs/design.md §2; exact for
    LINK + TREE / PTREE); ``label_logp``: float64 (n+1, n+1, R) log p(r | h -> m); ``map_scores``:
    float64 (n+1, n+1) log-odds each arc sends the global factor, B − r_global (s itself in the
    exact case): the "map" decoder's weights; ``pairs``: the `PairFactors` of the graph (GRAND
    first, ``n_grand`` of them, then SIB: ``n_struct`` in all, then NAND pairs); ``pair_prob``:
    float64 P_F(1, 1) per pairwise factor and ``crossings`` float64 (n+1, n+1) expected crossings
    per NOCROSS group (the factor beliefs training needs; empty / zeros unless asked for);
    ``cross_w``: NOCROSS log-potentials as scored; ``seq``: the CHILDSEQ factors (`ChildSeqFactors`
    with BP's final messages) and ``seq_prob`` float64 the expected count of each of their
    transitions (aligned with ``seq.w``; zeros unless asked for).
    """

    mu: np.ndarray
    label_logp: np.ndarray
    map_scores: np.ndarray
    pairs: PairFactors
    n_grand: int
    n_struct: int
    pair_prob: np.ndarray
    cross_w: np.ndarray
    crossings: np.ndarray
    seq: ChildSeqFactors
    seq_prob: np.ndarray


@njit(cache=True, nogil=True)
def infer(attrs, weights, settings, heads, factor_beliefs):
    """Scores and inference for one sentence; an `Inference` record.

    ``attrs``: int64 (NUM_ATTRS, n+3) from `features.sentence_attributes`; ``weights``:
    `bpparse.features.Weights`; ``settings``: `bpparse.config.InferenceSettings`; ``heads``: int64
    (n+1,) arcs pruning keeps (the gold tree in training) or empty; ``factor_beliefs``: also
    compute the factor beliefs (``pair_prob``, ``crossings``) that gradients need.
    """
    return infer_scores(sentence_scores(attrs, weights, settings, heads), settings, factor_beliefs)


@njit(cache=True, nogil=True)
def infer_scores(sc, settings, factor_beliefs):
    """`infer` from a sentence's `SentenceScores` ``sc``."""
    arc = sc.arc
    n1 = arc.shape[0]
    n = n1 - 1
    n_struct = sc.pair_a.shape[0]
    pair_prob = np.zeros(0)
    crossings = np.zeros((n1, n1))
    seq = sc.seq
    seq_prob = np.zeros(seq.w.shape[0])
    if settings.code == TREE and n_struct == 0 and not settings.use_cross and seq.head.shape[0] == 0:
        if settings.projective:
            mu, _ = eisner_marginals(arc, settings.single_root)
        else:
            mu, _ = matrix_tree_marginals(arc, settings.single_root)
        return Inference(mu, sc.label_logp, arc, PairFactors(sc.pair_a, sc.pair_b, sc.pair_w),
                         sc.n_grand, 0, pair_prob, sc.cross_w, crossings, seq, seq_prob)
    pa, pb, pw = sc.pair_a, sc.pair_b, sc.pair_w
    if settings.not2 or settings.no2cycle:
        pa, pb, pw = with_nand_pairs(pa, pb, pw, n, settings.not2, settings.no2cycle)
    pairs = PairFactors(pa, pb, pw)
    options = bp_options_of(settings)
    bel, active, msg_a, msg_b, cross, global_msg = bp_full_graph(
        arc, pairs, sc.cross_w, settings.use_cross, settings.cross_mode, seq, options, sc.first_mu)
    mu = beliefs_to_marginals(bel)
    if factor_beliefs:
        pair_prob, crossings, seq_prob = bp_factor_beliefs(bel, pairs, active, msg_a, msg_b, cross,
                                                           seq)
    map_scores = bel if settings.code == NO_GLOBAL else bel - global_msg
    return Inference(mu, sc.label_logp, map_scores, pairs, sc.n_grand, n_struct, pair_prob,
                     sc.cross_w, crossings, seq, seq_prob)


@njit(cache=True, nogil=True)
def relaxed_infer_scores(sc, settings, relax, damping):
    """Relaxed inference (`relax_kernels.relaxed_bp`, Riedel & Smith 2010) instead of full BP on a
    sentence's `SentenceScores` ``sc``: the candidates are its GRAND / SIB factors and, with
    NOCROSS, every group (m, l), 1 ≤ m < l ≤ n; the NAND pairs of the settings' constraint and the
    CHILDSEQ automata are in every graph. The ``grouped`` NOCROSS groups join only the arcs pruning
    keeps (`scoring.arcs_above` of ``sc.first_mu`` at ``settings.prune``; every arc when pruning
    is off), as the GRAND / SIB factors do. ``relax``: `RelaxOptions` (its ``seed_iter`` is
    replaced: 1 when the seed is LINK + TREE / PTREE alone, whose first iteration is exact, else
    ``bp_iter``); ``damping`` of relaxed BP. Returns (mu, label_logp, map_scores) as `Inference`
    has them, and the output tuple of `relaxed_bp`."""
    arc = sc.arc
    n1 = arc.shape[0]
    n_soft = sc.pair_a.shape[0]
    pa, pb, pw = sc.pair_a, sc.pair_b, sc.pair_w
    if settings.not2 or settings.no2cycle:
        pa, pb, pw = with_nand_pairs(pa, pb, pw, n1 - 1, settings.not2, settings.no2cycle)
    candidate = np.zeros((n1, n1), dtype=np.bool_)
    cross_w = sc.cross_w
    cross_arcs = np.zeros((0, 0), dtype=np.bool_)
    if settings.use_cross:
        for m in range(1, n1):
            candidate[m, m + 1:] = True
        if sc.first_mu.shape[0] == n1 and settings.cross_mode == CROSS_GROUPED:
            cross_arcs = arcs_above(sc.first_mu, settings.prune, np.empty(0, dtype=np.int64))
    else:
        cross_w = np.zeros((n1, n1))
    seq = sc.seq
    seed_iter = relax.bp_iter
    if pa.shape[0] == n_soft and seq.head.shape[0] == 0 and settings.code == TREE:
        seed_iter = 1
    options = BPOptions(settings.code, settings.projective, settings.single_root, relax.bp_iter,
                        settings.tol, damping, DEFAULT_CLIP, False)
    cross = CrossFactors(cross_w, candidate, settings.cross_mode, np.zeros((0, 0, 0)), cross_arcs)
    selection = RelaxOptions(relax.method, relax.threshold, relax.max_rounds, relax.bp_iter,
                             seed_iter, relax.max_factors)
    out = relaxed_bp(arc, PairFactors(pa, pb, pw), n_soft, cross, seq, options, selection,
                     sc.first_mu)
    bel = out[0]
    map_scores = bel if settings.code == NO_GLOBAL else bel - out[7]
    return out[1], sc.label_logp, map_scores, out


@njit(cache=True, inline="always")
def bp_options_of(settings):
    """The engine's `BPOptions` for `InferenceSettings` (clip DEFAULT_CLIP): undamped, the global
    constraint's messages only to the arcs another factor reads (``sparse``, the same result to
    rounding: `bp_engine.bp_engine_continue`)."""
    return BPOptions(settings.code, settings.projective, settings.single_root, settings.iterations,
                     settings.tol, settings.damping, DEFAULT_CLIP, settings.damping == 0.0)


def encoded_marginals(model, encoded, settings=None):
    """Arc marginals float64 (n+1, n+1) and label log-probabilities (n+1, n+1, R) of an
    `EncodedSentence` (``settings``: default the model's parse settings)."""
    settings = settings or model.config.inference_settings("parse")
    attrs = F.sentence_attributes(encoded.tokens, model.fine_tags)
    res = infer(attrs, model.weights, settings, np.empty(0, dtype=np.int64), False)
    return res.mu, res.label_logp


def exact_projective_marginals(model, encoded, settings=None):
    """Exact inference for a projective model of LINK (+ CHILDSEQ) factors, the alternative to BP:
    Eisner / McDonald & Pereira's O(n³) DP (`bpparse.kernels.sibling_dp`) over every arc (no
    pruning, so that the automata see every child). Returns (mu float64 (n+1, n+1) arc marginals,
    label_logp (n+1, n+1, R), log_z, transitions float64 (n+1, n+1, n+1) expected counts [h, a, b]).
    ``settings``: default the model's parse settings; ValueError unless PTREE without GRAND, SIB,
    NOCROSS."""
    from bpparse.kernels.sibling_dp import sibling_inside_outside

    settings = (settings or model.config.inference_settings("parse"))._replace(prune=0.0)
    if not settings.projective or settings.use_grand or settings.use_sib or settings.use_cross:
        raise ValueError("exact inference needs a projective (PTREE) model of LINK and CHILDSEQ factors")
    attrs = F.sentence_attributes(encoded.tokens, model.fine_tags)
    sc = sentence_scores(attrs, model.weights, settings, np.empty(0, dtype=np.int64))
    n1 = sc.arc.shape[0]
    mu, log_z, transitions = sibling_inside_outside(
        sc.arc, dense_transition_values(sc.seq, sc.seq.w, n1), settings.single_root)
    return mu, sc.label_logp, float(log_z), transitions
