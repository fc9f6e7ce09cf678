"""Brute-force oracles shared by the tests: every dependency tree of a tiny sentence.

A tree over n words is an int array ``heads`` of length n+1 with ``heads[0] == -1``; scores are
``(n+1, n+1)`` arrays indexed ``[head, child]`` (docs/design.md §1).
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


_TREE_TABLES = {}


def tree_table(n, projective=False, single_root=True):
    """All trees of all_trees(n, ...) stacked as an int64 array (n_trees, n+1), computed once per
    argument triple by vectorised filtering (fast enough for n <= 7)."""
    key = (n, bool(projective), bool(single_root))
    if key not in _TREE_TABLES:
        cand = np.array(list(itertools.product(range(n + 1), repeat=n)), dtype=np.int64).reshape(-1, n)
        cand = np.concatenate([np.full((len(cand), 1), -1, dtype=np.int64), cand], axis=1)
        words = np.arange(1, n + 1)
        keep = (cand[:, 1:] != words).all(axis=1)
        if single_root:
            keep &= (cand[:, 1:] == 0).sum(axis=1) == 1
        cand = cand[keep]
        # following parents n times from every word reaches ROOT iff there is no cycle
        v = np.tile(words, (len(cand), 1))
        rows = np.arange(len(cand))[:, None]
        for _ in range(n):
            v = np.where(v > 0, cand[rows, np.maximum(v, 0)], 0)
        cand = cand[(v == 0).all(axis=1)]
        if projective:
            cand = cand[[is_projective(t) for t in cand]]
        _TREE_TABLES[key] = cand
    return _TREE_TABLES[key]


def brute_force_table(scores, projective=False, single_root=True):
    """Same result as brute_force_first_order, vectorised over tree_table (n <= 7)."""
    n = scores.shape[0] - 1
    trees = tree_table(n, projective, single_root)
    words = np.arange(1, n + 1)
    values = scores[trees[:, 1:], words].sum(axis=1)
    finite = np.isfinite(values)
    log_z = np.logaddexp.reduce(values[finite]) if finite.any() else -np.inf
    marg = np.zeros((n + 1, n + 1))
    if finite.any():
        p = np.exp(values[finite] - log_z)
        for m in words:
            np.add.at(marg[:, m], trees[finite, m], p)
    best = int(np.argmax(values))
    return marg, log_z, trees[best].copy(), values[best]
