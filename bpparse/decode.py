"""Decoding: arc marginals (and label log-probabilities) → one tree with labels.

Decoders (`bpparse.kernels.codes`):
- MBR: the minimum-Bayes-risk tree, i.e. the maximum spanning tree under weights = arc marginals
  (Chu-Liu-Edmonds; Eisner's algorithm under PTREE), which maximises expected attachment accuracy
  (Smith & Eisner 2008 §6, docs/design.md §4);
- MAP: the maximum spanning tree under the first-order-plus-message scores, i.e. the log-odds each
  arc sends to the global factor, B − r_TREE = s + messages of GRAND/SIB/NOCROSS; for a LINK-only
  model this is the exact MAP tree under s. For comparison with MBR;
- GREEDY: every word takes its most probable head; may not be a tree (diagnostics only);
- DD: the MAP tree of the whole model by dual decomposition (`bpparse.kernels.dual_decomposition`;
  run by `bpparse.parse.parse_chunk_dd` on the scores, not here).
Every decoded arc gets its most probable label p(r | h -> m) (`label_tree`).
"""
import numpy as np

from bpparse.jit import njit
from bpparse.kernels.cle import mst_decode
from bpparse.kernels.codes import GREEDY, MBR
from bpparse.kernels.eisner import eisner_decode


@njit(cache=True, nogil=True)
def decode_sentence(mu, label_logp, map_scores, decoder, projective, single_root, heads, labels,
                    head_prob, label_prob):
    """Decode one sentence into the output slices (all of length n+1, entry 0 = ROOT).

    mu: float64 (n+1, n+1) arc marginals; label_logp: float64 (n+1, n+1, R); map_scores: float64
    (n+1, n+1) log-odds for MAP; decoder MBR / MAP / GREEDY (module docstring). Writes heads (int64,
    heads[0] = -1), labels (int64 label index of the chosen arc, -1 at 0 or without labels),
    head_prob = mu[head, m] and label_prob = p(label | head -> m) (float64, 0 at index 0).
    """
    n1 = mu.shape[0]
    if decoder == GREEDY:
        heads[0] = -1
        for m in range(1, n1):
            best = -1
            top = -1.0
            for h in range(n1):
                if h != m and mu[h, m] > top:
                    top = mu[h, m]
                    best = h
            heads[m] = best
    else:
        w = np.empty((n1, n1))
        for h in range(n1):
            for m in range(n1):
                if m == 0 or h == m:
                    w[h, m] = -np.inf
                elif decoder == MBR:
                    w[h, m] = mu[h, m]
                else:
                    w[h, m] = map_scores[h, m]
        if projective:
            tree = eisner_decode(w, single_root)
        else:
            tree = mst_decode(w, single_root)
        for m in range(n1):
            heads[m] = tree[m]
    label_tree(heads, mu, label_logp, labels, head_prob, label_prob)


@njit(cache=True, nogil=True)
def temper_head_probs(mu, heads, head_prob, temperature):
    """head_prob[m] = mu[h, m]^(1/T) / Σ_g mu[g, m]^(1/T) for every word m >= 1 with head h =
    heads[m] (g over the other positions): each word's column of the arc marginals ``mu`` float64
    (n+1, n+1) renormalised and tempered by ``temperature`` T (`bpparse.calibration`; 0 where
    mu[h, m] is 0)."""
    n1 = mu.shape[0]
    for m in range(1, n1):
        top = mu[heads[m], m]
        if not top > 0.0:  # (NaN too)
            head_prob[m] = 0.0
            continue
        ref = np.log(top)
        total = 0.0
        for g in range(n1):
            if g != m and mu[g, m] > 0.0:
                total += np.exp((np.log(mu[g, m]) - ref) / temperature)
        head_prob[m] = 1.0 / total


@njit(cache=True, nogil=True)
def label_tree(heads, mu, label_logp, labels, head_prob, label_prob):
    """Labels and probabilities of the tree ``heads`` (int64 (n+1,)): each arc's most probable
    label (``labels``, -1 at 0 or without labels), ``head_prob`` = mu[head, m] and ``label_prob``
    = p(label | head -> m) (float64, 0 at index 0); inputs as in `decode_sentence`."""
    R = label_logp.shape[2]
    labels[0] = -1
    head_prob[0] = 0.0
    label_prob[0] = 0.0
    for m in range(1, heads.shape[0]):
        h = heads[m]
        head_prob[m] = mu[h, m]
        best = -1
        top = -np.inf
        for r in range(R):
            if label_logp[h, m, r] > top:
                top = label_logp[h, m, r]
                best = r
        labels[m] = best
        label_prob[m] = np.exp(top) if best >= 0 else 0.0


def mbr_decode(marginals, projective=False, single_root=True):
    """Minimum-Bayes-risk tree: the maximum spanning tree (Eisner's algorithm when ``projective``)
    under arc weights = marginal probabilities, which maximises expected arc accuracy (SE08 §6,
    docs/design.md §4). ``marginals``: float64 ``(n+1, n+1)``; an arc of marginal 0 (e.g. forbidden) is used
    only when every tree needs one. Returns int64 heads with heads[0] = -1."""
    marginals = np.asarray(marginals, dtype=np.float64)
    scores = np.where(marginals > 0.0, marginals, -np.inf)
    if projective:
        return eisner_decode(scores, single_root)
    return mst_decode(scores, single_root)
