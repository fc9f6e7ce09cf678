"""``bpparse train-punct``: add (or retrain) the punctuation stage of a trained model."""
import click


@click.command("train-punct")
@click.option("-m", "--model", "model_name", required=True,
              help="A trained model: a model file or a bundled name (en_ewt).")
@click.option("--train", "train_path", required=True, type=click.Path(dir_okay=False),
              help="Training treebank (CoNLL-U) with gold trees.")
@click.option("--dev", "dev_path", type=click.Path(dir_okay=False),
              help="Held-out treebank: chooses the stage's scale, and the stage is kept only if it "
                   "attaches dev punctuation better than the parser.")
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False),
              help="Model file to write (the model with its punctuation stage).")
@click.option("--set", "overrides", multiple=True, metavar="punct.KEY=VALUE",
              help="Override a [punct] value of the model's config, e.g. --set punct.epochs=8.")
def train_punct_command(model_name, train_path, dev_path, out_path, overrides):
    """Train the punctuation stage (`bpparse.punct`) for a model: each PUNCT word of a decoded
    tree is then re-attached from the tree around it and the parser's marginals.

    The parser and labeler stay as they are; `bpparse train` does this itself (config [punct]);
    this command adds it to models trained without it.
    """
    from bpparse.cli.options import say, second_stage_inputs
    from bpparse.model import save_model
    from bpparse.parse import parse_settings
    from bpparse.train import add_punct

    model, train, dev = second_stage_inputs("train-punct", "punct", model_name, train_path,
                                            dev_path, out_path, overrides)
    add_punct(model, train, dev, parse_settings(model), say=say)
    if model.punct is None:
        say(f"no punctuation stage: {out_path} not written")
        raise SystemExit(1)
    model.meta["punct"] = {"train": str(train_path), "dev": str(dev_path) if dev_path else None}
    save_model(model, out_path)
    say(f"wrote {out_path}")
