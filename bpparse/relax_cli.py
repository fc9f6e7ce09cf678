"""``bpparse relax``: parse like ``bpparse parse`` with relaxed inference (Riedel & Smith 2010).

The command object is `relax_command`; the CLI group registers it with
``cli.add_command(relax_command)``. `relax_options` / `make_inference` let ``bpparse parse
--inference relaxed`` share the same options and code path. Heavy imports stay inside functions so
``bpparse --help`` stays instant.
"""
import sys

import click

METHOD_HELP = ("iterative: Riedel & Smith (2010) Alg. 1; joint / size / divergence: MinJoint / "
               "MinSize / MinDivergence of Riedel, Smith & McCallum (one shot).")


def relax_options(f):
    """The options of relaxed inference (shared by ``relax`` and ``parse --inference relaxed``)."""
    options = [
        click.option("--method", type=click.Choice(["iterative", "joint", "size", "divergence"]),
                     default="iterative", show_default=True, help=METHOD_HELP),
        click.option("--threshold", type=float, default=1e-4, show_default=True,
                     help="Gain threshold in nats: ε (iterative, size) or γ (joint); 0 adds every "
                          "factor, inf none."),
        click.option("--max-rounds", type=click.IntRange(min=0), default=None,
                     help="Rounds of factor addition for iterative  [default: until none is added]"),
        click.option("--bp-iter", type=click.IntRange(min=1), default=5, show_default=True,
                     help="BP iterations per round (one-shot methods: of the final run)."),
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
    return click.option("--prune", type=click.FloatRange(0, 1, max_open=True),
                        help="Keep GRAND/SIB factors only on arcs whose first-order marginal is at "
                             "least this (0: all, the papers' setting for relaxed inference)  "
                             "[default: the model's]")(f)


def make_inference(method, threshold, max_rounds, bp_iter, max_factors, report=None, damping=0.0):
    """The parse pipeline's ``inference`` hook for these options (`bpparse.relax.relaxed_inference`)."""
    from bpparse.relax import relaxed_inference

    return relaxed_inference(method, threshold, max_rounds, bp_iter, max_factors, report, damping)


@click.command("relax")
@click.argument("inputs", nargs=-1, type=click.Path(dir_okay=False, allow_dash=True))
@click.option("-m", "--model", default=None,
              help="Model file or bundled model name  [default: the bundled en_ewt model]")
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True), default="-",
              show_default=True, help="Output file (- for stdout; .gz/.xz compress).")
@click.option("--format", "fmt", type=click.Choice(["auto", "conllu", "conllx"]), default="auto",
              show_default=True, help="Input format (as for parse).")
@click.option("--decoder", type=click.Choice(["mbr", "map", "greedy"]), default="mbr",
              show_default=True, help="As for parse.")
@click.option("--marginals", is_flag=True, help="Add HeadProb/LabelProb to MISC (as for parse).")
@click.option("--marginals-file", type=click.Path(dir_okay=False),
              help="Also write every word's head distribution (one INPUT only).")
@click.option("--constraint", help="Parse constraint  [default: the model's]")
@click.option("--iterations", type=click.IntRange(min=1), default=10, show_default=True,
              help="Iterations (at most) of the full-BP baseline of --compare-full (Riedel & "
                   "Smith's 'BP (10 iterations)'); relaxed BP uses --bp-iter.")
@click.option("--tolerance", type=click.FloatRange(min=0),
              help="BP stops when no message moves more than this  [default: the model's]")
@click.option("--damping", type=click.FloatRange(0, 1, max_open=True), default=0.0,
              show_default=True,
              help="BP damping of relaxed BP (its graph holds a few % of the factors and hardly "
                   "loops).")
@click.option("--full-damping", type=click.FloatRange(0, 1, max_open=True),
              help="Damping of the full-BP baseline of --compare-full  [default: the model's]")
@prune_and_length_options
@relax_options
@click.option("--report", is_flag=True,
              help="Per INPUT on stderr: % of second-order factors used, rounds, mean KL bound, "
                   "inference time per sentence.")
@click.option("--compare-full", is_flag=True,
              help="With --report: also run full BP; marginal error (mean, max) and UAS of both "
                   "against the input's HEAD column (Riedel & Smith 2010, Table 2).")
@click.option("--progress/--no-progress", default=None, help="Progress bar on stderr")
def relax_command(inputs, model, output, fmt, decoder, marginals, marginals_file, constraint,
                  iterations, tolerance, damping, full_damping, prune, max_length, method, threshold,
                  max_rounds, bp_iter, max_factors, report, compare_full, progress):
    """Parse INPUTS (default: stdin) like `bpparse parse`, with relaxed marginal inference: BP on
    LINK + TREE plus only the second-order factors whose gain reaches --threshold.

    The output is CoNLL-U exactly as `bpparse parse` writes it. Sentences are parsed one at a time
    (--jobs does not apply).
    """
    from bpparse.bundled import resolve_model
    from bpparse.cli import warn
    from bpparse.conll import open_output
    from bpparse.model import load_model
    from bpparse.parse import parse_corpus, parse_settings
    from bpparse.relax import RelaxReport

    inputs = inputs or ("-",)
    if marginals_file and len(inputs) > 1:
        raise click.UsageError("--marginals-file takes one INPUT")
    if compare_full and not report:
        raise click.UsageError("--compare-full needs --report")
    if method == "divergence" and max_factors is None:
        raise click.UsageError("--method divergence needs --max-factors")
    path, bundled = resolve_model(model)
    click.echo(f"bpparse: model {path.stem if bundled else path}" +
               (f" (bundled: {path})" if bundled else ""), err=True)
    loaded = load_model(path)
    settings = parse_settings(loaded, constraint, iterations, tolerance, full_damping, decoder,
                              max_length, prune)
    if progress is None:
        progress = sys.stderr.isatty()
    with open_output(output) as out:
        for name in inputs:
            stats = RelaxReport(compare_full, iterations) if report else None
            hook = make_inference(method, threshold, max_rounds, bp_iter, max_factors, stats,
                                  damping)
            done = parse_corpus(loaded, (name,), out, fmt, settings, 1, marginals, marginals_file,
                                inference=hook, on_warning=warn, progress=progress)
            label = "<stdin>" if name == "-" else name
            if stats is not None:
                click.echo(f"bpparse: relax: {stats.format(label)}", err=True)
            rate = done["sentences"] / max(done["seconds"], 1e-9)
            click.echo(f"bpparse: {label}: {done['sentences']} sentences, {done['words']} words in "
                       f"{done['seconds']:.1f} s ({rate:.0f} sentences/s)", err=True)
