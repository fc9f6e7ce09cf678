"""Brute-force oracles for the BP tests: exact marginals of the full factor graph for tiny sentences.

- `exact_second_order`: enumerate every tree (oracle.all_trees) and score it with LINK + GRAND + SIB
  + NOCROSS log-potentials; under TREE/PTREE both NOCROSS forms define the same distribution (each
  child has one parent, so a group contributes w exactly when the two parent arcs cross).
- `exact_over_assignments`: enumerate every assignment of all arc variables (2^(n²), n <= 4) under
  LINK, pairwise (incl. NAND) factors and an optional per-child hard constraint; for the tests of the
  weaker constraints of Smith & Eisner Table 3.
- small factor-level enumerations used by test_factors.py.
Arrays: ``(n+1, n+1)`` [head, child]; GRAND ``[g, h, m]``, SIB ``[h, m, s]`` (m < s), cross ``[m, l]``
(m < l). Written independently of the package: plain Python loops over explicit definitions.
"""
import itertools

import numpy as np

from oracle import all_trees


def arcs_cross(h, m, k, l):
    """True when arc h→m and arc k→l cross (sharing an endpoint never crosses)."""
    if len({h, m} & {k, l}) > 0:
        return False
    lo, hi = min(h, m), max(h, m)
    return (lo < k < hi) != (lo < l < hi)


def tree_log_score(heads, link, grand=None, sib=None, cross=None):
    """Log-potential of one tree under LINK + GRAND + SIB + NOCROSS."""
    n = len(heads) - 1
    total = sum(link[heads[m], m] for m in range(1, n + 1))
    if grand is not None:
        for m in range(1, n + 1):
            h = heads[m]
            if h != 0:
                total += grand[heads[h], h, m]
    if sib is not None:
        for m in range(1, n + 1):
            for s in range(m + 1, n + 1):
                if heads[m] == heads[s]:
                    total += sib[heads[m], m, s]
    if cross is not None:
        for m in range(1, n + 1):
            for l in range(m + 1, n + 1):
                if arcs_cross(heads[m], m, heads[l], l):
                    total += cross[m, l]
    return total


def exact_second_order(link, grand=None, sib=None, cross=None, projective=False, single_root=True):
    """Exact (arc marginals, log Z, expected crossings [m, l]) of the full second-order model."""
    n = link.shape[0] - 1
    trees = all_trees(n, projective, single_root)
    scores = np.array([tree_log_score(t, link, grand, sib, cross) for t in trees])
    log_z = np.logaddexp.reduce(scores)
    probs = np.exp(scores - log_z)
    marg = np.zeros((n + 1, n + 1))
    crossings = np.zeros((n + 1, n + 1))
    for t, p in zip(trees, probs):
        for m in range(1, n + 1):
            marg[t[m], m] += p
            for l in range(m + 1, n + 1):
                if arcs_cross(t[m], m, t[l], l):
                    crossings[m, l] += p
    return marg, log_z, crossings


def exact_over_assignments(link, pairs=(), per_child=None):
    """Exact arc marginals over all assignments of the arc variables (n <= 4).

    ``pairs``: iterable of (arc a, arc b, w) with arc = (h, m); w = -inf is NAND.
    ``per_child``: None, "exactly1" or "atmost1" (a hard constraint on each child's parent count).
    """
    n = link.shape[0] - 1
    arcs = [(h, m) for m in range(1, n + 1) for h in range(n + 1) if h != m]
    index = {a: i for i, a in enumerate(arcs)}
    pairs = [(index[a], index[b], w) for a, b, w in pairs]
    log_weights = []
    configs = []
    for bits in itertools.product((0, 1), repeat=len(arcs)):
        if per_child is not None:
            ok = True
            for m in range(1, n + 1):
                count = sum(bits[index[(h, m)]] for h in range(n + 1) if h != m)
                if count > 1 or (per_child == "exactly1" and count == 0):
                    ok = False
                    break
            if not ok:
                continue
        value = sum(link[h, m] for (h, m), b in zip(arcs, bits) if b)
        for i, j, w in pairs:
            if bits[i] and bits[j]:
                value += w
        if value == -np.inf:
            continue
        log_weights.append(value)
        configs.append(bits)
    log_weights = np.array(log_weights)
    probs = np.exp(log_weights - np.logaddexp.reduce(log_weights))
    marg = np.zeros((n + 1, n + 1))
    for bits, p in zip(configs, probs):
        for (h, m), b in zip(arcs, bits):
            if b:
                marg[h, m] += p
    return marg


def factor_messages_by_enumeration(q, potential):
    """Outgoing log-odds messages of one factor over d boolean variables, by enumeration.

    ``q``: incoming log-odds ``[d]``; ``potential(bits)`` -> factor value >= 0. Returns
    (r ``[d]``, table): r[i] = log Σ_{x_i=1} ψ Π_{j≠i} e^{q_j x_j} − log Σ_{x_i=0} (same), and the list
    of (bits, ψ(bits)·Π_j e^{q_j x_j}), the unnormalised factor belief.
    """
    d = len(q)
    on = np.zeros(d)
    off = np.zeros(d)
    table = []
    for bits in itertools.product((0, 1), repeat=d):
        psi = potential(bits)
        if psi == 0.0:
            continue
        table.append((bits, psi * np.exp(sum(q[j] for j in range(d) if bits[j]))))
        for i in range(d):
            weight = psi * np.exp(sum(q[j] for j in range(d) if bits[j] and j != i))
            if bits[i]:
                on[i] += weight
            else:
                off[i] += weight
    with np.errstate(divide="ignore"):
        r = np.log(on) - np.log(off)
    return r, table
