"""Model configurations: TOML files (bpparse/configs/*.toml, shipped) plus command-line overrides -> a frozen `Config`.

A config names a model: its factor families, the hard constraint used in training and in parsing
(Smith & Eisner 2008 Table 3), BP iterations and damping, feature hashing and optimiser settings.
The resolved config (every value filled in) is stored in the model file (`Config.to_dict`).

Sections and keys (defaults in `DEFAULTS`)::

    name = "second-order"
    [model]     factors = ["LINK", "GRAND", "SIB", "NOCROSS", "CHILDSEQ"], nocross = "grouped" | "exactly1",
                single_root, labels
    [features]  hash_bits, second_order_hash_bits, label_hash_bits (log2 of region sizes),
                fine_tags = "auto" | true | "derived" | false (fine-tag templates: true reads XPOS,
                "derived" the UPOS with some FEATS values; auto: XPOS when the treebank has it, else
                derived when it has FEATS), lemma = "auto" | true | false
                (auto: with morph, unless the model has a tagger, which does not predict lemmas), feats,
                second_order_words (lexicalised GRAND/SIB templates), context_words (LINK templates
                of the words beside head and child), morph = "auto" | true | false
                (FEATS split into attribute values, agreement, suffix and richer label templates;
                auto: on when the training words carry at least MORPH_AUTO_PAIRS of those attributes
                on average), gold_only, min_count
    [train]     constraint, bp_iterations, damping, tolerance, epochs = "auto" | N (auto: 10 with a
                dev file, which keeps the best; without one, sentences / AUTO_EPOCH_SENTENCES rounded
                up, in 2..10: the best dev epochs of IMST, Bosque and EWT), seed, batch_size, jobs,
                unreachable_gold = "skip" | "projectivize", min_coef, prune, margin (softmax-margin
                training: each wrong arc scores this much more, in log-odds, in the expectations)
    [parse]     constraint, bp_iterations, damping, tolerance, prune

``prune`` > 0 keeps GRAND / SIB factors (and CHILDSEQ's candidate children) only on arcs whose first-order marginal (LINK scores alone,
matrix-tree) is at least ``prune``, plus each word's best head (and the gold arcs in training);
0 keeps every factor.
    [optimizer] method = "adagrad" | "sgd", learning_rate, lr_decay, l2, averaging, adagrad_eps,
                second_order_lr_scale (step of GRAND/SIB/NOCROSS weights relative to learning_rate)
    [tagger]    enabled (train a UPOS/XPOS/FEATS tagger into the model, `bpparse.tagger`), epochs,
                hash_bits (UPOS and XPOS), feats_hash_bits, prune (weights of smaller magnitude are
                dropped: the size of the stored tagger), min_count (feature blocks seen fewer times
                in training get no weights), jackknife (0: the parser trains on gold
                tags; K >= 2: on tags predicted by K taggers, each trained on the other K-1 folds),
                min_update (a weight moves only on gradients larger than this: a sparse tagger),
                lexicon (UPOS reads the tags each word had in training: its ambiguity class)
    [labeler]   enabled (after the parser, train the second-stage labeler that labels each decoded
                tree from the tree around each arc, `bpparse.labeler`; needs model.labels), epochs
                (the best on dev label accuracy is kept), hash_bits (log2 of its rows of R weights),
                learning_rate (AdaGrad), min_update (smaller gradients are not applied: a sparse
                table)
    [punct]     enabled (after the labeler, train the punctuation stage that re-attaches each PUNCT
                word from the decoded tree, `bpparse.punct`; kept only if it helps on dev), epochs
                (averaged perceptron), hash_bits
    [reattach]  enabled (after the labeler, train the stage that re-attaches each non-punctuation
                word from the decoded, labelled tree, `bpparse.reattach`; kept only if it helps on
                dev), epochs (averaged perceptron), hash_bits, candidates (heads considered per
                word: the K most probable by the parser's marginals)

Constraints: "TREE", "PTREE", or the weaker "EXACTLY1", "ATMOST1", "NOT2", each optionally
"+NO2CYCLE". Decoding always outputs a tree (maximum spanning tree over the beliefs, Eisner's
algorithm when the parse constraint is PTREE).
"""
import copy
import dataclasses
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import NamedTuple

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from bpparse.errors import ConfigError
from bpparse.kernels.codes import ATMOST1, CROSS_EXACTLY1, CROSS_GROUPED, EXACTLY1, NO_GLOBAL, TREE

FAMILIES = ("LINK", "GRAND", "SIB", "NOCROSS", "CHILDSEQ")
BASE_CONSTRAINTS = ("TREE", "PTREE", "EXACTLY1", "ATMOST1", "NOT2")
# kernel codes (`bpparse.kernels.codes`) of the constraint names and NOCROSS forms
GLOBAL_CODES = {"TREE": TREE, "PTREE": TREE, "EXACTLY1": EXACTLY1, "ATMOST1": ATMOST1, "NOT2": NO_GLOBAL}
CROSS_MODES = {"grouped": CROSS_GROUPED, "exactly1": CROSS_EXACTLY1}


@dataclass(frozen=True)
class ModelSection:
    factors: tuple = ("LINK",)
    nocross: str = "grouped"
    single_root: bool = True
    labels: bool = True
    # score an arc's labels only among those a training arc with its head and child UPOS and
    # direction had (`features.label_filter`)
    label_filter: bool = True
    # parse only the arcs whose head and child UPOS and direction a training arc had, up to twice
    # the longest such arc, adjacent and ROOT arcs always (`features.arc_limits`)
    arc_filter: bool = False


# keys that may be "auto": resolved from the training data (bpparse.train)
# (a value of the key's type when not "auto")
AUTO_KEYS = {("features", "fine_tags"): False, ("features", "morph"): False, ("features", "lemma"): False,
             ("train", "epochs"): 10}
# the other words such a key may be: features.fine_tags "derived" (UPOS with some FEATS values:
# `encode.derived_fine_tags`; Bosque, without XPOS: +0.5-0.7 test UAS, +0.6 LAS; docs/experiments.md)
AUTO_WORDS = {("features", "fine_tags"): ("derived",)}
# morphology + lemma templates (second-order, dev): IMST (2.7 attribute values a word) +2.0 UAS /
# +3.2 LAS; Bosque (1.7) -0.4 UAS / +0.1 LAS; EWT has 1.3
MORPH_AUTO_PAIRS = 2.0
# best epoch on dev (second-order): IMST (3,435 training sentences) 2-4, Bosque (7,018) 4, EWT
# (12,544) 8: about one epoch per 1,500 sentences
AUTO_EPOCH_SENTENCES = 1500
AUTO_EPOCHS_MAX = 10


@dataclass(frozen=True)
class FeatureSection:
    hash_bits: int = 22
    second_order_hash_bits: int = 18
    label_hash_bits: int = 16
    fine_tags: object = "auto"
    lemma: object = "auto"
    feats: bool = False
    second_order_words: bool = False
    context_words: bool = False
    morph: object = "auto"
    gold_only: bool = True
    min_count: int = 1

    @property
    def derived_fine(self):
        """Whether the fine-tag row holds `encode.derived_fine_tags` (fine_tags "derived")."""
        return self.fine_tags == "derived"


@dataclass(frozen=True)
class TrainSection:
    constraint: str = "TREE"
    bp_iterations: int = 5
    damping: float = 0.0
    tolerance: float = 1e-4
    epochs: object = "auto"
    seed: int = 1
    batch_size: int = 32
    jobs: int = 1
    unreachable_gold: str = "skip"
    min_coef: float = 0.0
    prune: float = 0.0
    margin: float = 0.0


@dataclass(frozen=True)
class ParseSection:
    constraint: str = "TREE"
    bp_iterations: int = 5
    damping: float = 0.0
    tolerance: float = 1e-4
    prune: float = 0.0


@dataclass(frozen=True)
class TaggerSection:
    enabled: bool = False
    epochs: int = 10
    hash_bits: int = 18
    feats_hash_bits: int = 16
    prune: float = 0.0
    min_count: int = 3  # EWT UPOS test 95.31 with 3, 95.17 with 1 (hash_bits 18)
    jackknife: int = 0
    # weights move only on gradients above this (EWT, bits 18 / 15, min_count 3, dev UPOS / test
    # UPOS / size: 1e-3 94.81 / 95.29 / 6.7 MB, 1e-2 94.99 / 95.35 / 4.0 MB, 3e-2 94.93 / 95.26 /
    # 3.0 MB; dense updates: test 95.31 at 18.2 MB; docs/experiments.md)
    min_update: float = 1e-2
    lexicon: bool = True  # the UPOS column reads the training words' tags (EWT test UPOS 95.40 -> 95.62)


@dataclass(frozen=True)
class LabelerSection:
    enabled: bool = True
    epochs: int = 5
    # Bosque dev, second-order parser, LAS 82.31 with its labels: 2^16 rows 84.71, 2^18 84.80,
    # 2^20 84.73 (min_update 1e-2); min_update 0 84.63 (10.1 M nonzero weights), 1e-2 84.77
    # (1.6 M), 5e-2 84.80 (0.69 M), 0.1 84.80 (0.54 M)
    hash_bits: int = 18
    learning_rate: float = 0.1
    min_update: float = 0.05


@dataclass(frozen=True)
class PunctSection:
    enabled: bool = True
    epochs: int = 5
    hash_bits: int = 18


@dataclass(frozen=True)
class ReattachSection:
    enabled: bool = True
    epochs: int = 3
    hash_bits: int = 20
    candidates: int = 4


@dataclass(frozen=True)
class OptimizerSection:
    method: str = "adagrad"
    learning_rate: float = 0.1
    lr_decay: float = 0.0
    l2: float = 0.0
    averaging: bool = True
    adagrad_eps: float = 1e-6
    second_order_lr_scale: float = 0.1


_SECTIONS = {
    "model": ModelSection,
    "features": FeatureSection,
    "train": TrainSection,
    "parse": ParseSection,
    "optimizer": OptimizerSection,
    "tagger": TaggerSection,
    "labeler": LabelerSection,
    "punct": PunctSection,
    "reattach": ReattachSection,
}


@dataclass(frozen=True)
class Config:
    name: str = "unnamed"
    model: ModelSection = field(default_factory=ModelSection)
    features: FeatureSection = field(default_factory=FeatureSection)
    train: TrainSection = field(default_factory=TrainSection)
    parse: ParseSection = field(default_factory=ParseSection)
    optimizer: OptimizerSection = field(default_factory=OptimizerSection)
    tagger: TaggerSection = field(default_factory=TaggerSection)
    labeler: LabelerSection = field(default_factory=LabelerSection)
    punct: PunctSection = field(default_factory=PunctSection)
    reattach: ReattachSection = field(default_factory=ReattachSection)

    @property
    def second_order(self):
        return "GRAND" in self.model.factors or "SIB" in self.model.factors

    @property
    def nocross(self):
        return "NOCROSS" in self.model.factors

    @property
    def childseq(self):
        return "CHILDSEQ" in self.model.factors

    def inference_settings(self, phase, constraint=None, iterations=None, tolerance=None,
                           damping=None, prune=None):
        """`InferenceSettings` of phase "train" or "parse", each value overridable (None keeps
        the config's); out-of-range overrides raise ConfigError."""
        section = getattr(self, phase)
        c = parse_constraint(constraint or section.constraint)
        iterations = section.bp_iterations if iterations is None else int(iterations)
        tolerance = section.tolerance if tolerance is None else float(tolerance)
        damping = section.damping if damping is None else float(damping)
        prune = section.prune if prune is None else float(prune)
        if iterations < 1:
            raise ConfigError("BP iterations must be >= 1")
        if not 0.0 <= damping < 1.0:
            raise ConfigError("damping must be in [0, 1)")
        if not tolerance >= 0.0:
            raise ConfigError("tolerance must be >= 0")
        if not 0.0 <= prune < 1.0:
            raise ConfigError("prune must be in [0, 1)")
        factors = self.model.factors
        return InferenceSettings(
            code=c.code, projective=c.projective, single_root=bool(self.model.single_root),
            not2=c.not2, no2cycle=c.no2cycle, iterations=iterations, tol=float(tolerance),
            damping=float(damping), use_grand="GRAND" in factors, use_sib="SIB" in factors,
            use_cross="NOCROSS" in factors, use_childseq="CHILDSEQ" in factors,
            cross_mode=CROSS_MODES[self.model.nocross],
            prune=float(prune))

    def to_dict(self):
        """Plain dict (TOML/JSON-able) of every value; `Config.from_dict` inverts it."""
        d = dataclasses.asdict(self)
        d["model"]["factors"] = list(self.model.factors)
        return d

    @classmethod
    def from_dict(cls, data, source="config"):
        return _build(data, source)

    def replace(self, overrides):
        """A new Config with dotted-key overrides applied, e.g. {"train.epochs": 3}."""
        return _build(apply_overrides(self.to_dict(), overrides), "overrides")


def apply_overrides(data, overrides):
    """Copy of a config dict with {"section.key": value} (or {"name": value}) overrides set."""
    out = copy.deepcopy(data)
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        if key == "name":
            out["name"] = value
            continue
        section, _, name = key.partition(".")
        if section not in _SECTIONS or not name:
            raise ConfigError(f"unknown config key {key!r} (use section.key, sections: {', '.join(_SECTIONS)})")
        out.setdefault(section, {})[name] = value
    return out


class Constraint(NamedTuple):
    """A parsed constraint: ``base`` in BASE_CONSTRAINTS and whether NO2CYCLE NAND pairs join it."""

    base: str
    no2cycle: bool

    @property
    def code(self):
        """The global factor's kernel code (`bpparse.kernels.codes`); NOT2 is NAND pairs."""
        return GLOBAL_CODES[self.base]

    @property
    def projective(self):
        return self.base == "PTREE"

    @property
    def not2(self):
        return self.base == "NOT2"

    def __str__(self):
        return self.base + ("+NO2CYCLE" if self.no2cycle else "")


def parse_constraint(constraint):
    """The one reader of constraint names (case-insensitive): a `Constraint` (a (base, no2cycle)
    tuple) with base in BASE_CONSTRAINTS."""
    parts = [p.strip().upper() for p in str(constraint).split("+")]
    base, extra = parts[0], parts[1:]
    if base not in BASE_CONSTRAINTS or any(e != "NO2CYCLE" for e in extra) or len(extra) > 1:
        raise ConfigError(
            f"unknown constraint {constraint!r}: expected one of {', '.join(BASE_CONSTRAINTS)}, "
            "optionally followed by '+NO2CYCLE'")
    if extra and base in ("TREE", "PTREE"):
        raise ConfigError(f"constraint {constraint!r}: NO2CYCLE is implied by {base}")
    return Constraint(base, bool(extra))


class InferenceSettings(NamedTuple):
    """What the inference kernels build and run for one sentence (a numba record; build it with
    `Config.inference_settings` so every field has its one type and one compiled specialisation).

    ``code``, ``projective``, ``not2``, ``no2cycle``: the `Constraint`; ``single_root``: ROOT takes
    exactly one child; ``iterations``, ``tol``, ``damping``: BP's schedule; ``use_grand``,
    ``use_sib``, ``use_cross``, ``use_childseq``: the factor families; ``cross_mode``: NOCROSS form
    (`kernels.codes`); ``prune``: first-order marginal threshold for GRAND / SIB / CHILDSEQ factors
    (0: all).
    """

    code: int
    projective: bool
    single_root: bool
    not2: bool
    no2cycle: bool
    iterations: int
    tol: float
    damping: float
    use_grand: bool
    use_sib: bool
    use_cross: bool
    use_childseq: bool
    cross_mode: int
    prune: float

    def first_order(self):
        """The same sentence under LINK + TREE / PTREE alone (exact inference): the fallback for
        over-long sentences."""
        return self._replace(code=TREE, not2=False, no2cycle=False, iterations=1, use_grand=False,
                             use_sib=False, use_cross=False, use_childseq=False)


def _check_type(section, key, value, default, source):
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{source}: {section}.{key} must be true or false, got {value!r}")
    elif isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{source}: {section}.{key} must be an integer, got {value!r}")
    elif isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{source}: {section}.{key} must be a number, got {value!r}")
        value = float(value)
    elif isinstance(default, str):
        if not isinstance(value, str):
            raise ConfigError(f"{source}: {section}.{key} must be a string, got {value!r}")
    return value


def _build(data, source):
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a config is a table of sections")
    unknown = set(data) - set(_SECTIONS) - {"name"}
    if unknown:
        raise ConfigError(f"{source}: unknown section(s) {', '.join(sorted(unknown))}")
    parts = {}
    for section, klass in _SECTIONS.items():
        values = data.get(section, {})
        if not isinstance(values, dict):
            raise ConfigError(f"{source}: [{section}] must be a table")
        defaults = klass()
        known = {f.name for f in dataclasses.fields(klass)}
        bad = set(values) - known
        if bad:
            raise ConfigError(f"{source}: unknown key(s) in [{section}]: {', '.join(sorted(bad))}")
        kwargs = {}
        for key, value in values.items():
            default = getattr(defaults, key)
            if section == "model" and key == "factors":
                if isinstance(value, str):
                    value = [v for v in value.replace(",", "+").split("+") if v]
                if not isinstance(value, (list, tuple)):
                    raise ConfigError(f"{source}: model.factors must be a list of family names")
                value = tuple(str(v).strip().upper() for v in value)
            elif (section, key) in AUTO_KEYS:
                if value != "auto" and value not in AUTO_WORDS.get((section, key), ()):  # else typed
                    value = _check_type(section, key, value, AUTO_KEYS[section, key], source)
            else:
                value = _check_type(section, key, value, default, source)
            kwargs[key] = value
        parts[section] = klass(**kwargs)
    name = data.get("name", "unnamed")
    if not isinstance(name, str):
        raise ConfigError(f"{source}: name must be a string")
    config = Config(name=name, **parts)
    _validate(config, source)
    return config


def _validate(c, source):
    m = c.model
    bad = [f for f in m.factors if f not in FAMILIES]
    if bad:
        raise ConfigError(f"{source}: unknown factor famil(ies) {', '.join(bad)}; known: {', '.join(FAMILIES)}")
    if "LINK" not in m.factors:
        raise ConfigError(f"{source}: model.factors must include LINK")
    if len(set(m.factors)) != len(m.factors):
        raise ConfigError(f"{source}: model.factors lists a family twice")
    if m.nocross not in ("grouped", "exactly1"):
        raise ConfigError(f"{source}: model.nocross must be \"grouped\" or \"exactly1\", got {m.nocross!r}")
    for section in (c.train, c.parse):
        parse_constraint(section.constraint)
        if section.bp_iterations < 1:
            raise ConfigError(f"{source}: bp_iterations must be >= 1")
        if not 0.0 <= section.damping < 1.0:
            raise ConfigError(f"{source}: damping must be in [0, 1)")
        if not 0.0 <= section.prune < 1.0:
            raise ConfigError(f"{source}: prune must be in [0, 1)")
    f = c.features
    for key in ("hash_bits", "second_order_hash_bits", "label_hash_bits"):
        if not 8 <= getattr(f, key) <= 30:
            raise ConfigError(f"{source}: features.{key} must be in 8..30")
    if f.min_count < 1:
        raise ConfigError(f"{source}: features.min_count must be >= 1")
    t = c.train
    if (t.epochs != "auto" and t.epochs < 1) or t.batch_size < 1 or t.jobs < 0:
        raise ConfigError(f"{source}: train.epochs >= 1, train.batch_size >= 1 and train.jobs >= 0 "
                          f"(0: all cores) required")
    if t.unreachable_gold not in ("skip", "projectivize"):
        raise ConfigError(f"{source}: train.unreachable_gold must be \"skip\" or \"projectivize\"")
    if not 0.0 <= t.margin <= 10.0:
        raise ConfigError(f"{source}: train.margin must be in [0, 10]")
    g = c.tagger
    if (g.epochs < 1 or not 10 <= g.hash_bits <= 26 or not 10 <= g.feats_hash_bits <= 26
            or not g.prune >= 0 or g.min_count < 1 or g.jackknife < 0 or g.jackknife == 1
            or not 0 <= g.min_update < 1):
        raise ConfigError(f"{source}: tagger.epochs >= 1, tagger.hash_bits and feats_hash_bits in "
                          f"10..26, tagger.prune >= 0, tagger.min_count >= 1, tagger.min_update in "
                          f"[0, 1) and tagger.jackknife 0 (parser trained on gold tags) or >= 2 "
                          f"folds required")
    b = c.labeler
    if b.epochs < 1 or not 8 <= b.hash_bits <= 24 or not b.learning_rate > 0 or not 0 <= b.min_update < 1:
        raise ConfigError(f"{source}: labeler.epochs >= 1, labeler.hash_bits in 8..24, "
                          f"labeler.learning_rate > 0 and labeler.min_update in [0, 1) required")
    if c.punct.epochs < 1 or not 8 <= c.punct.hash_bits <= 24:
        raise ConfigError(f"{source}: punct.epochs >= 1 and punct.hash_bits in 8..24 required")
    r = c.reattach
    if r.epochs < 1 or not 8 <= r.hash_bits <= 24 or not 1 <= r.candidates <= 16:
        raise ConfigError(f"{source}: reattach.epochs >= 1, reattach.hash_bits in 8..24 and "
                          f"reattach.candidates in 1..16 required")
    o = c.optimizer
    if o.method not in ("adagrad", "sgd"):
        raise ConfigError(f"{source}: optimizer.method must be \"adagrad\" or \"sgd\"")
    if o.learning_rate <= 0 or o.l2 < 0 or o.lr_decay < 0 or o.adagrad_eps <= 0 or o.second_order_lr_scale <= 0:
        raise ConfigError(f"{source}: optimizer values out of range")


def shipped_configs():
    """Names of the configs shipped inside the package (``bpparse/configs/*.toml``)."""
    return sorted(f.name[:-5] for f in resources.files("bpparse.configs").iterdir()
                  if f.name.endswith(".toml"))


def load_config(path, overrides=None):
    """Read a TOML config (a path, or the name of a shipped config such as "second-order", see
    `shipped_configs`) and apply dotted-key overrides; returns a validated frozen `Config`."""
    p = Path(path)
    try:
        if not p.exists() and not p.suffix and p.name in shipped_configs():
            text = resources.files("bpparse.configs").joinpath(f"{p.name}.toml").read_bytes()
        else:
            with open(p, "rb") as fh:
                text = fh.read()
        data = tomllib.loads(text.decode("utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path} (shipped configs: "
                          f"{', '.join(shipped_configs())})") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a config file") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    data.setdefault("name", p.stem)
    return _build(apply_overrides(data, overrides), str(path))


def parse_override(text):
    """("section.key", value) from a "section.key=value" string; the value is read as TOML (a bare
    word that is not TOML is taken as a string)."""
    key, sep, raw = str(text).partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"override {text!r}: expected SECTION.KEY=VALUE")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return key.strip(), value
