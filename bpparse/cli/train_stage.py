"""``bpparse train-punct`` and ``bpparse train-reattach``: add (or retrain) a tree-reading stage
that re-attaches words of a trained model's decoded trees."""
import click


def _stage_command(name, section, attribute, adder, what, summary):
    @click.command(name, help=f"""Train the {what} (`bpparse.{section}`) for a model: {summary}

    The parser and labeler stay as they are; `bpparse train` does this itself (config
    [{section}]); this command adds it to models trained without it. With --dev the model's
    temperatures (`bpparse calibrate`) are fitted again; without, dropped.""")
    @click.option("-m", "--model", "model_name", required=True,
                  help="A trained model: a model file or a bundled name (en_ewt).")
    @click.option("--train", "train_path", required=True, type=click.Path(dir_okay=False),
                  help="Training treebank (CoNLL-U) with gold trees.")
    @click.option("--dev", "dev_path", type=click.Path(dir_okay=False),
                  help="Held-out treebank: chooses the stage's scale, and the stage is kept only "
                       "if it attaches dev words better than the parser.")
    @click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False),
                  help=f"Model file to write (the model with its {what}).")
    @click.option("--set", "overrides", multiple=True, metavar=f"{section}.KEY=VALUE",
                  help=f"Override a [{section}] value of the model's config, e.g. "
                       f"--set {section}.epochs=8.")
    def command(model_name, train_path, dev_path, out_path, overrides):
        from bpparse import train
        from bpparse.cli.options import refit_temperatures, say, second_stage_inputs
        from bpparse.model import save_model
        from bpparse.parse import parse_settings

        model, sentences, dev_trees, dev = second_stage_inputs(name, section, model_name,
                                                               train_path, dev_path, out_path,
                                                               overrides)
        getattr(train, adder)(model, sentences, dev, parse_settings(model), say=say)
        if getattr(model, attribute) is None:
            say(f"no {what}: {out_path} not written")
            raise SystemExit(1)
        model.meta[section] = {"train": str(train_path),
                               "dev": str(dev_path) if dev_path else None}
        refit_temperatures(model, dev_trees, dev_path)
        save_model(model, out_path)
        say(f"wrote {out_path}")

    return command


train_punct_command = _stage_command(
    "train-punct", "punct", "punct", "add_punct", "punctuation stage",
    "each PUNCT word of a decoded tree is then re-attached from the tree around it and the "
    "parser's marginals.")
train_reattach_command = _stage_command(
    "train-reattach", "reattach", "reattach", "add_reattach", "re-attachment stage",
    "each other word of a decoded tree (the root word excepted) then chooses its head again "
    "among the parser's most probable ones, reading the labelled tree around it (a head's other "
    "dependents, its own, verbs in between, crossing arcs).")
