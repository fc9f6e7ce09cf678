"""Where each feature family lives in the weight vector: the layout array (fields ``LY_*``),
the per-sentence attribute rows (``A_*``) and the buffer bounds; see `bpparse.features`."""
import numpy as np

from bpparse.encode import MORPH_ATTRS

BLOCK = 16
DIRTY_SHIFT = 4  # gradient buffers flag touched pages of 2**DIRTY_SHIFT weights

# rows of the padded per-sentence attribute table (see sentence_attributes)
A_WORD, A_PREFIX, A_UTAG, A_FTAG, A_LEMMA, A_FEATS, A_SUFFIX = 0, 1, 2, 3, 4, 5, 6
A_MORPH = 7  # first of N_MORPH rows: the values of encode.MORPH_ATTRS (0 = attribute absent)
N_MORPH = len(MORPH_ATTRS)
M_CASE, M_VERBFORM, M_NUMBER, M_PERSON, M_NUMBER_PSOR, M_PERSON_PSOR = (
    MORPH_ATTRS.index(a) for a in ("Case", "VerbForm", "Number", "Person", "Number[psor]", "Person[psor]"))
NUM_ATTRS = A_MORPH + N_MORPH
BEFORE = -2  # attribute value of the position before the first word
AFTER = -3  # ... and after the last word

# fields of the layout array
LY_LINK_OFF, LY_LINK_BLOCKS, LY_SEC_OFF, LY_SEC_BLOCKS = 0, 1, 2, 3
LY_LAB_OFF, LY_LAB_BLOCKS, LY_NLAB, LY_SIZE = 4, 5, 6, 7
LY_FINE, LY_LEMMA, LY_FEATS, LY_SECOND_WORDS = 8, 9, 10, 11
LY_MORPH = 12  # morphology templates: attribute values, agreement, suffixes (0 in older files)
LY_CONTEXT_WORDS = 13  # LINK templates of the words beside head and child (0 in older files)
LY_RANKED = 14  # 1 in a training `CompactSpace` layout: LINK+SECOND slots ranked through its mask
LAYOUT_LEN = 15

# encoder field rows (bpparse.encode): FORM, LOWER, PREFIX, SUFFIX, UPOS, XPOS, LEMMA, FEATS, then
# the N_MORPH attribute rows
_E_LOWER, _E_PREFIX, _E_SUFFIX, _E_UPOS, _E_XPOS, _E_LEMMA, _E_FEATS, _E_MORPH = 1, 2, 3, 4, 5, 6, 7, 8


MAX_FIXED_LINK_FEATURES = 256  # per arc, without the between-tag features (2 per distinct tag)
MAX_PAIR_FEATURES = 32
MAX_LABEL_TEMPLATES = 40
# which of an arc's keys a template function writes (`link_features`, `label_keys`)
ALL_KEYS = 0
ARC_KEYS = 1  # those that read both ends (or the direction and distance, for labels)
HEAD_KEYS = 2  # those of the head's word alone
CHILD_KEYS = 3  # those of the child's word alone (with the direction, for labels)


def make_layout(link_bits, second_bits, label_bits, n_labels, fine_tags, lemma, feats,
                second_words=False, morph=False, context_words=False):
    """Region layout as an int64 array of length LAYOUT_LEN; sizes are powers of two (in weights)."""
    for bits in (link_bits, second_bits, label_bits):
        if not 8 <= bits <= 30:
            raise ValueError(f"hash bits must be in 8..30, got {bits}")
    layout = np.zeros(LAYOUT_LEN, dtype=np.int64)
    link_size = 1 << link_bits
    sec_size = 1 << second_bits
    layout[LY_LINK_OFF] = 0
    layout[LY_LINK_BLOCKS] = link_size // BLOCK
    layout[LY_SEC_OFF] = link_size
    layout[LY_SEC_BLOCKS] = sec_size // BLOCK
    layout[LY_LAB_OFF] = link_size + sec_size
    layout[LY_LAB_BLOCKS] = (1 << label_bits) if n_labels > 0 else 0
    layout[LY_NLAB] = n_labels
    layout[LY_SIZE] = link_size + sec_size + layout[LY_LAB_BLOCKS] * n_labels
    layout[LY_FINE] = int(bool(fine_tags))
    layout[LY_LEMMA] = int(bool(lemma))
    layout[LY_FEATS] = int(bool(feats))
    layout[LY_SECOND_WORDS] = int(bool(second_words))
    layout[LY_MORPH] = int(bool(morph))
    layout[LY_CONTEXT_WORDS] = int(bool(context_words))
    return layout
