"""Brute-force oracles for the BP tests: exact marginals of the full factor graph for tiny sentences.

- `exact_second_order`: enumerate every tree (oracle.all_trees) and score it with LINK + GRAND + SIB
  + NOCROSS log-potentials; under TREE/PTREE both NOCROSS forms define the same distribution (each
  child has one parent, so a group contributes w exactly when the two parent arcs cross).
- `exact_over_assignments`: enumerate every assignment of all arc variables (2^(n²), n <= 4) under
  LINK, pairwise (incl. NAND) factors and an optional per-child hard constraint; for the tests of the
  weaker constraints of Smith & Eisner Table 3.
- small factor-level enumerations used by test_factors.py.
Arrays: ``(n+1, n+1)`` [head, child]; GRAND ``[g, h, m]``, SIB ``[h, m, s]`` (m < s), cross ``[m, l]``
(m < l). Written independently of the package, from the explicit definitions.
"""
import functools
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


@functools.lru_cache(maxsize=None)
def tree_table(n, projective, single_root):
    """All trees as one int64 array (T, n+1) of head rows (cached per n and constraint)."""
    return np.array(all_trees(n, projective, single_root), dtype=np.int64)


@functools.lru_cache(maxsize=None)
def crossing_table(n):
    """bool (n+1, n+1, n+1, n+1): [h, m, k, l] = arcs h→m and k→l cross."""
    size = n + 1
    tab = np.zeros((size,) * 4, bool)
    for h, m, k, l in itertools.product(range(size), repeat=4):
        tab[h, m, k, l] = arcs_cross(h, m, k, l)
    return tab


def tree_log_scores(trees, link, grand=None, sib=None, cross=None):
    """`tree_log_score` of every row of ``trees`` (T, n+1), vectorised over trees."""
    n = trees.shape[1] - 1
    total = np.zeros(trees.shape[0])
    for m in range(1, n + 1):
        h = trees[:, m]
        total += link[h, m]
        if grand is not None:
            has_parent = h != 0
            g = trees[np.arange(len(trees)), h]
            total += np.where(has_parent, grand[g, h, m], 0.0)
        for s in range(m + 1, n + 1):
            if sib is not None:
                total += np.where(h == trees[:, s], sib[h, m, s], 0.0)
            if cross is not None:
                total += np.where(crossing_table(n)[h, m, trees[:, s], s], cross[m, s], 0.0)
    return total


def exact_second_order(link, grand=None, sib=None, cross=None, projective=False, single_root=True):
    """Exact (arc marginals, log Z, expected crossings [m, l]) of the full second-order model."""
    n = link.shape[0] - 1
    trees = tree_table(n, projective, single_root)
    scores = tree_log_scores(trees, link, grand, sib, cross)
    log_z = np.logaddexp.reduce(scores)
    probs = np.exp(scores - log_z)
    marg = np.zeros((n + 1, n + 1))
    crossings = np.zeros((n + 1, n + 1))
    for m in range(1, n + 1):
        np.add.at(marg[:, m], trees[:, m], probs)
        for l in range(m + 1, n + 1):
            crossings[m, l] = probs[crossing_table(n)[trees[:, m], m, trees[:, l], l]].sum()
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


def reference_bp(link, grand=None, sib=None, cross=None, projective=False, single_root=True,
                 iterations=10, damping=0.0, cross_mode="grouped"):
    """Textbook flooding loopy BP with explicit per-factor messages (log-odds), slow and plain.

    TREE/PTREE messages by enumerating trees, pairwise messages by enumerating the factor's four
    assignments, NOCROSS groups per docs/design.md §2 (``grouped``: per crossing pair from the group's
    incoming messages; ``exactly1``: enumeration over the group's assignments). Entries 0 of
    grand/sib/cross add no factor (all groups with ``exactly1``). Returns the beliefs B (log-odds).
    """
    n = link.shape[0] - 1
    arcs = [(h, m) for m in range(1, n + 1) for h in range(n + 1) if h != m]
    trees = all_trees(n, projective, single_root)
    factors = []  # (kind, arcs, data)
    factors.append(("tree", arcs, None))
    if grand is not None:
        for g, h, m in itertools.product(range(n + 1), repeat=3):
            if h >= 1 and m >= 1 and len({g, h, m}) == 3 and grand[g, h, m] != 0:
                factors.append(("pair", [(g, h), (h, m)], grand[g, h, m]))
    if sib is not None:
        for h, m, s in itertools.product(range(n + 1), repeat=3):
            if 1 <= m < s and h not in (m, s) and sib[h, m, s] != 0:
                factors.append(("pair", [(h, m), (h, s)], sib[h, m, s]))
    if cross is not None:
        for m in range(1, n + 1):
            for l in range(m + 1, n + 1):
                if cross[m, l] != 0 or cross_mode == "exactly1":
                    group = [(h, m) for h in range(n + 1) if h != m]
                    group += [(k, l) for k in range(n + 1) if k != l]
                    factors.append((cross_mode, group, (m, l, cross[m, l])))
    msgs = [dict((a, 0.0) for a in f[1]) for f in factors]

    def beliefs():
        b = {a: link[a] for a in arcs}
        for f, r in zip(factors, msgs):
            for a, v in r.items():
                b[a] += v
        return b

    for _ in range(iterations):
        b = beliefs()
        new = []
        for (kind, f_arcs, data), r in zip(factors, msgs):
            q = {a: b[a] - r[a] for a in f_arcs}
            if kind == "tree":
                out = {}
                weights = np.array([sum(q[(t[m], m)] for m in range(1, n + 1)) for t in trees])
                for a in f_arcs:
                    has = np.array([t[a[1]] == a[0] for t in trees])
                    on = np.logaddexp.reduce(weights[has] - q[a]) if has.any() else -np.inf
                    off = np.logaddexp.reduce(weights[~has]) if (~has).any() else -np.inf
                    out[a] = on - off
            elif kind == "pair":
                qa = np.array([q[f_arcs[0]], q[f_arcs[1]]])
                rr, _ = factor_messages_by_enumeration(
                    qa, lambda bits, w=data: np.exp(w) if bits[0] and bits[1] else 1.0)
                out = {f_arcs[0]: rr[0], f_arcs[1]: rr[1]}
            elif kind == "grouped":
                m, l, w = data
                out = {}
                for (h, c) in f_arcs:
                    other = l if c == m else m
                    total = 0.0
                    for k in range(n + 1):
                        if k != other and arcs_cross(h, c, k, other):
                            rr, _ = factor_messages_by_enumeration(
                                np.array([q[(h, c)], q[(k, other)]]),
                                lambda bits: np.exp(w) if bits[0] and bits[1] else 1.0)
                            total += rr[0]
                    out[(h, c)] = total
            else:
                m, l, w = data
                qa = np.array([q[a] for a in f_arcs])

                def potential(bits):
                    on = [a for a, bit in zip(f_arcs, bits) if bit]
                    if sorted(a[1] for a in on) != [m, l]:
                        return 0.0
                    (h1, c1), (h2, c2) = on
                    return np.exp(w) if arcs_cross(h1, c1, h2, c2) else 1.0
                rr, _ = factor_messages_by_enumeration(qa, potential)
                out = dict(zip(f_arcs, rr))
            new.append({a: (1 - damping) * out[a] + damping * r[a] for a in f_arcs})
        msgs = new
    b = beliefs()
    out = np.full((n + 1, n + 1), -np.inf)
    for a in arcs:
        out[a] = b[a]
    return out


def child_sequences(heads, h):
    """Head h's (left, right) children, each ordered outward from h (nearest first)."""
    n = len(heads) - 1
    left = [m for m in range(h - 1, 0, -1) if heads[m] == h]
    right = [m for m in range(h + 1, n + 1) if heads[m] == h]
    return left, right


def childseq_transitions(heads):
    """Every CHILDSEQ transition (h, a, b) of a tree: per head and side with children c_1..c_r
    (outward), (h, h, c_1), (h, c_1, c_2), ..., (h, c_r, h); an empty side has none."""
    out = []
    for h in range(len(heads)):
        for side in child_sequences(heads, h):
            if side:
                seq = [h] + side + [h]
                out.extend((h, a, b) for a, b in zip(seq, seq[1:]))
    return out


def exact_childseq(link, seq, projective=False, single_root=True):
    """Exact (arc marginals, log Z, expected transition counts (n+1)^3, best heads) of LINK + CHILDSEQ
    by enumerating trees; ``seq[h, a, b]`` is the log-potential of transition (h, a, b) (a = h: first
    child, b = h: last child; see `childseq_transitions`)."""
    n = link.shape[0] - 1
    trees = tree_table(n, projective, single_root)
    scores = np.array([tree_log_score(t, link) + sum(seq[x] for x in childseq_transitions(t))
                       for t in trees])
    log_z = np.logaddexp.reduce(scores)
    probs = np.exp(scores - log_z)
    marg = np.zeros((n + 1, n + 1))
    counts = np.zeros((n + 1,) * 3)
    for t, p in zip(trees, probs):
        for m in range(1, n + 1):
            marg[t[m], m] += p
        for x in childseq_transitions(t):
            counts[x] += p
    return marg, log_z, counts, trees[int(np.argmax(scores))]
