"""TAGLINK factors (Smith & Eisner 2008 §3, Table 1): one factor per arc h -> m joining the arc
variable L[h,m] with the tag variables T_h and T_m.

The factor's potential is e^φ[a, b] when the arc is present with T_h = a and T_m = b, and 1 when
the arc is absent (whatever the tags), so it only scores tag pairs of arcs that are in the tree.
Tags are restricted per token to a candidate list (``cand[i, :cnt[i]]``, tag ids of the tagger's
UPOS column; the ROOT column 0 has the one pseudo-tag -1). Incoming messages (log domain): q, the
arc's log-odds B[h,m] − r_arc; μ_h(a) = τ_h(a) − r_head(a) and μ_m(b) = τ_m(b) − r_child(b), the tag
variables' log-beliefs τ minus this factor's own messages. Outgoing messages:

    r_arc      = log Σ_ab e^{φ[a,b] + μ_h(a) + μ_m(b)} − log Σ_a e^{μ_h(a)} − log Σ_b e^{μ_m(b)}
    r_head(a)  = log( Σ_b e^{μ_m(b)} + e^q Σ_b e^{φ[a,b] + μ_m(b)} )         (normalised: max 0)
    r_child(b) = log( Σ_a e^{μ_h(a)} + e^q Σ_a e^{φ[a,b] + μ_h(a)} )         (normalised: max 0)

All in log space with max shifts (no underflow for scores of ±1e4). A factor whose two tags are
certain (one candidate each) is a constant unary on its arc: r_arc = φ[0, 0] and uniform tag messages.
"""
from typing import NamedTuple

import numpy as np

from bpparse.jit import njit

NEG_INF = -np.inf


class TagLinkFactors(NamedTuple):
    """The TAGLINK factors of one sentence. ``arcs`` int64 (F,): arc index h*(n+1) + m;
    ``cand`` int64 (n+1, C) candidate tag ids per token (row 0: ROOT, -1), ``cnt`` int64 (n+1,)
    how many; ``phi`` float64 (F, C, C) log-potentials φ[f, candidate of h, candidate of m];
    messages, updated by `taglink_update`: ``to_arc`` float64 (F,) log-odds, ``to_head`` /
    ``to_child`` float64 (F, C) log messages over the head's / child's candidates (max 0)."""

    arcs: np.ndarray
    cand: np.ndarray
    cnt: np.ndarray
    phi: np.ndarray
    to_arc: np.ndarray
    to_head: np.ndarray
    to_child: np.ndarray


def taglink_factors(arcs, cand, cnt, phi):
    """A `TagLinkFactors` record with zero messages."""
    F, C = phi.shape[0], cand.shape[1]
    return TagLinkFactors(arcs, cand, cnt, phi, np.zeros(F), np.zeros((F, C)), np.zeros((F, C)))


@njit(cache=True, nogil=True, inline="always")
def _lse2(a, b):
    if a < b:
        a, b = b, a
    if b == NEG_INF:
        return a
    return a + np.log1p(np.exp(b - a))


@njit(cache=True, nogil=True)
def _factor(tl, f, q, tag_bel, mu_h, mu_m, rh, rc):
    """Messages of factor f for arc log-odds input q: (r_arc, log Z0, log Z1, h, m), with the
    unnormalised r_head / r_child written into ``rh`` / ``rc`` and the tag inputs μ into ``mu_h``
    / ``mu_m`` (float64 (C,) scratch)."""
    n1 = tl.cand.shape[0]
    h = tl.arcs[f] // n1
    m = tl.arcs[f] % n1
    ch = tl.cnt[h]
    cm = tl.cnt[m]
    phi = tl.phi[f]
    zh = NEG_INF
    for a in range(ch):
        mu_h[a] = tag_bel[h, a] - tl.to_head[f, a]
        zh = _lse2(zh, mu_h[a])
    zm = NEG_INF
    for b in range(cm):
        mu_m[b] = tag_bel[m, b] - tl.to_child[f, b]
        zm = _lse2(zm, mu_m[b])
    for b in range(cm):
        rc[b] = NEG_INF
    z1 = NEG_INF
    for a in range(ch):
        row = NEG_INF
        for b in range(cm):
            v = phi[a, b] + mu_h[a] + mu_m[b]
            row = _lse2(row, phi[a, b] + mu_m[b])
            rc[b] = _lse2(rc[b], phi[a, b] + mu_h[a])
            z1 = _lse2(z1, v)
        rh[a] = _lse2(zm, q + row)
    for b in range(cm):
        rc[b] = _lse2(zh, q + rc[b])
    return z1 - zh - zm, zh + zm, z1, h, m


@njit(cache=True, nogil=True)
def taglink_update(bel, tag_bel, tl, damping, clip):
    """One flooding step of every TAGLINK factor; returns the largest message change.

    ``bel``: float64 (n+1, n+1) arc beliefs (log-odds) of the previous iteration, which include
    ``tl.to_arc``; ``tag_bel``: float64 (n+1, C) tag log-beliefs over each token's candidates
    (row 0: 0), which include ``tl.to_head`` / ``to_child``. Messages are replaced by (1-α)·new +
    α·old (α = ``damping``), r_arc clipped to [-clip, clip].
    """
    F = tl.arcs.shape[0]
    C = tl.cand.shape[1]
    n1 = bel.shape[0]
    mu_h = np.empty(C)
    mu_m = np.empty(C)
    rh = np.empty(C)
    rc = np.empty(C)
    keep = 1.0 - damping
    change = 0.0
    for f in range(F):
        h = tl.arcs[f] // n1
        m = tl.arcs[f] % n1
        q = bel[h, m] - tl.to_arc[f]
        r, _, _, h, m = _factor(tl, f, q, tag_bel, mu_h, mu_m, rh, rc)
        r = min(max(r, -clip), clip)
        change = max(change, abs(r - tl.to_arc[f]))
        tl.to_arc[f] = keep * r + damping * tl.to_arc[f]
        _damped(tl.to_head[f], rh, tl.cnt[h], keep, damping)
        d = _damped(tl.to_child[f], rc, tl.cnt[m], keep, damping)
        change = max(change, d)
    return change


@njit(cache=True, nogil=True, inline="always")
def _damped(old, new, c, keep, damping):
    """old[:c] <- keep·(new − max new) + damping·old; returns the largest change before damping."""
    top = NEG_INF
    for a in range(c):
        top = max(top, new[a])
    d = 0.0
    for a in range(c):
        v = new[a] - top if top > NEG_INF else 0.0
        d = max(d, abs(v - old[a]))
        old[a] = keep * v + damping * old[a]
    return d


@njit(cache=True, nogil=True)
def taglink_beliefs(bel, tag_bel, tl):
    """Factor beliefs P_F(L[h,m] = 1, T_h = a, T_m = b): float64 (F, C, C) over candidate indices
    (the expected TAGLINK feature counts training needs)."""
    F = tl.arcs.shape[0]
    C = tl.cand.shape[1]
    n1 = bel.shape[0]
    out = np.zeros((F, C, C))
    mu_h = np.empty(C)
    mu_m = np.empty(C)
    rh = np.empty(C)
    rc = np.empty(C)
    for f in range(F):
        h = tl.arcs[f] // n1
        m = tl.arcs[f] % n1
        q = bel[h, m] - tl.to_arc[f]
        _, z0, z1, h, m = _factor(tl, f, q, tag_bel, mu_h, mu_m, rh, rc)
        log_n = _lse2(z0, q + z1)
        if log_n == NEG_INF:
            continue
        for a in range(tl.cnt[h]):
            for b in range(tl.cnt[m]):
                out[f, a, b] = np.exp(q + tl.phi[f, a, b] + mu_h[a] + mu_m[b] - log_n)
    return out


@njit(cache=True, nogil=True)
def tag_incoming(tl, n):
    """float64 (n+1, C) Σ of the TAGLINK messages each token's candidates receive."""
    C = tl.cand.shape[1]
    n1 = n + 1
    inc = np.zeros((n1, C))
    for f in range(tl.arcs.shape[0]):
        h = tl.arcs[f] // n1
        m = tl.arcs[f] % n1
        for a in range(tl.cnt[h]):
            inc[h, a] += tl.to_head[f, a]
        for b in range(tl.cnt[m]):
            inc[m, b] += tl.to_child[f, b]
    return inc
