"""Feature-key hashing (FNV-1a over 64-bit words with a splitmix64 finaliser; never Python's
salted ``hash``) and the emission of a key's block slots into an index buffer.

Emission writes where a slot's weight lives in the vector the kernel reads (`_index`): the slot
itself (a plain gold-feature mask, or none), or, in training, its rank among the slots a gold-feature
*rank mask* keeps (`features.store.CompactSpace`), so that training's vectors hold only those.
"""
import numpy as np

from bpparse.features.layout import BLOCK
from bpparse.jit import intrinsic, njit

_FNV_SEED = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_SM1 = np.uint64(0xBF58476D1CE4E5B9)
_SM2 = np.uint64(0x94D049BB133111EB)
_S27 = np.uint64(27)
_S30 = np.uint64(30)
_S31 = np.uint64(31)


@njit(cache=True, inline="always")
def _h0(template):
    return (_FNV_SEED ^ np.uint64(template)) * _FNV_PRIME


@njit(cache=True, inline="always")
def _hc(h, value):
    return (h ^ np.uint64(value)) * _FNV_PRIME


@njit(cache=True, inline="always")
def _fin(h):
    z = h
    z = (z ^ (z >> _S30)) * _SM1
    z = (z ^ (z >> _S27)) * _SM2
    return z ^ (z >> _S31)


@njit(cache=True, inline="always")
def _slot(h, nblocks):
    """Block number of key hash ``h`` among ``nblocks`` (a power of two, as every layout region
    is: a mask, not a 64-bit division, which cost a third of feature extraction)."""
    return np.int64(_fin(h) & (np.uint64(nblocks) - np.uint64(1)))


@njit(cache=True)
def hash_key(values):
    """Hash an int64 key (template id first) to a uint64; the reference for the inlined hashing."""
    h = _h0(values[0])
    for i in range(1, values.shape[0]):
        h = _hc(h, values[i])
    return _fin(h)


@njit(cache=True, inline="always")
def _bit(mask, i):
    if mask.shape[0] == 0:
        return True
    return (mask[i >> 6] >> np.uint64(i & 63)) & np.uint64(1) != np.uint64(0)


@intrinsic
def _popcount(typingctx, x):
    """Number of set bits of a uint64 (the CPU's popcnt)."""
    from numba import types

    sig = types.uint64(types.uint64)

    def codegen(context, builder, signature, args):
        return builder.ctpop(args[0])

    return sig, codegen


@intrinsic
def _prefetch(typingctx, array, i):
    """Ask the CPU to bring array[i] into its caches (llvm.prefetch; no effect on any result)."""
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils

    sig = types.void(array, i)

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        address = builder.bitcast(builder.gep(data, [args[1]]), ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [address.type, i32, i32, i32])
        prefetch = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        builder.call(prefetch, [address, i32(0), i32(3), i32(1)])  # read, keep, data
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, inline="always")
def prefetch_words(index, entries, lo, hi):
    """Prefetch the rank words (``index``: [bits, rank] pairs) of the block entries
    entries[lo:hi], which `store.sum_block_groups` (or `scatter_block_groups`) reads once the
    group is complete: the misses then overlap the hashing of the group's other arcs or factors."""
    for j in range(lo, hi):
        _prefetch(index, 2 * ((entries[j] >> 8) >> 6))


@njit(cache=True, inline="always")
def _word(mask, ranked, i):
    """(bits, first) of the (non-empty) mask word holding slot ``i`` (see `_index`): its bits, and
    where the weights of its slots start (with ``ranked`` the rank of its first set bit, else its
    first slot). A key's block (BLOCK slots, aligned) lies inside one word."""
    if ranked:
        return mask[2 * (i >> 6)], np.int64(mask[2 * (i >> 6) + 1])
    return mask[i >> 6], np.int64(i - (i & 63))


@njit(cache=True, inline="always")
def _in_word(bits, first, pos, ranked):
    """`_index` of bit ``pos`` of a mask word (`_word`), or -1 when the bit is clear."""
    below = np.uint64(1) << np.uint64(pos)
    if bits & below == 0:
        return np.int64(-1)
    if ranked:
        return first + np.int64(_popcount(bits & (below - np.uint64(1))))
    return first + pos


@njit(cache=True, inline="always")
def _index(mask, ranked, i):
    """Where slot ``i``'s weight lives in the vector a kernel reads, or -1 when it has none.

    ``mask``: uint64 (W,) gold-feature bits over the LINK+SECOND slots (empty: every slot), giving
    ``i`` itself when its bit is set; or, with ``ranked``, a rank mask uint64 (2W,) of pairs [bits,
    number of bits set in the pairs before] (`features.store.CompactSpace`), giving the rank of
    ``i`` among the set bits."""
    if mask.shape[0] == 0:
        return np.int64(i)
    bits, first = _word(mask, ranked, i)
    return _in_word(bits, first, i & 63, ranked)


# A block entry: a key's block (its slot 0, a multiple of BLOCK) and up to two of its conjunction
# slots, base << 8 | c1 << 4 | c2 (codes < BLOCK = 16), so that the key's rank word is read once for
# all its slots (`store.BlockGroups`).
@njit(cache=True, inline="always")
def _block_entry(base, c1, c2):
    return (base << 8) | (c1 << 4) | c2


# The emitters test the mask inline rather than through a shared append helper: a third level of
# inlined calls made parsing's LINK and GRAND/SIB scoring 25-50% slower. Each reads its block's
# mask word once for all the slots it emits.
@njit(cache=True, inline="always")
def _emit(out, k, h, off, nblocks, code, mask, ranked):
    """Emit slot 0 and slot ``code`` (0 = none) of the block that key hash ``h`` selects (where
    their weights live: `_index`)."""
    base = off + _slot(h, nblocks) * BLOCK
    if mask.shape[0] == 0:
        out[k] = base
        k += 1
        if code > 0:
            out[k] = base + code
            k += 1
        return k
    bits, first = _word(mask, ranked, base)
    pos = base & 63
    j = _in_word(bits, first, pos, ranked)
    if j >= 0:
        out[k] = j
        k += 1
    if code > 0:
        j = _in_word(bits, first, pos + code, ranked)
        if j >= 0:
            out[k] = j
            k += 1
    return k


@njit(cache=True, inline="always")
def _emit2(out, k, h, off, nblocks, code1, code2, mask, ranked):
    """Emit slots 0, ``code1`` and ``code2`` (two different conjunctions) of one key's block."""
    base = off + _slot(h, nblocks) * BLOCK
    if mask.shape[0] == 0:
        out[k] = base
        out[k + 1] = base + code1
        out[k + 2] = base + code2
        return k + 3
    bits, first = _word(mask, ranked, base)
    pos = base & 63
    for c in (0, code1, code2):
        j = _in_word(bits, first, pos + c, ranked)
        if j >= 0:
            out[k] = j
            k += 1
    return k
