"""Relaxed marginal inference: BP on the few second-order factors that matter (docs/design.md §5).

Two algorithms over the same flat factor graph as full BP (`bpparse.graph`), both starting from the
seed graph LINK + TREE/PTREE (+ the hard NAND pairs of a NOT2 / NO2CYCLE constraint and the CHILDSEQ
head automata, which are never relaxed):

- ``iterative`` (Riedel & Smith 2010, Alg. 1): run BP for at most ``bp_iter`` iterations, add every
  candidate factor whose gain g ≥ ``threshold`` (ε), repeat until nothing is added or after
  ``max_rounds`` rounds (None = no limit). BP restarts from the previous round's messages.
- one-shot (Riedel, Smith & McCallum, Alg. 1): infer on the seed graph, pick factors once by
  ``joint`` (MinJoint: every g ≥ γ = ``threshold``), ``size`` (MinSize: drop the lowest gains while
  their sum stays ≤ ε = ``threshold``) or ``divergence`` (MinDivergence: the ``max_factors``
  highest gains), run BP once more on the result.

Candidates are every GRAND / SIB factor and every NOCROSS group (m, l) of the full graph. A NOCROSS
group is one binary factor "the parent arcs of m and l cross" (under TREE each child has one parent, so
at most one crossing pair of the group fires); the engine runs a group as a whole, so the group is the
unit that is added. In `bpparse relax` (`inference.relaxed_infer_scores`) the groups join only the
arcs pruning keeps, as the GRAND / SIB candidates do; the graph API here joins every arc.

Gains g = log(1 − μ + μe^θ) − μθ (Riedel & Smith 2010, Prop. 1) need μ, the probability that a factor
not yet in the graph fires under the current graph. BP has no belief for it; it is approximated as
if its two arcs were independent, μ ≈ μ[a]·μ[b] from the current arc marginals (for a NOCROSS group,
the sum of such products over its crossing pairs). Two arcs from ROOT never co-occur under a
single-root constraint, so those SIB factors get μ = 0. `scripts/relax_experiments.py mu-approx`
measures the approximation against enumeration (README, "Relaxed inference").

The bound reported is on KL(p_sub ‖ p_full) from the factors left out, with the same μ approximation:
``bound`` η = ‖θ_rest‖₁ − ⟨μ_rest, θ_rest⟩ (Riedel & Smith 2010, Prop. 2) and ``bound_tight``, η plus
the C term of Riedel, Smith & McCallum Prop. 2 (`bpparse.kernels.relax_kernels.kl_bounds`).
"""
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from bpparse.bp import BPMessages, BPResult, _check_array, _check_options, dense_graph, seq_factors
from bpparse.config import CROSS_MODES, GLOBAL_CODES
from bpparse.graph import FactorGraph, parse_constraint

METHODS = ("iterative", "joint", "size", "divergence")
NOCROSS_BP_ITER = 3  # relaxed BP's iterations a round and damping for models with NOCROSS factors
NOCROSS_DAMPING = 0.3
NOCROSS_THRESHOLD = 3e-3  # iterative's gain threshold (nats) and rounds with NOCROSS factors
NOCROSS_MAX_ROUNDS = 2
THRESHOLD = 1e-4  # the default gain threshold otherwise (one-shot methods, no NOCROSS, graph API)


@dataclass
class RelaxedResult:
    """Output of `relaxed_marginals` / `relax_graph`.

    - ``marginals``: float64 ``(n+1, n+1)`` arc probabilities of the final subgraph;
    - ``beliefs``: float64 ``(n+1, n+1)`` their log-odds (-inf where the arc cannot exist);
    - ``fraction``: dict family -> fraction of that family's factors in the final graph, for
      "grand", "sib", "cross" (families absent from the model are left out) and "all" (every
      second-order factor: GRAND + SIB + NOCROSS groups); 1.0 when the model has none;
    - ``rounds``: how many times factors were added (0: the seed graph was kept);
    - ``bp_iterations``: BP iterations run in all (seed included);
    - ``bound``, ``bound_tight``: upper bounds (nats) on KL(p_sub ‖ p_full), see the module doc
      (NaN when not asked for);
    - ``active``: int64 indices of the pairwise factors in the final graph (into ``graph``'s arrays);
    - ``cross_active``: bool ``(n+1, n+1)`` NOCROSS groups in the final graph, or None;
    - ``graph``: the full `FactorGraph` the factors were chosen from (``active`` indexes it);
    - ``bp``: the last `BPResult`, on a compact copy of the final subgraph (its pairwise factors are
      ``graph``'s ``active`` ones, in that order): pair beliefs, expected crossings, messages.
    """

    marginals: np.ndarray
    beliefs: np.ndarray
    fraction: dict
    rounds: int
    bp_iterations: int
    bound: float
    bound_tight: float
    active: np.ndarray
    cross_active: object
    graph: FactorGraph
    bp: BPResult

    @property
    def pair_beliefs(self):
        """float64 ``[K]`` over ``graph``'s pairwise factors: P(both arcs) from BP for the factors in
        the final graph, 0 for the others."""
        out = np.zeros(self.graph.pair_a.shape[0])
        out[self.active] = self.bp.pair_beliefs
        return out

    def marginal_interval(self):
        """`marginal_interval` of these marginals with η = ``bound``."""
        return marginal_interval(self.marginals, self.bound)


def marginal_interval(marginals, eta):
    """Riedel & Smith (2010) Prop. 2.2: (lo, hi) float64 like ``marginals`` such that the full
    model's marginals lie in [lo, hi] when the subgraph's marginals and η are exact:
    μ − (e^η − 1)(1 − μ) ≤ μ_full ≤ μ + (e^η − 1)·μ, clipped to [0, 1]."""
    f = np.expm1(eta)
    mu = np.asarray(marginals, dtype=np.float64)
    return np.clip(mu - f * (1.0 - mu), 0.0, 1.0), np.clip(mu + f * mu, 0.0, 1.0)


def _bounds(marginals, graph, in_pair, groups, in_group, zero_root, bound, mu_g=None):
    """(eta, tight) over the factors not in the graph; NaN for what ``bound`` does not ask."""
    from bpparse.kernels.relax_kernels import (crossing_probs, kl_bounds, pair_eta,
                                               pair_firing_probs)

    if bound is None:
        return np.nan, np.nan
    n_soft = graph.n_grand + graph.n_sib
    pa, pb, pw = graph.pair_a, graph.pair_b, graph.pair_w
    theta_g = graph.cross_w[groups] if groups is not None else np.zeros(0)
    if mu_g is None:
        mu_g = crossing_probs(marginals)[groups] if groups is not None else np.zeros(0)
    flat = marginals.reshape(-1)
    if bound == "tight":
        return kl_bounds(
            np.concatenate([pair_firing_probs(flat, pa, pb, n_soft, zero_root), mu_g]),
            np.concatenate([pw[:n_soft], theta_g]), ~np.concatenate([in_pair[:n_soft], in_group]),
            True)
    eta = pair_eta(flat, pa, pb, pw, n_soft, in_pair, zero_root)
    return eta + kl_bounds(mu_g, theta_g, ~in_group, False)[0], np.nan


def result_bounds(result, single_root=True, constraint="tree", tight=False):
    """The KL bounds of a `RelaxedResult` computed after the fact (e.g. when `relax_graph` ran with
    ``bound=None`` to time inference alone): (eta, tight) as in `RelaxedResult`, tight NaN unless
    ``tight``. ``single_root`` and ``constraint`` as given to `relax_graph`."""
    g = result.graph
    in_pair = np.zeros(g.pair_a.shape[0], dtype=bool)
    in_pair[result.active] = True
    in_pair[g.n_grand + g.n_sib:] = True
    groups = None
    in_group = np.zeros(0, dtype=bool)
    if g.cross_w is not None:
        groups = np.nonzero(g.cross_active)
        in_group = result.cross_active[groups]
    zero_root = bool(single_root) and parse_constraint(constraint)[0] == "tree"
    return _bounds(result.marginals, g, in_pair, groups, in_group, zero_root,
                   "tight" if tight else "eta")


def _validate(graph, link, method, threshold, max_rounds, bp_iter, max_factors, projective,
              constraint, cross_mode, damping, tol, bound):
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    threshold = float(threshold)
    if np.isnan(threshold):
        raise ValueError("threshold must be a number")
    if method == "divergence":
        if max_factors is None or int(max_factors) < 0:
            raise ValueError("method 'divergence' needs max_factors >= 0")
    if max_rounds is not None and int(max_rounds) < 0:
        raise ValueError("max_rounds must be >= 0 or None")
    if int(bp_iter) < 1:
        raise ValueError("bp_iter must be >= 1")
    if bound not in ("eta", "tight", None):
        raise ValueError(f"bound must be 'eta', 'tight' or None, got {bound!r}")
    n1 = graph.n + 1
    link = _check_array("link", link, (n1, n1))
    _check_options(projective, constraint, cross_mode, bp_iter, damping, tol)
    return link, threshold


def relax_kernel_args(link, graph, method="iterative", threshold=THRESHOLD, max_rounds=None,
                      bp_iter=5, max_factors=None, projective=False, single_root=True, tol=1e-6,
                      damping=0.0, cross_mode="grouped", constraint="tree", seed_iter=None):
    """The argument tuple of `bpparse.kernels.relax_kernels.relaxed_bp` for these options (no
    validation: `relax_graph` validates). ``relaxed_bp(*args)`` is all of relaxed inference;
    scripts/relax_experiments.py times exactly that call."""
    from bpparse.kernels.bp_engine import DEFAULT_CLIP, CrossFactors, PairFactors, bp_options
    from bpparse.kernels.relax_kernels import relax_options

    n1 = graph.n + 1
    code = GLOBAL_CODES[parse_constraint(constraint)[0].upper()]
    n_soft = graph.n_grand + graph.n_sib  # GRAND + SIB; the NAND pairs after them are never relaxed
    if graph.cross_w is None:
        cross_w = np.zeros((n1, n1))
        cross_candidate = np.zeros((n1, n1), dtype=np.bool_)
    else:
        cross_w, cross_candidate = graph.cross_w, graph.cross_active
    first_order_seed = (n_soft == graph.pair_a.shape[0] and graph.seq is None
                        and code == GLOBAL_CODES["TREE"])
    if seed_iter is None:
        seed_iter = 1 if first_order_seed else bp_iter
    return (link, PairFactors(graph.pair_a, graph.pair_b, graph.pair_w), n_soft,
            CrossFactors(cross_w, cross_candidate, CROSS_MODES[cross_mode], np.zeros((0, 0, 0)),
                         np.zeros((0, 0), dtype=bool)),  # groups on every arc
            seq_factors(graph),  # in every graph, never relaxed
            bp_options(code, projective, single_root, bp_iter, tol, damping, DEFAULT_CLIP),
            relax_options(METHODS.index(method), threshold, -1 if max_rounds is None else max_rounds,
                          bp_iter, seed_iter, -1 if max_factors is None else max_factors),
            np.zeros((0, 0)))  # the seed computes its own first-order marginals


def relax_graph(link, graph, method="iterative", threshold=THRESHOLD, max_rounds=None, bp_iter=5,
                max_factors=None, projective=False, single_root=True, tol=1e-6, damping=0.0,
                cross_mode="grouped", constraint="tree", seed_iter=None, bound="eta"):
    """Relaxed marginal inference on a prepared `FactorGraph` (the full graph); see the module doc.

    ``link``: float64 ``(n+1, n+1)`` LINK scores. ``method``: "iterative", "joint", "size" or
    "divergence"; ``threshold``: ε (iterative, size) or γ (joint), in nats; ``max_rounds``: R for
    "iterative" (None = until nothing is added, which always terminates but can take many rounds
    where BP does not converge); ``bp_iter``: B, the BP iterations per round (for
    the one-shot methods, of the final run); ``max_factors``: m for "divergence" (NOCROSS groups
    count one each). ``seed_iter``: BP iterations on the seed graph (default: 1 when it is LINK +
    TREE/PTREE only, where one iteration is exact first-order inference, else ``bp_iter``).
    ``bound``: "eta" (one pass over the factors left out), "tight" (also ``bound_tight``: a
    partial sort of them) or None (neither; NaN, as unneeded bounds are for plain parsing). Other
    arguments as in `bpparse.bp_marginals`. Inference is one call of the numba kernel
    `bpparse.kernels.relax_kernels.relaxed_bp` (no Python per round). Returns a `RelaxedResult`.
    """
    from bpparse.kernels.relax_kernels import relaxed_bp

    link, threshold = _validate(graph, link, method, threshold, max_rounds, bp_iter, max_factors,
                                projective, constraint, cross_mode, damping, tol, bound)
    args = relax_kernel_args(link, graph, method, threshold, max_rounds, bp_iter, max_factors,
                             projective, single_root, tol, damping, cross_mode, constraint,
                             seed_iter)
    return result_from_kernel(graph, relaxed_bp(*args), single_root, constraint, cross_mode,
                              bound)


def result_from_kernel(graph, out, single_root=True, constraint="tree", cross_mode="grouped",
                       bound="eta"):
    """`RelaxedResult` from the output tuple of `relaxed_bp` on ``graph`` (factor beliefs and the
    requested bounds are computed here, outside the kernel)."""
    from bpparse.kernels.bp_engine import CrossFactors, PairFactors, bp_factor_beliefs
    from bpparse.kernels.factors.childseq import dense_transition_values

    (bel, marginals, sel, msg_a, msg_b, cross_active, cross_msg, global_msg, rounds, iterations,
     last, converged, residual, seq_msg) = out
    n1 = graph.n + 1
    k = graph.pair_a.shape[0]
    n_soft = graph.n_grand + graph.n_sib
    n_g = int(np.searchsorted(sel, graph.n_grand))
    n_s = int(np.searchsorted(sel, n_soft)) - n_g
    has_cross = graph.cross_w is not None
    sub = FactorGraph(graph.n, graph.pair_a[sel], graph.pair_b[sel], graph.pair_w[sel], n_g, n_s,
                      sel.shape[0] - n_g - n_s, graph.cross_w, cross_active if has_cross else None,
                      graph.seq)
    cw = graph.cross_w if has_cross else np.zeros((n1, n1))
    mode = CROSS_MODES[cross_mode]
    seq = seq_factors(graph, seq_msg)
    pair_prob, crossings, seq_prob = bp_factor_beliefs(
        bel, PairFactors(sub.pair_a, sub.pair_b, sub.pair_w), np.arange(sel.shape[0]), msg_a, msg_b,
        CrossFactors(cw, cross_active, mode, cross_msg, np.zeros((0, 0), dtype=bool)), seq)
    messages = BPMessages(global_msg, msg_a, msg_b, cross_msg,
                          None if graph.seq is None else seq_msg)
    res = BPResult(marginals=marginals, beliefs=bel, iterations=int(last),
                   converged=bool(converged), residual=float(residual), graph=sub,
                   pair_beliefs=pair_prob, cross_expected=crossings if has_cross else None,
                   messages=messages, seq_expected=None if graph.seq is None else
                   dense_transition_values(seq, seq_prob, n1))
    in_pair = np.zeros(k, dtype=bool)
    in_pair[sel] = True
    groups = np.nonzero(graph.cross_active) if has_cross else None
    in_group = cross_active[groups] if has_cross else np.zeros(0, dtype=bool)
    zero_root = bool(single_root) and parse_constraint(constraint)[0] == "tree"
    eta, tight = _bounds(marginals, graph, in_pair, groups, in_group, zero_root, bound)
    fraction = {}
    used_g = int(in_group.sum())
    for name, used, total in (("grand", n_g, graph.n_grand), ("sib", n_s, graph.n_sib),
                              ("cross", used_g, in_group.shape[0])):
        if total:
            fraction[name] = used / total
    total = n_soft + in_group.shape[0]
    fraction["all"] = (n_g + n_s + used_g) / total if total else 1.0
    return RelaxedResult(
        marginals=marginals, beliefs=bel, fraction=fraction, rounds=int(rounds),
        bp_iterations=int(iterations), bound=float(eta), bound_tight=float(tight), active=sel,
        cross_active=cross_active if has_cross else None, graph=graph, bp=res)


def graph_from_flat(n, pair_a, pair_b, pair_w, n_grand, cross_w=None, constraint="tree", seq=None):
    """The full `FactorGraph` of one sentence from flat pairwise factors (as in
    `bpparse.model.SentenceScores`): ``pair_a``, ``pair_b`` int64 ``[K]``, ``pair_w`` float64 ``[K]``,
    GRAND first (``n_grand`` of them) then SIB; ``cross_w`` float64 ``(n+1, n+1)`` NOCROSS
    log-potentials at [m, l] (every group m < l is in the full graph, as in training), or None / an
    empty array. NOT2 / NO2CYCLE NAND pairs are appended when ``constraint`` asks for them.
    ``seq``: the sentence's `ChildSeqFactors`, or None / one without segments."""
    from bpparse.kernels.factors.hard import no2cycle_pairs, not2_pairs

    pa = np.ascontiguousarray(pair_a, dtype=np.int64)
    pb = np.ascontiguousarray(pair_b, dtype=np.int64)
    pw = np.ascontiguousarray(pair_w, dtype=np.float64)
    n_pairs = pa.shape[0]
    base, no2cycle = parse_constraint(constraint)
    nand = ([not2_pairs(n)] if base == "not2" else []) + ([no2cycle_pairs(n)] if no2cycle else [])
    n_nand = sum(x[0].shape[0] for x in nand)
    if nand:
        pa = np.concatenate([pa] + [x[0] for x in nand])
        pb = np.concatenate([pb] + [x[1] for x in nand])
        pw = np.concatenate([pw, np.full(n_nand, -np.inf)])
    cw = ca = None
    if cross_w is not None and np.size(cross_w) > 0:
        cw = np.ascontiguousarray(cross_w, dtype=np.float64)
        ca = np.triu(np.ones((n + 1, n + 1), dtype=bool), 1)
        ca[0, :] = False
    if seq is not None and seq.head.shape[0] == 0:
        seq = None
    return FactorGraph(int(n), pa, pb, pw, int(n_grand), int(n_pairs - n_grand), int(n_nand), cw, ca,
                       seq)


def relaxed_marginals(link, grand=None, sib=None, cross=None, method="iterative",
                      threshold=THRESHOLD, max_rounds=None, bp_iter=5, max_factors=None, projective=False,
                      single_root=True, tol=1e-6, damping=0.0, cross_mode="grouped",
                      constraint="tree", bound="tight", childseq=None):
    """Arc marginals of a second-order dependency model by relaxed BP (Riedel & Smith 2010; Riedel,
    Smith & McCallum): BP over the seed graph LINK + TREE/PTREE plus only the GRAND / SIB / NOCROSS
    factors whose gain reaches the threshold.

    ``link``, ``grand``, ``sib``, ``cross``, ``projective``, ``single_root``, ``tol``, ``damping``,
    ``cross_mode``, ``constraint``, ``childseq``: as in `bpparse.bp_marginals` (an entry 0 adds no
    GRAND / SIB factor; the CHILDSEQ head automata are always in the graph).
    ``method``: "iterative" (Riedel & Smith Alg. 1, add every factor with gain ≥ ``threshold`` = ε
    after each round of at most ``bp_iter`` BP iterations, for at most ``max_rounds`` rounds, None =
    until nothing is added), or one-shot "joint" (MinJoint, gain ≥ γ = ``threshold``), "size"
    (MinSize, ε = ``threshold``), "divergence" (MinDivergence, the ``max_factors`` best).
    ``threshold`` 0 adds every factor (the full model), ``inf`` none (first-order marginals).
    ``bound``: "tight" (default: ``bound`` and ``bound_tight``), "eta" (``bound`` only) or None.

    Returns a `RelaxedResult`: ``.marginals``, ``.fraction`` (per family and "all"), ``.rounds``,
    ``.bound`` / ``.bound_tight`` (KL bounds on what was left out), ``.bp_iterations``, ...
    """
    link, graph = dense_graph(link, grand, sib, cross, projective, constraint, cross_mode, bp_iter,
                              damping, tol, childseq)
    return relax_graph(link, graph, method, threshold, max_rounds, bp_iter, max_factors, projective,
                       single_root, tol, damping, cross_mode, constraint, None, bound)


# ---------------------------------------------------------------- parsing with relaxed inference

# constraint names of the API by kernel code (PTREE is "tree" with projective=True)
_CONSTRAINT_NAMES = {code: name.lower() for name, code in GLOBAL_CODES.items() if name != "PTREE"}


class RelaxReport:
    """Per-corpus statistics of relaxed inference while parsing (`bpparse relax --report`), the
    analogue of Riedel & Smith (2010) Table 2: fraction of second-order factors used (summed over
    sentences, so long sentences weigh more), rounds, the η bound, CPU time of inference per
    sentence; with ``compare_full``, also full BP on the same scores: mean and max |Δμ| of the arc
    marginals, CPU time, and the UAS of both MBR trees against the input's HEAD column (words whose
    HEAD is ``_`` are not counted). The full-BP baseline runs at most ``full_iterations`` iterations
    (default 10: Riedel & Smith's "BP (10 iterations)") with damping ``full_damping`` (None: the
    parse settings' damping) and the settings' tolerance."""

    def __init__(self, compare_full=False, full_iterations=10, full_damping=None):
        if int(full_iterations) < 1:
            raise ValueError("full_iterations must be >= 1")
        if full_damping is not None and not 0.0 <= float(full_damping) < 1.0:
            raise ValueError("full_damping must be in [0, 1)")
        self.compare_full = compare_full
        self.full_iterations = int(full_iterations)
        self.full_damping = None if full_damping is None else float(full_damping)
        self.used_damping = None
        self.full_converged = 0
        self.err_max_sentence = -1
        self.sentences = 0
        self.words = 0
        self.used = 0
        self.total = 0
        self.rounds = 0
        self.bound = 0.0
        self.seconds = 0.0
        self.full_seconds = 0.0
        self.err_sum = 0.0
        self.err_count = 0
        self.err_max = 0.0
        self.scored = 0
        self.correct = 0
        self.correct_full = 0

    def summary(self):
        """dict of the corpus figures (time in ms per sentence; errors and UAS only when compared)."""
        s = max(self.sentences, 1)
        out = {"sentences": self.sentences, "words": self.words,
               "factors_used": self.used / self.total if self.total else 0.0,
               "rounds": self.rounds / s, "bound": self.bound / s,
               "ms_per_sentence": 1000.0 * self.seconds / s}
        if self.compare_full:
            out.update({"full_ms_per_sentence": 1000.0 * self.full_seconds / s,
                        "speedup": self.full_seconds / self.seconds if self.seconds else float("nan"),
                        "mean_abs_error": self.err_sum / max(self.err_count, 1),
                        "max_abs_error": self.err_max,
                        "max_error_sentence": self.err_max_sentence,
                        "full_iterations": self.full_iterations,
                        "full_damping": self.used_damping,
                        "full_converged": self.full_converged / s,
                        "uas": 100.0 * self.correct / max(self.scored, 1),
                        "uas_full": 100.0 * self.correct_full / max(self.scored, 1)})
        return out

    def format(self, name):
        d = self.summary()
        text = (f"{name}: {d['sentences']} sentences, {d['words']} words; second-order factors used "
                f"{100 * d['factors_used']:.2f}%, rounds {d['rounds']:.2f}, mean bound "
                f"{d['bound']:.4g} nats, inference {d['ms_per_sentence']:.3f} ms/sentence")
        if self.compare_full:
            text += (f"; full BP (at most {d['full_iterations']} iterations, damping "
                     f"{d['full_damping']}, converged on {100 * d['full_converged']:.1f}% of the "
                     f"sentences) {d['full_ms_per_sentence']:.3f} ms/sentence ({d['speedup']:.1f}x), "
                     f"marginal error mean {d['mean_abs_error']:.5f} max {d['max_abs_error']:.4f} "
                     f"(sentence {d['max_error_sentence'] + 1}), "
                     f"UAS relaxed {d['uas']:.2f} full BP {d['uas_full']:.2f}")
        return text


class RelaxedSettings(NamedTuple):
    """Relaxed inference in the parse kernels (`bpparse.parse.ParseSettings.relax`; build it with
    `relaxed_settings`): ``options`` the `relax_kernels.RelaxOptions`, ``damping`` of relaxed BP."""

    options: object
    damping: float


def _check_relaxed(method, threshold, max_rounds, bp_iter, max_factors, damping):
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if method == "divergence" and (max_factors is None or int(max_factors) < 0):
        raise ValueError("method 'divergence' needs max_factors >= 0")
    if threshold != "auto" and np.isnan(float(threshold)):
        raise ValueError("threshold must be a number or 'auto'")
    if (bp_iter != "auto" and int(bp_iter) < 1) or (max_rounds not in (None, "auto")
                                                     and int(max_rounds) < 0):
        raise ValueError("bp_iter must be >= 1 or 'auto' and max_rounds >= 0, None or 'auto'")
    if damping not in (None, "auto") and not 0.0 <= float(damping) < 1.0:
        raise ValueError("damping must be in [0, 1), None or 'auto'")


def relaxed_settings(settings, method="iterative", threshold="auto", max_rounds="auto",
                     bp_iter="auto", max_factors=None, damping="auto"):
    """`RelaxedSettings` for a model's parse `InferenceSettings` ``settings``: which factors
    relaxed inference adds (``method``, ``threshold``, ``max_rounds``, ``max_factors``: as for
    `relax_graph`), ``bp_iter`` its BP iterations a round and ``damping`` of its BP (None: the
    parse settings'). "auto" (the defaults): for a model with NOCROSS factors, whose many short
    loops make undamped BP oscillate even on the relaxed graph, NOCROSS_BP_ITER iterations damped
    by NOCROSS_DAMPING (four `full` models, EWT and IMST: within 0.05 UAS of full BP, where 2
    iterations damped by 0.5 lost 0.16 on IMST, docs/experiments.md); else 5 iterations undamped
    (the relaxed graph holds a few % of the GRAND/SIB factors and hardly loops; full BP on the
    whole graph needs the model's damping). With NOCROSS, "auto" also means that ``iterative`` adds
    the factors gaining NOCROSS_THRESHOLD nats, in at most NOCROSS_MAX_ROUNDS rounds (the NOCROSS
    groups on the arcs pruning keeps, `inference.relaxed_infer_scores`; five NOCROSS models, EWT
    and IMST: -0.08 to +0.10 UAS against full BP, where 3 rounds gave -0.06 to +0.08 for a
    quarter more inference time, docs/experiments.md); else THRESHOLD and no limit. ValueError
    for an option out of range."""
    from bpparse.kernels.relax_kernels import relax_options

    _check_relaxed(method, threshold, max_rounds, bp_iter, max_factors, damping)
    nocross_iterative = settings.use_cross and method == "iterative"
    if threshold == "auto":
        threshold = NOCROSS_THRESHOLD if nocross_iterative else THRESHOLD
    if max_rounds == "auto":
        max_rounds = NOCROSS_MAX_ROUNDS if nocross_iterative else None
    iterations = int(bp_iter) if bp_iter != "auto" else NOCROSS_BP_ITER if settings.use_cross else 5
    if damping is None:
        damping = settings.damping
    elif damping == "auto":
        damping = NOCROSS_DAMPING if settings.use_cross else 0.0
    return RelaxedSettings(
        relax_options(METHODS.index(method), threshold, -1 if max_rounds is None else max_rounds,
                      iterations, iterations, -1 if max_factors is None else max_factors),
        float(damping))


def relaxed_inference(method="iterative", threshold="auto", max_rounds="auto", bp_iter="auto",
                      max_factors=None, report=None, damping="auto"):
    """An ``inference`` hook for `bpparse.parse` (``iter_parse`` / ``parse_corpus``) that fills a
    `RelaxReport` ``report`` (with ``compare_full`` it also runs full BP with the report's own
    iterations and damping), sentence by sentence: the model's scores, then relaxed inference
    (`inference.relaxed_infer_scores`, as the parse kernels run it for
    `bpparse.parse.ParseSettings.relax`) under the parse settings' constraint and tolerance, the
    options as for `relaxed_settings`. Without a report, `relaxed_settings` in the parse settings
    gives the same output faster (no Python per sentence, and ``jobs``). Sentences the pipeline
    sends to the first-order fallback get exact first-order marginals (no second-order factors to
    add). Returns ``inference(model, encoded, settings) -> (mu, label_logp, map_scores)``.
    """
    import time

    from bpparse.inference import relaxed_infer_scores
    from bpparse.scoring import encoded_scores

    _check_relaxed(method, threshold, max_rounds, bp_iter, max_factors, damping)
    resolved = {}  # InferenceSettings -> RelaxedSettings (the model's, its first-order fallback's)

    def inference(model, encoded, settings):
        relax = resolved.get(settings)
        if relax is None:
            relax = resolved[settings] = relaxed_settings(settings, method, threshold, max_rounds,
                                                          bp_iter, max_factors, damping)
        # the full graph is the one the built-in inference builds (second-order factors pruned to
        # the arcs of first-order marginal >= settings.prune)
        sc = encoded_scores(model, encoded, settings)
        t0 = time.thread_time()
        mu, label_logp, map_scores, out = relaxed_infer_scores(sc, settings, *relax)
        elapsed = time.thread_time() - t0
        if report is not None:
            n = sc.arc.shape[0] - 1
            constraint = _CONSTRAINT_NAMES[settings.code] + (
                "+no2cycle" if settings.no2cycle else "")
            cross_mode = "exactly1" if settings.cross_mode == 1 else "grouped"
            graph = graph_from_flat(n, sc.pair_a, sc.pair_b, sc.pair_w, sc.n_grand,
                                    sc.cross_w if settings.use_cross else None, constraint, sc.seq)
            res = result_from_kernel(graph, out, settings.single_root, constraint, cross_mode, None)
            _record(report, res, graph, encoded, settings, constraint, elapsed, sc.arc)
        return mu, label_logp, map_scores

    return inference


def _record(report, res, graph, encoded, settings, constraint, elapsed, arc):
    """Add one sentence to a `RelaxReport` (bound, and with compare_full, full BP), untimed."""
    import time

    from bpparse.decode import mbr_decode
    from bpparse.kernels.bp_engine import (DEFAULT_CLIP, CrossFactors, PairFactors,
                                           beliefs_to_marginals, bp_engine, bp_options)

    g = graph
    n = g.n
    report.sentences += 1
    report.words += n
    report.total += g.n_grand + g.n_sib + (0 if g.cross_w is None else int(g.cross_active.sum()))
    report.used += res.active.shape[0] - g.n_nand + (
        0 if res.cross_active is None else int(res.cross_active.sum()))
    report.rounds += res.rounds
    report.bound += result_bounds(res, settings.single_root, constraint)[0]
    report.seconds += elapsed
    if not report.compare_full:
        return
    size = n + 1
    k = g.pair_a.shape[0]
    if g.cross_w is None:
        cw, ca, cmsg = np.zeros((size, size)), np.zeros((size, size), bool), np.zeros((0, 0, 0))
    else:
        cw, ca, cmsg = g.cross_w, g.cross_active, np.zeros((size, size, size))
    damping = settings.damping if report.full_damping is None else report.full_damping
    report.used_damping = damping
    t0 = time.thread_time()
    options = bp_options(settings.code, settings.projective, settings.single_root,
                         report.full_iterations, settings.tol, damping, DEFAULT_CLIP)
    bel, _, converged, _ = bp_engine(arc, PairFactors(g.pair_a, g.pair_b, g.pair_w), np.arange(k),
                                     np.zeros(k), np.zeros(k),
                                     CrossFactors(cw, ca, settings.cross_mode, cmsg,
                                                  np.zeros((0, 0), dtype=bool)),
                                     seq_factors(g), np.zeros((size, size)), options)
    full = beliefs_to_marginals(bel)
    report.full_seconds += time.thread_time() - t0
    report.full_converged += bool(converged)
    mask = np.zeros((size, size), dtype=bool)
    mask[:, 1:] = True
    np.fill_diagonal(mask, False)
    diff = np.abs(res.marginals - full)[mask]
    if diff.size:
        report.err_sum += float(diff.sum())
        report.err_count += diff.size
        if float(diff.max()) > report.err_max:
            report.err_max = float(diff.max())
            report.err_max_sentence = report.sentences - 1
    gold = np.asarray(encoded.heads)
    known = gold[1:] >= 0
    if known.any():
        mine = mbr_decode(res.marginals, settings.projective, settings.single_root)
        theirs = mbr_decode(full, settings.projective, settings.single_root)
        report.scored += int(known.sum())
        report.correct += int(np.sum((mine[1:] == gold[1:]) & known))
        report.correct_full += int(np.sum((theirs[1:] == gold[1:]) & known))
