"""Exact enumeration of second-order tree distributions for the relaxation tests (tiny n only).

p(y) ∝ [y is a tree] · exp(Σ_m s[h_m, m] + Σ_i θ_i φ_i(y)) with φ_i a pairwise factor (both arcs present)
or a NOCROSS group (the parent arcs of m and l cross). Pair factors follow the engine's data model:
GRAND g→h→m: a = idx(g,h), b = idx(h,m); SIB h→{m,s}, m<s: a = idx(h,m), b = idx(h,s); idx(h,m) = h*(n+1)+m.
"""
import numpy as np

from oracle import all_trees


def grand_sib_pairs(n):
    """Every GRAND then every SIB factor of an n-word sentence: (pair_a, pair_b, n_grand)."""
    n1 = n + 1
    a, b = [], []
    for g in range(n1):
        for h in range(1, n1):
            for m in range(1, n1):
                if len({g, h, m}) == 3:
                    a.append(g * n1 + h)
                    b.append(h * n1 + m)
    n_grand = len(a)
    for h in range(n1):
        for m in range(1, n1):
            for s in range(m + 1, n1):
                if h != m and h != s:
                    a.append(h * n1 + m)
                    b.append(h * n1 + s)
    return np.array(a, dtype=np.int64), np.array(b, dtype=np.int64), n_grand


def arcs_cross(h, m, k, l):
    """docs/design.md §1: one end of k→l strictly inside the span of h→m and the other strictly outside."""
    lo, hi = min(h, m), max(h, m)
    lo2, hi2 = min(k, l), max(k, l)
    return lo < lo2 < hi < hi2 or lo2 < lo < hi2 < hi


class TreeModel:
    """All trees of one sentence with their arc, pair-factor and crossing indicators."""

    def __init__(self, n, pair_a, pair_b, projective=False, single_root=True):
        self.n = n
        n1 = n + 1
        self.trees = np.array(all_trees(n, projective, single_root))
        t = len(self.trees)
        self.arcs = np.zeros((t, n1 * n1), dtype=bool)
        for j, heads in enumerate(self.trees):
            for m in range(1, n1):
                self.arcs[j, heads[m] * n1 + m] = True
        self.pair_fire = self.arcs[:, pair_a] & self.arcs[:, pair_b]
        self.groups = [(m, l) for m in range(1, n1) for l in range(m + 1, n1)]
        self.cross_fire = np.array(
            [[arcs_cross(h[m], m, h[l], l) for (m, l) in self.groups] for h in self.trees], dtype=bool
        ).reshape(t, len(self.groups))

    def log_weights(self, link, pair_w=None, pair_on=None, cross_w=None, cross_on=None):
        """Unnormalised log-probability of every tree under the chosen factors (finite scores only;
        diagonal and column 0 of ``link`` are never read because no tree uses those arcs)."""
        lw = self.arcs.astype(float) @ np.nan_to_num(link.ravel(), neginf=0.0, posinf=0.0)
        if pair_w is not None:
            w = np.where(pair_on, pair_w, 0.0) if pair_on is not None else pair_w
            lw = lw + self.pair_fire.astype(float) @ w
        if cross_w is not None:
            cw = np.array([cross_w[m, l] for (m, l) in self.groups])
            if cross_on is not None:
                cw = np.where([cross_on[m, l] for (m, l) in self.groups], cw, 0.0)
            lw = lw + self.cross_fire.astype(float) @ cw
        return lw

    @staticmethod
    def probs(lw):
        return np.exp(lw - np.logaddexp.reduce(lw))

    def arc_marginals(self, p):
        return (p @ self.arcs).reshape(self.n + 1, self.n + 1)

    def cross_matrix(self, values):
        out = np.zeros((self.n + 1, self.n + 1))
        for (m, l), v in zip(self.groups, values):
            out[m, l] = v
        return out


def kl(p, q):
    """KL(p ‖ q) for two distributions over the same enumerated trees (nats)."""
    mask = p > 0
    return float(np.sum(p[mask] * (np.log(p[mask]) - np.log(q[mask]))))
