"""Loopy belief propagation for dependency parsing: the public Python API (docs/design.md §2, SE08).

`bp_marginals` takes dense log-potentials (LINK scores and optional GRAND / SIB / NOCROSS arrays, e.g.
from a neural scorer), builds the sentence's factor graph as flat arrays (`bpparse.graph`) and runs the
one-call numba engine (`bpparse.kernels.bp_engine`). `run_bp` is the lower-level entry point on a
`FactorGraph` with an ``active`` subset and warm-start messages (relaxation, training).
"""
from collections import namedtuple
from dataclasses import dataclass

import numpy as np

from bpparse.config import CROSS_MODES, GLOBAL_CODES
from bpparse.graph import (
    FactorGraph,
    build_graph,
    parse_constraint,
    scatter_pair_values,
)

BPMessages = namedtuple("BPMessages", "global_msg msg_a msg_b cross_msg seq_msg",
                        defaults=(None,))
BPMessages.__doc__ = """All messages of a BP run (log-odds), reusable as a warm start.

``global_msg``: float64 ``(n+1, n+1)`` from TREE / PTREE / EXACTLY1 / ATMOST1; ``msg_a``, ``msg_b``:
float64 ``[K]`` from each pairwise factor to its arcs a and b; ``cross_msg``: float64
``(n+1, n+1, n+1)`` from NOCROSS groups (``[x, y, h]``: group {x, y} to arc h→x), or shape
(0, 0, 0); ``seq_msg``: float64 ``[C]`` from the CHILDSEQ factors to their arcs (in the order of
``graph.seq.child``), or None."""



@dataclass
class BPResult:
    """Output of `bp_marginals` / `run_bp`.

    - ``marginals``: float64 ``(n+1, n+1)``, P(arc h→m) = σ(beliefs) (0 on the diagonal, column 0 and
      forbidden arcs);
    - ``beliefs``: float64 ``(n+1, n+1)``, log-odds (-inf where the arc cannot exist);
    - ``iterations``, ``converged``, ``residual``: iterations run, whether the largest message change
      fell below ``tol``, and that change in the last iteration;
    - ``graph``: the `FactorGraph` (flat pairwise factors: GRAND, then SIB, then NAND pairs);
    - ``pair_beliefs``: float64 ``[K]``, P(both arcs) of every pairwise factor (0 when inactive);
    - ``cross_expected``: float64 ``(n+1, n+1)``, expected crossings per NOCROSS group at [m, l]
      (m < l), or None without NOCROSS;
    - ``seq_expected``: float64 ``(n+1, n+1, n+1)``, expected count of every CHILDSEQ transition
      [h, a, b] (layout of ``childseq`` in `bp_marginals`), or None without CHILDSEQ;
    - ``messages``: `BPMessages`, to continue from (``run_bp(..., messages=result.messages)``).
    """

    marginals: np.ndarray
    beliefs: np.ndarray
    iterations: int
    converged: bool
    residual: float
    graph: FactorGraph
    pair_beliefs: np.ndarray
    cross_expected: object
    messages: BPMessages
    seq_expected: object = None

    @property
    def grand_beliefs(self):
        """Dense float64 ``(n+1, n+1, n+1)``: P(g→h and h→m) at [g, h, m] for every GRAND factor."""
        g = self.graph
        return scatter_pair_values(self.pair_beliefs, g.pair_a, g.pair_b, 0, g.n_grand, g.n + 1)

    @property
    def sib_beliefs(self):
        """Dense float64 ``(n+1, n+1, n+1)``: P(h→m and h→s) at [h, m, s] (m < s) for every SIB factor."""
        g = self.graph
        return scatter_pair_values(self.pair_beliefs, g.pair_a, g.pair_b, g.n_grand,
                                   g.n_grand + g.n_sib, g.n + 1)


def _check_array(name, value, shape, allow_neg_inf=True):
    arr = np.ascontiguousarray(value, dtype=np.float64)
    if arr.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {arr.shape}")
    bad = np.isnan(arr) | (arr == np.inf)
    if not allow_neg_inf:
        bad |= arr == -np.inf
    if bad.any():
        raise ValueError(f"{name} contains NaN or +inf")
    return arr


def _check_options(projective, constraint, cross_mode, max_iter, damping, tol):
    base, no2cycle = parse_constraint(constraint)
    if projective and (base != "tree" or no2cycle):
        raise ValueError("projective=True needs constraint='tree' (PTREE)")
    if cross_mode not in CROSS_MODES:
        raise ValueError(f"cross_mode must be 'grouped' or 'exactly1', got {cross_mode!r}")
    if int(max_iter) < 0:
        raise ValueError("max_iter must be >= 0")
    if not 0.0 <= float(damping) < 1.0:
        raise ValueError("damping must be in [0, 1)")
    if not float(tol) >= 0.0:
        raise ValueError("tol must be >= 0")
    return base


def init_messages(graph):
    """All-zero `BPMessages` for ``graph`` (a cold start)."""
    size = graph.n + 1
    k = graph.pair_a.shape[0]
    cross = np.zeros((size, size, size) if graph.cross_w is not None else (0, 0, 0))
    seq = None if graph.seq is None else np.zeros(graph.seq.child.shape[0])
    return BPMessages(np.zeros((size, size)), np.zeros(k), np.zeros(k), cross, seq)


def seq_factors(graph, msg=None):
    """The `ChildSeqFactors` the BP kernels take for ``graph``: its CHILDSEQ factors carrying the
    messages ``msg`` (float64 ``[C]`` log-odds, updated in place by BP; None: fresh zeros), or an
    empty one (`no_childseq`) when the graph has none."""
    from bpparse.kernels.factors.childseq import no_childseq

    if graph.seq is None:
        return no_childseq()
    return graph.seq._replace(msg=np.zeros(graph.seq.child.shape[0]) if msg is None else msg)


def run_bp(link, graph, active=None, messages=None, projective=False, single_root=True,
           max_iter=10, tol=1e-6, damping=0.0, cross_mode="grouped", constraint="tree",
           clip=None):
    """BP on a prepared `FactorGraph`, optionally on a subset of its pairwise factors.

    ``link``: float64 ``(n+1, n+1)`` LINK scores; ``active``: int64 indices of the pairwise factors
    in the graph (default: all); ``messages``: `BPMessages` to start from (default: zeros; they are
    updated in place and returned in the result). The constraint must match the one ``graph`` was
    built with (NOT2 / NO2CYCLE are NAND pairs inside it). Other arguments as in `bp_marginals`.
    """
    from bpparse.kernels.bp_engine import (
        DEFAULT_CLIP,
        CrossFactors,
        PairFactors,
        beliefs_to_marginals,
        bp_engine,
        bp_factor_beliefs,
        bp_options,
    )
    from bpparse.kernels.factors.childseq import dense_transition_values

    size = graph.n + 1
    link = _check_array("link", link, (size, size))
    base = _check_options(projective, constraint, cross_mode, max_iter, damping, tol)
    if active is None:
        active = np.arange(graph.pair_a.shape[0], dtype=np.int64)
    else:
        active = np.ascontiguousarray(active, dtype=np.int64)
        if active.size and (active.min() < 0 or active.max() >= graph.pair_a.shape[0]):
            raise ValueError("active indexes outside the graph's pairwise factors")
    if messages is None:
        messages = init_messages(graph)
    if graph.cross_w is None:
        cross_w = np.zeros((size, size))
        cross_active = np.zeros((size, size), np.bool_)
    else:
        cross_w, cross_active = graph.cross_w, graph.cross_active
    pairs = PairFactors(graph.pair_a, graph.pair_b, graph.pair_w)
    cross = CrossFactors(cross_w, cross_active, CROSS_MODES[cross_mode], messages.cross_msg,
                         np.zeros((0, 0), dtype=bool))
    seq = seq_factors(graph, messages.seq_msg)
    options = bp_options(GLOBAL_CODES[base.upper()], projective, single_root, max_iter, tol, damping,
                         DEFAULT_CLIP if clip is None else clip)
    bel, iterations, converged, residual = bp_engine(link, pairs, active, messages.msg_a,
                                                     messages.msg_b, cross, seq,
                                                     messages.global_msg, options)
    pair_prob, crossings, seq_prob = bp_factor_beliefs(bel, pairs, active, messages.msg_a,
                                                       messages.msg_b, cross, seq)
    return BPResult(
        marginals=beliefs_to_marginals(bel), beliefs=bel, iterations=int(iterations),
        converged=bool(converged), residual=float(residual), graph=graph, pair_beliefs=pair_prob,
        cross_expected=crossings if graph.cross_w is not None else None, messages=messages,
        seq_expected=None if graph.seq is None else dense_transition_values(seq, seq_prob, size))


def bp_marginals(link, grand=None, sib=None, cross=None, projective=False, single_root=True,
                 max_iter=10, tol=1e-6, damping=0.0, cross_mode="grouped", constraint="tree",
                 childseq=None):
    """Approximate arc marginals of a second-order dependency model by loopy BP (Smith & Eisner 2008).

    ``link[h, m]``: float64 ``(n+1, n+1)`` LINK log-potential of arc h→m (0 = ROOT; diagonal and
    column 0 ignored; -inf forbids the arc). Optional log-potentials, float64; an entry that is 0 adds
    no factor:
    - ``grand[g, h, m]`` ``(n+1, n+1, n+1)``: when arcs g→h and h→m are both present;
    - ``sib[h, m, s]`` ``(n+1, n+1, n+1)``: when arcs h→m and h→s are both present (m < s used);
    - ``cross[m, l]`` ``(n+1, n+1)``: for each crossing pair of parent arcs of m and l (m < l used);
      -inf in grand/sib/cross makes the pair impossible. With ``cross_mode="exactly1"`` (SE08 §5.3)
      every group m < l is in the graph, even at weight 0, because it also carries EXACTLY1;
    - ``childseq[h, a, b]`` ``(n+1, n+1, n+1)``: head automata (CHILDSEQ, SE08 §3), one factor per
      head and side over its children listed outward from h: ``[h, h, c]`` when c is h's first
      child on its side, ``[h, c, d]`` when d follows c, ``[h, c, h]`` when c is the last; a side
      without children scores 0 (every entry is read: here 0 is a value, not "no factor").
    ``projective``: PTREE instead of TREE; ``single_root``: ROOT has exactly one child (TREE/PTREE).
    ``constraint``: "tree" (default), or a weaker hard constraint of SE08 Table 3 in its place:
    "exactly1", "atmost1", "not2", optionally "+no2cycle" (``single_root`` does not apply to them).
    Flooding schedule with damping ``damping`` (r <- (1-α) r_new + α r_old); stops after ``max_iter``
    iterations or when the largest message change is below ``tol``.

    Returns a `BPResult` (``.marginals``, ``.iterations``, ``.converged``, ``.residual``,
    ``.beliefs``, ``.pair_beliefs`` / ``.grand_beliefs`` / ``.sib_beliefs``, ``.cross_expected``,
    ``.seq_expected``).
    """
    link, graph = dense_graph(link, grand, sib, cross, projective, constraint, cross_mode, max_iter,
                              damping, tol, childseq)
    return run_bp(link, graph, None, None, projective, single_root, max_iter, tol, damping,
                  cross_mode, constraint)


def dense_graph(link, grand, sib, cross, projective, constraint, cross_mode, max_iter, damping, tol,
                childseq=None):
    """Validate the dense user arrays and options of `bp_marginals` / `relaxed_marginals`; returns
    (link float64 (n+1, n+1), `FactorGraph` of the nonzero second-order and crossing entries)."""
    link = np.ascontiguousarray(link, dtype=np.float64)
    if link.ndim != 2 or link.shape[0] != link.shape[1] or link.shape[0] < 2:
        raise ValueError(f"link must be a square (n+1, n+1) array with n >= 1, got {link.shape}")
    size = link.shape[0]
    link = _check_array("link", link, (size, size))
    _check_options(projective, constraint, cross_mode, max_iter, damping, tol)
    if grand is not None:
        grand = _check_array("grand", grand, (size, size, size))
    if sib is not None:
        sib = _check_array("sib", sib, (size, size, size))
    if cross is not None:
        cross = _check_array("cross", cross, (size, size))
    if childseq is not None:
        childseq = _check_array("childseq", childseq, (size, size, size))
    return link, build_graph(size - 1, grand, sib, cross, constraint, cross_mode, childseq)
