"""Parsing corpora: read -> encode -> inference and decoding -> write, in input order, streaming.

Pipeline. Sentences are read lazily (`bpparse.conll.read_conll`) and cut into chunks (the first ones
small, so the first sentence comes out quickly, then up to ``chunk_size`` sentences). Python encodes
a chunk and packs its token arrays into one int32 buffer with offsets; ONE compiled call, `parse_chunk`
(ahead of time where the package ships it, else under numba: `bpparse.jit`), computes for every sentence features -> scores -> BP -> decoding -> labels and writes heads, labels
and the probabilities of the chosen head and label into flat output buffers; Python then formats the
chunk (only HEAD, DEPREL and optionally MISC change) and writes it. With ``jobs > 1`` a pool of
threads runs `parse_chunk` on groups of the chunk's sentences at once (it releases the GIL), so one
compiled kernel serves every thread count and the JIT cache is the same; the next chunk is then
parsed while the current one is written. Memory is bounded by one chunk (two with threads).
Sentences are independent and each is computed by the same code whatever the thread, so the output
bytes do not depend on ``jobs``.

Inference per sentence: `bpparse.inference.infer` with the model's ``[parse]`` settings
(overridable), then `bpparse.decode.decode_sentence` (decoders "mbr", "map", "greedy").

Sentences longer than ``max_length`` words are parsed with first-order inference (LINK + TREE /
PTREE, exact), never dropped; the caller is told through ``on_warning``.

Relaxed inference (``ParseSettings.relax``) runs in the kernels as BP does (`parse_chunk_relaxed`).

The ``inference`` hook: a callable ``inference(model, encoded, settings) -> (mu, label_logp,
map_scores)`` replaces the built-in kernel (e.g. `bpparse.relax.relaxed_inference`, relaxed
inference that reports on each sentence); ``mu`` float64 (n+1, n+1) arc marginals,
``label_logp`` float64 (n+1, n+1, R) log p(r | h -> m), ``map_scores`` float64 (n+1, n+1) scores
for the "map" decoder (None: log-odds of mu). It is called sentence by sentence in order, and the
decoding is the same as for the built-in inference.
"""
import json
import logging
import os
import sys
import time
import zipfile
from contextlib import contextmanager
from typing import NamedTuple

import numpy as np

from bpparse import features as F
from bpparse.config import InferenceSettings
from bpparse.decode import decode_sentence, label_tree, temper_head_probs
from bpparse.errors import BpparseError, ConfigError, InputError
from bpparse.features.punct import no_punct_stage
from bpparse.features.reattach import no_reattach_stage, reattach_tree
from bpparse.inference import infer_scores, relaxed_infer_scores
from bpparse.interrupts import deferred
from bpparse.jit import njit, preload
from bpparse.joint import joint_infer, tag_candidates
from bpparse.labeler import no_labeler
from bpparse.kernels.bp_engine import DEFAULT_CLIP
from bpparse.kernels.codes import DD, DECODERS, MAP, MBR, TREE
from bpparse.kernels.dual_decomposition import RULES, RUSH, dual_decompose
from bpparse.kernels.joint_dd import TagScores, joint_dual_decompose
from bpparse.scoring import sentence_scores
from bpparse.tagger import upos_potentials
from bpparse.tagging import apply_joint_tags, fill_tags

DEFAULT_MAX_LENGTH = 100
DEFAULT_CHUNK = 256
FIRST_CHUNK = 8
MAX_CHUNK_TOKENS = 16384  # with the sentence cap, bounds a chunk's buffers whatever the input

logger = logging.getLogger("bpparse.parse")


DD_ITERATIONS = 50


class DDOptions(NamedTuple):
    """The dd decoder's options (`bpparse.kernels.dual_decomposition.dual_decompose`): at most
    ``iterations`` updates by ``rule`` (AD3 / POLYAK / RUSH) with constant ``step``."""

    iterations: int
    rule: int
    step: float


class ParseSettings(NamedTuple):
    """Resolved parse options (see `parse_settings`): ``constraint`` its name, ``inference`` the
    `InferenceSettings` record the kernels read, ``decoder`` MBR / MAP / GREEDY / DD, ``max_length``:
    longer sentences get first-order inference; ``dd``: `DDOptions`; ``joint``: words whose UPOS the
    tagger predicts are tagged and parsed jointly (`bpparse.joint`) rather than by the pipeline;
    ``head_temperature`` / ``label_temperature``: the temperatures of the chosen heads' and
    labels' probabilities (`bpparse.calibration`); ``relax``: None (BP), or a
    `bpparse.relax.RelaxedSettings`: relaxed inference instead of BP (`parse_chunk_relaxed`)."""

    constraint: str
    inference: InferenceSettings
    decoder: int
    max_length: int
    dd: DDOptions
    joint: bool = False
    head_temperature: float = 1.0
    label_temperature: float = 1.0
    relax: object = None


def parse_settings(model, constraint=None, iterations=None, tolerance=None, damping=None, decoder="mbr",
                   max_length=DEFAULT_MAX_LENGTH, prune=None, dd_iterations=DD_ITERATIONS,
                   dd_rule="ad3", tagging="auto", calibrated=True):
    """ParseSettings from the model's ``[parse]`` config, each value overridable (None keeps it).
    ``tagging``: "joint", "pipeline" or "auto" (joint when the model has TAGLINK weights);
    ``calibrated``: the probabilities of the chosen heads and labels with the model's temperatures
    (fitted on dev by training; 1 for models without), else as inferred.
    ConfigError for a decoder that cannot apply (dd: TREE / PTREE models without NOCROSS), or
    joint tagging with a model without TAGLINK weights."""
    if decoder not in DECODERS:
        raise ConfigError(f"unknown decoder {decoder!r}: expected one of {', '.join(DECODERS)}")
    if max_length < 1:
        raise ConfigError("max_length must be >= 1")
    if dd_rule not in RULES or int(dd_iterations) < 1:
        raise ConfigError(f"dd: the rule must be one of {', '.join(RULES)} and iterations >= 1")
    inference = model.config.inference_settings("parse", constraint, iterations, tolerance, damping,
                                                prune)
    name = str(constraint or model.config.parse.constraint).upper()
    if decoder == "dd" and (inference.code != TREE or inference.use_cross):
        raise ConfigError(f"the dd decoder needs a TREE or PTREE model without NOCROSS (this one: "
                          f"{name}, {' + '.join(model.config.model.factors)}): NOCROSS scores how "
                          "many arcs cross each arc, which no subproblem here solves exactly")
    if tagging not in ("auto", "joint", "pipeline"):
        raise ConfigError(f"unknown tagging {tagging!r}: expected auto, joint or pipeline")
    joint = tagging == "joint" or (tagging == "auto" and model.taglink is not None)
    if joint and (model.taglink is None or inference.code != TREE):
        raise ConfigError("joint tagging needs a model with TAGLINK weights (bpparse train-joint) "
                          "and a TREE or PTREE constraint")
    return ParseSettings(name, inference, DECODERS.index(decoder), int(max_length),
                         DDOptions(int(dd_iterations), *RULES[dd_rule]), joint,
                         model.head_temperature if calibrated else 1.0,
                         model.label_temperature if calibrated else 1.0)


# ---------------------------------------------------------------- kernels

class Chunk(NamedTuple):
    """A packed chunk of sentences: ``tokens`` int32 (NUM_FIELDS, total), sentence s in columns
    ``offsets[s]`` .. ``offsets[s+1]-1`` (ROOT column included); ``full`` uint8 (S,), 0 = parse that
    sentence with the first-order fallback."""

    tokens: np.ndarray
    offsets: np.ndarray
    full: np.ndarray


class ChunkOutputs(NamedTuple):
    """Flat outputs of a chunk, per token column: ``heads`` int64, ``labels`` int64, ``head_prob``
    and ``label_prob`` float64 (see `decode_sentence`); ``marg`` float64 (sum of (n+1)²,) receives
    each sentence's arc marginals [head, child] flattened from ``marg_offsets[s]``, or is empty
    (not kept); per sentence, the dd decoder's ``dd_iterations`` int64 (0: not decomposed, the
    first-order fallback) and ``dd_certified`` uint8."""

    heads: np.ndarray
    labels: np.ndarray
    head_prob: np.ndarray
    label_prob: np.ndarray
    marg: np.ndarray
    marg_offsets: np.ndarray
    dd_iterations: np.ndarray
    dd_certified: np.ndarray


class JointTags(NamedTuple):
    """Per token column of a chunk's jointly tagged sentences: ``upos`` int64 (total,) the most
    probable UPOS id (-1 at ROOT columns), ``dist`` float64 (total, g) the tag beliefs (0 outside
    the word's candidates)."""

    upos: np.ndarray
    dist: np.ndarray


class SecondStages(NamedTuple):
    """What the parse kernels apply to each decoded tree (`second_stages`): the second-stage
    ``labeler`` (`features.ContextLabeler`), the re-attachment stage ``reattach``
    (`features.reattach.Reattacher`) and the punctuation stage ``punct``
    (`features.PunctAttacher`); empty ones keep the parser's labels and heads. The probabilities
    of the chosen heads and of the labeler's labels are tempered by ``head_temperature`` and
    ``label_temperature`` (`bpparse.calibration`; 1: untempered)."""

    labeler: F.ContextLabeler
    reattach: F.Reattacher
    punct: F.PunctAttacher
    head_temperature: float
    label_temperature: float


def model_stages(model, settings):
    """The `SecondStages` of a model for its `ParseSettings` ``settings`` (decoder, temperatures):
    without the re-attachment and punctuation stages for DD, whose heads must stay the model's
    certified MAP tree."""
    if settings.decoder == DD:
        reattach, punct = no_reattach_stage(), no_punct_stage(len(model.labels))
    else:
        reattach, punct = model.reattach_record, model.punct_record
    return SecondStages(model.labeler_record, reattach, punct, float(settings.head_temperature),
                        float(settings.label_temperature))


@njit(cache=True, nogil=True)
def second_stages(attrs, stages, mu, heads, labels, head_prob, label_prob, projective):
    """The `SecondStages` on one sentence's tree: labels by the labeler, words then punctuation
    re-attached (each reading the labels; a ``projective`` tree stays projective), labels again
    after a stage moved something; the labeler's label probabilities and the final tree's head
    probabilities tempered."""
    t = stages.label_temperature
    F.relabel_tree(attrs, stages.labeler, heads, labels, label_prob, t)
    if reattach_tree(attrs, stages.reattach, stages.labeler, mu, heads, labels, head_prob,
                     projective, True) > 0:
        F.relabel_tree(attrs, stages.labeler, heads, labels, label_prob, t)
    if F.attach_punct(attrs, stages.punct, mu, heads, labels, head_prob, projective) > 0:
        F.relabel_tree(attrs, stages.labeler, heads, labels, label_prob, t)
    if stages.head_temperature != 1.0:
        temper_head_probs(mu, heads, head_prob, stages.head_temperature)


@njit(cache=True, nogil=True)
def parse_chunk(select, chunk, weights, settings, fallback, decoder, stages, out):
    """Parse the sentences ``select`` (int64 indices) of a `Chunk`, in that order, into its
    `ChunkOutputs`.

    ``weights``: the model's `Weights`; ``settings``: `InferenceSettings`, ``fallback`` those of
    the first-order fallback (`InferenceSettings.first_order`); ``decoder``: MBR / MAP / GREEDY;
    ``stages``: the `SecondStages` applied to each decoded tree.
    Releases the GIL: threads may run disjoint ``select`` sets of one chunk at the same time, and
    as each sentence writes only its own slices the result does not depend on how it is split.
    """
    for j in range(select.shape[0]):
        s = select[j]
        a = chunk.offsets[s]
        b = chunk.offsets[s + 1]
        attrs = F.sentence_attributes(chunk.tokens[:, a:b], weights.fine)
        st = settings if chunk.full[s] else fallback
        res = infer_scores(sentence_scores(attrs, weights, st, np.empty(0, dtype=np.int64)), st,
                           False)
        _decode_into(out, s, a, b, attrs, st, decoder, stages, res.mu, res.label_logp,
                     res.map_scores)


@njit(cache=True, nogil=True)
def _decode_into(out, s, a, b, attrs, st, decoder, stages, mu, label_logp, map_scores):
    """Sentence s (token columns a..b-1) of `parse_chunk` / `parse_chunk_relaxed` from its
    inference: decoded, the second stages applied, written into ``out``."""
    decode_sentence(mu, label_logp, map_scores, decoder, st.projective, st.single_root,
                    out.heads[a:b], out.labels[a:b], out.head_prob[a:b], out.label_prob[a:b])
    second_stages(attrs, stages, mu, out.heads[a:b], out.labels[a:b], out.head_prob[a:b],
                  out.label_prob[a:b], st.projective)
    _keep_marginals(out, s, mu)


@njit(cache=True, nogil=True)
def parse_chunk_relaxed(select, chunk, weights, settings, fallback, decoder, relax, stages, out):
    """`parse_chunk` with relaxed inference (`inference.relaxed_infer_scores`) instead of BP, by
    ``relax`` (`bpparse.relax.RelaxedSettings`), for the first-order fallback too (its seed graph
    is exact); its own kernel, as `parse_chunk_dd`, so that a parse under numba never compiles
    relaxed BP."""
    for j in range(select.shape[0]):
        s = select[j]
        a = chunk.offsets[s]
        b = chunk.offsets[s + 1]
        attrs = F.sentence_attributes(chunk.tokens[:, a:b], weights.fine)
        st = settings if chunk.full[s] else fallback
        sc = sentence_scores(attrs, weights, st, np.empty(0, dtype=np.int64))
        mu, label_logp, map_scores, _ = relaxed_infer_scores(sc, st, relax.options, relax.damping)
        _decode_into(out, s, a, b, attrs, st, decoder, stages, mu, label_logp, map_scores)


@njit(cache=True, nogil=True)
def parse_chunk_dd(select, chunk, weights, settings, fallback, dd, stages, out):
    """`parse_chunk` with the dd decoder (its own kernel, so that other decoders never compile
    it): per sentence BP as for MBR (marginals, label and head probabilities, the MBR tree), then
    `dual_decompose` on the same scores with the MBR tree as the first candidate; writes the
    certified MAP tree or the best-scoring tree found, and ``out.dd_iterations`` /
    ``out.dd_certified``. Sentences of the first-order fallback get its exact MAP tree (MST).
    ``stages``: `model_stages` for DD (no punctuation stage)."""
    empty = np.empty(0, dtype=np.int64)
    for j in range(select.shape[0]):
        s = select[j]
        a = chunk.offsets[s]
        b = chunk.offsets[s + 1]
        attrs = F.sentence_attributes(chunk.tokens[:, a:b], weights.fine)
        st = settings if chunk.full[s] else fallback
        sc = sentence_scores(attrs, weights, st, empty)
        res = infer_scores(sc, st, False)
        heads = out.heads[a:b]
        decode_sentence(res.mu, res.label_logp, res.map_scores, MBR if chunk.full[s] else MAP,
                        st.projective, st.single_root, heads, out.labels[a:b], out.head_prob[a:b],
                        out.label_prob[a:b])
        out.dd_iterations[s] = 0
        out.dd_certified[s] = 0
        if chunk.full[s]:
            candidates = np.empty((1, b - a), dtype=np.int64)
            candidates[0] = heads
            r = dual_decompose(sc.arc, sc.pair_a, sc.pair_b, sc.pair_w, sc.n_grand, sc.seq,
                               st.projective, st.single_root, dd.iterations, dd.rule, dd.step,
                               candidates)
            heads[:] = r.heads
            label_tree(heads, res.mu, res.label_logp, out.labels[a:b], out.head_prob[a:b],
                       out.label_prob[a:b])
            out.dd_iterations[s] = r.iterations
            out.dd_certified[s] = r.certified
        second_stages(attrs, stages, res.mu, heads, out.labels[a:b], out.head_prob[a:b],
                      out.label_prob[a:b], st.projective)
        _keep_marginals(out, s, res.mu)


@njit(cache=True, nogil=True)
def joint_parse_chunk(select, chunk, weights, settings, decoder, dd, unary, trans, taglink,
                      stages, out, joint_tags):
    """`parse_chunk` with joint BP for the sentences ``select`` of a `Chunk`: per
    sentence the candidates from its chain potentials (``unary`` float64 (total, g), rows aligned
    with the chunk's token columns, ROOT rows unused; ``trans`` (g+1, g+1)), `joint_infer`, the
    tree decoded from the joint arc marginals into ``out`` (`ChunkOutputs`), the `SecondStages`
    (`model_stages` for ``decoder``), each word's most probable UPOS id and its tag beliefs into
    ``joint_tags`` (`JointTags`).
    ``decoder`` DD: the joint MAP tree and tags by `kernels.joint_dd.joint_dual_decompose` (the
    parser's second-order factors included; at most ``dd.iterations``, Rush's rule with c = 1, or
    ``dd.step`` when ``dd.rule`` is RUSH), BP's MBR tree and most probable tags its first
    candidate."""
    empty = np.empty(0, dtype=np.int64)
    for j in range(select.shape[0]):
        s = select[j]
        a = chunk.offsets[s]
        b = chunk.offsets[s + 1]
        attrs = F.sentence_attributes(chunk.tokens[:, a:b], weights.fine)
        cand, cnt, masked = tag_candidates(unary[a + 1:b], trans, taglink.max_candidates,
                                           taglink.min_prob, empty)
        res, tag_bel, tl, _, arc = joint_infer(attrs, weights, settings, empty, False, masked,
                                               trans, cand, cnt, taglink)
        heads = out.heads[a:b]
        decode_sentence(res.mu, res.label_logp, res.map_scores, MBR if decoder == DD else decoder,
                        settings.projective, settings.single_root, heads, out.labels[a:b],
                        out.head_prob[a:b], out.label_prob[a:b])
        tags = np.zeros(b - a, dtype=np.int64)
        for i in range(1, b - a):
            for c in range(1, cnt[i]):
                if tag_bel[i, c] > tag_bel[i, tags[i]]:
                    tags[i] = c
        if decoder == DD:
            n1 = b - a
            phi = np.zeros((n1, n1, cand.shape[1], cand.shape[1]))
            for f in range(tl.arcs.shape[0]):
                phi[tl.arcs[f] // n1, tl.arcs[f] % n1] = tl.phi[f]
            r = joint_dual_decompose(arc, res.pairs, res.n_grand, res.seq,
                                     TagScores(phi, masked, trans, cand, cnt), settings.projective,
                                     settings.single_root, dd.iterations,
                                     dd.step if dd.rule == RUSH else 1.0,
                                     heads.reshape((1, n1)).copy(), tags.reshape((1, n1)))
            heads[:] = r.heads
            tags[:] = r.tags
            label_tree(heads, res.mu, res.label_logp, out.labels[a:b], out.head_prob[a:b],
                       out.label_prob[a:b])
            out.dd_iterations[s] = r.iterations
            out.dd_certified[s] = r.certified
        second_stages(attrs, stages, res.mu, heads, out.labels[a:b], out.head_prob[a:b],
                      out.label_prob[a:b], settings.projective)
        _keep_marginals(out, s, res.mu)
        joint_tags.upos[a] = -1
        for i in range(1, b - a):
            joint_tags.upos[a + i] = cand[i, tags[i]]
            joint_tags.dist[a + i] = 0.0
            for c in range(cnt[i]):
                joint_tags.dist[a + i, cand[i, c]] = np.exp(tag_bel[i, c])


@njit(cache=True, nogil=True)
def _keep_marginals(out, s, mu):
    """Copy sentence s's arc marginals into ``out.marg`` when marginals are kept."""
    if out.marg.shape[0] > 0:
        n1 = mu.shape[0]
        base = out.marg_offsets[s]
        for h in range(n1):
            for m in range(n1):
                out.marg[base + h * n1 + m] = mu[h, m]


def preload_kernels():
    """Load (or compile) `parse_chunk` for the argument types every parse uses, without running it,
    unless the shipped ahead-of-time code serves them (`bpparse.jit`).

    Meant for a background thread started before the model file is read: importing numba and
    loading its cache then overlaps reading the model.
    """
    from bpparse.config import Config
    from bpparse.encode import NUM_FIELDS

    i64 = np.zeros(1, dtype=np.int64)
    f64 = np.zeros(1)
    settings = Config().inference_settings("parse")
    example = (i64, Chunk(np.zeros((NUM_FIELDS, 2), dtype=np.int32), i64, np.zeros(1, dtype=np.uint8)),
               F.dense_weights(True, i64, np.zeros(1, dtype=np.uint64), f64, F.NO_LABEL_FILTER), settings,
               settings.first_order(), MBR,
               SecondStages(no_labeler(i64, 1), no_reattach_stage(), no_punct_stage(1), 1.0, 1.0),
               ChunkOutputs(i64, i64, f64, f64, f64, i64, i64, np.zeros(1, dtype=np.uint8)))
    preload(parse_chunk, example)


# ---------------------------------------------------------------- results

class ParsedSentence:
    """One parsed sentence.

    ``sentence``: the input `bpparse.conll.Sentence`; ``heads``: int64 (n+1,), heads[0] = -1;
    ``deprels``: n+1 label strings (entry 0 None; ``"_"`` for a model without labels);
    ``head_probs`` / ``label_probs``: float64 (n+1,) probability of the chosen head (the arc's
    marginal) / label, each tempered by the settings' temperature (`bpparse.calibration`; entry 0
    is 0); ``marginals``: float64 (n+1, n+1) arc marginals [head, child] or None when not kept;
    ``first_order``: True when the sentence was too long and parsed with first-order inference;
    ``upos_probs``: None, or float64 (n+1,) p(UPOS_i = the predicted tag) where the model's tagger
    predicted UPOS (NaN where the input's UPOS was kept; `bpparse.tagging.fill_tags`);
    ``upos_dist``: None, or float64 (n+1, g) each such word's distribution over ``upos_tags`` (the
    tagger's UPOS tags; joint tagging: its tag beliefs, 0 outside its candidates);
    ``dd``: with the dd decoder, (certified, iterations) of the dual decomposition (None for other
    decoders and for the first-order fallback); ``dd_misc``: write it as ``DD=certified`` or
    ``DD=K`` (K iterations without a certificate) in the first word's MISC.
    ``text``: the CoNLL block with HEAD and DEPREL (and, if asked, MISC HeadProb/LabelProb/UposProb
    and DD) replaced, and the tags the tagger filled in;
    ``tokens``: the same as a conllu ``TokenList``.
    """

    __slots__ = ("sentence", "heads", "deprels", "head_probs", "label_probs", "marginals",
                 "first_order", "misc_probs", "keep_deps", "upos_probs", "upos_dist", "upos_tags",
                 "dd", "dd_misc", "_text")

    def __init__(self, sentence, heads, deprels, head_probs, label_probs, marginals, first_order,
                 misc_probs, keep_deps=False, upos=None, dd=None, dd_misc=False, upos_tags=None):
        self.sentence = sentence
        self.heads = heads
        self.deprels = deprels
        self.head_probs = head_probs
        self.label_probs = label_probs
        self.marginals = marginals
        self.first_order = first_order
        self.misc_probs = misc_probs
        self.keep_deps = keep_deps
        self.upos_probs = None if upos is None else upos.prob
        self.upos_dist = None if upos is None else upos.dist
        self.upos_tags = upos_tags
        self.dd = dd
        self.dd_misc = dd_misc
        self._text = None

    @property
    def n(self):
        return self.sentence.n

    def __repr__(self):
        return f"<ParsedSentence {self.sentence.path}:{self.sentence.first_line} n={self.n}>"

    @property
    def text(self):
        if self._text is None:
            misc = probability_misc(self.sentence, self.head_probs, self.label_probs,
                                    self.upos_probs) if self.misc_probs else None
            if self.dd_misc and self.dd is not None:
                misc = dd_status_misc(self.sentence, misc, *self.dd)
            from bpparse.conll import format_sentence

            self._text = format_sentence(self.sentence, self.heads, self.deprels, misc,
                                         self.keep_deps)
        return self._text

    @property
    def tokens(self):
        import io

        from bpparse.conll import read_conll

        (parsed,) = read_conll(io.StringIO(self.text), self.sentence.format)
        return parsed.tokens


def _probability(p):
    return format(float(p), ".4g")


def probability_misc(sentence, head_probs, label_probs, upos_probs=None):
    """MISC strings (n+1, entry 0 None) with ``HeadProb=...|LabelProb=...`` (and ``UposProb=...``
    where ``upos_probs`` is finite; 4 significant digits) added to each word's MISC; earlier
    HeadProb / LabelProb / UposProb entries are replaced, others kept."""
    old = sentence.misc
    out = [None]
    for i in range(1, sentence.n + 1):
        items = [] if old[i] == "_" else [x for x in old[i].split("|")
                                          if not x.startswith(("HeadProb=", "LabelProb=", "UposProb="))]
        items.append(f"HeadProb={_probability(head_probs[i])}")
        if label_probs is not None and label_probs[i] > 0.0:
            items.append(f"LabelProb={_probability(label_probs[i])}")
        if upos_probs is not None and upos_probs[i] == upos_probs[i]:  # not NaN
            items.append(f"UposProb={_probability(upos_probs[i])}")
        out.append("|".join(items))
    return out


def dd_status_misc(sentence, misc, certified, iterations):
    """MISC strings (``misc`` or the sentence's own, n+1, entry 0 None) with ``DD=certified`` or
    ``DD=K`` (K iterations, no certificate) on the first word, replacing an earlier DD entry."""
    misc = list(misc) if misc is not None else [None] + list(sentence.misc[1:])
    items = [x for x in misc[1].split("|") if x != "_" and not x.startswith("DD=")]
    items.append(f"DD={'certified' if certified else iterations}")
    misc[1] = "|".join(items)
    return misc


# ---------------------------------------------------------------- the pipeline

def check_tags(sentence):
    """InputError at the first word whose UPOS is ``_``, for a model without a tagger (its features
    need POS tags)."""
    upos = sentence.upos
    for i in range(1, sentence.n + 1):
        if upos[i] == "_":
            raise InputError(sentence.path, sentence.line_of(i),
                             "UPOS is '_' and this model has no tagger: give POS-tagged input, or "
                             "use a model trained with [tagger] enabled (the bundled en_ewt)")


def _tagged(sentences):
    """The sentences, each checked by `check_tags` as it is read."""
    for sentence in sentences:
        check_tags(sentence)
        yield sentence


def thread_count(jobs):
    """Threads for ``jobs`` (None or 0: every core this process may use)."""
    if not jobs:
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except AttributeError:
            return os.cpu_count() or 1
    return max(1, int(jobs))


def _groups(sizes, jobs, ids=None):
    """Split a chunk's sentences (``sizes`` = n+1 each; ``ids``: their indices, default 0, 1, ...)
    into tasks for ``jobs`` threads: sentences by decreasing cost (n³), cut into about 4·jobs
    groups of similar cost, costliest first, so the last tasks to start are short ones. Returns a
    list of int64 index arrays."""
    order = np.argsort(-sizes, kind="stable")
    if ids is not None:
        return [ids[g] for g in _groups(sizes, jobs)]
    cost = sizes[order].astype(np.float64) ** 3
    target = cost.sum() / (4 * jobs)
    groups = []
    start = 0
    acc = 0.0
    for j in range(order.shape[0]):
        acc += cost[j]
        if acc >= target:
            groups.append(order[start:j + 1].astype(np.int64))
            start = j + 1
            acc = 0.0
    if start < order.shape[0]:
        groups.append(order[start:].astype(np.int64))
    return groups


def _chunks(sentences, chunk_size):
    """Lists of sentences: 8, 16, 32, ... up to chunk_size, each under MAX_CHUNK_TOKENS words
    (a sentence alone may exceed it). A reading error comes after the sentences read before it."""
    size = min(FIRST_CHUNK, chunk_size)
    chunk = []
    tokens = 0
    try:
        for sentence in sentences:
            if chunk and tokens + sentence.n > MAX_CHUNK_TOKENS:
                yield chunk
                chunk, tokens = [], 0
                size = min(2 * size, chunk_size)
            chunk.append(sentence)
            tokens += sentence.n
            if len(chunk) >= size:
                yield chunk
                chunk, tokens = [], 0
                size = min(2 * size, chunk_size)
    except BpparseError:
        # malformed input: the sentences before it are still parsed and written, then the error
        if chunk:
            yield chunk
        raise
    if chunk:
        yield chunk


def _long_message(sentence, settings):
    return (f"{sentence.path}:{sentence.first_line}: sentence of {sentence.n} words is longer than "
            f"the limit of {settings.max_length}: parsed with first-order inference")


def _output_buffers(encoded, keep_marginals):
    """(sizes, outputs) of a chunk: sizes int64 (S,) token columns per sentence (ROOT included);
    outputs (offsets, then the fields of `ChunkOutputs`), the flat arrays `parse_chunk` /
    `decode_sentence` fill (marg empty unless ``keep_marginals``)."""
    sizes = np.array([e.tokens.shape[1] for e in encoded], dtype=np.int64)
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    total = int(offsets[-1])
    marg_offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    if keep_marginals:
        np.cumsum(sizes * sizes, out=marg_offsets[1:])
    return sizes, (offsets, np.empty(total, dtype=np.int64), np.empty(total, dtype=np.int64),
                   np.empty(total), np.empty(total), np.empty(int(marg_offsets[-1])), marg_offsets,
                   np.zeros(len(encoded), dtype=np.int64), np.zeros(len(encoded), dtype=np.uint8))


def _start_kernel(model, settings, encoded, full, pool, jobs, keep_marginals, joint=None):
    """Pack a chunk and run `parse_chunk` (`parse_chunk_dd` for the dd decoder,
    `parse_chunk_relaxed` for ``settings.relax``) on it: here when
    ``pool`` is None, else on the pool's threads (it releases the GIL). ``joint``: None, or
    (sentences, unary, trans) for joint tagging and parsing: those sentences (int64 indices) run
    `joint.joint_parse_chunk` with the UPOS chain potentials ``unary`` float64 (total, g) (rows
    aligned with the chunk's token columns) and ``trans``. Returns (outputs, futures, tags): the
    flat output arrays (heads, labels, head/label probabilities per token column, marginals) are
    complete once every future is done; ``tags``: None or the `JointTags` of the joint sentences."""
    sizes, out = _output_buffers(encoded, keep_marginals)
    tokens = np.ascontiguousarray(np.concatenate([e.tokens for e in encoded], axis=1), dtype=np.int32)
    chunk = Chunk(tokens, out[0], full)
    outputs = ChunkOutputs(*out[1:])
    stages = model_stages(model, settings)
    fallback = settings.inference.first_order()
    if settings.decoder == DD:
        kernel, args = parse_chunk_dd, (chunk, model.weights, settings.inference, fallback,
                                        settings.dd, stages, outputs)
    elif settings.relax is not None:
        kernel, args = parse_chunk_relaxed, (chunk, model.weights, settings.inference, fallback,
                                             settings.decoder, settings.relax, stages, outputs)
    else:
        kernel, args = parse_chunk, (chunk, model.weights, settings.inference, fallback,
                                     settings.decoder, stages, outputs)
    runs = []
    select = np.arange(len(encoded), dtype=np.int64)
    tags = None
    if joint is not None:
        joint_select, unary, trans = joint
        select = np.setdiff1d(select, joint_select)
        tags = JointTags(np.full(tokens.shape[1], -1, dtype=np.int64),
                         np.zeros((tokens.shape[1], trans.shape[0] - 1)))
        runs.append((joint_parse_chunk, joint_select,
                     (chunk, model.weights, settings.inference, settings.decoder,
                      settings.dd, unary, trans, model.taglink, stages, outputs, tags)))
    runs.append((kernel, select, args))
    futures = []
    for run, sel, run_args in runs:
        if pool is None:
            run(sel, *run_args)
        else:
            futures += [pool.submit(run, group, *run_args)
                        for group in _groups(sizes[sel], jobs, sel)]
    return out, futures, tags


def _run_hook(model, settings, encoded, full, inference, keep_marginals):
    """Like `_start_kernel` (run here, no futures), with a per-sentence ``inference`` callable (see the module docstring)."""
    _, out = _output_buffers(encoded, keep_marginals)
    offsets, heads, labels, head_prob, label_prob, marg, marg_offsets = out[:7]
    fallback = settings.inference.first_order()
    stages = model_stages(model, settings)
    for s, e in enumerate(encoded):
        mu, label_logp, map_scores = inference(model, e, settings.inference if full[s] else fallback)
        mu = np.ascontiguousarray(mu, dtype=np.float64)
        label_logp = np.ascontiguousarray(label_logp, dtype=np.float64)
        if map_scores is None:
            with np.errstate(divide="ignore"):
                map_scores = np.clip(np.log(mu) - np.log1p(-mu), -DEFAULT_CLIP, DEFAULT_CLIP)
        map_scores = np.ascontiguousarray(map_scores, dtype=np.float64)
        a, b = offsets[s], offsets[s + 1]
        decode_sentence(mu, label_logp, map_scores, settings.decoder, settings.inference.projective,
                        settings.inference.single_root, heads[a:b], labels[a:b], head_prob[a:b],
                        label_prob[a:b])
        second_stages(F.sentence_attributes(e.tokens, model.fine_tags), stages, mu, heads[a:b],
                      labels[a:b], head_prob[a:b], label_prob[a:b], settings.inference.projective)
        if keep_marginals:
            marg[marg_offsets[s]:marg_offsets[s + 1]] = mu.ravel()
    return out


def parse_encoded(model, encoded, settings=None, jobs=1, marginals=False):
    """Trees of `EncodedSentence` objects by the same kernel and fallback as `iter_parse`: a list of
    (heads int64 (n+1,), labels int64 (n+1,) label indices, -1 at 0), in input order; with
    ``marginals``, (heads, labels, arc marginals float64 (n+1, n+1))."""
    settings = settings or parse_settings(model)
    jobs = thread_count(jobs)
    pool = None
    if jobs > 1:
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(jobs, thread_name_prefix="bpparse")
    trees = []
    try:
        for start in range(0, len(encoded), DEFAULT_CHUNK):
            chunk = encoded[start:start + DEFAULT_CHUNK]
            full = np.array([e.tokens.shape[1] - 1 <= settings.max_length for e in chunk],
                            dtype=np.uint8)
            out, futures, _ = _start_kernel(model, settings, chunk, full, pool, jobs, marginals)
            for future in futures:
                future.result()
            offsets, heads, labels, marg, marg_offsets = out[0], out[1], out[2], out[5], out[6]
            for i in range(len(chunk)):
                a, b = offsets[i], offsets[i + 1]
                tree = (heads[a:b], labels[a:b])
                if marginals:
                    tree += (marg[marg_offsets[i]:marg_offsets[i + 1]].reshape(b - a, b - a),)
                trees.append(tree)
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
    return trees


def evaluate_encoded(model, encoded, settings=None, jobs=1):
    """UAS and LAS (percent, punctuation counted) of `parse_encoded` trees of gold sentences: the
    figures `bpparse parse | bpparse eval` gives for the same file and settings."""
    return score_trees(encoded, parse_encoded(model, encoded, settings, jobs))


def score_trees(encoded, trees):
    """{"uas", "las", "words"} of ``trees`` ((heads, labels, ...) per sentence, as
    `parse_encoded` gives) against the gold sentences ``encoded``."""
    total = correct = labeled = 0
    for e, (heads, labels, *_) in zip(encoded, trees):
        ok = heads[1:] == np.asarray(e.heads)[1:]
        total += len(ok)
        correct += int(ok.sum())
        labeled += int((ok & (labels[1:] == np.asarray(e.labels)[1:])).sum())
    return {"uas": 100.0 * correct / max(total, 1), "las": 100.0 * labeled / max(total, 1),
            "words": total}


def iter_parse(model, sentences, settings=None, jobs=1, misc_probs=False, keep_marginals=False,
               inference=None, on_warning=None, chunk_size=DEFAULT_CHUNK, keep_deps=False,
               retag=False, dd_misc=False):
    """Parse an iterable of `bpparse.conll.Sentence`; yields `ParsedSentence` in input order.

    Streams: at most one chunk (``chunk_size`` sentences, at most MAX_CHUNK_TOKENS words unless one
    sentence is longer) is held at a time, two with ``jobs > 1`` (the next one is parsed while the
    caller consumes the current one). ``settings``: `ParseSettings` (default: the model's);
    ``jobs``: threads (1: this thread only; None: every core); ``misc_probs``: the ``text`` of each
    result carries HeadProb / LabelProb in MISC; ``keep_marginals``: results carry the arc marginals;
    ``inference``: hook replacing the built-in inference (module docstring); ``on_warning``: called
    with one message per sentence parsed with the first-order fallback (default: logged).
    Tags the input lacks are predicted by the model's tagger (all of them with ``retag``;
    `bpparse.tagging`); a model without a tagger raises InputError for a word without UPOS.
    ``dd_misc``: with the dd decoder, results write DD=certified|K in MISC (`ParsedSentence`).
    """
    if retag and model.tagger is None:
        raise BpparseError("retag: this model has no tagger")
    settings = settings or parse_settings(model)
    use_dd = settings.decoder == DD
    if use_dd and (inference is not None or settings.relax is not None):
        raise ConfigError("the dd decoder works on the model's own scores: it cannot run with "
                          "relaxed inference or an inference hook")
    report = on_warning if on_warning is not None else logger.warning
    jobs = thread_count(jobs)
    encode = model.vocabs.encode
    labels_of = list(model.labels) + ["_"]  # index -1 (no label) writes "_"
    upos_tags = model.tagger.upos_tags if model.tagger is not None else None
    pool = None
    if jobs > 1 and inference is None:
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(jobs, thread_name_prefix="bpparse")

    def finish(chunk, beliefs, full, out, futures, joint):
        for future in futures:
            future.result()
        offsets, heads, labels, head_prob, label_prob, marg, marg_offsets, dd_its, dd_cert = out
        if joint is not None:
            raw, ids, (upos, upos_dist) = joint
            for s in ids:
                a, b = offsets[s] + 1, offsets[s + 1]
                chunk[s], beliefs[s] = apply_joint_tags(tagger, raw[s], chunk[s], upos[a:b],
                                                        upos_dist[a:b], retag)
        for s, sentence in enumerate(chunk):
            a, b = offsets[s], offsets[s + 1]
            deprels = [labels_of[i] for i in labels[a:b].tolist()]
            deprels[0] = None
            mu = None
            if keep_marginals:
                mu = marg[marg_offsets[s]:marg_offsets[s + 1]].reshape(b - a, b - a)
            dd = (bool(dd_cert[s]), int(dd_its[s])) if use_dd and full[s] else None
            yield ParsedSentence(sentence, heads[a:b], deprels, head_prob[a:b], label_prob[a:b], mu,
                                 not full[s], misc_probs, keep_deps, beliefs[s], dd, dd_misc,
                                 upos_tags)

    # with a pool, chunk k+1 is read and started before chunk k is handed out, so the threads keep
    # working while the caller formats and writes chunk k
    pending = None
    try:
        tagger = model.tagger
        chunks = _chunks(sentences if tagger is not None else _tagged(sentences),
                         max(1, int(chunk_size)))
        while True:
            try:
                chunk = next(chunks, None)
                if chunk is None:
                    break
                beliefs = [None] * len(chunk)
                raw = chunk
                if tagger is not None:
                    with deferred():
                        chunk, beliefs = fill_tags(tagger, chunk, retag)
                encoded = []
                full = np.ones(len(chunk), dtype=np.uint8)
                for s, sentence in enumerate(chunk):
                    encoded.append(encode(sentence))
                    if sentence.n > settings.max_length:
                        full[s] = 0
                        report(_long_message(sentence, settings))
            except BpparseError:
                if pending is not None:  # what was read before the bad sentence still comes out
                    yield from finish(*pending)
                    pending = None
                raise
            with deferred():
                joint = _joint_inputs(tagger, chunk, beliefs, full) if (
                    settings.joint and inference is None and settings.relax is None) else None
                if inference is None:
                    out, futures, tags = _start_kernel(model, settings, encoded, full, pool, jobs,
                                                       keep_marginals, joint)
                else:
                    out, futures, tags = _run_hook(model, settings, encoded, full, inference,
                                                   keep_marginals), [], None
            joint = None if tags is None else (raw, joint[0], tags)
            if pending is not None:
                yield from finish(*pending)
                pending = None
            if pool is None:
                yield from finish(chunk, beliefs, full, out, futures, joint)
            else:
                pending = (chunk, beliefs, full, out, futures, joint)
        if pending is not None:
            yield from finish(*pending)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def _joint_inputs(tagger, chunk, beliefs, full):
    """(sentences, unary, trans) of a chunk for `_start_kernel`: the sentences whose UPOS the
    tagger predicted (and not parsed by the first-order fallback), their UPOS chain potentials in
    rows aligned with the chunk's token columns, the chain's transitions; None if there are none."""
    ids = [s for s, p in enumerate(beliefs)
           if p is not None and full[s] and not np.isnan(p.prob[1:]).all()]
    if not ids:
        return None
    potentials, trans = upos_potentials(tagger, [chunk[s] for s in ids])
    offsets = np.cumsum([0] + [s.n + 1 for s in chunk])
    unary = np.zeros((int(offsets[-1]), trans.shape[0] - 1))
    index = {t: k for k, t in enumerate(tagger.upos_tags)}
    for s, pot in zip(ids, potentials, strict=True):
        for i in np.flatnonzero(np.isnan(beliefs[s].prob[1:])):  # UPOS the input gave: clamped
            t = index.get(chunk[s].upos[i + 1])
            if t is not None:
                pot[i] = -np.inf
                pot[i, t] = 0.0
        unary[offsets[s] + 1:offsets[s + 1]] = pot
    return np.array(ids, dtype=np.int64), unary, trans


def _as_sentences(items, fmt="auto"):
    """Sentences from a path, CoNLL text, a `Sentence`, a conllu TokenList, a list of token strings,
    or an iterable of these. With ``fmt`` "text" / "raw" a string is the text itself (tokenised,
    one sentence per line / raw) and an ``os.PathLike`` a file of it (`bpparse.text`)."""
    import io

    from bpparse.conll import Sentence, read_conll
    from bpparse.text import TEXT_FORMATS, read_input, read_tokens

    def from_text(text):
        if fmt in TEXT_FORMATS:
            stream = io.StringIO(text)
            stream.name = "<text>"  # what errors name as the file
            return read_input(stream, fmt)
        return read_conll(io.StringIO(text), fmt)

    if isinstance(items, os.PathLike) or (isinstance(items, str) and fmt in TEXT_FORMATS):
        yield from (read_input(items, fmt) if isinstance(items, os.PathLike) else from_text(items))
        return
    if isinstance(items, str):
        if "\n" in items or "\t" in items:
            yield from read_conll(io.StringIO(items), fmt)
        else:
            yield from read_conll(items, fmt)
        return
    if isinstance(items, Sentence):
        yield items
        return
    if hasattr(items, "serialize"):  # one conllu TokenList
        yield from read_conll(io.StringIO(items.serialize()), fmt)
        return
    for k, item in enumerate(items, 1):
        if isinstance(item, Sentence):
            yield item
        elif hasattr(item, "serialize"):
            yield from read_conll(io.StringIO(item.serialize()), fmt)
        elif isinstance(item, str):
            yield from from_text(item)
        elif isinstance(item, (list, tuple)):
            yield from read_tokens([item], first=k)  # errors name its position in the list
        else:
            raise TypeError(f"cannot parse a {type(item).__name__}: give Sentence objects, conllu "
                            "TokenLists, lists of tokens or CoNLL-U text")


def _resolve(model):
    if isinstance(model, (str, os.PathLike)) or model is None:
        from bpparse.model import load_model

        return load_model(model)
    return model


def parse_sentences(model, sentences, decoder="mbr", marginals=False, jobs=1, constraint=None,
                    iterations=None, tolerance=None, damping=None, max_length=DEFAULT_MAX_LENGTH,
                    inference=None, on_warning=None, fmt="auto", prune=None, keep_deps=False,
                    retag=False, dd_iterations=DD_ITERATIONS, dd_rule="ad3", dd_misc=False,
                    tagging="auto", calibrated=True):
    """Parse sentences with a model; returns a list of `ParsedSentence` in input order.

    model: a `Model`, a model path or a bundled model name (None: the default bundled model).
    sentences: `bpparse.conll.Sentence` objects, conllu ``TokenList`` objects, CoNLL-U text, lists
    of token strings (``[["The", "cat", "sat", "."]]``), or an iterable of these; with ``fmt="text"``
    (one sentence per line, tokens separated by spaces) or ``fmt="raw"`` (`bpparse.text.read_raw`)
    a string is the text to parse (a file: ``pathlib.Path`` or `parse_file`). ``marginals``: add
    HeadProb / LabelProb to MISC in ``text`` / ``tokens`` and keep each sentence's arc marginals
    (``.marginals``); with a tagger, UposProb too. ``decoder="dd"``: the MAP tree by dual
    decomposition, each result's ``.dd`` = (certified, iterations). ``tagging="joint"`` (the
    default for a model with TAGLINK weights): words the input gives no UPOS are tagged and parsed
    jointly (`bpparse.joint`); "pipeline": tagged first, then parsed. ``head_probs`` /
    ``label_probs`` (HeadProb / LabelProb) are calibrated by the model's temperatures
    (``calibrated=False``: as inferred); ``.marginals`` are the model's. Other options as in
    `parse_settings` and `iter_parse`. Example::

        model = bpparse.load_model("en_ewt")
        for parsed in parse_sentences(model, open("tagged.conllu").read()):
            print(parsed.heads, parsed.deprels, parsed.tokens)
    """
    model = _resolve(model)
    settings = parse_settings(model, constraint, iterations, tolerance, damping, decoder, max_length,
                              prune, dd_iterations, dd_rule, tagging, calibrated)
    return list(iter_parse(model, _as_sentences(sentences, fmt), settings, jobs, marginals, marginals,
                           inference, on_warning, keep_deps=keep_deps, retag=retag,
                           dd_misc=dd_misc))


def parse_file(model, path, **options):
    """`parse_sentences` over a file (a path or "-"): CoNLL-U / CoNLL-X, or with ``fmt`` "text" /
    "raw" plain text (`bpparse.text.read_input`); same options."""
    from bpparse.text import read_input

    fmt = options.pop("fmt", "auto")
    model = _resolve(model)
    settings = parse_settings(model, options.pop("constraint", None), options.pop("iterations", None),
                              options.pop("tolerance", None), options.pop("damping", None),
                              options.pop("decoder", "mbr"), options.pop("max_length", DEFAULT_MAX_LENGTH),
                              options.pop("prune", None), options.pop("dd_iterations", DD_ITERATIONS),
                              options.pop("dd_rule", "ad3"), options.pop("tagging", "auto"),
                              options.pop("calibrated", True))
    marginals = options.pop("marginals", False)
    return list(iter_parse(model, read_input(path, fmt), settings, misc_probs=marginals,
                           keep_marginals=marginals, **options))


# ---------------------------------------------------------------- marginals files

class MarginalsWriter:
    """Writes each sentence's head distributions to ``path``, atomically (`conll.AtomicOutput`):
    `close` puts the file in place, `discard` leaves an existing file untouched.

    ``.npz``: one float32 array (n+1, n+1) of arc marginals [head, child] per sentence, named
    ``s0000001``, ``s0000002``, ... in input order (column m is word m's head distribution; row 0 =
    ROOT; column 0 unused); ``np.load(path)[name]``; where the tagger predicted UPOS, also
    ``t0000001`` ... float32 (n+1, g): each word's UPOS distribution over the tags of the array
    ``upos_tags`` (NaN rows: UPOS given by the input). Anything else: JSON lines, one object per
    sentence ``{"sentence": i, "sent_id": ..., "n": n, "heads": [...], "head_probs": [[p(h) for h
    in 0..n] for each word 1..n]}``, with predicted UPOS also ``"upos_probs": [{tag: p} or null for
    each word]`` (tags of p ≥ 1e-4) (probabilities rounded to 6 decimals; ``.gz`` / ``.xz``
    compress).
    """

    def __init__(self, path):
        from bpparse.conll import AtomicOutput

        self.path = os.fspath(path)
        self.count = 0
        npz = self.path.endswith(".npz")
        self._file = AtomicOutput(self.path, binary=npz)
        self._zip = None
        self._tags_written = False
        if npz:
            self._zip = zipfile.ZipFile(self._file.stream, "w", compression=zipfile.ZIP_DEFLATED,
                                        compresslevel=1, allowZip64=True)

    def write(self, parsed):
        self.count += 1
        mu = parsed.marginals
        try:
            dist = parsed.upos_dist
            if self._zip is not None:
                self._array(f"s{self.count:07d}", mu.astype(np.float32))
                if dist is not None:
                    if not self._tags_written:
                        self._array("upos_tags", np.array(parsed.upos_tags, dtype=str))
                        self._tags_written = True
                    self._array(f"t{self.count:07d}", dist.astype(np.float32))
                return
            record = {
                "sentence": self.count,
                "sent_id": parsed.sentence.sent_id,
                "n": parsed.n,
                "heads": parsed.heads[1:].tolist(),
                "head_probs": np.round(mu[:, 1:].T, 6).tolist(),
            }
            if dist is not None:
                record["upos_probs"] = [
                    None if np.isnan(row).all() else
                    {t: round(float(p), 6) for t, p in zip(parsed.upos_tags, row) if p >= 1e-4}
                    for row in dist[1:]]
            self._file.stream.write(json.dumps(record, separators=(",", ":")) + "\n")
        except OSError as e:
            raise BpparseError(f"{self.path}: cannot write: {e.strerror or e}") from None

    def _array(self, name, array):
        with self._zip.open(f"{name}.npy", "w", force_zip64=True) as fh:
            np.lib.format.write_array(fh, array, allow_pickle=False)

    def close(self):
        """Finish the file and put it in place."""
        if self._zip is not None:
            self._zip.close()
        self._file.commit()

    def discard(self):
        """Drop what was written (an existing file stays as it was)."""
        if self._zip is not None:
            try:
                self._zip.close()
            except (OSError, ValueError):
                pass
        self._file.discard()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        if exc_type is None:
            self.close()
        else:
            self.discard()


# ---------------------------------------------------------------- the command's library call

def read_marginals(path):
    """The head distributions a `MarginalsWriter` wrote, in sentence order: float64 arrays
    ``(n+1, n+1)`` [head, child] (column 0 zero). Errors name the file."""
    path = os.fspath(path)
    try:
        if path.endswith(".npz"):
            with np.load(path, allow_pickle=False) as z:
                for name in sorted(f for f in z.files if f.startswith("s")):
                    yield np.asarray(z[name], dtype=np.float64)
            return
        from bpparse.conll import _open_source

        stream, _ = _open_source(path, path)
        with stream:
            for lineno, line in enumerate(stream, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                    probs = np.asarray(record["head_probs"], dtype=np.float64)
                    n = int(record["n"])
                    if probs.shape != (n, n + 1):
                        raise ValueError(f"head_probs of shape {probs.shape} for n = {n}")
                except (ValueError, KeyError, TypeError) as e:
                    raise InputError(path, lineno, f"not a marginals record: {e}") from None
                mu = np.zeros((n + 1, n + 1))
                mu[:, 1:] = probs.T
                yield mu
    except OSError as e:
        raise InputError(path, None, f"cannot read: {e.strerror or e}") from None
    except (ValueError, zipfile.BadZipFile) as e:
        raise InputError(path, None, f"not a marginals file: {e}") from None


def parse_corpus(model, inputs, output="-", fmt="auto", settings=None, jobs=None, misc_probs=False,
                 marginals_file=None, inference=None, on_warning=None, progress=False,
                 chunk_size=DEFAULT_CHUNK, keep_deps=False, retag=False, dd_misc=False):
    """Parse CoNLL files (paths or "-"; with ``fmt`` "text" / "raw" plain text, `bpparse.text`)
    into one CoNLL output (a path, "-" or an open text stream), chunk by chunk; returns
    {"sentences", "words", "first_order", "seconds"}, with the dd decoder also "dd_sentences",
    "dd_certified" and "dd_iterations" (sentences decomposed, certified, total iterations).

    ``marginals_file``: also write each sentence's head distributions (`MarginalsWriter`).
    ``progress``: a tqdm bar on stderr. ``keep_deps``: keep the input's DEPS column (by default a
    word whose HEAD is rewritten gets DEPS ``_``). Other options as in `iter_parse`.

    An output path that is also an input is refused before anything is read. Files are written
    atomically: if parsing fails or is interrupted, an existing output or marginals file is left
    as it was. CoNLL-U streamed to stdout (or to a stream) and the marginals file always hold the
    same sentences: both are written sentence batch by sentence batch, and on an error or
    interrupt the marginals file keeps exactly the sentences already streamed.
    """
    from bpparse.conll import check_outputs
    from bpparse.text import read_input

    check_outputs(inputs, [output, marginals_file])
    settings = settings or parse_settings(model)
    start = time.perf_counter()

    def sentences():
        for path in inputs:
            yield from read_input(path, fmt)

    stats = {"sentences": 0, "words": 0, "first_order": 0}
    if settings.decoder == DD:
        stats.update(dd_sentences=0, dd_certified=0, dd_iterations=0)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(unit="sent", file=sys.stderr, mininterval=0.5, leave=False)
    # what goes to stdout stays there when a run fails; a file output is discarded (atomic)
    streaming = output is sys.stdout or (not hasattr(output, "write") and str(output) == "-") or (
        getattr(output, "name", None) == "<stdout>")
    writer = MarginalsWriter(marginals_file) if marginals_file else None
    committed = False
    try:
        with _output(output) as out:
            parses = iter_parse(model, sentences(), settings, jobs, misc_probs, writer is not None,
                                inference, on_warning, chunk_size, keep_deps, retag, dd_misc)
            pending = []

            def flush():
                with deferred():  # the CoNLL-U and the marginals file stay in step
                    out.write("".join(p.text for p in pending))
                    out.flush()
                    if writer is not None:
                        for p in pending:
                            writer.write(p)
                if bar is not None:
                    bar.update(len(pending))
                pending.clear()

            try:
                for parsed in parses:
                    pending.append(parsed)
                    stats["sentences"] += 1
                    stats["words"] += parsed.n
                    stats["first_order"] += parsed.first_order
                    if parsed.dd is not None:
                        stats["dd_sentences"] += 1
                        stats["dd_certified"] += parsed.dd[0]
                        stats["dd_iterations"] += parsed.dd[1]
                    # the first sentences go out at once, then in batches
                    if len(pending) >= 64 or stats["sentences"] <= FIRST_CHUNK:
                        flush()
            except BpparseError:
                flush()  # the sentences before a malformed one
                raise
            flush()
        if writer is not None:
            writer.close()
            committed = True
    except BaseException:
        if writer is not None and not committed:
            # what went to a stream stays there, and the marginals file says the same; a file
            # output was discarded, and so is the marginals file
            if streaming:
                writer.close()
            else:
                writer.discard()
        raise
    finally:
        if bar is not None:
            bar.close()
    stats["seconds"] = time.perf_counter() - start
    return stats


@contextmanager
def _output(output):
    from bpparse.conll import open_output

    if hasattr(output, "write"):
        yield output
        return
    with open_output(output) as out:
        yield out
