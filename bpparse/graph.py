"""A sentence's factor graph as flat arrays (docs/design.md §2; the data model of the BP engine).

Arc index of h→m in a sentence of n words: a = h*(n+1) + m. Pairwise factors are four flat arrays of
length K: ``pair_a``, ``pair_b`` (int64 arc indices), ``pair_w`` (float64 log-potential when both arcs
are present; -inf = NAND) and, in the engine, the messages ``msg_a``, ``msg_b``.

- GRAND g→h→m: a = idx(g, h), b = idx(h, m); g ∉ {h, m}, h >= 1 (ROOT has no parent), m >= 1.
- SIB h→{m, s}, m < s: a = idx(h, m), b = idx(h, s).
- NOT2 / NO2CYCLE (hard NAND pairs, see `bpparse.kernels.factors.hard`).
Order of a full list: GRAND first, then SIB, then NAND pairs, so each family is a contiguous slice.

NOCROSS groups (m, l), 1 <= m < l <= n: ``cross_w`` float64 ``(n+1, n+1)`` log-potentials and
``cross_active`` bool ``(n+1, n+1)`` (the groups in the graph), both read at [m, l].

CHILDSEQ head automata: a `ChildSeqFactors` record (`bpparse.kernels.factors.childseq`), one factor
per head and side.
"""
from collections import namedtuple

import numpy as np

from bpparse.config import parse_constraint as read_constraint
from bpparse.errors import ConfigError
from bpparse.jit import njit
from bpparse.kernels.factors.childseq import childseq_from_dense
from bpparse.kernels.factors.hard import no2cycle_pairs, not2_pairs

FactorGraph = namedtuple(
    "FactorGraph", "n pair_a pair_b pair_w n_grand n_sib n_nand cross_w cross_active seq",
    defaults=(None,))
FactorGraph.__doc__ = """One sentence's factor graph beyond LINK and the global constraint.

``pair_a``, ``pair_b``: int64 ``[K]``; ``pair_w``: float64 ``[K]``; slices [0, n_grand) are GRAND,
[n_grand, n_grand + n_sib) SIB, the last n_nand NAND pairs (w = -inf). ``cross_w``, ``cross_active``:
``(n+1, n+1)`` NOCROSS groups, or None when there are none. ``seq``: the CHILDSEQ factors
(`ChildSeqFactors`; its ``msg`` unused, BP's messages live in `bpparse.bp.BPMessages`), or None."""


def grand_count(n):
    """Number of GRAND factors g→h→m of an n-word sentence: n(n-1)²."""
    return n * (n - 1) ** 2


def sib_count(n):
    """Number of SIB factors h→{m, s} of an n-word sentence: C(n, 2) + n·C(n-1, 2)."""
    return n * (n - 1) // 2 + n * ((n - 1) * (n - 2) // 2)


@njit(cache=True)
def _all_pairs(n):
    size = n + 1
    n_grand = n * (n - 1) * (n - 1)
    n_sib = n * (n - 1) // 2 + n * ((n - 1) * (n - 2) // 2)
    pa = np.empty(n_grand + n_sib, np.int64)
    pb = np.empty(n_grand + n_sib, np.int64)
    i = 0
    # h outermost: consecutive factors share arcs, which keeps the engine's gathers in cache
    for h in range(1, size):
        for g in range(size):
            if g == h:
                continue
            for m in range(1, size):
                if m == h or m == g:
                    continue
                pa[i] = g * size + h
                pb[i] = h * size + m
                i += 1
    for h in range(size):
        for m in range(1, size):
            if m == h:
                continue
            for s in range(m + 1, size):
                if s == h:
                    continue
                pa[i] = h * size + m
                pb[i] = h * size + s
                i += 1
    return pa, pb, n_grand


def all_pairs(n):
    """Every GRAND and SIB factor of an n-word sentence, in a fixed order.

    Returns (pair_a, pair_b, n_grand): int64 ``[K]`` arc indices, K = grand_count(n) + sib_count(n);
    GRAND (for h = 1..n, g = 0..n, m = 1..n) first, then SIB (for h = 0..n, m < s).
    """
    pa, pb, n_grand = _all_pairs(int(n))
    return pa, pb, int(n_grand)


@njit(cache=True)
def pairs_from_dense(grand, sib):
    """Flat pairwise factors from dense log-potentials; only nonzero entries become factors.

    ``grand``: float64 ``(n+1, n+1, n+1)`` [g, h, m] or shape (0, 0, 0) for none; ``sib``: float64
    ``(n+1, n+1, n+1)`` [h, m, s], entries with m < s used, or (0, 0, 0). Entries that name no
    valid factor (g ∈ {h, m}, h = 0 for GRAND; m, s = 0 or = h) are ignored.
    Returns (pair_a, pair_b, pair_w, n_grand) in the order of `all_pairs`. O(n³).
    """
    size = max(grand.shape[0], sib.shape[0])
    count_g = 0
    count_s = 0
    if grand.shape[0] > 0:
        for h in range(1, size):
            for g in range(size):
                if g == h:
                    continue
                for m in range(1, size):
                    if m != h and m != g and grand[g, h, m] != 0.0:
                        count_g += 1
    if sib.shape[0] > 0:
        for h in range(size):
            for m in range(1, size):
                if m == h:
                    continue
                for s in range(m + 1, size):
                    if s != h and sib[h, m, s] != 0.0:
                        count_s += 1
    pa = np.empty(count_g + count_s, np.int64)
    pb = np.empty(count_g + count_s, np.int64)
    pw = np.empty(count_g + count_s)
    i = 0
    if grand.shape[0] > 0:
        for h in range(1, size):
            for g in range(size):
                if g == h:
                    continue
                for m in range(1, size):
                    if m != h and m != g and grand[g, h, m] != 0.0:
                        pa[i] = g * size + h
                        pb[i] = h * size + m
                        pw[i] = grand[g, h, m]
                        i += 1
    if sib.shape[0] > 0:
        for h in range(size):
            for m in range(1, size):
                if m == h:
                    continue
                for s in range(m + 1, size):
                    if s != h and sib[h, m, s] != 0.0:
                        pa[i] = h * size + m
                        pb[i] = h * size + s
                        pw[i] = sib[h, m, s]
                        i += 1
    return pa, pb, pw, count_g


@njit(cache=True)
def cross_from_dense(cross, all_groups):
    """NOCROSS groups from dense log-potentials ``cross`` float64 ``(n+1, n+1)`` [m, l], m < l used.

    Returns (cross_w, cross_active): float64 and bool ``(n+1, n+1)``. A group is active when its
    entry is nonzero (a zero log-potential sends zero messages in the ``grouped`` form), or always
    when ``all_groups`` (the ``exactly1`` form, whose groups also carry EXACTLY1 at weight 0).
    """
    size = cross.shape[0]
    cross_w = np.zeros((size, size))
    cross_active = np.zeros((size, size), np.bool_)
    for m in range(1, size):
        for l in range(m + 1, size):
            if all_groups or cross[m, l] != 0.0:
                cross_w[m, l] = cross[m, l]
                cross_active[m, l] = True
    return cross_w, cross_active


@njit(cache=True)
def scatter_pair_values(values, pair_a, pair_b, start, stop, size):
    """Dense float64 ``(n+1, n+1, n+1)`` array holding ``values[start:stop]`` of pairwise factors at
    [a // (n+1), a % (n+1), b % (n+1)], i.e. [g, h, m] for GRAND and [h, m, s] for SIB; zero elsewhere.
    ``size`` = n+1."""
    out = np.zeros((size, size, size))
    for k in range(start, stop):
        a = pair_a[k]
        out[a // size, a % size, pair_b[k] % size] = values[k]
    return out


def parse_constraint(constraint):
    """Split a constraint name into (global factor, with_no2cycle), lower case, for the array API.

    ``constraint``: "tree" (TREE, or PTREE when projective), "exactly1", "atmost1", "not2", each
    but "tree" optionally followed by "+no2cycle" (Smith & Eisner 2008 Table 3); read by
    `bpparse.config.parse_constraint`, the one reader of constraint names.
    """
    try:
        base, no2cycle = read_constraint(constraint)
    except ConfigError as e:
        raise ValueError(str(e)) from None
    if base == "PTREE":
        raise ValueError(f"constraint {constraint!r}: use constraint='tree' with projective=True")
    return base.lower(), no2cycle


def build_graph(n, grand=None, sib=None, cross=None, constraint="tree", cross_mode="grouped",
                childseq=None):
    """The `FactorGraph` of an n-word sentence from dense log-potentials (None = family absent).

    ``grand``, ``sib``: float64 ``(n+1, n+1, n+1)``; ``cross``: float64 ``(n+1, n+1)``; see
    `pairs_from_dense`, `cross_from_dense` (with ``cross_mode`` "exactly1" every group m < l is in the
    graph, even at weight 0). NOT2 / NO2CYCLE NAND pairs are appended when ``constraint`` asks.
    ``childseq``: float64 ``(n+1, n+1, n+1)`` head-automaton log-potentials [h, a, b]
    (`childseq_from_dense`): one CHILDSEQ factor per head (ROOT included) and side.
    """
    size = n + 1
    empty3 = np.zeros((0, 0, 0))
    g = empty3 if grand is None else np.ascontiguousarray(grand, dtype=np.float64)
    s = empty3 if sib is None else np.ascontiguousarray(sib, dtype=np.float64)
    for name, arr in (("grand", g), ("sib", s)):
        if arr.shape[0] and arr.shape != (size, size, size):
            raise ValueError(f"{name} must have shape {(size, size, size)}, got {arr.shape}")
    pa, pb, pw, n_grand = pairs_from_dense(g, s)
    n_sib = pa.shape[0] - n_grand
    base, no2cycle = parse_constraint(constraint)
    nand = []
    if base == "not2":
        nand.append(not2_pairs(n))
    if no2cycle:
        nand.append(no2cycle_pairs(n))
    n_nand = sum(x[0].shape[0] for x in nand)
    if nand:
        pa = np.concatenate([pa] + [x[0] for x in nand])
        pb = np.concatenate([pb] + [x[1] for x in nand])
        pw = np.concatenate([pw, np.full(n_nand, -np.inf)])
    cross_w = cross_active = None
    if cross is not None:
        c = np.ascontiguousarray(cross, dtype=np.float64)
        if c.shape != (size, size):
            raise ValueError(f"cross must have shape {(size, size)}, got {c.shape}")
        cross_w, cross_active = cross_from_dense(c, cross_mode == "exactly1")
        if not cross_active.any():
            cross_w = cross_active = None
    seq = None
    if childseq is not None:
        c = np.ascontiguousarray(childseq, dtype=np.float64)
        if c.shape != (size, size, size):
            raise ValueError(f"childseq must have shape {(size, size, size)}, got {c.shape}")
        every = np.ones((size, size), dtype=np.bool_)
        np.fill_diagonal(every, False)
        every[:, 0] = False
        seq = childseq_from_dense(c, every, False)
    return FactorGraph(n, pa, pb, pw, int(n_grand), int(n_sib), int(n_nand), cross_w, cross_active,
                       seq)
