"""``bpparse relax``: parse like ``bpparse parse`` with relaxed inference (Riedel & Smith 2010)."""
import sys

import click
from click.core import ParameterSource

from bpparse.cli.options import (
    Number,
    announce_model,
    auto,
    decoder_option,
    format_option,
    freeze_loaded,
    keep_deps_option,
    model_option,
    output_option,
    prune_and_length_options,
    refuse_unless,
    relax_options,
    retag_option,
    warn,
)


# the options that ask for relaxed BP where the defaults would run full BP
RELAXATION_OPTIONS = ("method", "threshold", "max_rounds", "bp_iter", "max_factors", "damping")


@click.command("relax")
@click.argument("inputs", nargs=-1, type=click.Path(dir_okay=False, allow_dash=True))
@model_option
@output_option
@format_option
@decoder_option
@click.option("--marginals", is_flag=True, help="Add HeadProb/LabelProb to MISC (as for parse).")
@click.option("--marginals-file", type=click.Path(dir_okay=False),
              help="Also write every word's head distribution (one INPUT only).")
@click.option("-j", "--jobs", type=click.IntRange(min=0), default=0, show_default=True,
              help="Threads (0: all cores); the output is the same for any value. --report runs "
                   "one.")
@click.option("--constraint", help="Parse constraint  [default: the model's]")
@click.option("--iterations", type=click.IntRange(min=1), default=10, show_default=True,
              help="Iterations (at most) of the full-BP baseline of --compare-full (Riedel & "
                   "Smith's 'BP (10 iterations)'); relaxed BP uses --bp-iter.")
@click.option("--tolerance", type=Number(min=0),
              help="BP stops when no message moves more than this  [default: the model's]")
@click.option("--damping", type=Number(0, 1, max_open=True),
              help="BP damping of relaxed BP  [default: 0.3 for a model with NOCROSS factors, "
                   "else 0: the relaxed graph holds a few % of the GRAND/SIB factors and hardly "
                   "loops]")
@click.option("--full-damping", type=Number(0, 1, max_open=True),
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
@keep_deps_option
@retag_option
@click.pass_context
def relax_command(ctx, inputs, model, output, fmt, decoder, marginals, marginals_file, jobs,
                  constraint, iterations, tolerance, damping, full_damping, prune, max_length, method,
                  threshold, max_rounds, bp_iter, max_factors, report, compare_full, progress,
                  keep_deps, retag):
    """Parse INPUTS (default: stdin) like `bpparse parse`, with relaxed marginal inference: BP on
    LINK + TREE plus only the second-order factors whose gain reaches --threshold.

    For a model without NOCROSS factors the defaults run full BP, as `bpparse parse` does
    (relaxation did not pay there); any relaxation option or --report asks for relaxed BP.
    The output is CoNLL-U exactly as `bpparse parse` writes it.
    """
    from bpparse.conll import check_outputs, open_output
    from bpparse.model import load_model
    from bpparse.parse import parse_corpus, parse_settings
    from bpparse.relax import RelaxReport, relaxed_inference, relaxed_settings

    inputs = inputs or ("-",)
    if marginals_file and len(inputs) > 1:
        raise click.UsageError("--marginals-file takes one INPUT")
    if compare_full and not report:
        raise click.UsageError("--compare-full needs --report")
    refuse_unless(ctx, compare_full, ("iterations", "full_damping"), "--compare-full")
    refuse_unless(ctx, method == "iterative", ("max_rounds",), "--method iterative")
    refuse_unless(ctx, method == "divergence", ("max_factors",), "--method divergence")
    check_outputs(inputs, [output, marginals_file])
    loaded = freeze_loaded(load_model(announce_model(model)))
    relaxed = "NOCROSS" in loaded.config.model.factors or report or any(
        ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE for name in RELAXATION_OPTIONS)
    if relaxed:
        settings = parse_settings(loaded, constraint, iterations, tolerance, full_damping, decoder,
                                  max_length, prune)
        options = (method, auto(threshold), auto(max_rounds), auto(bp_iter), max_factors)
        damping = auto(damping)
        if not report:  # in the parse kernels; the report needs each sentence's graph, in Python
            settings = settings._replace(relax=relaxed_settings(settings.inference, *options,
                                                                damping))
    else:
        # without NOCROSS, pruning already leaves BP a few % of the second-order factors: relaxed
        # BP was slower than full BP there and less accurate (the bundled model: 1.9-2.2 s against
        # 1.7 s on EWT test, UAS 90.01 against 90.12; docs/benchmarks.md), so the defaults run
        # full BP with the model's own settings, as `bpparse parse` does
        click.echo("bpparse: relax: the model has no NOCROSS factors, where relaxation does not "
                   "pay: full BP with the model's settings (a relaxation option asks for relaxed "
                   "BP)", err=True)
        settings = parse_settings(loaded, constraint, None, tolerance, None, decoder, max_length,
                                  prune)
    if progress is None:
        progress = sys.stderr.isatty()
    with open_output(output) as out:
        for name in inputs:
            stats = hook = None
            if report:
                stats = RelaxReport(compare_full, iterations)
                hook = relaxed_inference(*options, stats, damping)
            done = parse_corpus(loaded, (name,), out, fmt, settings, 1 if report else jobs,
                                marginals, marginals_file, inference=hook, on_warning=warn,
                                progress=progress, keep_deps=keep_deps, retag=retag)
            label = "<stdin>" if name == "-" else name
            if stats is not None:
                click.echo(f"bpparse: relax: {stats.format(label)}", err=True)
            rate = done["sentences"] / max(done["seconds"], 1e-9)
            click.echo(f"bpparse: {label}: {done['sentences']} sentences, {done['words']} words in "
                       f"{done['seconds']:.1f} s ({rate:.0f} sentences/s)", err=True)
