"""The weaker hard constraints of Smith & Eisner (2008) §3.3 and Table 3, which may replace TREE.

- EXACTLY1 m: child m has exactly one parent. r[h,m] = -logsumexp_{h'≠h} q[h',m] (docs/design.md §2;
  SE08 §5.3: the only assignment with L[h,m] true has every other parent of m false).
- ATMOST1 m: m has one parent or none. r[h,m] = -log(1 + Σ_{h'≠h} e^{q[h',m]}).
- NOT2: NAND(L[h,m], L[k,m]) for every child m and h < k, the O(n³) pairwise form of ATMOST1.
- NO2CYCLE: NAND(L[h,m], L[m,h]) for 1 <= h < m, O(n²) pairs.
NOT2 and NO2CYCLE are pairwise factors with w = -inf and run through `pairwise.pairwise_update`
(its message is then -softplus(q_other)); this module only enumerates their arc pairs.

``q``, ``r``: float64 ``(n+1, n+1)`` log-odds ``[head, child]``; -inf in ``q`` marks an absent arc
(forbidden, the diagonal, column 0), which gets r = 0. Messages are clipped to [-clip, clip]
(EXACTLY1 sends +inf to a child's only possible parent). Cost O(n) per child, O(n²) in all.
"""
import numpy as np

from bpparse.jit import njit


@njit(cache=True)
def _others_log_sum(q, m, prefix, suffix):
    """log Σ_{h'≠h} e^{q[h',m]} for every h, from prefix and suffix sums (no subtraction).

    Writes ``prefix`` (float64 ``[n+2]``) and ``suffix``; returns (shift, ok): the per-column shift
    applied inside the sums, and whether any arc into m exists. Then for row h the value is
    shift + log(prefix[h] + suffix[h+1]).
    """
    size = q.shape[0]
    shift = -np.inf
    for h in range(size):
        if q[h, m] > shift:
            shift = q[h, m]
    if shift == -np.inf:
        return 0.0, False
    prefix[0] = 0.0
    for h in range(size):
        prefix[h + 1] = prefix[h] + np.exp(q[h, m] - shift)
    suffix[size] = 0.0
    for h in range(size - 1, -1, -1):
        suffix[h] = suffix[h + 1] + np.exp(q[h, m] - shift)
    return shift, True


@njit(cache=True)
def exactly1_messages(q, clip):
    """EXACTLY1 messages for every child: float64 ``(n+1, n+1)``, see the module docstring."""
    size = q.shape[0]
    r = np.zeros((size, size))
    prefix = np.empty(size + 1)
    suffix = np.empty(size + 1)
    for m in range(1, size):
        shift, ok = _others_log_sum(q, m, prefix, suffix)
        if not ok:
            continue
        for h in range(size):
            if q[h, m] == -np.inf:
                continue
            others = prefix[h] + suffix[h + 1]
            value = clip if others <= 0.0 else -(shift + np.log(others))
            r[h, m] = min(max(value, -clip), clip)
    return r


@njit(cache=True)
def atmost1_messages(q, clip):
    """ATMOST1 messages for every child: float64 ``(n+1, n+1)``, see the module docstring."""
    size = q.shape[0]
    r = np.zeros((size, size))
    prefix = np.empty(size + 1)
    suffix = np.empty(size + 1)
    for m in range(1, size):
        shift, ok = _others_log_sum(q, m, prefix, suffix)
        if not ok:
            continue
        for h in range(size):
            if q[h, m] == -np.inf:
                continue
            others = prefix[h] + suffix[h + 1]
            if others <= 0.0:
                continue
            # -log(1 + e^x), x = log Σ_{h'≠h} e^{q[h',m]}
            x = shift + np.log(others)
            value = -(max(x, 0.0) + np.log1p(np.exp(-abs(x))))
            r[h, m] = max(value, -clip)
    return r


@njit(cache=True)
def not2_pairs(n):
    """NOT2 pairs (arc indices a = h*(n+1)+m): (pair_a, pair_b) int64 ``[K]``, K = n·C(n, 2).

    For each child m = 1..n, every two distinct possible parents h < k (0..n, not m).
    """
    size = n + 1
    count = n * (n * (n - 1) // 2)
    pa = np.empty(count, np.int64)
    pb = np.empty(count, np.int64)
    i = 0
    for m in range(1, size):
        for h in range(size):
            if h == m:
                continue
            for k in range(h + 1, size):
                if k == m:
                    continue
                pa[i] = h * size + m
                pb[i] = k * size + m
                i += 1
    return pa, pb


@njit(cache=True)
def no2cycle_pairs(n):
    """NO2CYCLE pairs: (pair_a, pair_b) int64 ``[K]``, a = idx(h, m), b = idx(m, h), 1 <= h < m <= n."""
    size = n + 1
    count = n * (n - 1) // 2
    pa = np.empty(count, np.int64)
    pb = np.empty(count, np.int64)
    i = 0
    for h in range(1, size):
        for m in range(h + 1, size):
            pa[i] = h * size + m
            pb[i] = m * size + h
            i += 1
    return pa, pb


@njit(cache=True)
def with_nand_pairs(pair_a, pair_b, pair_w, n, not2, no2cycle):
    """The pairwise-factor arrays with the NOT2 and/or NO2CYCLE pairs (w = -inf) appended after the
    soft factors: (pair_a, pair_b int64 ``[K']``, pair_w float64 ``[K']``)."""
    xa = np.empty(0, dtype=np.int64)
    xb = np.empty(0, dtype=np.int64)
    if not2:
        xa, xb = not2_pairs(n)
    if no2cycle:
        ya, yb = no2cycle_pairs(n)
        xa = np.concatenate((xa, ya))
        xb = np.concatenate((xb, yb))
    return (np.concatenate((pair_a, xa)), np.concatenate((pair_b, xb)),
            np.concatenate((pair_w, np.full(xa.shape[0], -np.inf))))
