"""Hashed feature templates for LINK, GRAND, SIB, NOCROSS and labels (numba kernels).

One weight vector holds every family (kernels read it through the `Weights` record: the dense
float64 vector in training, one uint8 code a slot into a float16 codebook in parsing,
`features.store`);
``layout`` (int64 array, fields ``LY_*``)
says where each region starts and how large it is:

* LINK region: the first-order templates of McDonald et al. (2005) (word/tag unigrams and bigrams of
  head and child, tags between, tags around head and child). Coarse tags are UPOS, fine tags XPOS
  (only when the treebank has them); words are lower-cased forms and 5-character prefixes; lemma and
  FEATS templates are optional.
* SECOND region (smaller, so that it stays in cache): GRAND, SIB and NOCROSS tag templates
  (Smith & Eisner 2008 §8.2): coarse and fine tag triples / pairs, conjoined with direction(s) and
  binned distances, and the "grandparent between parent and child" indicator; the CHILDSEQ
  adjacent-sibling templates (McDonald & Pereira 2006, `features.childseq`).
* LABEL region: blocks of R (number of labels) weights; one hashed label template fetches the R
  label weights of one arc as one contiguous run, so labeled scores s[h,m,r] cost one lookup per
  template (docs/design.md §4: labels marginalised inside the arc).

Every LINK / SECOND template key (template id, attribute values) is hashed with a fixed 64-bit mix
(FNV-1a over 64-bit words, splitmix64 finaliser; never Python's salted ``hash``) to a block of
``BLOCK`` = 16 weights: slot 0 is the plain feature, the other slots the same feature conjoined with
direction and binned distance. Both usually share a cache line pair, so a conjoined template costs
one cache miss instead of two.

The same enumeration (``*_features`` kernels filling an index buffer) serves scoring (sum of
weights) and gradients (add a coefficient at each index), so scores and updates cannot disagree.
An optional bitmask over the LINK+SECOND regions keeps only features seen on gold structures
(McDonald et al. 2005 keep only features that occur in gold trees); an empty mask keeps everything.
"""

from bpparse.features.attributes import (  # noqa: F401
    link_distance_bin,
    second_distance_bin,
    sentence_attributes,
)
from bpparse.features.childseq import (  # noqa: F401
    childseq_features,
    childseq_scatter,
    childseq_scores,
    mark_childseq_features,
)
from bpparse.features.context import ContextLabeler, relabel_tree, tree_label_scores  # noqa: F401
from bpparse.features.cross import cross_features, cross_scatter, cross_scores  # noqa: F401
from bpparse.features.gold import mark_gold_features  # noqa: F401
from bpparse.features.hashing import hash_key  # noqa: F401
from bpparse.features.labels import (  # noqa: F401
    arc_limits,
    label_blocks,
    label_filter,
    label_lists,
    label_scatter,
    label_scores,
)
from bpparse.features.layout import (  # noqa: F401
    A_FEATS,
    A_FTAG,
    A_LEMMA,
    A_PREFIX,
    A_UTAG,
    A_WORD,
    AFTER,
    BEFORE,
    BLOCK,
    DIRTY_SHIFT,
    LAYOUT_LEN,
    LY_FEATS,
    LY_FINE,
    LY_LAB_BLOCKS,
    LY_LAB_OFF,
    LY_LEMMA,
    LY_LINK_BLOCKS,
    LY_LINK_OFF,
    LY_NLAB,
    LY_RANKED,
    LY_SEC_BLOCKS,
    LY_SEC_OFF,
    LY_SECOND_WORDS,
    LY_SIZE,
    MAX_FIXED_LINK_FEATURES,
    MAX_LABEL_TEMPLATES,
    MAX_PAIR_FEATURES,
    NUM_ATTRS,
    make_layout,
)
from bpparse.features.link import (  # noqa: F401
    arc_between_tags,
    between_capacity,
    link_features,
    link_scatter,
    link_scores,
    link_sweep,
)
from bpparse.features.pairs import (  # noqa: F401
    grand_features,
    pair_features_tabled,
    pair_scatter,
    pair_scores,
    pair_tables,
    sib_features,
)
from bpparse.features.punct import PunctAttacher, attach_punct  # noqa: F401
from bpparse.features.reattach import Reattacher  # noqa: F401
from bpparse.features.store import (  # noqa: F401
    MAX_LEVELS,
    NO_ARC_FILTER,
    NO_LABEL_FILTER,
    BlockGroups,
    CompactSpace,
    Weights,
    arc_allowed,
    block_groups,
    check_held_in_mask,
    compact_space,
    compact_weights,
    delta_code,
    delta_decode,
    dense_vector,
    dense_weights,
    held_arrays,
    held_weights,
    quantize_values,
    scatter_block_groups,
    stored_entries,
    sum_block_groups,
    sum_weights,
    weight_at,
)
