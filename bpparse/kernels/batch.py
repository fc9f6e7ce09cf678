"""Batched first-order inference and decoding over many sentences in one call (docs/design.md §3).

Layout: the (n_b+1, n_b+1) score matrices of B sentences are concatenated row-major into one flat
float64 buffer; sentence b occupies flat[offsets[b]:offsets[b+1]] (int64 offsets, length B+1, from
`batch_offsets`). Outputs go into preallocated buffers with the same layout (marginals) or the
concatenated heads arrays (int64, heads of sentence b at head_offsets[b]:head_offsets[b+1]).
Sentences are distributed over threads with prange; each one runs the single-sentence kernel, so a
batch gives bit-identical results to sentence-by-sentence calls whatever the thread count.
"""
import numpy as np

from bpparse.jit import njit, prange
from bpparse.kernels.cle import mst_decode
from bpparse.kernels.eisner import eisner_decode, eisner_marginals
from bpparse.kernels.matrix_tree import matrix_tree_marginals


@njit(cache=True)
def batch_offsets(n_words):
    """(offsets, head_offsets) for sentences of n_words[b] words: int64 (B+1,) each, the start of
    sentence b's (n+1)² scores in the flat buffer and of its n+1 heads in the heads buffer."""
    count = n_words.shape[0]
    offsets = np.zeros(count + 1, dtype=np.int64)
    head_offsets = np.zeros(count + 1, dtype=np.int64)
    for b in range(count):
        side = n_words[b] + 1
        offsets[b + 1] = offsets[b] + side * side
        head_offsets[b + 1] = head_offsets[b] + side
    return offsets, head_offsets


@njit(cache=True)
def _side(size):
    """n+1 for a block of (n+1)² entries."""
    side = int(np.sqrt(size) + 0.5)
    return side


@njit(parallel=True, cache=True)
def batch_tree_marginals(flat_scores, offsets, projective, single_root, out_marginals, out_log_z):
    """Marginals and log Z of every sentence of a batch (matrix-tree or Eisner).

    flat_scores: float64 (offsets[-1],), concatenated (n_b+1, n_b+1) log-potentials [head, child].
    offsets: int64 (B+1,). projective, single_root: bool, as in the single-sentence kernels.
    out_marginals: float64 (offsets[-1],), written with each sentence's marginals (same layout).
    out_log_z: float64 (B,), written with each sentence's log Z (-inf when it has no tree).
    """
    for b in prange(offsets.shape[0] - 1):
        lo = offsets[b]
        hi = offsets[b + 1]
        side = _side(hi - lo)
        scores = flat_scores[lo:hi].reshape((side, side))
        if projective:
            marg, log_z = eisner_marginals(scores, single_root)
        else:
            marg, log_z = matrix_tree_marginals(scores, single_root)
        out_marginals[lo:hi] = marg.ravel()
        out_log_z[b] = log_z


@njit(parallel=True, cache=True)
def batch_decode(flat_scores, offsets, projective, single_root, out_heads, head_offsets):
    """Best tree of every sentence of a batch (Chu-Liu-Edmonds or Eisner).

    flat_scores, offsets: as in batch_tree_marginals (any arc weights: log-potentials, marginals).
    out_heads: int64 (head_offsets[-1],), written with each sentence's heads (heads[0] = -1).
    head_offsets: int64 (B+1,), from batch_offsets.
    """
    for b in prange(offsets.shape[0] - 1):
        lo = offsets[b]
        hi = offsets[b + 1]
        side = _side(hi - lo)
        scores = flat_scores[lo:hi].reshape((side, side))
        if projective:
            out_heads[head_offsets[b]:head_offsets[b + 1]] = eisner_decode(scores, single_root)
        else:
            out_heads[head_offsets[b]:head_offsets[b + 1]] = mst_decode(scores, single_root)
