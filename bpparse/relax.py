"""Relaxed marginal inference: BP on the few second-order factors that matter (DESIGN §5).

Two algorithms over the same flat factor graph as full BP (`bpparse.graph`), both starting from the
seed graph LINK + TREE/PTREE (+ the hard NAND pairs of a NOT2 / NO2CYCLE constraint, which are
never relaxed):

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
unit that is added.

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

import numpy as np

from bpparse.bp import BPMessages, BPResult, run_bp
from bpparse.graph import FactorGraph, build_graph, parse_constraint

METHODS = ("iterative", "joint", "size", "divergence")


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
      (``bound_tight`` is NaN unless asked for);
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


def relax_graph(link, graph, method="iterative", threshold=1e-4, max_rounds=None, bp_iter=5,
                max_factors=None, projective=False, single_root=True, tol=1e-6, damping=0.0,
                cross_mode="grouped", constraint="tree", seed_iter=None, tight_bound=False):
    """Relaxed marginal inference on a prepared `FactorGraph` (the full graph); see the module doc.

    ``link``: float64 ``(n+1, n+1)`` LINK scores. ``method``: "iterative", "joint", "size" or
    "divergence"; ``threshold``: ε (iterative, size) or γ (joint), in nats; ``max_rounds``: R for
    "iterative" (None = until nothing is added); ``bp_iter``: B, the BP iterations per round (for
    the one-shot methods, of the final run); ``max_factors``: m for "divergence" (NOCROSS groups
    count one each). ``seed_iter``: BP iterations on the seed graph (default: 1 when it is LINK +
    TREE/PTREE only, where one iteration is exact first-order inference, else ``bp_iter``).
    ``tight_bound``: also compute ``bound_tight`` (a partial sort of the factors left out; NaN
    otherwise). Other arguments as in `bpparse.bp_marginals`. Returns a `RelaxedResult`.
    """
    from bpparse.kernels.relax_kernels import (crossing_probs, factor_gains, kl_bounds,
                                               pair_candidates_at_least, pair_eta,
                                               pair_firing_probs, select_gain_at_least,
                                               select_min_divergence, select_min_size)

    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    threshold = float(threshold)
    if np.isnan(threshold):
        raise ValueError("threshold must be a number")
    if method == "divergence":
        if max_factors is None or int(max_factors) < 0:
            raise ValueError("method 'divergence' needs max_factors >= 0")
        max_factors = int(max_factors)
    if max_rounds is not None and int(max_rounds) < 0:
        raise ValueError("max_rounds must be >= 0 or None")
    if int(bp_iter) < 1:
        raise ValueError("bp_iter must be >= 1")

    k = graph.pair_a.shape[0]
    n1 = graph.n + 1
    n_soft = graph.n_grand + graph.n_sib  # GRAND + SIB; the NAND pairs after them are never relaxed
    pa, pb, pw = graph.pair_a, graph.pair_b, graph.pair_w
    zero_root = bool(single_root) and parse_constraint(constraint)[0] == "tree"
    in_pair = np.zeros(k, dtype=bool)
    in_pair[n_soft:] = True
    if graph.cross_w is not None:
        groups = np.nonzero(graph.cross_active)  # NOCROSS groups (m, l), row-major
        theta_g = graph.cross_w[groups]
    else:
        groups = None
        theta_g = np.zeros(0)
    in_group = np.zeros(theta_g.shape[0], dtype=bool)

    def group_probs(marginals):
        return crossing_probs(marginals)[groups] if groups is not None else np.zeros(0)

    # BP runs on a compact copy of the subgraph (only its own factors), so that the engine's
    # per-call work is O(|subgraph|), not O(|full graph|); messages move along when factors are added
    def compact(sel):
        cross_on = None
        if groups is not None:
            cross_on = np.zeros_like(graph.cross_active)
            cross_on[groups[0][in_group], groups[1][in_group]] = True
        n_g = int(np.searchsorted(sel, graph.n_grand))
        n_s = int(np.searchsorted(sel, n_soft)) - n_g
        return FactorGraph(graph.n, pa[sel], pb[sel], pw[sel], n_g, n_s, sel.shape[0] - n_g - n_s,
                           graph.cross_w, cross_on)

    sel = np.arange(n_soft, k)
    cross_shape = (n1, n1, n1) if groups is not None else (0, 0, 0)
    messages = BPMessages(np.zeros((n1, n1)), np.zeros(sel.shape[0]), np.zeros(sel.shape[0]),
                          np.zeros(cross_shape))
    if seed_iter is None:
        seed_iter = 1 if sel.shape[0] == 0 and parse_constraint(constraint)[0] == "tree" else bp_iter
    res = run_bp(link, compact(sel), None, messages, projective, single_root, int(seed_iter), tol,
                 damping, cross_mode, constraint)
    iterations = res.iterations
    rounds = 0
    mu_g = None  # NOCROSS firing probabilities under the current `res`
    while True:
        if method != "iterative" and rounds == 1:
            break
        if method == "iterative" and max_rounds is not None and rounds >= int(max_rounds):
            break
        flat = res.marginals.reshape(-1)
        mu_g = group_probs(res.marginals)
        if method in ("iterative", "joint"):
            add_p = pair_candidates_at_least(flat, pa, pb, pw, n_soft, in_pair, zero_root, threshold)
            add_g = np.nonzero(select_gain_at_least(mu_g, theta_g, ~in_group, threshold))[0]
        else:
            gains = factor_gains(
                np.concatenate([pair_firing_probs(flat, pa, pb, n_soft, zero_root), mu_g]),
                np.concatenate([pw[:n_soft], theta_g]))
            candidate = ~np.concatenate([in_pair[:n_soft], in_group])
            if method == "size":
                add = select_min_size(gains, candidate, threshold)
            else:
                add = select_min_divergence(gains, candidate, max_factors)
            add_p = np.nonzero(add[:n_soft])[0]
            add_g = np.nonzero(add[n_soft:])[0]
        if add_p.shape[0] == 0 and add_g.shape[0] == 0:
            break
        in_pair[add_p] = True
        in_group[add_g] = True
        rounds += 1
        new_sel = np.sort(np.concatenate([sel, add_p]))
        pos = np.searchsorted(new_sel, sel)
        msg_a = np.zeros(new_sel.shape[0])
        msg_b = np.zeros(new_sel.shape[0])
        msg_a[pos] = res.messages.msg_a
        msg_b[pos] = res.messages.msg_b
        sel = new_sel
        messages = BPMessages(res.messages.global_msg, msg_a, msg_b, res.messages.cross_msg)
        res = run_bp(link, compact(sel), None, messages, projective, single_root, int(bp_iter), tol,
                     damping, cross_mode, constraint)
        iterations += res.iterations
        mu_g = None

    flat = res.marginals.reshape(-1)
    if mu_g is None:
        mu_g = group_probs(res.marginals)
    if tight_bound:
        eta, tight = kl_bounds(
            np.concatenate([pair_firing_probs(flat, pa, pb, n_soft, zero_root), mu_g]),
            np.concatenate([pw[:n_soft], theta_g]), ~np.concatenate([in_pair[:n_soft], in_group]),
            True)
    else:
        eta = pair_eta(flat, pa, pb, pw, n_soft, in_pair, zero_root)
        eta += kl_bounds(mu_g, theta_g, ~in_group, False)[0]
        tight = np.nan
    fraction = {}
    used_p = sel.shape[0] - (k - n_soft)
    used_g = int(in_group.sum())
    n_g_used = int(np.searchsorted(sel, graph.n_grand))
    for name, used, total in (("grand", n_g_used, graph.n_grand),
                              ("sib", used_p - n_g_used, graph.n_sib),
                              ("cross", used_g, in_group.shape[0])):
        if total:
            fraction[name] = used / total
    total = n_soft + in_group.shape[0]
    fraction["all"] = (used_p + used_g) / total if total else 1.0
    return RelaxedResult(
        marginals=res.marginals, beliefs=res.beliefs, fraction=fraction, rounds=rounds,
        bp_iterations=int(iterations), bound=float(eta), bound_tight=float(tight), active=sel,
        cross_active=res.graph.cross_active, graph=graph, bp=res)


def graph_from_flat(n, pair_a, pair_b, pair_w, n_grand, cross_w=None, constraint="tree"):
    """The full `FactorGraph` of one sentence from flat pairwise factors (as in
    `bpparse.model.SentenceScores`): ``pair_a``, ``pair_b`` int64 ``[K]``, ``pair_w`` float64 ``[K]``,
    GRAND first (``n_grand`` of them) then SIB; ``cross_w`` float64 ``(n+1, n+1)`` NOCROSS
    log-potentials at [m, l] (every group m < l is in the full graph, as in training), or None / an
    empty array. NOT2 / NO2CYCLE NAND pairs are appended when ``constraint`` asks for them."""
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
    return FactorGraph(int(n), pa, pb, pw, int(n_grand), int(n_pairs - n_grand), int(n_nand), cw, ca)


def relaxed_marginals(link, grand=None, sib=None, cross=None, method="iterative", threshold=1e-4,
                      max_rounds=None, bp_iter=5, max_factors=None, projective=False,
                      single_root=True, tol=1e-6, damping=0.0, cross_mode="grouped",
                      constraint="tree", tight_bound=True):
    """Arc marginals of a second-order dependency model by relaxed BP (Riedel & Smith 2010; Riedel,
    Smith & McCallum): BP over the seed graph LINK + TREE/PTREE plus only the GRAND / SIB / NOCROSS
    factors whose gain reaches the threshold.

    ``link``, ``grand``, ``sib``, ``cross``, ``projective``, ``single_root``, ``tol``, ``damping``,
    ``cross_mode``, ``constraint``: as in `bpparse.bp_marginals` (an entry 0 adds no factor).
    ``method``: "iterative" (Riedel & Smith Alg. 1, add every factor with gain ≥ ``threshold`` = ε
    after each round of at most ``bp_iter`` BP iterations, for at most ``max_rounds`` rounds, None =
    until nothing is added), or one-shot "joint" (MinJoint, gain ≥ γ = ``threshold``), "size"
    (MinSize, ε = ``threshold``), "divergence" (MinDivergence, the ``max_factors`` best).
    ``threshold`` 0 adds every factor (the full model), ``inf`` none (first-order marginals).
    ``tight_bound``: compute ``bound_tight`` too (default; `relax_graph`, the parser's entry point,
    skips it unless asked).

    Returns a `RelaxedResult`: ``.marginals``, ``.fraction`` (per family and "all"), ``.rounds``,
    ``.bound`` / ``.bound_tight`` (KL bounds on what was left out), ``.bp_iterations``, ...
    """
    from bpparse.bp import _check_array, _check_options

    link = np.ascontiguousarray(link, dtype=np.float64)
    if link.ndim != 2 or link.shape[0] != link.shape[1] or link.shape[0] < 2:
        raise ValueError(f"link must be a square (n+1, n+1) array with n >= 1, got {link.shape}")
    size = link.shape[0]
    link = _check_array("link", link, (size, size))
    _check_options(projective, constraint, cross_mode, bp_iter, damping, tol)
    if grand is not None:
        grand = _check_array("grand", grand, (size, size, size))
    if sib is not None:
        sib = _check_array("sib", sib, (size, size, size))
    if cross is not None:
        cross = _check_array("cross", cross, (size, size))
    graph = build_graph(size - 1, grand, sib, cross, constraint, cross_mode)
    return relax_graph(link, graph, method, threshold, max_rounds, bp_iter, max_factors, projective,
                       single_root, tol, damping, cross_mode, constraint, None, tight_bound)
