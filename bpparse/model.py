"""The model: resolved config, vocabularies, label set and hashed weights, and its file format.

File layout (all integers little-endian)::

    MAGIC (16 bytes) | format version u32 | header length u64 | header (UTF-8 JSON: config,
    vocabularies, labels, layout, training metadata) | payload length u64 | payload (numpy .npz:
    the parser's weights as `features.held_arrays`, stored as they are, since loading reads them
    on every start: the bits of the feature slots that hold a weight, their uint8 codes into a
    float16 codebook of at most 255 levels, the label region's codes; deflated: the codebook,
    the gold-feature mask, the tagger and the second stages) | SHA-256 of everything before it
    (32 bytes)

Weights are stored sparse, each as one byte (`features.store.quantize_values`: the levels of a 1-D
k-means; on the bundled model an RMS error of 0.0024 against weights of RMS 0.22, at most 0.03,
which moves no parse measurably, and 6.5 MB less than float16 values); a `Model` built by training
is rounded the same way (`round_weights`), so a saved model reloads and parses identically. Files
with float16 values (written before the codebook) still load, their weights quantized on loading.
A loaded model keeps its weights as one uint8 code a slot (`features.store`: an eighth of the
dense float64 vector, exact), expanded from the held bits in about 12 ms, never the dense vector
unless something asks for ``model.theta``. Version-1 files (delta-coded positions, all
deflated) still load. Loading a file of another format version, a truncated or corrupted file, or
a file that is not a model raises `ModelFileError`.
"""
import contextlib
import functools
import hashlib
import io
import json
import os
import struct
import zipfile

import numpy as np

from bpparse import features as F
from bpparse.calibration import TEMPERATURE_RANGE
from bpparse.config import Config, parse_constraint
from bpparse.conll import open_output
from bpparse.errors import ModelFileError
from bpparse.labeler import labeler_from_arrays, labeler_to_arrays, no_labeler
from bpparse.punct import punct_from_arrays, punct_record, punct_to_arrays
from bpparse.reattach import reattach_from_arrays, reattach_record
from bpparse.tagger import tagger_from_arrays, tagger_to_arrays

MAGIC = b"BPPARSE-MODEL\x00\x00\x00"
FORMAT_VERSION = 2  # 2: weights as held bits and codes (`features.held_arrays`); 1 still loads
_HASH_LEN = 32
_TAGGER_PREFIX = "tagger."
_LABELER_PREFIX = "labeler."
_PUNCT_PREFIX = "punct."
_REATTACH_PREFIX = "reattach."
_MAX_TAGGER_WEIGHTS = 1 << 30
# weight slots a model file may claim (checked before anything is allocated): 2^32 keeps stored
# positions uint32; the bundled model has 3.8e7, and training a dense 2^32 one would take 32 GB
MAX_WEIGHTS = 1 << 32


def _stored_weights(values, slots=None):
    """(positions, codebook, codes) of the weights a model file stores: the slots nonzero at float16
    precision and their one-byte codes (`features.store.quantize_values`), of the weight vector
    ``values``, or of the weights ``values`` at ``slots`` (int64 increasing)."""
    nz = np.flatnonzero(values.astype(np.float16))
    return (nz if slots is None else slots[nz], *F.quantize_values(values[nz]))


def _file_arrays(model, values, slots=None):
    """(held, codes, labels, codebook): how a model file stores the weights ``values`` (float64,
    the model's weight vector, or its weights at increasing ``slots``), rounded to one-byte codes
    (`features.held_arrays`, `features.quantize_values`)."""
    nz, codebook, codes = _stored_weights(values, slots)
    return (*F.held_arrays(nz, codes, model.layout, model.mask), codebook)


def round_weights(theta):
    """theta rounded to the levels the model file stores (float64 array; see `save_model`)."""
    out = np.zeros(theta.shape[0], dtype=np.float64)
    nz, codebook, codes = _stored_weights(theta)
    out[nz] = codebook.astype(np.float64)[codes]
    return out


class Model:
    """A trained (or training) parser: config, vocabularies, feature layout, weights, metadata.

    ``config``: a resolved `Config` (features.fine_tags is a bool or "derived"); ``vocabs``:
    `Vocabularies` (derived fine tags exactly when the config says so);
    ``theta``: float64 weight vector of length ``layout[LY_SIZE]`` (zeros if None), or ``compact``:
    compact `features.Weights` of the same weights (a loaded model); ``mask``: uint64
    gold-feature bit mask (empty = no filter), or a function that reads it; ``meta``: JSON-able
    training metadata; ``tagger``: a `bpparse.tagger.Tagger` that predicts the tag columns input
    lacks, or None; ``labeler``: the second-stage `bpparse.labeler.Labeler` that labels decoded
    trees, or None (the parser's labels);
    ``punct``: the `bpparse.punct.PunctStage` that re-attaches punctuation in decoded trees, or None;
    ``reattach``: the `bpparse.reattach.ReattachStage` that re-attaches the other words, or None;
    ``calibration``: None, or a JSON-able dict whose ``head_temperature`` (and, with a labeler,
    ``label_temperature``) calibrate the probabilities of the chosen heads and labels
    (`bpparse.calibration`; fitted on dev by training), with how they were fitted;
    ``label_filter``: the `features.label_filter` table of the labels an arc may carry, or None
    (every label); ``arc_filter``: the `features.arc_limits` table of the arcs parsing scores, or
    None (every arc).
    """

    def __init__(self, config, vocabs, theta=None, mask=None, meta=None, tagger=None, compact=None,
                 labeler=None, punct=None, reattach=None, calibration=None, label_filter=None,
                 arc_filter=None):
        if vocabs.derived_fine != config.features.derived_fine:
            raise ValueError("the vocabularies' fine tags are not those of features.fine_tags")
        self.config = config
        self.reattach = reattach
        self.tagger = tagger
        self.labeler = labeler
        self.punct = punct
        self.vocabs = vocabs
        self.layout = make_model_layout(config, len(vocabs.labels))
        if compact is None:
            self.theta = np.zeros(self.size) if theta is None else theta
        else:
            self._theta, self._compact = None, compact
        self._mask = mask if callable(mask) else self._checked_mask(mask)
        self.label_filter = label_filter
        self.arc_filter = arc_filter
        self.meta = dict(meta or {})
        self.calibration = calibration
        self.format_version = FORMAT_VERSION  # of the file it was loaded from, else of a new one

    @property
    def head_temperature(self):
        """The temperature of the chosen heads' probabilities (1: none fitted)."""
        return float((self.calibration or {}).get("head_temperature", 1.0))

    @property
    def label_temperature(self):
        """The temperature of the labeler's label probabilities (1: none fitted)."""
        return float((self.calibration or {}).get("label_temperature", 1.0))

    @property
    def mask(self):
        """uint64 gold-feature bit mask (empty = no filter). A loaded model reads it from its file
        when first asked for (training and saving read it; parsing does not)."""
        if callable(self._mask):
            self._mask = self._checked_mask(self._mask())
        return self._mask

    @mask.setter
    def mask(self, value):
        self._mask = self._checked_mask(value)

    def _checked_mask(self, mask):
        mask = np.empty(0, dtype=np.uint64) if mask is None else np.ascontiguousarray(mask, dtype=np.uint64)
        if mask.shape[0] not in (0, mask_words(self.layout)):
            raise ModelFileError(f"gold-feature mask has {mask.shape[0]} words, layout needs "
                                 f"{mask_words(self.layout)}")
        return mask

    @property
    def label_filter(self):
        """bool (U, U, 2, R): the labels an arc may carry by its head's and child's UPOS ids and
        direction (`features.label_filter`), or None: every label."""
        return self._label_filter

    @label_filter.setter
    def label_filter(self, allowed):
        if allowed is not None:
            check_label_filter(allowed, self.vocabs, self.layout)
        self._label_filter = allowed
        self._label_lists = F.NO_LABEL_FILTER if allowed is None else F.label_lists(allowed)

    @property
    def arc_filter(self):
        """int32 (U, U, 2): the longest arc parsing scores by its head's and child's UPOS ids and
        direction (`features.arc_limits`, `Weights.arc_limits`), or None: every arc."""
        return None if self._arc_limits is F.NO_ARC_FILTER else self._arc_limits

    @arc_filter.setter
    def arc_filter(self, limits):
        if limits is not None:
            check_arc_filter(limits, self.vocabs)
        self._arc_limits = F.NO_ARC_FILTER if limits is None else limits

    @property
    def label_lists(self):
        """The label filter as the kernels read it (`features.Weights.label_lists`)."""
        return self._label_lists

    @property
    def taglink(self):
        """The TAGLINK weights of joint tagging and parsing (`bpparse.tagger.TagLink`), or None."""
        return self.tagger.taglink if self.tagger is not None else None

    @taglink.setter
    def taglink(self, value):
        self.tagger.taglink = value

    @property
    def labeler_record(self):
        """The `features.context.ContextLabeler` the parse kernels take (an empty table when the
        model has no labeler: the parser's labels stay)."""
        if self.labeler is None:
            return no_labeler(self.layout, len(self.labels))
        return self.labeler.record(self.layout)

    @property
    def punct_record(self):
        """The `features.punct.PunctAttacher` the parse kernels take (no weights when the model has
        no punctuation stage: the parser's heads stay)."""
        return punct_record(self.punct, self.vocabs)

    @property
    def reattach_record(self):
        """The `features.reattach.Reattacher` the parse kernels take (no weights when the model has
        no re-attachment stage: the parser's heads stay)."""
        return reattach_record(self.reattach, self.vocabs)

    @property
    def projective(self):
        """Does the model parse under PTREE (its ``[parse]`` constraint)? Its second stages then
        keep the trees projective."""
        return parse_constraint(self.config.parse.constraint).projective

    @property
    def size(self):
        """Number of weight slots of the layout."""
        return int(self.layout[F.LY_SIZE])

    @property
    def theta(self):
        """The float64 weight vector (materialised from the compact weights on first use)."""
        if self._theta is None:
            self._theta = F.dense_vector(self._compact)
        return self._theta

    @theta.setter
    def theta(self, value):
        value = np.ascontiguousarray(value, dtype=np.float64)
        if value.shape != (self.size,):
            raise ModelFileError(f"weight vector has {value.shape[0]} entries, layout needs {self.size}")
        self._theta, self._compact = value, None

    @property
    def labels(self):
        return self.vocabs.labels

    @property
    def fine_tags(self):
        return bool(self.config.features.fine_tags)

    def encode(self, sentence):
        return self.vocabs.encode(sentence)

    def parse(self, sentences, format="auto", **options):
        """`bpparse.parse_sentences` with this model: ``model.parse([["The", "cat", "sat", "."]])``,
        ``model.parse("The cat sat.", format="raw")``; a list of `ParsedSentence`.

        The parser is a layer above this module (docs/design.md §6), so it is reached through the
        package's public API at call time, never imported here.
        """
        import bpparse

        return bpparse.parse_sentences(self, sentences, fmt=format, **options)

    @property
    def weights(self):
        """The `Weights` record the kernels read (views of this model's arrays): the dense vector
        with the gold-feature mask, or the compact store without it (it holds no masked weight)."""
        if self._theta is not None:
            return F.dense_weights(self.fine_tags, self.layout, self.mask, self._theta,
                                   self._label_lists)._replace(arc_limits=self._arc_limits)
        c = self._compact
        if c.label_lists is not self._label_lists or c.arc_limits is not self._arc_limits:
            self._compact = c._replace(label_lists=self._label_lists, arc_limits=self._arc_limits)
        return self._compact

    @weights.setter
    def weights(self, record):
        """Score with the `features.Weights` record ``record`` (a compact store, or training's
        weights in a `features.CompactSpace`); ``theta`` is materialised from it when asked."""
        self._theta, self._compact = None, record

    def hold(self, slots, values):
        """Hold the weights ``values`` (float64) at increasing int64 ``slots`` as a loaded model
        holds its own: rounded as the file stores them, in the compact store (the bundled model:
        16 MB instead of a 303 MB dense vector)."""
        self.weights = F.held_weights(self.fine_tags, self.layout, self.mask,
                                      *_file_arrays(self, values, slots))

    def nonzero_weights(self):
        """Number of nonzero weights (without materialising a compact model's dense vector)."""
        if self._theta is not None or self._compact.dense.shape[0] > 0:
            return int(np.count_nonzero(self.weights.dense))
        c = self._compact
        zero = c.codebook == 0.0  # code 0, and any stored level that is 0
        return int(np.count_nonzero(~zero[c.codes]))

    def describe(self):
        """A dict summarising the model (for `bpparse info`)."""
        nonzero = self.nonzero_weights()
        return {
            "name": self.config.name,
            "format_version": self.format_version,
            "factors": list(self.config.model.factors),
            "train_constraint": self.config.train.constraint,
            "parse_constraint": self.config.parse.constraint,
            "single_root": self.config.model.single_root,
            "labels": len(self.labels),
            # labels an arc may carry, averaged over every (head UPOS, child UPOS, direction)
            "label_filter": (None if self.label_filter is None
                             else round(float(self.label_filter.sum(axis=3).mean()), 1)),
            # (head UPOS, child UPOS, direction) classes whose arcs are scored beyond adjacent ones
            "arc_filter": (None if self.arc_filter is None
                           else int(np.count_nonzero(self.arc_filter))),
            "weights": self.size,
            "nonzero_weights": nonzero,
            "vocabulary": {"forms": len(self.vocabs.vocabs[0]), "upos": len(self.vocabs.vocabs[4]),
                           "xpos": len(self.vocabs.vocabs[5])},
            "tagger": ({name: len(c.tags) for name, c in self.tagger.columns.items()}
                       if self.tagger is not None else None),
            "labeler": self.labeler.info if self.labeler is not None else None,
            "punct": (dict(self.punct.info, hash_bits=self.punct.hash_bits, scale=self.punct.scale)
                      if self.punct is not None else None),
            "reattach": (dict(self.reattach.info, hash_bits=self.reattach.hash_bits,
                              scale=self.reattach.scale) if self.reattach is not None else None),
            "calibration": self.calibration,
            "meta": self.meta,
        }


def check_label_filter(allowed, vocabs, layout, shape_only=False):
    """Raise ValueError unless ``allowed`` (an array, or with ``shape_only`` its shape) is a label
    filter for these vocabularies (UPOS ids, labels) and a layout with labels: bool (U, U, 2, R),
    at least one label for every arc."""
    from bpparse.encode import UPOS

    U = len(vocabs.vocabs[UPOS])
    shape = tuple(allowed if shape_only else allowed.shape)
    if not layout[F.LY_NLAB] or shape != (U, U, 2, len(vocabs.labels)):
        raise ValueError(f"a label filter of shape {shape}, where the model has "
                         f"{U} UPOS ids and {int(layout[F.LY_NLAB])} labels")
    if not shape_only and (allowed.dtype != np.bool_ or not allowed.any(axis=3).all()):
        raise ValueError(f"a label filter of {allowed.dtype} that is not boolean or leaves some arc "
                         "no label")


def check_arc_filter(limits, vocabs, shape_only=False):
    """Raise ValueError unless ``limits`` (an array, or with ``shape_only`` its shape) is an arc
    filter for these vocabularies: int32 (U, U, 2) lengths, none negative."""
    from bpparse.encode import UPOS

    U = len(vocabs.vocabs[UPOS])
    shape = tuple(limits if shape_only else limits.shape)
    if shape != (U, U, 2):
        raise ValueError(f"an arc filter of shape {shape}, where the model has {U} UPOS ids")
    if not shape_only and (limits.dtype != np.int32 or (limits < 0).any()):
        raise ValueError(f"an arc filter of {limits.dtype} that is not int32 or has a negative "
                         "length")


def mask_words(layout):
    """Length (uint64 words) of a gold-feature mask over the LINK+SECOND regions of a layout."""
    return (int(layout[F.LY_LAB_OFF]) >> 6) + 1


def make_model_layout(config, n_labels):
    f = config.features
    if "auto" in (f.fine_tags, f.morph, f.lemma):
        raise ValueError("features.fine_tags, morph and lemma must be resolved (true/false) before "
                         "building a model")
    return F.make_layout(f.hash_bits, f.second_order_hash_bits, f.label_hash_bits,
                         n_labels if config.model.labels else 0, bool(f.fine_tags), f.lemma, f.feats,
                         f.second_order_words, f.morph, f.context_words)


def save_model(model, path):
    """Write a model file (see the module docstring); returns the number of bytes written."""
    if model._theta is None:  # a compact store: no dense vector built (303 MB for the bundled model)
        slots, values = F.stored_entries(model.weights)
        held, codes, labels, codebook = _file_arrays(model, values, slots)
    else:
        held, codes, labels, codebook = _file_arrays(model, model.theta)
    arrays = {}
    tagger_meta = None
    if model.tagger is not None:
        tagger_meta, tagger_arrays = tagger_to_arrays(model.tagger)
        arrays = {_TAGGER_PREFIX + k: v for k, v in tagger_arrays.items()}
    labeler_meta = None
    if model.labeler is not None:
        labeler_meta, labeler_arrays = labeler_to_arrays(model.labeler)
        arrays.update({_LABELER_PREFIX + k: v for k, v in labeler_arrays.items()})
    punct_meta = None
    if model.punct is not None:
        punct_meta, punct_arrays = punct_to_arrays(model.punct)
        arrays.update({_PUNCT_PREFIX + k: v for k, v in punct_arrays.items()})
    reattach_meta = None
    if model.reattach is not None:
        reattach_meta, reattach_arrays = punct_to_arrays(model.reattach)
        arrays.update({_REATTACH_PREFIX + k: v for k, v in reattach_arrays.items()})
    payload = _npz({"held": held, "values": codes, "labels": labels}, dict(
        codebook=codebook, mask=model.mask, **arrays,
        **({} if model.label_filter is None else {"label_filter": model.label_filter}),
        **({} if model.arc_filter is None else {"arc_filter": model.arc_filter})))
    header = {
        "config": model.config.to_dict(),
        "vocabularies": model.vocabs.to_dict(),
        "layout": [int(x) for x in model.layout],
        "size": model.size,
        "meta": model.meta,
    }
    if tagger_meta is not None:
        header["tagger"] = tagger_meta
    if labeler_meta is not None:
        header["labeler"] = labeler_meta
    if punct_meta is not None:
        header["punct"] = punct_meta
    if reattach_meta is not None:
        header["reattach"] = reattach_meta
    if model.calibration is not None:
        header["calibration"] = model.calibration
    head = json.dumps(header, sort_keys=True).encode("utf-8")
    body = b"".join([MAGIC, struct.pack("<I", FORMAT_VERSION), struct.pack("<Q", len(head)), head,
                     struct.pack("<Q", len(payload)), payload])
    data = body + hashlib.sha256(body).digest()
    with open_output(path, binary=True) as fh:  # atomic: a failed write leaves no damaged file
        fh.write(data)
    return len(data)


def write_npy(zf, name, array, method=zipfile.ZIP_STORED):
    """Write ``array`` into the open zip file ``zf`` as member NAME.npy (as `np.load` reads an
    .npz), stored or compressed by ``method``, without a copy of it in memory."""
    info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = method
    with zf.open(info, "w", force_zip64=True) as fh:
        np.lib.format.write_array(fh, np.asanyarray(array), allow_pickle=False)


def _npz(raw, compressed):
    """An .npz archive (bytes) of the arrays of the dicts ``raw``, stored as they are (what loading
    reads on every start: no inflating), and ``compressed`` (deflated)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for arrays, method in ((raw, zipfile.ZIP_STORED), (compressed, zipfile.ZIP_DEFLATED)):
            for name, array in arrays.items():
                write_npy(zf, name, array, method)
    return buf.getvalue()


def read_header(path):
    """(header dict, payload bytes) of a model file, after checking magic, version and checksum."""
    with _open_model_file(path) as (header, payload, _, _):
        return header, payload.read()


class _Window(io.RawIOBase):
    """A read-only, seekable view of bytes [start, start + length) of the open binary file ``fh``:
    the payload of a model file, read by `np.load` member by member, so that loading never holds
    the whole file in memory."""

    def __init__(self, fh, start, length):
        super().__init__()
        self._fh, self._start, self._length, self._pos = fh, start, length, 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self._pos

    def seek(self, offset, whence=io.SEEK_SET):
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._length}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer):
        n = min(len(buffer), self._length - self._pos)
        if n <= 0:
            return 0
        self._fh.seek(self._start + self._pos)
        got = self._fh.readinto(memoryview(buffer)[:n])
        self._pos += got
        return got


@contextlib.contextmanager
def _open_model_file(path):
    """Context of (header dict, payload as a seekable file, checksum bytes, format version) of a
    model file, after checking magic, version, sizes and the checksum (streamed: the file is
    never read into memory whole); raises ModelFileError."""
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        raise ModelFileError(f"{path}: model file not found") from None
    except IsADirectoryError:
        raise ModelFileError(f"{path}: is a directory, not a model file") from None
    except OSError as e:  # permissions, I/O errors
        raise ModelFileError(f"{path}: cannot read the model file: {e.strerror or e}") from None
    with fh:
        try:
            yield _check_model_file(path, fh)
        except OSError as e:
            raise ModelFileError(f"{path}: cannot read the model file: {e.strerror or e}") from None


def _check_model_file(path, fh):
    """What `_open_model_file` yields, from its open file ``fh``."""
    total = os.fstat(fh.fileno()).st_size
    start = fh.read(len(MAGIC) + 12)
    if not start.startswith(MAGIC):
        raise ModelFileError(f"{path}: not a bpparse model file")
    if len(start) < len(MAGIC) + 4:
        raise ModelFileError(f"{path}: truncated model file")
    (version,) = struct.unpack_from("<I", start, len(MAGIC))
    if version not in (1, FORMAT_VERSION):
        raise ModelFileError(f"{path}: model file format version {version}; this bpparse reads "
                             f"version {FORMAT_VERSION} (retrain or use a matching bpparse)")
    if len(start) < len(MAGIC) + 12:
        raise ModelFileError(f"{path}: truncated model file")
    (hlen,) = struct.unpack_from("<Q", start, len(MAGIC) + 4)
    pos = len(start) + hlen + 8  # the payload's first byte
    if pos > total:
        raise ModelFileError(f"{path}: truncated model file ({total} bytes)")
    head = fh.read(hlen)
    (plen,) = struct.unpack("<Q", fh.read(8))
    end = pos + plen
    if total < end + _HASH_LEN:
        raise ModelFileError(f"{path}: truncated model file ({total} bytes)")
    digest = hashlib.sha256(start + head + struct.pack("<Q", plen))
    fh.seek(pos)
    chunk = bytearray(1 << 20)
    view = memoryview(chunk)
    left = plen
    while left:
        got = fh.readinto(view[:min(left, len(chunk))])
        if not got:
            raise ModelFileError(f"{path}: truncated model file")
        digest.update(view[:got])
        left -= got
    checksum = fh.read()
    if total != end + _HASH_LEN or digest.digest() != checksum:
        raise ModelFileError(f"{path}: checksum mismatch: the model file is corrupted")
    try:
        header = json.loads(head.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ModelFileError(f"{path}: malformed model header: {e}") from None
    return header, _Window(fh, pos, plen), checksum, version


def _checked_member(archive, shapes, name, check):
    """The payload array ``name`` (None if the file has none), checked by ``check(x, shape_only)``
    on its shape before it is read and on its values after."""
    if name not in shapes:
        return None
    check(shapes[name], True)
    table = archive[name]
    check(table, False)
    return table


def _payload_shapes(zf):
    """{array name: shape} of the .npy members of the open zip archive ``zf``, read from their
    headers only."""
    shapes = {}
    for member in zf.namelist():
        name = member[:-4] if member.endswith(".npy") else member
        with zf.open(member) as fh:
            version = np.lib.format.read_magic(fh)
            read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                    else np.lib.format.read_array_header_2_0)
            shapes[name] = tuple(int(x) for x in read(fh)[0])
    return shapes


# switches added after model files were written, and what a stored config without one means: the
# file predates it (then off), whatever today's default ("auto" or on)
_BEFORE_THE_SWITCH = {"features.morph": False, "features.lemma": False, "tagger.lexicon": False,
                      "model.label_filter": False}


def load_model(path=None):
    """Load a model file written by `save_model`, or a bundled model by name (None: the default
    bundled model, see `bpparse.bundled`); raises ModelFileError on any problem."""
    from bpparse.bundled import resolve_model

    path, _ = resolve_model(path)
    with _open_model_file(path) as opened:
        return _model_from_file(path, *opened)


def _model_from_file(path, header, payload, checksum, version):
    """The `Model` of a model file opened by `_open_model_file`."""
    from bpparse.encode import Vocabularies

    try:
        stored = header["config"]
        config = Config.from_dict(stored, source=f"{path} (stored config)")
        config = config.replace({key: value for key, value in _BEFORE_THE_SWITCH.items()
                                 if key.split(".")[1] not in stored.get(key.split(".")[0], {})})
        vocabs = Vocabularies.from_dict(header["vocabularies"], config.features.derived_fine)
        size = int(header["size"])
        layout = make_model_layout(config, len(vocabs.labels))
        # every count the file claims is checked against what its config implies before anything
        # is allocated: a corrupted or forged header (checksums are easy to recompute) must not
        # make us allocate what it says
        if size != int(layout[F.LY_SIZE]):
            raise ModelFileError(f"{path}: malformed model file: header says {size} weights, its "
                                 f"config needs {int(layout[F.LY_SIZE])}")
        if size > MAX_WEIGHTS:
            raise ModelFileError(f"{path}: malformed model file: header claims {size:,} weight slots, "
                                 f"a model has at most {MAX_WEIGHTS:,}")
        # fields added later (e.g. LY_SECOND_WORDS) are 0 in files written before them
        stored = header["layout"] + [0] * (layout.shape[0] - len(header["layout"]))
        if [int(x) for x in layout] != stored:
            raise ModelFileError(f"{path}: stored feature layout does not match the stored config")
        archive = np.load(payload)  # reads the zip directory only
        shapes = _payload_shapes(archive.zip)
        compact = _payload_weights(archive, shapes, layout, bool(config.features.fine_tags))
        label_filter = _checked_member(archive, shapes, "label_filter",
                                       lambda t, s: check_label_filter(t, vocabs, layout, s))
        arc_filter = _checked_member(archive, shapes, "arc_filter",
                                     lambda t, s: check_arc_filter(t, vocabs, s))
    except ModelFileError:
        raise
    except Exception as e:  # a header or payload that passed the checksum but is not ours
        raise ModelFileError(f"{path}: malformed model file: {e}") from None
    # what a loaded model reads from its file later, refusing a file that changed since; an
    # absolute path: the same file if the working directory changes
    reread = functools.partial(_read_members, os.path.abspath(path), path, checksum)
    tagger = _load_tagger(path, reread, header.get("tagger"), archive, shapes)
    n_labels = len(vocabs.labels)
    labeler = _load_stage(path, "labeler", _LABELER_PREFIX, header.get("labeler"), archive, shapes,
                          n_labels, lambda m, d, v: labeler_from_arrays(m, d, v, n_labels))
    punct = _load_stage(path, "punctuation stage", _PUNCT_PREFIX, header.get("punct"), archive,
                        shapes, 1, punct_from_arrays)
    reattach = _load_stage(path, "re-attachment stage", _REATTACH_PREFIX, header.get("reattach"),
                           archive, shapes, 1, reattach_from_arrays)
    archive.close()
    mask = functools.partial(_read_mask, path, reread, "held" in shapes)
    model = Model(config, vocabs, None, mask, header.get("meta"), tagger, compact=compact,
                  labeler=labeler, punct=punct, reattach=reattach,
                  calibration=_checked_calibration(path, header.get("calibration")),
                  label_filter=label_filter, arc_filter=arc_filter)
    model.format_version = version
    return model


def _checked_calibration(path, calibration):
    """A model file's calibration record (None if it has none); ModelFileError unless it has a
    head temperature, and its temperatures are numbers in `calibration.TEMPERATURE_RANGE`."""
    if calibration is None:
        return None
    low, high = TEMPERATURE_RANGE
    if not isinstance(calibration, dict):
        calibration = {}
    for key in ("head_temperature", "label_temperature"):
        t = calibration.get(key)
        if t is None and key == "label_temperature":
            continue
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not low <= t <= high:
            raise ModelFileError(f"{path}: malformed model file: {key.replace('_', ' ')} {t!r} is "
                                 f"not a number in [{low}, {high}]")
    return calibration


def _payload_weights(archive, shapes, layout, fine):
    """Compact `features.Weights` of a payload's parser weights: held bits, codes and label codes
    (`features.held_arrays`), or, in files written before them, delta-coded positions and codes
    (or float16 values, before the codebook), which the gold-feature mask filters. The mask is not
    kept, and held bits are checked against it only when `Model.mask` reads it (`_read_mask`):
    parsing never reads it, and inflating it took a fifth of loading the bundled model. Every
    shape is checked against ``layout`` before an array is read; raises ValueError."""
    size, label_off = int(layout[F.LY_SIZE]), int(layout[F.LY_LAB_OFF])
    levels = [(k,) for k in range(1, F.MAX_LEVELS + 1)]
    values_shape = shapes.get("values", ())
    n_values = values_shape[0] if len(values_shape) == 1 else -1
    if "held" in shapes:
        fits = (shapes["held"] == ((label_off + 63) >> 6,) and n_values <= label_off
                and shapes.get("labels") == (size - label_off,) and shapes.get("codebook") in levels)
        names = ("values", "codebook", "held", "labels")
    else:
        fits = (shapes.get("deltas") == (n_values,) and n_values <= size
                and shapes.get("codebook", (1,)) in levels)
        names = ("values", "codebook", "deltas") if "codebook" in shapes else ("values", "deltas")
    if not (fits and n_values >= 0 and shapes.get("mask") in ((0,), (mask_words(layout),))):
        raise ValueError(f"payload arrays {shapes} do not fit {size} weights")
    mask = np.empty(0, dtype=np.uint64) if "held" in names else archive["mask"]
    arrays = {name: archive[name] for name in names}
    values = arrays["values"]
    if "codebook" not in arrays:  # float16 values, quantized here (tens of ms)
        codebook, values = F.quantize_values(values)
    elif arrays["codebook"].dtype != np.float16 or values.dtype != np.uint8:
        raise ValueError(f"weights stored as {values.dtype} codes into a "
                         f"{arrays['codebook'].dtype} codebook")
    else:
        codebook = arrays["codebook"]
    if "held" in arrays:
        held, labels = arrays["held"], arrays["labels"]
        if held.dtype != np.uint64 or labels.dtype != np.uint8:
            raise ValueError(f"held bits stored as {held.dtype}, label codes as {labels.dtype}")
        return F.held_weights(fine, layout, mask, held, values, labels, codebook)
    return F.compact_weights(fine, layout, mask, arrays["deltas"], values, codebook)


def _load_stage(path, what, prefix, meta, archive, shapes, row_width, build):
    """A second stage a model file stores (None if none): the sizes of its delta-coded arrays
    ``prefix`` + deltas / values are checked against its table (2^hash_bits rows of
    ``row_width``) before they are read, then ``build(meta, deltas, values)``; ``what`` names it
    in errors."""
    if meta is None:
        return None
    try:
        n_values = shapes.get(prefix + "deltas")
        bits = int(meta["hash_bits"])
        if n_values is None or shapes.get(prefix + "values") != n_values or \
                not 8 <= bits <= 24 or len(n_values) != 1 or n_values[0] > (row_width << bits):
            raise ValueError(f"{what} payload arrays {n_values} do not fit {bits} hash bits"
                             + (f" and {row_width} labels" if row_width > 1 else ""))
        return build(meta, archive[prefix + "deltas"], archive[prefix + "values"])
    except (ValueError, KeyError, TypeError) as e:
        raise ModelFileError(f"{path}: malformed model file ({what}): {e}") from None


class _TaggerArrays:
    """The tagger's members of a model file's payload, by name without the prefix: the small ones
    (tag restrictions, TAGLINK weights) read at once, the column weights and the lexicon read
    again from the file when first asked for (all together: the columns are needed together, the
    first time some input lacks tags) and handed out once, not kept: what the tagger builds from
    them is all it holds (a second request reads the file again). ``reread``: `_read_members` of
    the file (ModelFileError if it has changed since the model was loaded)."""

    def __init__(self, reread, archive):
        self.reread = reread
        self.names = {m[len(_TAGGER_PREFIX):] for m in archive.files if m.startswith(_TAGGER_PREFIX)}
        self.read = {k: archive[_TAGGER_PREFIX + k] for k in self.names
                     if k.endswith(".allowed") or k.startswith("taglink.")}
        self.unread = self.names - set(self.read)  # read together on the first request

    def __getitem__(self, key):
        if key not in self.read:
            names = sorted(self.unread) if key in self.unread else [key]
            members = self.reread([_TAGGER_PREFIX + k for k in names])
            self.read.update({k: members[_TAGGER_PREFIX + k] for k in names})
            self.unread = set()
        return self.read[key] if key.endswith(".allowed") else self.read.pop(key)

    def get(self, key, default=None):
        return self[key] if key in self.names else default


def _read_members(file, path, checksum, names):
    """{name: array} of the payload members ``names`` of the model file ``file``, read again after
    loading (``path``: its name in errors); raises ModelFileError if the file has changed since
    it was loaded (its checksum is not ``checksum``)."""
    with _open_model_file(file) as (_, payload, now, _):
        if now != checksum:
            raise ModelFileError(f"{path}: the model file has changed since it was loaded: load it "
                                 "again")
        with np.load(payload) as archive:
            return {name: archive[name] for name in names}


def _read_mask(path, reread, held):
    """The gold-feature mask of a model file, read again; with ``held`` (a file that stores held
    bits) checked to hold every one of them (ModelFileError)."""
    arrays = reread(["mask", "held"] if held else ["mask"])
    if not held:
        return arrays["mask"]
    try:
        F.check_held_in_mask(arrays["held"], arrays["mask"])
    except ValueError as e:
        raise ModelFileError(f"{path}: malformed model file: {e}") from None
    return arrays["mask"]


def _load_tagger(path, reread, meta, archive, shapes):
    """The tagger a model file stores (None if none), its claimed sizes checked before allocating;
    ``archive``: the payload's open npz archive, ``reread`` its `_read_members` (see
    `_TaggerArrays`)."""
    if meta is None:
        return None
    try:
        for c in meta["columns"]:
            name = c["name"]
            bits, g = int(c["hash_bits"]), len(c["tags"])
            size = (1 << bits) * g + (g + 1) ** 2 if 8 <= bits <= 26 else -1
            if not 0 < size <= _MAX_TAGGER_WEIGHTS or int(c["size"]) != size:
                raise ModelFileError(f"tagger column {name} claims {c['size']} weights, needs {size}")
            n_values = shapes.get(f"{_TAGGER_PREFIX}{name}.deltas", (-1,))
            if len(n_values) != 1 or not 0 <= n_values[0] <= size or \
                    shapes.get(f"{_TAGGER_PREFIX}{name}.values") != n_values:
                raise ModelFileError(f"tagger column {name}: payload arrays do not fit {size} weights")
        if "lexicon" in meta:
            n = int(meta["lexicon"])
            if any(shapes.get(f"{_TAGGER_PREFIX}lexicon.{k}") != (n,) for k in ("forms", "amb", "top")):
                raise ModelFileError(f"the tagger's lexicon claims {n} words, its arrays do not fit")
        if "taglink" in meta:
            bits = int(meta["taglink"]["hash_bits"])
            n_values = shapes.get(f"{_TAGGER_PREFIX}taglink.deltas", (-1,))
            if not 8 <= bits <= 24 or len(n_values) != 1 or not 0 <= n_values[0] <= 1 << bits or \
                    shapes.get(f"{_TAGGER_PREFIX}taglink.values") != n_values:
                raise ModelFileError(f"taglink: {bits} hash bits and payload arrays do not fit")
        return tagger_from_arrays(meta, _TaggerArrays(reread, archive), source=str(path))
    except ModelFileError as e:
        raise ModelFileError(f"{path}: malformed model file: {e}") from None
    except Exception as e:
        raise ModelFileError(f"{path}: malformed model file (tagger): {e!r}") from None
