"""The `Weights` record kernels read: a dense vector (training) or one byte a slot (parsing).

A trained model's LINK and SECOND regions are mostly zero (the bundled EWT model: 4.1 M weights set
of 34.6 M slots), while its LABEL region is dense. A model file stores the bits of the slots that
hold a weight, their uint8 codes and a float16 codebook of at most 255 levels (`held_arrays`);
loading expands them into the compact store:

* ``codes`` uint8, one per slot of the layout: slot i's weight is ``codebook[codes[i]]``;
* ``codebook`` float64 (at most 256): code 0 is the weight 0, codes 1.. the levels the file stores
  (`quantize_values`).

38 MB for the bundled model instead of 303 MB of float64, and every value exact: scores are
summed in float64, so a compact model scores bit for bit like the dense vector of the same file.
A lookup is one byte at an address the key's hash gives: one cache line, no rank to compute. The
rank dictionary this replaced (the bits and rank of each 64-slot word beside the held codes,
17 MB) read two dependent cache lines a key and a software popcount on the portable CPU the
shipped kernels are built for (docs/benchmarks.md). An unset slot reads 0, which is also what the
gold-feature mask would have skipped, so parsing with a compact store needs no mask (and
`compact_weights` drops any weight the mask hides).
"""
from typing import NamedTuple

import numpy as np

from bpparse.features.hashing import _bit, _in_word, _prefetch, _word
from bpparse.features.layout import DIRTY_SHIFT, LY_LAB_OFF, LY_RANKED, LY_SEC_OFF, LY_SIZE
from bpparse.jit import LEAF, njit

MAX_LEVELS = 255  # levels of a stored codebook: a compact uint8 code has one more, 0


class Weights(NamedTuple):
    """A model's weights as kernels read them (through `weight_at`): ``fine`` (XPOS templates on),
    ``layout`` int64 (`features.LAYOUT_LEN`,), ``mask`` uint64 gold-feature bits (empty = every
    feature) or, with a `CompactSpace` layout (training), its rank mask (then ``dense`` is in that
    space); ``dense`` float64 every slot (training; empty when compact), else the compact
    ``codes`` uint8 (one per slot) and ``codebook`` float64 of the module docstring (both empty
    with ``dense``); ``label_lists`` int16 (U, U, 2, R+1), the labels an arc scores by its head's
    and child's UPOS ids and direction (child right of head: 1): their number, then their ids
    (`features.label_lists`; `NO_LABEL_FILTER`, shape (0, 0, 2, 1): every label);
    ``arc_limits`` int32 (U, U, 2), the arc filter: the longest arc scored by the same ids and
    direction, 0 none (`features.arc_limits`, read by `arc_allowed`; `NO_ARC_FILTER`, shape
    (0, 0, 2): every arc). One flat record: numba's parallel loops take no nested one."""

    fine: bool
    layout: np.ndarray
    mask: np.ndarray
    dense: np.ndarray
    codes: np.ndarray
    codebook: np.ndarray
    label_lists: np.ndarray
    arc_limits: np.ndarray


NO_LABEL_FILTER = np.zeros((0, 0, 2, 1), dtype=np.int16)
NO_ARC_FILTER = np.zeros((0, 0, 2), dtype=np.int32)


@njit(cache=True, inline="always")
def arc_allowed(limits, utag, h, m):
    """Is arc h -> m scored under the arc filter ``limits`` (`Weights.arc_limits`; empty: every
    arc)? ``utag``: the UPOS ids of the `attrs` row (word p at p + 1). Arcs between adjacent words
    are always scored, and ROOT's arcs by its row of ``limits``, so every sentence keeps a tree."""
    if limits.shape[0] == 0:
        return True
    d = m - h if m > h else h - m
    return d == 1 or d <= limits[utag[h + 1], utag[m + 1], 1 if m > h else 0]


@njit(cache=True, inline="always")
def weight_at(weights, i):
    """The weight of slot ``i`` (float64; 0 for a slot the compact store does not hold)."""
    if weights.dense.shape[0] > 0:
        return weights.dense[i]
    return weights.codebook[weights.codes[i]]


# The loops below read the record's arrays into locals before looping and have no early return
# inside: through `weight_at` numba kept reference counts on four arrays at every lookup (eight
# atomic calls a weight), which made LINK scoring 3x slower.

@njit(cache=True, **LEAF)
def sum_weights(weights, slots, k):
    """Σ of the weights of ``slots[:k]`` (int64 slot indices), in order: the score of one arc's
    or factor's features (`weight_at` for each, summed)."""
    s = 0.0
    if weights.dense.shape[0] > 0:
        dense = weights.dense
        for j in range(k):
            s += dense[slots[j]]
        return s
    codes, codebook = weights.codes, weights.codebook
    for j in range(k):
        s += codebook[codes[slots[j]]]
    return s


class BlockGroups(NamedTuple):
    """Scratch for summing or scattering the weights of block entries (`hashing._block_entry`)
    group by group: ``entries`` int64 (E,), group g being entries[start[g]:start[g + 1]]
    (``start`` int64 (G+1,), start[0] = 0); ``words`` uint64 and ``firsts`` int64 (E,) the rank
    words read for them; ``slots`` int64 (3E,) the positions of the weights they hold, group g's
    at slots[bounds[g]:bounds[g + 1]] (``bounds`` int64 (G+1,))."""

    entries: np.ndarray
    start: np.ndarray
    words: np.ndarray
    firsts: np.ndarray
    slots: np.ndarray
    bounds: np.ndarray


@njit(cache=True)
def block_groups(n_entries, n_groups):
    """`BlockGroups` for up to ``n_groups`` groups of ``n_entries`` block entries in all."""
    return BlockGroups(np.empty(n_entries, dtype=np.int64), np.zeros(n_groups + 1, dtype=np.int64),
                       np.empty(n_entries, dtype=np.uint64), np.empty(n_entries, dtype=np.int64),
                       np.empty(3 * n_entries, dtype=np.int64), np.zeros(n_groups + 1, dtype=np.int64))


@njit(cache=True, inline="always")
def _held_slots(index, groups, n, target):
    """groups.slots / groups.bounds of the first n groups: the positions of the slots that the rank
    words ``index`` ([bits, rank] pairs: a `CompactSpace`'s rank mask) hold among each entry's
    (the plain slot, then the conjunctions), in entry order. Every word
    is read first: those loads are independent, so the CPU overlaps their cache misses, which
    entry-by-entry lookups wait for one after the other (GRAND/SIB scoring twice as fast). Each
    slot's entry of ``target`` (the array read or written at the slots next) is prefetched as the
    slot is found, and the emitters prefetch the words themselves (`hashing.prefetch_words`):
    LINK scoring 0.30 -> 0.19 ms a sentence."""
    entries, words, firsts, slots, bounds = (groups.entries, groups.words, groups.firsts,
                                             groups.slots, groups.bounds)
    for j in range(groups.start[n]):
        words[j], firsts[j] = _word(index, True, entries[j] >> 8)
    k = 0
    for g in range(n):
        bounds[g] = k
        for j in range(groups.start[g], groups.start[g + 1]):
            e = entries[j]
            pos = (e >> 8) & 63
            for q, c in enumerate((0, (e >> 4) & 15, e & 15)):
                if q == 0 or c > 0:  # (code 0: none)
                    i = _in_word(words[j], firsts[j], pos + c, True)
                    if i >= 0:
                        slots[k] = i
                        _prefetch(target, i)
                        k += 1
    bounds[n] = k


@njit(cache=True)
def sum_block_groups(weights, groups, n, sums):
    """sums[g] = Σ of the weights of group g's block entries (`BlockGroups`), g < n, in the order
    `sum_weights` reads their slots (the same sums, bit for bit), for dense weights in a
    `CompactSpace` (``weights.mask`` its rank mask: training)."""
    _held_slots(weights.mask, groups, n, weights.dense)
    slots, bounds, dense = groups.slots, groups.bounds, weights.dense
    for g in range(n):
        s = 0.0
        for j in range(bounds[g], bounds[g + 1]):
            s += dense[slots[j]]
        sums[g] = s


@njit(cache=True)
def scatter_block_groups(rank, groups, n, coefs, grad, dirty):
    """grad[i] += coefs[g] for the position i of every slot of group g's block entries
    (`BlockGroups`), g < n, that the rank mask ``rank`` (a `CompactSpace`'s) holds, in the order
    of the features (the same sums, bit for bit); touched pages flagged in ``dirty`` unless it is
    empty."""
    _held_slots(rank, groups, n, grad)
    slots, bounds = groups.slots, groups.bounds
    for g in range(n):
        c = coefs[g]
        for j in range(bounds[g], bounds[g + 1]):
            grad[slots[j]] += c
            if dirty.shape[0] > 0:
                dirty[slots[j] >> DIRTY_SHIFT] = 1


@njit(cache=True, inline="always")
def add_blocks(dense, codes, codebook, starts, k, row):
    """row[r] += the weight of slot start + r for r < len(row) and each of the blocks
    ``starts[:k]`` (a LABEL block: one weight per label; a LINK key's block: its BLOCK slots),
    block by block, from a `Weights` record's ``dense`` vector, or (empty) from its compact
    ``codes`` and ``codebook`` (taken from the record by the caller, once). Every block's cache
    lines are prefetched before the first is read, so that their misses overlap; with that, row
    and block slices and the record read outside the loop, label scoring takes half the time."""
    R = row.shape[0]
    if dense.shape[0] > 0:
        for i in range(k):
            _prefetch(dense, starts[i])
            _prefetch(dense, starts[i] + R - 1)
        for i in range(k):
            block = dense[starts[i]:starts[i] + R]
            for r in range(R):
                row[r] += block[r]
    else:
        for i in range(k):
            _prefetch(codes, starts[i])
            _prefetch(codes, starts[i] + R - 1)
        for i in range(k):
            block = codes[starts[i]:starts[i] + R]
            for r in range(R):
                row[r] += codebook[block[r]]


@njit(cache=True)
def dense_weights(fine, layout, mask, theta, label_lists):
    """`Weights` reading the float64 vector ``theta`` itself (training, tests; an empty ``theta``
    for the gradient sweeps, which read no weights), scoring the labels of ``label_lists``
    (`NO_LABEL_FILTER`: every label), every arc (`Weights._replace` sets an arc filter)."""
    return Weights(fine, layout, mask, theta, np.empty(0, dtype=np.uint8), np.empty(0), label_lists,
                   np.zeros((0, 0, 2), dtype=np.int32))


@njit(cache=True, inline="always")
def _next_slot(deltas, j, pos, size):
    """Slot j of the delta-coded ``deltas`` (first slot, then gaps) after slot ``pos``, or -1 when
    it repeats one or lies past ``size``."""
    step = np.int64(deltas[j])
    if j > 0 and step == 0:
        return np.int64(-1)
    slot = step if j == 0 else pos + step
    return slot if slot < size else np.int64(-1)


@njit(cache=True)
def _fill_compact(deltas, codes, mask, label_off, out):
    """Decode delta-coded positions straight into the compact ``out`` (uint8, one per slot; no
    int64 position vector: loading stays small), each weight's compact code being its stored code
    + 1 (0 = weight 0), LINK+SECOND weights (before ``label_off``) only where the gold-feature
    ``mask`` holds them; returns False when a position repeats or falls outside ``out``."""
    pos = np.int64(-1)
    for j in range(deltas.shape[0]):
        pos = _next_slot(deltas, j, pos, out.shape[0])
        if pos < 0:
            return False
        if pos >= label_off or _bit(mask, pos):
            out[pos] = codes[j] + 1
    return True


def compact_weights(fine, layout, mask, deltas, codes, codebook):
    """Compact `Weights` (no mask) of the weights ``codebook[codes]`` (uint8 codes into a float16
    codebook of at most MAX_LEVELS levels, `quantize_values`) at the slots that the delta-coded
    ``deltas`` (unsigned ints: first slot, then gaps) give in ``layout``. Weights the gold-feature
    ``mask`` (uint64 bits over LINK+SECOND, empty = all) leaves out are dropped, so they read
    exactly what masked dense scoring reads. Raises ValueError for repeated or out-of-range
    positions, or codes past the codebook."""
    codes = np.asarray(codes, dtype=np.uint8)
    if codebook.shape[0] > MAX_LEVELS or (codes.shape[0] and int(codes.max()) >= codebook.shape[0]):
        raise ValueError(f"weight codes do not fit their codebook of {codebook.shape[0]} levels")
    label_off, size = int(layout[LY_LAB_OFF]), int(layout[LY_SIZE])
    out = np.zeros(size, dtype=np.uint8)
    if not _fill_compact(deltas, codes, mask, label_off, out):
        raise ValueError("weight positions out of range (past the weight vector, or repeated)")
    return _compact_store(fine, layout, out, codebook)


def _compact_store(fine, layout, codes, levels):
    """The compact `Weights` of ``codes`` (uint8, one per slot; 0 = weight 0, k = ``levels[k-1]``)."""
    return Weights(fine, layout, np.empty(0, dtype=np.uint64), np.empty(0), codes,
                   np.concatenate([[0.0], np.asarray(levels, dtype=np.float64)]), NO_LABEL_FILTER,
                   NO_ARC_FILTER)


_POPCOUNT8 = np.array([bin(b).count("1") for b in range(256)], dtype=np.uint64)


def _set_bits(words):
    """int64 increasing: the positions of the set bits of uint64 ``words`` (bit j of word w is
    position 64·w + j)."""
    return np.flatnonzero(np.unpackbits(np.ascontiguousarray(words).view(np.uint8), bitorder="little"))


def _word_counts(bits):
    """uint64 (W,): how many bits each of the uint64 ``bits`` (W,) has set."""
    if hasattr(np, "bitwise_count"):  # numpy >= 2
        return np.bitwise_count(bits).astype(np.uint64)
    return _POPCOUNT8[bits.view(np.uint8)].reshape(-1, 8).sum(axis=1)


def _rank_pairs(bits):
    """(pairs uint64 (2W,), set): pairs [bits[w], number of bits set in the words before] of uint64
    ``bits`` (W,), the layout of the rank masks (training's, the second stages'), and how many
    bits are set in all."""
    counts = _word_counts(bits)
    pairs = np.zeros(2 * bits.shape[0], dtype=np.uint64)
    pairs[0::2] = bits
    np.cumsum(counts[:-1], dtype=np.uint64, out=pairs[3::2])
    return pairs, int(counts.sum(dtype=np.uint64))


# the slot of a word's lowest set bit b is _LOWEST_BIT[(b * _DEBRUIJN) >> 58] (a de Bruijn
# sequence: the portable CPU the kernels ship for has no count-trailing-zeros instruction)
_DEBRUIJN = np.uint64(0x022FDD63CC95386D)
_LOWEST_BIT = np.zeros(64, dtype=np.int64)
_LOWEST_BIT[(np.uint64(1) << np.arange(64, dtype=np.uint64)) * _DEBRUIJN >> np.uint64(58)] = \
    np.arange(64)


@njit(cache=True)
def expand_held(held, codes, out):
    """out[i] = the next of ``codes`` for each set bit i of the uint64 words ``held`` (bit j of
    word w is slot 64·w + j), in slot order: ``out`` (uint8) must hold every slot, ``codes`` one
    code a set bit. How loading lays out a model's held weights (the bundled model's 4.1 M in
    about 12 ms; numpy's unpackbits and a boolean scatter took 55)."""
    k = 0
    for w in range(held.shape[0]):
        bits = held[w]
        while bits != 0:
            low = bits & (~bits + np.uint64(1))
            out[64 * w + _LOWEST_BIT[(low * _DEBRUIJN) >> np.uint64(58)]] = codes[k]
            k += 1
            bits ^= low


class SparseTable(NamedTuple):
    """A hashed table of float32 weights, most of them 0 (a second stage's), held as a rank
    dictionary: ``index`` uint64 (2·W,) for each 64-slot word its bits of the nonzero slots and the
    rank of its first one, ``values`` float32 (nonzero,) those slots'
    weights in slot order. The table has 64·W slots; an empty index is "no table". Kernels sum
    it with `features.punct.keys_score`. The bundled re-attachment stage: 0.7 MB instead of a
    4 MB dense table."""

    index: np.ndarray
    values: np.ndarray

    @property
    def size(self):
        return 32 * self.index.shape[0]

    def positions(self):
        """int64 (nonzero,) the slots that hold a weight, increasing."""
        return _set_bits(self.index[0::2])

    def dense(self):
        """The float32 (size,) table."""
        table = np.zeros(self.size, dtype=np.float32)
        table[self.positions()] = self.values
        return table


def sparse_table(positions, values, size):
    """The `SparseTable` of ``size`` slots (a power of two, at least 64) holding ``values`` at
    increasing int64 ``positions``."""
    held = np.zeros(size, dtype=np.bool_)
    held[positions] = True
    index, _ = _rank_pairs(np.packbits(held, bitorder="little").view(np.uint64))
    return SparseTable(index, np.asarray(values, dtype=np.float32))


def sparse_table_of(dense):
    """The `SparseTable` of a dense table (its nonzero entries, as float32)."""
    positions = np.flatnonzero(dense)
    return sparse_table(positions, dense[positions], dense.shape[0])


def held_arrays(slots, codes, layout, mask):
    """(held, codes, labels): how a model file stores the weights of stored ``codes`` (uint8,
    positions in its codebook) at increasing int64 ``slots`` (`held_weights` reads them back):
    held uint64 (W,) the bits of the LINK+SECOND slots that hold a weight, codes uint8 their
    compact codes (stored + 1) in slot order, labels uint8 the compact code of every LABEL slot.
    Weights the gold-feature ``mask`` (uint64 bits over LINK+SECOND, empty = all) hides are left
    out: scoring never reads them."""
    label_off, size = int(layout[LY_LAB_OFF]), int(layout[LY_SIZE])
    k = int(np.searchsorted(slots, label_off))
    link, link_codes = slots[:k], codes[:k]
    if mask.shape[0]:
        keep = (mask[link >> 6] >> (link & 63).astype(np.uint64)) & np.uint64(1) != 0
        link, link_codes = link[keep], link_codes[keep]
    flags = np.zeros(((label_off + 63) >> 6) * 64, dtype=np.uint8)
    flags[link] = 1
    labels = np.zeros(size - label_off, dtype=np.uint8)
    labels[slots[k:] - label_off] = codes[k:] + 1
    return np.packbits(flags, bitorder="little").view(np.uint64), link_codes + np.uint8(1), labels


def check_held_in_mask(held, mask):
    """ValueError unless every bit of ``held`` (uint64, the LINK+SECOND slots holding a weight)
    is in the gold-feature ``mask`` (uint64 over the same slots; empty = all)."""
    step, mask = 1 << 16, mask[:held.shape[0]]  # in pieces: no temporaries the size of the mask
    if mask.shape[0] and any(np.any(held[i:i + step] & ~mask[i:i + step])
                             for i in range(0, held.shape[0], step)):
        raise ValueError("weights outside the gold-feature mask")


def held_weights(fine, layout, mask, held, codes, labels, codebook):
    """Compact `Weights` of the arrays `held_arrays` writes, expanded to one code a slot (no
    positions to decode: this is what makes loading a model fast): ``codebook`` float16 (at most
    MAX_LEVELS levels; compact code k is level k-1). Raises ValueError when they do not fit ``layout`` or
    ``mask`` (empty: not checked; a model file checks its mask when it is read, `check_held_in_mask`)."""
    label_off, size = int(layout[LY_LAB_OFF]), int(layout[LY_SIZE])
    words = (label_off + 63) >> 6
    if held.shape != (words,) or labels.shape != (size - label_off,) or codes.ndim != 1:
        raise ValueError(f"{held.shape[0]} words of held bits and {labels.shape[0]} label weights "
                         f"do not fit the layout ({words} and {size - label_off})")
    if label_off & 63 and words and held[-1] >> np.uint64(label_off & 63):
        raise ValueError("held bits past the feature regions")
    n_held = int(_word_counts(held).sum(dtype=np.uint64))
    if n_held != codes.shape[0]:
        raise ValueError(f"{codes.shape[0]} weights for {n_held} held slots")
    top = codebook.shape[0]
    if top > MAX_LEVELS or max(int(codes.max(initial=0)), int(labels.max(initial=0))) > top:
        raise ValueError(f"weight codes do not fit their codebook of {top} levels")
    check_held_in_mask(held, mask)
    out = np.zeros(size, dtype=np.uint8)
    expand_held(np.ascontiguousarray(held), np.ascontiguousarray(codes), out)
    out[label_off:] = labels
    return _compact_store(fine, layout, out, codebook)


def quantize_values(values, levels=MAX_LEVELS, iterations=30):
    """(codebook float16 (k,) increasing, k <= ``levels``; codes uint8 (N,)) such that
    ``codebook[codes]`` is ``values`` rounded to the nearest of k levels: how model files store the
    parser's weights (one byte each: the bundled model's file 25 -> 18 MB, its loaded weights 38 ->
    13 MB), at most MAX_LEVELS levels so that a compact store's code 0 can mean 0.

    Values with at most ``levels`` distinct float16 roundings are kept exactly (so quantizing a
    quantized vector changes nothing: a saved model reloads bit for bit). Otherwise the levels are
    a 1-D k-means (Lloyd) of the values, which minimises the summed squared error, i.e. the
    perturbation of an arc's score summed over its features; started half at equal-mass quantiles,
    half evenly over the range (from quantiles alone Lloyd leaves the few large weights, the most
    telling features, on far-off levels). It runs over the distinct float16 values with their
    counts (at most 65,536, found by counting bit patterns): O(N) in all."""
    if levels > MAX_LEVELS:
        raise ValueError(f"at most {MAX_LEVELS} levels fit a compact uint8 code")
    bits = np.ascontiguousarray(values, dtype=np.float16).view(np.uint16)
    pattern_counts = np.bincount(bits, minlength=1 << 16)
    present = np.flatnonzero(pattern_counts)
    x_present = present.astype(np.uint16).view(np.float16).astype(np.float64)
    x, where = np.unique(x_present, return_inverse=True)  # +0 and -0 are one value
    counts = np.bincount(where, weights=pattern_counts[present])
    level_of = np.zeros(1 << 16, dtype=np.uint8)
    if x.shape[0] <= levels:
        level_of[present] = where
        return x.astype(np.float16), level_of[bits]
    mass = np.cumsum(counts)
    total = np.cumsum(counts * x)
    q = levels // 2
    centers = np.unique(np.concatenate([
        x[np.searchsorted(mass, (np.arange(q) + 0.5) * (mass[-1] / q))],
        np.linspace(x[0], x[-1], levels - q).astype(np.float16)]).astype(np.float64))
    for _ in range(iterations):
        ends = np.searchsorted(x, 0.5 * (centers[:-1] + centers[1:]))  # segment k: [ends[k-1], ends[k])
        ends = np.concatenate([ends, [x.shape[0]]])
        firsts = np.concatenate([[0], ends[:-1]])
        n = mass[ends - 1] - np.concatenate([[0.0], mass])[firsts]
        keep = n > 0
        sums = total[ends - 1] - np.concatenate([[0.0], total])[firsts]
        updated = np.unique((sums[keep] / n[keep]).astype(np.float16).astype(np.float64))
        if np.array_equal(updated, centers):
            break
        centers = updated
    level_of[present] = np.searchsorted(0.5 * (centers[:-1] + centers[1:]), x_present)
    return centers.astype(np.float16), level_of[bits]


def delta_code(positions):
    """Delta-coded unsigned ints (the first position, then the gaps) of increasing int64
    ``positions``, in the narrowest of uint16 / uint32 / uint64 that holds them: how model files
    store where their sparse weights are (the bundled parser's gaps are at most 399: uint16 halves
    what loading decompresses)."""
    gaps = np.diff(positions, prepend=0)
    top = int(gaps.max()) if gaps.shape[0] else 0
    return gaps.astype(np.uint16 if top < 2**16 else np.uint32 if top < 2**32 else np.uint64)


def delta_decode(deltas, size):
    """The increasing int64 positions of delta-coded ``deltas`` (`delta_code`); raises ValueError
    when one repeats or lies outside [0, size)."""
    positions = np.array(deltas, dtype=np.int64)
    np.cumsum(positions, out=positions)  # in place: loading's peak memory
    if positions.shape[0] and (positions[0] < 0 or positions[-1] >= size
                               or np.any(positions[1:] <= positions[:-1])):
        raise ValueError("weight positions out of range or repeated")
    return positions


def csr_rows(positions, width, n_rows):
    """(starts int64 (n_rows+1,), columns int64) of the entries at increasing flat ``positions``
    (row · width + column) of an (n_rows, width) table: row r's entries are
    columns[starts[r]:starts[r+1]], in the order of ``positions``."""
    starts = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(positions // width, minlength=n_rows), out=starts[1:])
    return starts, positions % width


class CompactSpace(NamedTuple):
    """Training's weight vectors over only the slots a model can use: the LINK+SECOND slots of its
    gold-feature mask (all of them without one), in slot order, then the whole LABEL region.

    ``rank`` uint64 (2W,): the rank mask kernels emit through (`hashing._index`), pairs [mask
    bits, number of bits set in the pairs before]; ``positions`` (size,) uint32 (int64 past 2^32
    slots): the slot of each entry; ``layout``: the model's layout with LY_RANKED set and the LABEL
    region moved to where it starts here (LINK and SECOND slots are hashed as before, then ranked;
    LY_SIZE stays the model's); ``sec_off``: the first SECOND entry."""

    rank: np.ndarray
    positions: np.ndarray
    layout: np.ndarray
    sec_off: int

    @property
    def size(self):
        return self.positions.shape[0]

    def sparse(self, vector):
        """(slots, values) of the nonzero entries of ``vector`` (this space's), slots increasing."""
        nz = np.flatnonzero(vector)
        return self.positions[nz], vector[nz]

    def entries(self, slots):
        """This space's entry of each slot of ``slots`` (increasing, int); ValueError when one is
        not in it."""
        j = np.searchsorted(self.positions, slots)
        if np.any(j >= self.size) or np.any(self.positions[np.minimum(j, self.size - 1)] != slots):
            raise ValueError("slots outside the gold-feature mask")
        return j


def compact_space(layout, mask):
    """The `CompactSpace` of a model's ``layout`` (int64) and gold-feature ``mask`` (uint64 bits
    over LINK+SECOND; empty = every slot)."""
    label_off, size = int(layout[LY_LAB_OFF]), int(layout[LY_SIZE])
    words = (label_off >> 6) + 1
    bits = np.full(words, np.iinfo(np.uint64).max, dtype=np.uint64) if mask.shape[0] == 0 else mask.copy()
    bits[label_off >> 6:] = 0  # the LABEL region is not ranked (label_off is a multiple of 64)
    rank = _rank_pairs(bits)[0]
    held = _set_bits(bits)
    positions = np.concatenate([held, np.arange(label_off, size)]).astype(
        np.uint32 if size <= 1 << 32 else np.int64)
    compact_layout = layout.copy()
    compact_layout[LY_LAB_OFF] = held.shape[0]
    compact_layout[LY_RANKED] = 1
    return CompactSpace(rank, positions, compact_layout, int(np.searchsorted(held, layout[LY_SEC_OFF])))


def stored_entries(weights):
    """(slots int64 increasing, values float64) of a compact store: every LINK+SECOND slot that
    holds a weight, then the whole LABEL region."""
    label_off, size = int(weights.layout[LY_LAB_OFF]), int(weights.layout[LY_SIZE])
    held = np.flatnonzero(weights.codes[:label_off])
    slots = np.concatenate([held, np.arange(label_off, size)])
    return slots, weights.codebook[weights.codes[slots]]


def dense_vector(weights):
    """The float64 vector (layout size) that ``weights`` read: dense weights' own, or expanded
    from a compact store or from dense weights in a `CompactSpace`."""
    ranked = weights.layout[LY_RANKED] != 0
    if weights.dense.shape[0] > 0 and not ranked:
        return weights.dense
    theta = np.zeros(int(weights.layout[LY_SIZE]))
    if ranked:
        held = _set_bits(weights.mask[0::2])
        theta[held] = weights.dense[:held.shape[0]]
        theta[theta.shape[0] - (weights.dense.shape[0] - held.shape[0]):] = weights.dense[held.shape[0]:]
    else:
        slots, values = stored_entries(weights)
        theta[slots] = values
    return theta
