"""Brute-force oracles shared by the tests: every dependency tree of a tiny sentence.

A tree over n words is an int array ``heads`` of length n+1 with ``heads[0] == -1``; scores are
``(n+1, n+1)`` arrays indexed ``[head, child]`` (DESIGN §1).
"""
import itertools

import numpy as np


def is_tree(heads):
    """True when every word reaches ROOT (0) without a cycle."""
    n = len(heads) - 1
    for m in range(1, n + 1):
        seen = set()
        v = m
        while v != 0:
            if v in seen:
                return False
            seen.add(v)
            v = heads[v]
    return True


def is_projective(heads):
    """True when no two arcs cross (arcs sharing an endpoint never cross)."""
    n = len(heads) - 1
    arcs = [(min(h, m), max(h, m)) for m, h in enumerate(heads) if m > 0]
    for (a, b), (c, d) in itertools.combinations(arcs, 2):
        if a < c < b < d or c < a < d < b:
            return False
    return True


def all_trees(n, projective=False, single_root=True):
    """Every tree over n words (as int64 head arrays) satisfying the constraints."""
    trees = []
    for choice in itertools.product(range(n + 1), repeat=n):
        heads = (-1,) + choice
        if any(heads[m] == m for m in range(1, n + 1)):
            continue
        if single_root and sum(1 for m in range(1, n + 1) if heads[m] == 0) != 1:
            continue
        if not is_tree(heads):
            continue
        if projective and not is_projective(heads):
            continue
        trees.append(np.array(heads, dtype=np.int64))
    return trees


def tree_score(scores, heads):
    return sum(scores[heads[m], m] for m in range(1, len(heads)))


def brute_force_first_order(scores, projective=False, single_root=True):
    """Exact (marginals, log_z, best_heads, best_score) by enumeration of all trees."""
    n = scores.shape[0] - 1
    trees = all_trees(n, projective, single_root)
    values = np.array([tree_score(scores, t) for t in trees])
    finite = np.isfinite(values)
    log_z = np.logaddexp.reduce(values[finite]) if finite.any() else -np.inf
    marg = np.zeros_like(scores, dtype=np.float64)
    for t, v in zip(trees, values):
        if np.isfinite(v):
            p = np.exp(v - log_z)
            for m in range(1, n + 1):
                marg[t[m], m] += p
    best = int(np.argmax(values))
    return marg, log_z, trees[best], values[best]
