"""``bpparse calibrate``: fit (or refit) a trained model's temperatures on held-out trees."""
import click


@click.command("calibrate")
@click.option("-m", "--model", "model_name", required=True,
              help="A trained model: a model file or a bundled name (en_ewt).")
@click.option("--dev", "dev_path", required=True, type=click.Path(dir_okay=False),
              help="Held-out treebank (CoNLL-U) with gold trees, not the training data.")
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False),
              help="Model file to write (the model with its temperatures).")
@click.option("-j", "--jobs", type=click.IntRange(min=0), default=0, show_default=True,
              help="Threads for parsing DEV (0: every core).")
def calibrate_command(model_name, dev_path, out_path, jobs):
    """Calibrate a model's HeadProb and LabelProb: fit their temperatures on DEV.

    Each word's head distribution (its column of the arc marginals) is raised to 1/T and
    renormalised, and the labeler's label scores are divided by their own T before the softmax;
    each T minimises the Brier score of the chosen heads (labels) on DEV, so that of the words
    given HeadProb 0.8 about 80% are right. Trees and labels do not change. `bpparse train` with
    --dev does this itself; a model with a tagger is calibrated on DEV twice over, with the tags it
    gives and with every tag predicted by the tagger. `bpparse eval --calibration` measures the
    result.
    """
    from bpparse.cli.options import refit_temperatures, say
    from bpparse.conll import check_writable, read_conll
    from bpparse.model import load_model, save_model

    check_writable(out_path)
    model = load_model(model_name)
    refit_temperatures(model, list(read_conll(dev_path, check_trees=True)), dev_path, jobs)
    save_model(model, out_path)
    say(f"wrote {out_path}")
