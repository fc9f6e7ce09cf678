"""The ``bpparse`` command line: a click group, one small function per subcommand.

Adding a command: decorate a function with ``@cli.command()``, import heavy modules (numpy, numba,
the kernels) inside it so ``bpparse --help`` stays instant, reuse ``format_option`` /
``output_option``, and raise ``BpparseError`` (or let library code raise it): the group turns it into
``bpparse: error: <file>:<line>: <problem>`` on stderr and exit status 1, without a traceback
(``cli_errors``). ``main`` makes a closed stdout pipe (``bpparse ... | head``) exit quietly.
"""
import os
import sys
from contextlib import contextmanager

import click

from bpparse._version import __version__
from bpparse.errors import BpparseError
from bpparse.relax_cli import (make_inference, prune_and_length_options, relax_command,
                                relax_options)


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


class BpparseGroup(click.Group):
    def invoke(self, ctx):
        with cli_errors():
            return super().invoke(ctx)


format_option = click.option(
    "--format", "fmt", type=click.Choice(["auto", "conllu", "conllx"]), default="auto", show_default=True,
    help="Input format; auto recognises CoNLL-X by its PHEAD/PDEPREL columns, else reads CoNLL-U.")
output_option = click.option(
    "-o", "--output", type=click.Path(dir_okay=False, allow_dash=True), default="-", show_default=True,
    help="Output file (- for stdout; .gz/.xz compress).")


@click.group(cls=BpparseGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="bpparse", message="%(prog)s %(version)s")
def cli():
    """bpparse: dependency parsing by loopy belief propagation with global tree constraints.

    Files are CoNLL-U (or CoNLL-X); - reads stdin. Run `bpparse COMMAND --help` for each command.
    """


@cli.command("eval")
@click.argument("gold", type=click.Path(dir_okay=False, allow_dash=True))
@click.argument("pred", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--punct/--no-punct", default=True, show_default=True,
              help="Count words whose gold UPOS is PUNCT (the CoNLL 2018 evaluation counts them).")
@click.option("--details", is_flag=True, help="Add scores by sentence length and by gold DEPREL.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (scores in percent).")
@format_option
def eval_command(gold, pred, punct, details, as_json, fmt):
    """Score the trees of PRED against GOLD: UAS, LAS, label accuracy, exact match.

    Scores count syntactic words (integer IDs) and are percentages. The two files must have the same
    sentences and words (FORM by FORM); the first difference is an error. GOLD or PRED may be -
    (stdin), e.g. `bpparse parse ... | bpparse eval gold.conllu -`.
    """
    if gold == "-" and pred == "-":
        raise click.UsageError("GOLD and PRED cannot both be - (stdin)")
    import json

    from bpparse.conll import read_conll
    from bpparse.evaluate import evaluate, format_report

    result = evaluate(read_conll(gold, fmt), read_conll(pred, fmt), punct=punct, details=details)
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        click.echo(format_report(result, punct=punct), nl=False)


@cli.command("check")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--trees/--no-trees", default=True, show_default=True,
              help="Also require complete trees (no HEAD _, no HEAD = self, no cycle), as training does.")
@format_option
def check_command(files, trees, fmt):
    """Validate CoNLL-U/CoNLL-X FILES and count their sentences and words.

    Stops at the first malformed line with `FILE:LINE: problem` and exit status 1. Sentences with
    several roots are accepted and reported as warnings.
    """
    from bpparse.conll import read_conll

    for path in files:
        sentences = words = 0
        several_roots = []
        for sentence in read_conll(path, fmt, check_trees=trees, on_warning=several_roots.append):
            sentences += 1
            words += sentence.n
        for message in several_roots:
            warn(message)
        name = "<stdin>" if path == "-" else path
        line = f"{name}: {sentences} sentences, {words} words"
        if trees:
            line += f", {len(several_roots)} with several roots"
        click.echo(line)


@cli.command("parse")
@click.argument("inputs", nargs=-1, type=click.Path(dir_okay=False, allow_dash=True))
@click.option("-m", "--model", default=None,
              help="Model file or bundled model name  [default: the bundled en_ewt model]")
@output_option
@format_option
@click.option("--decoder", type=click.Choice(["mbr", "map", "greedy"]), default="mbr", show_default=True,
              help="mbr: max spanning tree of the arc marginals; map: of the first-order-plus-message "
                   "scores; greedy: each word's most probable head (may not be a tree).")
@click.option("--marginals", is_flag=True,
              help="Add HeadProb=...|LabelProb=... (chosen head's and label's probability) to MISC.")
@click.option("--marginals-file", type=click.Path(dir_okay=False),
              help="Also write every word's head distribution: .npz (one array per sentence) or JSON lines.")
@click.option("-j", "--jobs", type=click.IntRange(min=0), default=0, show_default=True,
              help="Threads (0: all cores); the output is the same for any value.")
@click.option("--constraint", help="Parse constraint (TREE, PTREE, EXACTLY1, ...)  [default: the model's]")
@click.option("--iterations", type=click.IntRange(min=1), help="BP iterations  [default: the model's]")
@click.option("--tolerance", type=click.FloatRange(min=0), help="BP stops when no message moves more "
              "than this  [default: the model's]")
@click.option("--damping", type=click.FloatRange(0, 1, max_open=True),
              help="BP damping  [default: the model's; 0 with --inference relaxed]")
@prune_and_length_options
@click.option("--progress/--no-progress", default=None, help="Progress bar on stderr  [default: if a terminal]")
@click.option("--inference", type=click.Choice(["bp", "relaxed"]), default="bp", show_default=True,
              help="bp: loopy BP on the whole factor graph; relaxed: BP on the factors that matter, "
                   "as `bpparse relax` (one thread).")
@relax_options
def parse_command(inputs, model, output, fmt, decoder, marginals, marginals_file, jobs, constraint,
                  iterations, tolerance, damping, prune, max_length, progress, inference, method,
                  threshold, max_rounds, bp_iter, max_factors):
    """Parse POS-tagged CoNLL-U/CoNLL-X INPUTS (default: stdin) and write CoNLL-U.

    Only HEAD and DEPREL change (and MISC with --marginals). Sentences are written in input order as
    they are parsed, so any size of input can be piped through: `cat big.conllu | bpparse parse - |
    bpparse eval gold.conllu -`.
    """
    import threading

    from bpparse.bundled import resolve_model
    from bpparse.model import load_model
    from bpparse.parse import parse_corpus, parse_settings, preload_kernels

    path, bundled = resolve_model(model)
    name = path.stem if bundled else str(path)
    click.echo(f"bpparse: model {name}" + (f" (bundled: {path})" if bundled else ""), err=True)
    # numba's cache loads while the model file is read
    preload = threading.Thread(target=preload_kernels, daemon=True)
    preload.start()
    loaded = load_model(path)
    preload.join(timeout=3.0)
    if preload.is_alive():  # no JIT cache yet: compiling takes a while, once
        click.echo("bpparse: compiling the parser's kernels (first run only, a minute or two)", err=True)
    settings = parse_settings(loaded, constraint, iterations, tolerance, damping, decoder, max_length,
                              prune)
    if progress is None:
        progress = sys.stderr.isatty()
    hook = None
    if inference == "relaxed":
        hook = make_inference(method, threshold, max_rounds, bp_iter, max_factors,
                              damping=0.0 if damping is None else damping)
        jobs = 1
    stats = parse_corpus(loaded, inputs or ("-",), output, fmt, settings, jobs, marginals, marginals_file,
                         inference=hook, on_warning=warn, progress=progress)
    rate = stats["sentences"] / max(stats["seconds"], 1e-9)
    click.echo(f"bpparse: {stats['sentences']} sentences, {stats['words']} words in {stats['seconds']:.1f} s "
               f"({rate:.0f} sentences/s)", err=True)


cli.add_command(relax_command)


@cli.command("train")
@click.option("--config", "config_path", required=True,
              help="Model config: a TOML file or a name from configs/ (first-order, second-order, full, ...).")
@click.option("--train", "train_path", required=True, type=click.Path(dir_okay=False),
              help="Training treebank (CoNLL-U/CoNLL-X).")
@click.option("--dev", "dev_path", type=click.Path(dir_okay=False),
              help="Held-out treebank: UAS/LAS after each epoch; the best epoch is kept.")
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False),
              help="Model file to write; OUT.log.jsonl and OUT.ckpt are written beside it.")
@click.option("--epochs", type=click.IntRange(min=0), help="Passes over the data  [default: the config's]")
@click.option("--seed", type=int, help="Shuffling seed  [default: the config's]")
@click.option("--jobs", type=click.IntRange(min=1), help="Parallel chunks per mini-batch (cores); the "
              "result is fixed by seed and jobs  [default: the config's]")
@click.option("--set", "settings", multiple=True, metavar="SECTION.KEY=VALUE",
              help="Override any config value (TOML syntax), e.g. --set optimizer.learning_rate=0.05.")
@click.option("--resume", is_flag=True, help="Continue from OUT.ckpt (same config and data).")
@click.option("--progress/--no-progress", default=None, help="Progress bar on stderr  [default: if a terminal]")
def train_command(config_path, train_path, dev_path, out_path, epochs, seed, jobs, settings, resume, progress):
    """Train a parser by stochastic gradient on conditional likelihood with BP gradients.

    Command-line values override the config; the resolved config is stored in the model.
    """
    import numba

    from bpparse.config import load_config, parse_override
    from bpparse.train import train

    overrides = dict(parse_override(s) for s in settings)
    overrides.update({"train.epochs": epochs, "train.seed": seed, "train.jobs": jobs})
    config = load_config(config_path, overrides)
    numba.set_num_threads(min(config.train.jobs, numba.config.NUMBA_NUM_THREADS))
    if progress is None:
        progress = sys.stderr.isatty()
    model = train(config, train_path, out_path, dev_path=dev_path, resume=resume, progress=progress,
                  log=lambda message: click.echo(f"bpparse: {message}", err=True))
    meta = model.meta
    line = f"bpparse: wrote {out_path} (best epoch {meta['best_epoch']}"
    if meta.get("dev_uas") is not None:
        line += f", dev UAS {meta['dev_uas']:.2f} LAS {meta['dev_las']:.2f}"
    click.echo(line + f", {meta['train_seconds']:.0f} s)", err=True)


@cli.command("info")
@click.argument("model_path", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def info_command(model_path, as_json):
    """Describe a model file: config, training data, dev scores, size."""
    import json

    from bpparse.model import load_model

    model = load_model(model_path)
    d = model.describe()
    d["file_bytes"] = os.path.getsize(model_path)
    d["config"] = model.config.to_dict()
    if as_json:
        click.echo(json.dumps(d, indent=2))
        return
    meta = d["meta"]
    click.echo(f"model      {model_path} ({d['file_bytes'] / 1e6:.1f} MB, format {d['format_version']})")
    click.echo(f"config     {d['name']}: {'+'.join(d['factors'])}, train {d['train_constraint']}, "
               f"parse {d['parse_constraint']}, single root {d['single_root']}")
    click.echo(f"weights    {d['nonzero_weights']:,} nonzero of {d['weights']:,}; {d['labels']} labels; "
               f"{d['vocabulary']['forms']:,} forms")
    if meta:
        click.echo(f"trained on {meta.get('train_file')} ({meta.get('train_sentences')} sentences), "
                   f"{meta.get('epochs_run')} epochs, best epoch {meta.get('best_epoch')}, "
                   f"{meta.get('train_seconds')} s")
        if meta.get("dev_uas") is not None:
            click.echo(f"dev        {meta.get('dev_file')}: UAS {meta['dev_uas']:.2f} LAS {meta['dev_las']:.2f}")
        gold = meta.get("gold") or {}
        dropped = {k: v for k, v in gold.items() if k not in ("sentences", "ok") and v}
        if dropped:
            click.echo("gold trees " + ", ".join(f"{k} {v}" for k, v in dropped.items()))


def _silence_stdout():
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def main(argv=None):
    """Console-script entry point. A reader that closed the pipe (``| head``) ends us quietly, status 1."""
    try:
        try:
            cli.main(args=argv, prog_name="bpparse")
        finally:
            sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        sys.exit(1)
