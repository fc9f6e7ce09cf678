"""``bpparse train-labeler``: add (or retrain) the second-stage labeler of a trained model."""
import click


@click.command("train-labeler")
@click.option("-m", "--model", "model_name", required=True,
              help="A trained model: a model file or a bundled name (en_ewt).")
@click.option("--train", "train_path", required=True, type=click.Path(dir_okay=False),
              help="Training treebank (CoNLL-U) with gold trees and labels.")
@click.option("--dev", "dev_path", type=click.Path(dir_okay=False),
              help="Held-out treebank: label accuracy after each epoch, the best is kept; dev LAS "
                   "before and after.")
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False),
              help="Model file to write (the model with its labeler).")
@click.option("--set", "overrides", multiple=True, metavar="labeler.KEY=VALUE",
              help="Override a [labeler] value of the model's config, e.g. --set labeler.epochs=8.")
def train_labeler_command(model_name, train_path, dev_path, out_path, overrides):
    """Train the second-stage labeler (`bpparse.labeler`) for a model: each decoded tree's labels
    are then chosen from the tree around each arc (the child's and the head's other dependents).

    The parser stays as it is; `bpparse train` does this itself after training a parser (config
    [labeler]); this command adds it to models trained without it. With --dev the model's
    temperatures (`bpparse calibrate`) are fitted again; without, dropped.
    """
    from bpparse.cli.options import refit_temperatures, say, second_stage_inputs
    from bpparse.errors import ConfigError
    from bpparse.labeler import fit_labeler
    from bpparse.model import save_model
    from bpparse.parse import evaluate_encoded, parse_settings

    model, train, dev_trees, dev = second_stage_inputs("train-labeler", "labeler", model_name,
                                                       train_path, dev_path, out_path, overrides)
    if not model.labels:
        raise ConfigError(f"{model_name}: this model has no labels")
    before = None
    if dev:
        model.labeler, kept = None, model.labeler
        before = evaluate_encoded(model, dev, parse_settings(model))["las"]
        model.labeler = kept
    model.labeler = fit_labeler(model, train, dev, say)
    if dev:
        after = evaluate_encoded(model, dev, parse_settings(model))["las"]
        say(f"dev LAS {before:.2f} with the parser's labels, {after:.2f} with the labeler")
    model.meta["labeler"] = {"train": str(train_path), "dev": str(dev_path) if dev_path else None}
    refit_temperatures(model, dev_trees, dev_path)
    save_model(model, out_path)
    say(f"wrote {out_path}")
