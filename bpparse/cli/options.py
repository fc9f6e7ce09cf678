"""Shared pieces of the ``bpparse`` commands: the error path, warnings and the options several
commands take. Heavy modules (numpy, numba, the kernels) are imported inside the commands so that
``bpparse --help`` stays instant."""
import math
from contextlib import contextmanager

import click
from click.core import ParameterSource

from bpparse.errors import BpparseError


class Number(click.FloatRange):
    """`click.FloatRange` that also refuses NaN (which compares false with any bound)."""

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if number is not None and math.isnan(number):
            self.fail("nan is not a number", param, ctx)
        return number


def refuse_unless(ctx, condition, names, needs):
    """Usage error when an option of ``names`` was given on the command line but does not apply
    (``condition`` false); ``needs`` says what would make it apply."""
    if condition:
        return
    for name in names:
        if ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE:
            flag = "--" + name.replace("_", "-")
            raise click.UsageError(f"{flag} applies only with {needs}", ctx)


class CleanError(click.ClickException):
    """A BpparseError on its way out: one line on stderr, exit status 1."""

    exit_code = 1

    def show(self, file=None):
        click.echo(f"bpparse: error: {self.format_message()}", err=True)


@contextmanager
def cli_errors():
    """Map BpparseError (InputError, ConfigError, ModelFileError, ...) to a CleanError."""
    try:
        yield
    except BpparseError as e:
        raise CleanError(str(e)) from None


def warn(message):
    """A non-fatal report on stderr, e.g. for ``read_conll(..., on_warning=warn)``."""
    click.echo(f"bpparse: warning: {message}", err=True)


TEXT_COMMANDS = ("parse", "relax")  # the commands whose --format may be plain text (bpparse.text)


def _text_formats_only_to_parse(ctx, param, value):
    if value in ("text", "raw") and ctx.command.name not in TEXT_COMMANDS:
        raise click.UsageError(f"--format {value} applies only to bpparse parse and relax: "
                               f"{ctx.command.name} reads CoNLL-U or CoNLL-X", ctx)
    return value


format_option = click.option(
    "--format", "fmt", type=click.Choice(["auto", "conllu", "conllx", "text", "raw"]), default="auto",
    show_default=True, callback=_text_formats_only_to_parse,
    help="Input format; auto recognises CoNLL-X by its PHEAD/PDEPREL columns, else reads CoNLL-U; "
         "text: one sentence per line, tokens separated by spaces; raw: untokenised text, split "
         "into sentences and tokens by rule (parse and relax only).")
output_option = click.option(
    "-o", "--output", type=click.Path(dir_okay=False, allow_dash=True), default="-", show_default=True,
    help="Output file (- for stdout; .gz/.xz compress).")
model_option = click.option(
    "-m", "--model", default=None,
    help="Model file or bundled model name  [default: the bundled en_ewt model]")
DECODER_HELP = ("mbr: max spanning tree of the arc marginals; map: of the first-order-plus-message "
                "scores; greedy: each word's most probable head (may not be a tree)")
decoder_option = click.option(
    "--decoder", type=click.Choice(["mbr", "map", "greedy"]), default="mbr", show_default=True,
    help=DECODER_HELP + ".")


def dd_options(f):
    """``--decoder`` with dd, and the options of the dd decoder (`bpparse.parse.DDOptions`)."""
    options = [
        click.option("--decoder", type=click.Choice(["mbr", "map", "greedy", "dd"]), default="mbr",
                     show_default=True,
                     help=DECODER_HELP + "; dd: the model's MAP tree by dual decomposition, exact "
                          "where certified (TREE / PTREE models without NOCROSS)."),
        click.option("--dd-iterations", type=click.IntRange(min=1), default=50, show_default=True,
                     help="With --decoder dd: at most this many iterations a sentence."),
        click.option("--dd-rule", type=click.Choice(["ad3", "polyak", "rush"]), default="ad3",
                     show_default=True,
                     help="With --decoder dd: AD3 (alternating directions, Martins et al. 2015) or "
                          "subgradient steps by Polyak's rule or Rush et al.'s (2010)."),
        click.option("--dd-status", is_flag=True,
                     help="With --decoder dd: add DD=certified or DD=K (K iterations, no "
                          "certificate) to the MISC of each sentence's first word."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


METHOD_HELP = ("iterative: Riedel & Smith (2010) Alg. 1; joint / size / divergence: MinJoint / "
               "MinSize / MinDivergence of Riedel, Smith & McCallum (one shot).")


def auto(value):
    """A relaxed-inference option the user left unset -> "auto": `bpparse.relax.relaxed_settings`
    chooses it by the model."""
    return "auto" if value is None else value


def relax_options(f):
    """The options of relaxed inference (shared by ``relax`` and ``parse --inference relaxed``)."""
    options = [
        click.option("--method", type=click.Choice(["iterative", "joint", "size", "divergence"]),
                     default="iterative", show_default=True, help=METHOD_HELP),
        click.option("--threshold", type=Number(min=0), default=None,
                     help="Gain threshold in nats: ε (iterative, size) or γ (joint); 0 adds every "
                          "factor, inf none.  [default: 0.003 for iterative with a model with "
                          "NOCROSS factors, else 0.0001]"),
        click.option("--max-rounds", type=click.IntRange(min=0), default=None,
                     help="Rounds of factor addition for iterative  [default: 2 for a model with "
                          "NOCROSS factors, else until none is added]"),
        click.option("--bp-iter", type=click.IntRange(min=1), default=None,
                     help="BP iterations per round (one-shot methods: of the final run)  [default: "
                          "3 for a model with NOCROSS factors, else 5]"),
        click.option("--max-factors", type=click.IntRange(min=0), default=100, show_default=True,
                     help="m, the number of factors MinDivergence adds per sentence."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def prune_and_length_options(f):
    """``--prune`` and ``--max-length`` (shared by ``parse`` and ``relax``)."""
    f = click.option("--max-length", type=click.IntRange(min=1), default=100, show_default=True,
                     help="Longer sentences are parsed with first-order inference (and "
                          "reported).")(f)
    return click.option("--prune", type=Number(0, 1, max_open=True),
                        help="Keep GRAND/SIB factors (relax: and the arcs NOCROSS groups join) "
                             "only on arcs whose first-order marginal is at least this (0: all, "
                             "the papers' setting for relaxed inference)  [default: the model's]")(f)


retag_option = click.option(
    "--retag", is_flag=True,
    help="Predict UPOS/XPOS/FEATS with the model's tagger for every word (by default only the tags "
         "the input lacks are predicted and the given ones kept).")
keep_deps_option = click.option(
    "--keep-deps", is_flag=True,
    help="Keep the input's DEPS column (by default a word whose HEAD is rewritten gets DEPS _, since "
         "its enhanced dependencies would contradict the new tree).")


def announce_model(model):
    """Resolve ``-m`` (a path or a bundled name) and say on stderr which model is used; returns the
    path."""
    from bpparse.bundled import resolve_model

    path, bundled = resolve_model(model)
    click.echo(f"bpparse: model {path.stem if bundled else path}" +
               (f" (bundled: {path})" if bundled else ""), err=True)
    return path


def freeze_loaded(model):
    """``model``, with every object made so far (modules, the model) moved out of the garbage
    collector's generations (`gc.freeze`): the collections of a parse then trace only what it
    made since."""
    import gc

    gc.freeze()
    return model


def say(message):
    """A progress line on stderr."""
    click.echo(f"bpparse: {message}", err=True)


def refit_temperatures(model, dev, dev_path, jobs=1):
    """After a command changed a model's trees or labels: fit its temperatures again on the dev
    trees ``dev`` (`bpparse.conll.Sentence` list read from ``dev_path``;
    `bpparse.train.add_calibration`); without dev trees, drop the old ones, which were fitted to
    other probabilities."""
    from bpparse.train import add_calibration

    if dev:
        add_calibration(model, dev, dev_path, jobs=jobs, say=say)
    elif model.calibration is not None:
        model.calibration = None
        say("the model's temperatures were dropped: refit them with `bpparse calibrate`")


def second_stage_inputs(command, section, model_name, train_path, dev_path, out_path, overrides):
    """What ``train-labeler`` and ``train-punct`` start from, after checking that ``out_path`` can
    be written: the model with its config's ``[section]`` enabled and the ``--set`` overrides
    (``section.*`` keys only) applied, its encoded training trees, the dev trees as read and
    encoded (both None without ``dev_path``; read once, so that ``-`` works)."""
    from bpparse.config import parse_override
    from bpparse.conll import check_writable, read_conll
    from bpparse.errors import ConfigError
    from bpparse.model import load_model
    from bpparse.train import read_training_trees

    check_writable(out_path)
    model = load_model(model_name)
    values = dict(parse_override(text) for text in overrides)
    if any(not key.startswith(f"{section}.") for key in values):
        raise ConfigError(f"{command} --set takes {section}.* keys only")
    model.config = model.config.replace({**values, f"{section}.enabled": True})
    sentences, _ = read_training_trees(train_path)
    dev = list(read_conll(dev_path, check_trees=True)) if dev_path else None
    encoded_dev = [model.encode(s) for s in dev] if dev_path else None
    return model, [model.encode(s) for s in sentences], dev, encoded_dev
