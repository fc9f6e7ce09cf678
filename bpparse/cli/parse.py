"""``bpparse parse``: parse CoNLL-U / CoNLL-X files with a model."""
import sys

import click
from click.core import ParameterSource

from bpparse.cli.options import (
    Number,
    announce_model,
    auto,
    cli_errors,
    dd_options,
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


def cluster_options(f):
    """``--cluster`` and the options that apply only with it (`bpparse.distributed`)."""
    options = [
        click.option("--cluster", metavar="ADDRESS|local[:N]",
                     help="Parse on a Dask cluster: a scheduler address (tcp://host:8786) or local:N "
                          "(N worker processes here); needs pip install 'bpparse[dask]'."),
        click.option("--output-dir", type=click.Path(file_okay=False),
                     help="With --cluster: one output per input in DIR (same file name), each "
                          "written atomically."),
        click.option("--resume", is_flag=True,
                     help="With --output-dir: skip inputs whose output is already complete."),
        click.option("--skip-bad", is_flag=True,
                     help="With --cluster: report malformed or untagged sentences and leave them "
                          "out instead of stopping."),
        click.option("--shard-mb", type=Number(min=0, min_open=True), default=2, show_default=True,
                     help="With --cluster: shard size in MB (large files are cut at sentence "
                          "boundaries)."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def check_cluster_options(ctx, inputs, cluster, output_dir):
    """Usage errors for options that do not apply with or without ``--cluster``."""
    refuse_unless(ctx, cluster is not None, ("output_dir", "skip_bad", "shard_mb"), "--cluster")
    refuse_unless(ctx, output_dir is not None, ("resume",), "--output-dir")
    if cluster is None:
        return
    refuse_unless(ctx, False, ("jobs", "marginals_file"), "a local run (without --cluster)")
    if ctx.params["inference"] != "bp":
        raise click.UsageError("--inference relaxed cannot run with --cluster", ctx)
    if output_dir is not None and ctx.get_parameter_source("output") == ParameterSource.COMMANDLINE:
        raise click.UsageError("give -o or --output-dir, not both", ctx)
    if not inputs or "-" in inputs:
        raise click.UsageError("--cluster reads its inputs from files (each worker reads its "
                               "shards): give file paths, not stdin", ctx)
    from bpparse.distributed import require_dask

    with cli_errors():
        require_dask()


@click.command("parse")
@click.argument("inputs", nargs=-1, type=click.Path(dir_okay=False, allow_dash=True))
@model_option
@output_option
@format_option
@dd_options
@click.option("--marginals", is_flag=True,
              help="Add HeadProb=...|LabelProb=... (chosen head's and label's probability) to MISC.")
@click.option("--uncalibrated", is_flag=True,
              help="HeadProb and LabelProb as inferred, without the model's temperatures (fitted "
                   "on dev by training or `bpparse calibrate`).")
@click.option("--marginals-file", type=click.Path(dir_okay=False),
              help="Also write every word's head distribution (the model's marginals, untempered): "
                   ".npz (one array per sentence) or JSON lines.")
@click.option("-j", "--jobs", type=click.IntRange(min=0), default=0, show_default=True,
              help="Threads (0: all cores); the output is the same for any value.")
@click.option("--constraint", help="Parse constraint (TREE, PTREE, EXACTLY1, ...)  [default: the model's]")
@click.option("--iterations", type=click.IntRange(min=1), help="BP iterations  [default: the model's]")
@click.option("--tolerance", type=Number(min=0), help="BP stops when no message moves more "
              "than this  [default: the model's]")
@click.option("--damping", type=Number(0, 1, max_open=True),
              help="BP damping  [default: the model's; with --inference relaxed, as relax's --damping]")
@prune_and_length_options
@click.option("--progress/--no-progress", default=None, help="Progress bar on stderr  [default: if a terminal]")
@click.option("--inference", type=click.Choice(["bp", "relaxed"]), default="bp", show_default=True,
              help="bp: loopy BP on the whole factor graph; relaxed: BP on the factors that matter, "
                   "as `bpparse relax` (one thread).")
@relax_options
@keep_deps_option
@retag_option
@click.option("--tagging", type=click.Choice(["auto", "joint", "pipeline"]), default="auto",
              show_default=True,
              help="Words without UPOS: joint = tagged and parsed together by BP (TAGLINK "
                   "factors, models from `bpparse train-joint`), pipeline = tagged, then parsed; "
                   "auto = joint when the model can.")
@cluster_options
@click.pass_context
def parse_command(ctx, inputs, model, output, fmt, decoder, dd_iterations, dd_rule, dd_status,
                  marginals, uncalibrated, marginals_file, jobs,
                  constraint, iterations, tolerance, damping, prune, max_length, progress, inference,
                  method, threshold, max_rounds, bp_iter, max_factors, keep_deps, retag, tagging,
                  cluster, output_dir, resume, skip_bad, shard_mb):
    """Parse CoNLL-U/CoNLL-X or text INPUTS (default: stdin) and write CoNLL-U.

    HEAD and DEPREL change (and MISC with --marginals); tags the input lacks (UPOS '_', or XPOS /
    FEATS '_' throughout a sentence) are predicted by the model's tagger, all of them with --retag.
    Sentences are written in input order as they are parsed, so any size of input can be piped
    through: `cat big.conllu | bpparse parse - | bpparse eval gold.conllu -`;
    `echo "The cat sat ." | bpparse parse --format text -`.
    """
    import threading

    from bpparse.conll import check_outputs
    from bpparse.model import load_model
    from bpparse.parse import parse_corpus, parse_settings, preload_kernels
    from bpparse.relax import relaxed_settings

    refuse_unless(ctx, inference == "relaxed",
                  ("method", "threshold", "max_rounds", "bp_iter", "max_factors"), "--inference relaxed")
    refuse_unless(ctx, decoder == "dd", ("dd_iterations", "dd_rule", "dd_status"), "--decoder dd")
    refuse_unless(ctx, marginals or marginals_file, ("uncalibrated",), "--marginals or --marginals-file")
    if decoder == "dd" and inference == "relaxed":
        raise click.UsageError("--decoder dd decodes the model's own scores: it cannot run with "
                               "--inference relaxed", ctx)
    check_cluster_options(ctx, inputs, cluster, output_dir)
    inputs = inputs or ("-",)
    check_outputs(inputs, [output, marginals_file])
    path = announce_model(model)
    # numba's cache loads while the model file is read
    preload = threading.Thread(target=preload_kernels, daemon=True)
    preload.start()
    loaded = freeze_loaded(load_model(path))
    preload.join(timeout=3.0)
    if preload.is_alive():  # numba is still loading its cache, or compiling (once: minutes)
        from bpparse import kernel_cache

        click.echo("bpparse: loading the parser's kernels" if kernel_cache.serves_here() else
                   "bpparse: compiling the parser's kernels (first run only, a minute or two)",
                   err=True)
    with cli_errors():
        settings = parse_settings(loaded, constraint, iterations, tolerance, damping, decoder,
                                  max_length, prune, dd_iterations, dd_rule, tagging,
                                  not uncalibrated)
    if progress is None:
        progress = sys.stderr.isatty()
    if inference == "relaxed":
        settings = settings._replace(relax=relaxed_settings(
            settings.inference, method, auto(threshold), auto(max_rounds), auto(bp_iter),
            max_factors, auto(damping)))
    if cluster is not None:
        from bpparse.distributed import parse_on_cluster

        stats = parse_on_cluster(model, inputs, None if output_dir else output, output_dir, cluster,
                                 fmt, settings, marginals, keep_deps, resume, skip_bad, retag,
                                 int(shard_mb * 2**20), progress, warn,
                                 lambda message: click.echo(f"bpparse: {message}", err=True))
        memory = ", ".join(f"{mb:.0f}" for mb in stats["workers"].values())
        click.echo(f"bpparse: {stats['shards']} shards; workers' peak memory (MB): {memory or '-'}"
                   + (f"; {stats['resumed']} inputs already done" if resume else "")
                   + (f"; {stats['skipped']} bad sentences skipped" if skip_bad else ""), err=True)
    else:
        stats = parse_corpus(loaded, inputs, output, fmt, settings, jobs, marginals, marginals_file,
                             on_warning=warn, progress=progress, keep_deps=keep_deps,
                             retag=retag, dd_misc=dd_status)
    rate = stats["sentences"] / max(stats["seconds"], 1e-9)
    click.echo(f"bpparse: {stats['sentences']} sentences, {stats['words']} words in {stats['seconds']:.1f} s "
               f"({rate:.0f} sentences/s)", err=True)
    if stats.get("dd_sentences"):
        done = stats["dd_sentences"]
        click.echo(f"bpparse: dd certified {stats['dd_certified']} of {done} sentences "
                   f"({100.0 * stats['dd_certified'] / done:.1f}%) within {dd_iterations} iterations; "
                   f"{stats['dd_iterations'] / done:.1f} iterations a sentence", err=True)
