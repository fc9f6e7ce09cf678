"""Training by stochastic gradient on the conditional log-likelihood with BP gradients (SE08 §7).

For one sentence the gradient of log p(gold tree, gold labels | sentence) is (docs/design.md §4)

    LINK features of h -> m:       gold[h, m] - mu[h, m]                    (mu = sigma(B[h, m]))
    label features of h -> m, r:   gold[h, m] [r = gold label] - mu[h, m] p(r | h -> m)
    GRAND / SIB features:          gold pair - P_F(1, 1)                    (BP factor belief)
    CHILDSEQ features:             gold transition - its expected count     (automaton belief)
    NOCROSS features of m, l:      gold crossings - expected crossings

with BP's beliefs standing in for the exact marginals. Labels are nuisance variables inside the arc:
s[h, m] = logsumexp_r s[h, m, r]. Updates are AdaGrad (or plain SGD with a decaying rate) on the
hashed weights, optionally with L2 on the touched weights and with weight averaging.

Memory: the weights, AdaGrad sums, averaging sums and gradient buffers hold only the slots the
gold-feature mask keeps, plus the label region (`features.CompactSpace`: the bundled model's 37.9 M
slots become 7.4 M entries); kernels emit a feature's rank among the kept slots instead of its slot,
and dev scores each epoch's averaged weights in that space. After the epochs the model holds the
best epoch's weights as a loaded model does (`Model.hold`); no vector of all the slots is built.

Parallelism and determinism: a mini-batch is cut into ``jobs`` contiguous chunks; numba's prange runs
the chunks on the cores, each chunk adding its sentences' gradients in order into its own dense
buffer (touched 16-weight pages flagged); the update then sums the chunk buffers in chunk order.
The result depends on the seed and ``jobs`` only, not on thread scheduling. Epoch e visits the
sentences in the order ``default_rng([seed, e]).permutation``, so a run resumed from a checkpoint
reaches the same weights as an uninterrupted one.
"""
import json
import sys
import time
import zipfile
from pathlib import Path
from typing import NamedTuple

import numpy as np
from tqdm import tqdm

from bpparse import features as F
from bpparse.calibration import fit_head_temperature, fit_label_temperature
from bpparse.config import AUTO_EPOCH_SENTENCES, AUTO_EPOCHS_MAX, AUTO_KEYS, MORPH_AUTO_PAIRS, parse_constraint
from bpparse.conll import check_tree, check_writable, open_output, read_conll
from bpparse.encode import UPOS, Corpus, Vocabularies, morph_density, pack
from bpparse.errors import ConfigError, InputError, ModelFileError
from bpparse.inference import infer_scores
from bpparse.interrupts import deferred
from bpparse.jit import njit, prange
from bpparse.kernels.factors.childseq import gold_transitions
from bpparse.labeler import fit_labeler
from bpparse.model import Model, mask_words, round_weights, save_model, write_npy
from bpparse.parse import evaluate_encoded, parse_encoded, parse_settings, score_trees, thread_count
from bpparse.punct import train_punct
from bpparse.reattach import train_reattach
from bpparse.scoring import sentence_scores
from bpparse.tagger import train_tagger
from bpparse.tagging import fill_tags, jackknife_tags

CHECKPOINT_VERSION = 1


# ---------------------------------------------------------------- per-sentence kernels

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


class Gradient(NamedTuple):
    """Where gradients go: ``grad`` float64 (D,) (or (C, D), one row per chunk), ``dirty`` uint8
    flags of the touched 2**DIRTY_SHIFT-weight pages (likewise), ``min_coef``: coefficients of at
    most this magnitude are skipped, ``margin``: the softmax-margin cost of a wrong arc (log-odds)."""

    grad: np.ndarray
    dirty: np.ndarray
    min_coef: float
    margin: float


class UpdateRule(NamedTuple):
    """One optimiser step (`apply_update`): ``adagrad`` (else SGD), learning rate ``lr``, ``l2``,
    AdaGrad's ``eps``, and the second-order region [``sec_lo``, ``sec_hi``) stepping with
    ``lr * sec_scale``."""

    adagrad: bool
    lr: float
    l2: float
    eps: float
    sec_lo: int
    sec_hi: int
    sec_scale: float


@njit(cache=True)
def sentence_gradient(attrs, weights, settings, heads, labels, grad, dirty, min_coef, margin):
    """Add one sentence's CLL gradient (gold minus BP-expected counts) into ``grad``.

    With ``margin`` > 0 the expectations are taken under the cost-augmented distribution of
    softmax-margin training (Gimpel & Smith 2010): every wrong arc scores ``margin`` more (in
    log-odds; under TREE the same as every gold arc scoring ``margin`` less).

    weights: `bpparse.features.Weights`; settings: `bpparse.config.InferenceSettings` (training's);
    heads: int64 (n+1,) gold heads; labels: int32 (n+1,) gold label ids (-1 = unknown: the label
    is then summed out). grad: float64 (len(theta),); dirty: uint8 page flags (see features).
    Returns the sentence's objective proxy: sum over words of log mu[gold head, m] + log p(gold label).
    """
    layout, mask = weights.layout, weights.mask
    n1 = attrs.shape[1] - 2
    sc = sentence_scores(attrs, weights, settings, heads)
    if margin > 0.0:
        for m in range(1, n1):
            sc.arc[heads[m], m] -= margin
    res = infer_scores(sc, settings, True)
    mu, label_logp, pair_prob, crossings = res.mu, res.label_logp, res.pair_prob, res.crossings
    pa, pb, n_grand, n_struct = res.pairs.a, res.pairs.b, res.n_grand, res.n_struct
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
    if settings.use_cross:
        ccoef = -crossings
        for m in range(1, n1):
            for l in range(m + 1, n1):
                if _crosses(heads[m], m, heads[l], l):
                    ccoef[m, l] += 1.0
        F.cross_scatter(attrs, layout, mask, ccoef, grad, dirty, min_coef)
    seq = res.seq
    if seq.head.shape[0] > 0:
        scoef = gold_transitions(seq, heads) - res.seq_prob
        F.childseq_scatter(attrs, layout, mask, seq.head, seq.start, seq.child, seq.w_start, scoef,
                           grad, dirty, min_coef)
    return obj


@njit(cache=True, parallel=True)
def batch_gradient(corpus, batch, bounds, weights, settings, gradient, objective):
    """Gradients of the sentences ``batch`` (ids into the packed `Corpus`), chunk c =
    batch[bounds[c]:bounds[c+1]] into row c of the `Gradient` buffers (grad (C, D), dirty (C, P));
    objective[j] receives sentence batch[j]'s objective."""
    tokens, offsets, heads, labels = corpus
    for c in prange(bounds.shape[0] - 1):
        for j in range(bounds[c], bounds[c + 1]):
            s = batch[j]
            a = offsets[s]
            b = offsets[s + 1]
            attrs = F.sentence_attributes(tokens[:, a:b], weights.fine)
            objective[j] = sentence_gradient(attrs, weights, settings, heads[a:b], labels[a:b],
                                             gradient.grad[c], gradient.dirty[c],
                                             gradient.min_coef, gradient.margin)


@njit(cache=True, parallel=True)
def apply_update(theta, accum, avg, grads, dirty, step, n_ranges, rule):
    """Sum the chunk gradients (in chunk order) on flagged pages and take one ascent step.

    theta, accum (AdaGrad sum of squared gradients), avg (sum of (step-1) * delta for averaging,
    Daume's trick: averaged weights = theta - avg / step): float64 (D,). grads: (C, D), dirty:
    (C, P) uint8; both are cleared on the pages visited; the pages are cut into ``n_ranges``
    parallel ranges. ``rule``: `UpdateRule` (AdaGrad: lr / sqrt(accum + eps), else SGD with rate
    lr; the second-order region steps with lr * sec_scale; l2 on touched weights only, a lazy
    regulariser).
    """
    adagrad, lr, l2, eps, sec_lo, sec_hi, sec_scale = rule
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

def build_mask(model, tokens, offsets, heads):
    """Gold-feature bit mask over the LINK+SECOND regions from every gold tree of the packed corpus."""
    mask = np.zeros(mask_words(model.layout), dtype=np.uint64)
    _mark_all(tokens, offsets, heads, model.fine_tags, model.layout, model.config.second_order,
              model.config.nocross, model.config.childseq, mask)
    return mask


@njit(cache=True)
def _mark_all(tokens, offsets, heads, fine, layout, second_order, nocross, childseq, mask):
    for s in range(offsets.shape[0] - 1):
        a = offsets[s]
        b = offsets[s + 1]
        attrs = F.sentence_attributes(tokens[:, a:b], fine)
        F.mark_gold_features(attrs, layout, heads[a:b], second_order, nocross, childseq, mask)


# ---------------------------------------------------------------- the trainer

def _resolve_auto_features(config, sentences):
    """features.fine_tags "auto": XPOS templates when the treebank has more than one XPOS, else
    "derived" tags (`encode.derived_fine_tags`) when its words have FEATS, else none;
    features.morph "auto": morphology templates when its words carry at least MORPH_AUTO_PAIRS
    attribute values of encode.MORPH_ATTRS on average; features.lemma "auto": lemma templates with
    the morphology ones, unless the model has a tagger (it predicts no lemmas, so untagged input
    would have none)."""
    f = config.features
    fine, morph, lemma = f.fine_tags, f.morph, f.lemma
    if fine == "auto":
        has_xpos = len({t for s in sentences for t in s.xpos[1:]} - {"_"}) > 1
        has_feats = any(v != "_" for s in sentences for v in s.feats[1:])
        fine = True if has_xpos else "derived" if has_feats else False
    if morph == "auto":
        morph = morph_density(sentences) >= MORPH_AUTO_PAIRS
    if lemma == "auto":
        lemma = morph and not config.tagger.enabled
    return config.replace({"features.fine_tags": fine, "features.morph": bool(morph),
                           "features.lemma": bool(lemma)})


def _resolve_epochs(config, n_sentences, has_dev):
    """train.epochs "auto": AUTO_EPOCHS_MAX with a dev file (the best epoch on dev is kept), else
    one epoch per AUTO_EPOCH_SENTENCES training sentences, rounded up, in 2..AUTO_EPOCHS_MAX."""
    if config.train.epochs != "auto":
        return config
    epochs = AUTO_EPOCHS_MAX if has_dev else min(AUTO_EPOCHS_MAX, max(2, -(-n_sentences // AUTO_EPOCH_SENTENCES)))
    return config.replace({"train.epochs": epochs})


def _save_checkpoint(path, scalars, vectors, space):
    """Write an .npz checkpoint: the ``scalars`` as they are and each of ``vectors`` (name -> float64
    array over the `features.CompactSpace` ``space``) as NAME_i (slots) / NAME_v (values) of its
    nonzero entries (`CompactSpace.sparse`), one vector at a time."""
    with open_output(path, binary=True) as fh, zipfile.ZipFile(fh, "w") as zf:
        for name, value in scalars.items():
            write_npy(zf, name, value)
        for name, vector in vectors.items():
            slots, values = space.sparse(vector)
            write_npy(zf, name + "_i", slots)
            write_npy(zf, name + "_v", values)
            del slots, values


def _load_vector(path, z, name, space, out):
    """Fill ``out`` (float64 over the `features.CompactSpace` ``space``) from the checkpoint
    entries NAME_i / NAME_v of the open .npz ``z`` read from ``path``."""
    try:
        entries = space.entries(z[name + "_i"])
    except ValueError:
        raise ModelFileError(f"{path}: checkpoint does not match this config and data "
                             f"(weights outside the gold-feature mask)") from None
    out.fill(0.0)
    out[entries] = z[name + "_v"]


def read_training_trees(path, skip_bad_trees=False):
    """(sentences, problems) of a training file. Every sentence must be a tree (`conll.check_tree`:
    HEAD given, not the word itself, no cycle): the first that is not raises `InputError` naming
    its line, or with ``skip_bad_trees`` is left out and its problem (``FILE:LINE: problem``) listed."""
    sentences, problems = [], []
    for sentence in read_conll(path):
        try:
            check_tree(sentence, lambda message: None)  # several roots: counted by prepare_gold
        except InputError as e:
            if not skip_bad_trees:
                raise InputError(e.path, e.line, f"{e.msg} (training needs trees: fix the "
                                 f"sentence or pass --skip-bad-trees)") from None
            problems.append(str(e))
            continue
        sentences.append(sentence)
    return sentences, problems


def tagger_options(config):
    """`bpparse.tagger.train_tagger` options of a config's ``[tagger]`` section."""
    t = config.tagger
    return {"epochs": t.epochs, "hash_bits": t.hash_bits, "feats_bits": t.feats_hash_bits,
            "prune": t.prune, "min_count": t.min_count, "min_update": t.min_update,
            "seed": config.train.seed, "lexicon": ("upos",) if t.lexicon else ()}


def train_tags(config, sentences, dev_sentences, say):
    """(tagger, sentences, dev_sentences) for ``config.tagger``: the tagger trained on all the
    training sentences (dev for its early stopping) and, with ``jackknife`` = K, the sentences the
    parser trains on carrying jackknifed predicted tags (`bpparse.tagging.jackknife_tags`) and the
    dev sentences the tagger's tags, so that the parser learns from, and is selected on, tags like
    those it will read; with K = 0 both keep their gold tags."""
    options = tagger_options(config)
    t0 = time.time()
    tagger = train_tagger(sentences, dev=dev_sentences, **options)
    say(f"tagger ({', '.join(tagger.columns)}) trained in {time.time() - t0:.0f} s")
    folds = config.tagger.jackknife
    if folds:
        t0 = time.time()
        sentences = jackknife_tags(sentences, folds, say, dev=dev_sentences, **options)
        if dev_sentences is not None:
            dev_sentences, _ = fill_tags(tagger, dev_sentences, retag=True)
        say(f"jackknifed tags ({folds} folds) in {time.time() - t0:.0f} s")
    return tagger, sentences, dev_sentences


def describe_counts(counts):
    """'12 sentences: 10 ok, 2 skipped_multiroot' for the gold-tree counts of `train`."""
    parts = [f"{v} {k}" for k, v in counts.items() if k != "sentences" and v]
    return f"{counts['sentences']} sentences: " + (", ".join(parts) or "none usable")


def train(config, train_path, out_path, dev_path=None, resume=False, progress=True, log=None,
          skip_bad_trees=False):
    """Train a model and write it to ``out_path``; returns the final `Model`.

    ``config``: a `Config` (CLI overrides already applied). Writes beside the model:
    ``<out>.log.jsonl`` (one JSON object per epoch) and ``<out>.ckpt`` (checkpoint after each epoch,
    used by ``resume=True``), each replaced atomically; all three paths are checked writable before
    anything is read. Training (and dev) sentences must be trees (`read_training_trees`; with
    ``skip_bad_trees`` the others are left out and reported). With a dev file, the model kept is the
    epoch best on dev UAS (early stopping, SE08 §8.3); otherwise the last epoch.
    """
    say = log or (lambda msg: print(msg, file=sys.stderr))
    out_path = Path(out_path)
    log_path = Path(str(out_path) + ".log.jsonl")
    ckpt_path = Path(str(out_path) + ".ckpt")
    t_start = time.time()

    for path in (out_path, log_path, ckpt_path):
        check_writable(path)
    sentences, bad_trees = read_training_trees(train_path, skip_bad_trees)
    if bad_trees:
        say(f"skipped {len(bad_trees)} training sentence(s) that are not trees, the first: {bad_trees[0]}")
    dev_sentences = list(read_conll(dev_path, check_trees=True)) if dev_path else None
    tagger = None
    if config.tagger.enabled:
        tagger, sentences, dev_sentences = train_tags(config, sentences, dev_sentences, say)
    given = config
    config = _resolve_auto_features(config, sentences)
    vocabs = Vocabularies.build(sentences, config.features.min_count, config.features.derived_fine)
    encoded_all = [vocabs.encode(s) for s in sentences]
    base, _ = parse_constraint(config.train.constraint)
    counts = {"sentences": len(encoded_all) + len(bad_trees), "ok": 0, "projectivized": 0,
              "skipped_nonprojective": 0, "skipped_multiroot": 0, "skipped_missing_heads": 0,
              "skipped_bad_tree": len(bad_trees)}
    encoded, gold_heads = [], []
    for e in encoded_all:
        heads, status = prepare_gold(e, config.model.single_root, base == "PTREE",
                                     config.train.unreachable_gold)
        counts[status] += 1
        if heads is not None:
            encoded.append(e)
            gold_heads.append(heads)
    if not encoded:
        raise ConfigError(f"{train_path}: no usable training sentence ({describe_counts(counts)})")
    if counts["ok"] != len(encoded_all):
        say(f"gold trees the training constraint cannot produce ({describe_counts(counts)})")
    dev = None
    if dev_sentences is not None:
        dev = [vocabs.encode(s) for s in dev_sentences]
    config = _resolve_epochs(config, len(encoded), dev is not None)
    auto = [(f"{section}.{key}", getattr(getattr(config, section), key)) for section, key in AUTO_KEYS
            if getattr(getattr(given, section), key) == "auto"]
    if auto:
        say("auto settings: " + ", ".join(f"{k}={str(v).lower()}" for k, v in auto))

    model = Model(config, vocabs, tagger=tagger)
    upos, n_upos = [e.tokens[UPOS] for e in encoded], len(vocabs.vocabs[UPOS])
    if config.model.label_filter and config.model.labels:
        model.label_filter = F.label_filter(upos, gold_heads, [e.labels for e in encoded], n_upos,
                                            len(vocabs.labels))
    if config.model.arc_filter:
        model.arc_filter = F.arc_limits(upos, gold_heads, n_upos)
    tokens, offsets, heads, labels = pack(encoded, gold_heads)
    if config.features.gold_only:
        model.mask = build_mask(model, tokens, offsets, heads)
    D = model.size
    # the optimiser's vectors hold only the weights the gold-feature mask lets a model use
    space = F.compact_space(model.layout, model.mask)
    theta = np.zeros(space.size)
    accum = np.zeros(space.size)
    avg = np.zeros(space.size)
    step = 1
    first_epoch = 0
    best = {"epoch": 0, "uas": -1.0, "las": -1.0}
    best_theta = None  # (positions, values) of the best epoch's weights
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
            for name, vector in (("theta", theta), ("accum", accum), ("avg", avg)):
                _load_vector(ckpt_path, z, name, space, vector)
            if z["best_i"].shape[0] or saved["best"]["epoch"]:
                best_theta = (z["best_i"], z["best_v"])
            step = int(z["step"])
            first_epoch = int(z["epoch"])
            best = saved["best"]
        say(f"resuming after epoch {first_epoch}")
    log_lines = []
    if resume and log_path.exists():
        log_lines = [line for line in log_path.read_text().splitlines()
                     if line.strip() and json.loads(line).get("epoch", 0) <= first_epoch]

    jobs = thread_count(tr.jobs)
    n_pages = (space.size >> F.DIRTY_SHIFT) + 1
    grads = np.zeros((jobs, space.size))
    dirty = np.zeros((jobs, n_pages), dtype=np.uint8)
    settings = config.inference_settings("train")
    corpus = Corpus(tokens, offsets, heads, labels)
    gradient = Gradient(grads, dirty, float(tr.min_coef), float(tr.margin))
    # training scores every label and arc; parsing (the dev scores below, the model file) only
    # those of the label and arc filters: the bundled recipe's EWT dev UAS 89.82, against 89.71
    # with the label filter in training's loss too (docs/benchmarks.md)
    weights = F.dense_weights(model.fine_tags, space.layout, space.rank, theta, F.NO_LABEL_FILTER)
    dev_settings = parse_settings(model)
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
            if opt.method == "adagrad":
                lr = opt.learning_rate
            else:
                lr = opt.learning_rate / (1.0 + opt.lr_decay * (step - 1))
            rule = UpdateRule(opt.method == "adagrad", float(lr), float(opt.l2),
                              float(opt.adagrad_eps), space.sec_off,
                              int(space.layout[F.LY_LAB_OFF]), float(opt.second_order_lr_scale))
            with deferred():
                batch_gradient(corpus, batch, bounds, weights, settings, gradient, obj)
                apply_update(theta, accum, avg, grads, dirty, float(step), 4 * jobs, rule)
            step += 1
            objective += float(obj.sum())
            words += int(sizes[batch].sum() - batch.shape[0])
            bar.update(batch.shape[0])
            bar.set_postfix(obj=f"{objective / max(words, 1):.4f}", refresh=False)
        bar.close()
        seconds = time.time() - t0
        # the averaged weights, rounded as a model file stores them (the same values in the same
        # order as the full vector's nonzero ones), scored on dev in the compact space
        final = round_weights(theta - avg / max(step - 1, 1) if opt.averaging else theta)
        model.weights = F.dense_weights(model.fine_tags, space.layout, space.rank, final,
                                        model.label_lists)
        record = {"epoch": epoch + 1, "objective_per_word": objective / max(words, 1),
                  "seconds": round(seconds, 2), "sentences_per_second": round(N / max(seconds, 1e-9), 1),
                  "updates": step - 1, "gold": counts}
        if dev is not None:
            scores = evaluate_encoded(model, dev, dev_settings, jobs)
            record.update(dev_uas=round(scores["uas"], 2), dev_las=round(scores["las"], 2))
            if scores["uas"] > best["uas"]:
                best = {"epoch": epoch + 1, "uas": round(scores["uas"], 2), "las": round(scores["las"], 2)}
                best_theta = space.sparse(final)
            say(f"epoch {epoch + 1}: objective {record['objective_per_word']:.4f}/word, "
                f"dev UAS {scores['uas']:.2f} LAS {scores['las']:.2f}, {seconds:.0f}s")
        else:
            best = {"epoch": epoch + 1, "uas": None, "las": None}
            best_theta = space.sparse(final)
            say(f"epoch {epoch + 1}: objective {record['objective_per_word']:.4f}/word, {seconds:.0f}s")
        record["best_epoch"] = best["epoch"]
        log_lines.append(json.dumps(record))
        with open_output(log_path) as fh:
            fh.write("\n".join(log_lines) + "\n")
        best_i, best_v = best_theta if best_theta is not None else space.sparse(np.zeros(0))
        _save_checkpoint(ckpt_path, {"version": CHECKPOINT_VERSION, "size": D, "step": step,
                                     "epoch": epoch + 1, "best_i": best_i, "best_v": best_v,
                                     "info": json.dumps({"config": config.to_dict(), "best": best})},
                         {"theta": theta, "accum": accum, "avg": avg}, space)

    # freed before the stages train
    del theta, accum, avg, grads, dirty, gradient, weights
    if best_theta is not None:  # for the stages and the file (rounded already: kept exactly)
        model.hold(*best_theta)
    if config.labeler.enabled and config.model.labels:
        _add_labeler(model, encoded_all, dev, dev_settings, best, jobs, say)
    if config.reattach.enabled:
        add_reattach(model, encoded_all, dev, dev_settings, best, jobs, say)
    if config.punct.enabled:
        add_punct(model, encoded_all, dev, dev_settings, best, jobs, say)
    if dev_sentences is not None:
        add_calibration(model, dev_sentences, dev_path, dev_settings, jobs, say)
    model.meta = {
        "train_file": str(train_path), "dev_file": str(dev_path) if dev_path else None,
        "train_sentences": counts["sentences"], "gold": counts, "epochs_run": tr.epochs,
        "best_epoch": best["epoch"], "dev_uas": best.get("uas"), "dev_las": best.get("las"),
        "dev_uas_parser": best.get("uas_parser"),
        "dev_las_parser_labels": best.get("las_parser_labels"),
        "train_seconds": round(time.time() - t_start, 1),
        "created": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    save_model(model, out_path)
    return model


def add_calibration(model, sentences, source, settings=None, jobs=1, say=None):
    """Fit the model's temperatures (`bpparse.calibration`) on the gold trees ``sentences``
    (`bpparse.conll.Sentence`, read from ``source``) parsed by ``model`` with ``settings`` (its
    temperatures ignored): the chosen heads', and with a labeler the labels'. A model with a
    tagger is fitted on them twice over, as given and with every tag column predicted by its
    tagger, so that its probabilities serve both inputs. Sets ``model.calibration``."""
    say = say or (lambda msg: None)
    t0 = time.time()
    retagged = model.tagger is not None
    if retagged:
        sentences = list(sentences) + fill_tags(model.tagger, sentences, retag=True)[0]
    encoded = [model.encode(s) for s in sentences]
    settings = (settings or parse_settings(model))._replace(head_temperature=1.0, label_temperature=1.0)
    trees = parse_encoded(model, encoded, settings, jobs, marginals=True)
    heads = [tree[0] for tree in trees]
    fits = {"HeadProb": fit_head_temperature([tree[2] for tree in trees], heads,
                                             [e.heads for e in encoded])}
    calibration = {"head_temperature": fits["HeadProb"][0]}
    if model.labeler is not None:
        labeler = model.labeler_record
        scores = []
        for e, h in zip(encoded, heads):
            table = np.zeros((h.shape[0], len(model.labels)))
            F.tree_label_scores(F.sentence_attributes(e.tokens, model.fine_tags), labeler, h, table)
            scores.append(table)
        fits["LabelProb"] = fit_label_temperature(scores, [tree[1] for tree in trees],
                                                  [e.labels for e in encoded])
        calibration["label_temperature"] = fits["LabelProb"][0]
    calibration.update(dev=str(source), tags="given and predicted" if retagged else "given")
    for key, (t, before, after) in fits.items():
        calibration[key] = {"ece": [round(100 * before["ece"], 2), round(100 * after["ece"], 2)],
                            "brier": [round(before["brier"], 4), round(after["brier"], 4)]}
        say(f"{key} temperature {t:g} fitted on {before['words']} dev words"
            f"{' (tags as given, then predicted)' if retagged else ''}: ECE {100 * before['ece']:.2f} -> "
            f"{100 * after['ece']:.2f}, Brier {before['brier']:.4f} -> {after['brier']:.4f}")
    say(f"calibrated in {time.time() - t0:.0f} s")
    model.calibration = calibration


def _add_labeler(model, encoded, dev, dev_settings, best, jobs, say):
    """Train the second-stage labeler (config ``[labeler]``) on every training tree into ``model``;
    with a dev set, ``best`` gets the dev LAS with it (and keeps the parser's as
    ``las_parser_labels``)."""
    t0 = time.time()
    model.labeler = fit_labeler(model, encoded, dev, say)
    message = f"labeler trained in {time.time() - t0:.0f} s"
    if dev is not None:
        las = evaluate_encoded(model, dev, dev_settings, jobs)["las"]
        best["las_parser_labels"], best["las"] = best["las"], round(las, 2)
        message += f": dev LAS {best['las_parser_labels']:.2f} with the parser's labels, {las:.2f} with it"
    say(message)


def add_punct(model, encoded, dev=None, dev_settings=None, best=None, jobs=1, say=None):
    """Train the punctuation stage (config ``[punct]``, `bpparse.punct`) on every training tree
    into ``model`` (None when it does not help on dev); with a dev set its scale is chosen on the
    model's dev trees and ``best`` (a dict) gets the dev UAS / LAS with it."""
    say = say or (lambda msg: None)
    t0 = time.time()
    model.punct = None
    parsed = None
    if dev is not None:
        parsed = (dev, parse_encoded(model, dev, dev_settings, jobs, marginals=True))
    p = model.config.punct
    model.punct = train_punct(model, encoded, parsed, epochs=p.epochs, hash_bits=p.hash_bits,
                              seed=model.config.train.seed, say=say)
    say(_stage_report(model, "punctuation stage", model.punct, t0, parsed, dev_settings, jobs,
                      best))


def _stage_report(model, what, stage, t0, parsed, settings, jobs, best):
    """The log line of a re-attaching stage just trained (``stage``: None if it was not kept);
    with dev trees ``parsed`` (encoded, trees before the stage) the dev UAS before and after, and
    ``best`` (a dict, or None) gets the dev UAS / LAS with it (``uas_parser``: the first stage's
    "before")."""
    message = f"{what} trained in {time.time() - t0:.0f} s"
    if parsed is not None and stage is not None:
        before = score_trees(*parsed)["uas"]
        scores = evaluate_encoded(model, parsed[0], settings, jobs)
        message += f": dev UAS {before:.2f} -> {scores['uas']:.2f}, LAS {scores['las']:.2f}"
        if best is not None:
            best.setdefault("uas_parser", round(before, 2))
            best.update(uas=round(scores["uas"], 2), las=round(scores["las"], 2))
    return message


def add_reattach(model, encoded, dev=None, dev_settings=None, best=None, jobs=1, say=None):
    """Train the re-attachment stage (config ``[reattach]``, `bpparse.reattach`) into ``model``
    (None when it does not help on dev): the training trees are parsed once for their marginals
    (which rank each word's candidate heads), the dev trees (punctuation stage off: it runs after
    this one) choose its scale; ``best`` (a dict) gets the dev UAS / LAS with it."""
    say = say or (lambda msg: None)
    t0 = time.time()
    model.reattach = None
    punct, model.punct = model.punct, None
    try:
        settings = dev_settings or parse_settings(model)
        marginals = [t[2] for t in parse_encoded(model, encoded, settings, jobs, marginals=True)]
        parsed = None
        if dev is not None:
            parsed = (dev, parse_encoded(model, dev, settings, jobs, marginals=True))
        r = model.config.reattach
        model.reattach = train_reattach(model, encoded, marginals, parsed, epochs=r.epochs,
                                        hash_bits=r.hash_bits, candidates=r.candidates,
                                        seed=model.config.train.seed, say=say)
        message = _stage_report(model, "re-attachment stage", model.reattach, t0, parsed,
                                settings, jobs, best)
    finally:
        model.punct = punct
    say(message)


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
