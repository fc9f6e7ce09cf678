"""``bpparse train-joint``: add joint tagging and parsing (TAGLINK factors) to a trained model."""
import click


@click.command("train-joint")
@click.option("-m", "--model", "model_name", required=True,
              help="A model with a tagger: a model file or a bundled name (en_ewt).")
@click.option("--train", "train_path", required=True, type=click.Path(dir_okay=False),
              help="Training treebank (CoNLL-U) with gold trees and UPOS.")
@click.option("--dev", "dev_path", type=click.Path(dir_okay=False),
              help="Held-out treebank: joint UAS and UPOS after each epoch (tags stripped); the best "
                   "epoch is kept.")
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False),
              help="Model file to write (the model with its TAGLINK weights).")
@click.option("--folds", type=click.IntRange(min=2), default=4, show_default=True,
              help="Jackknife folds: the training sentences are tagged by taggers that did not see them.")
@click.option("--epochs", type=click.IntRange(min=1), default=3, show_default=True)
@click.option("--hash-bits", type=click.IntRange(10, 24), default=20, show_default=True,
              help="log2 of the TAGLINK weight table size.")
@click.option("--max-candidates", type=click.IntRange(1, 8), default=3, show_default=True,
              help="Candidate UPOS a word (its most probable tags under the tagger).")
def train_joint_command(model_name, train_path, dev_path, out_path, folds, epochs, hash_bits,
                        max_candidates):
    """Train TAGLINK factors (Smith & Eisner 2008 §3) for a model with a tagger: BP then tags and
    parses jointly, and `bpparse parse` uses it for words whose UPOS the input lacks.

    The parser and the tagger stay as they are; the TAGLINK weights are fitted on the joint
    conditional likelihood of gold trees and gold UPOS with BP's gradients.
    """
    from bpparse.cli.options import say
    from bpparse.conll import check_writable, read_conll
    from bpparse.errors import ConfigError
    from bpparse.train_joint import train_taglink
    from bpparse.model import load_model, save_model
    from bpparse.train import read_training_trees, tagger_options

    check_writable(out_path)
    model = load_model(model_name)
    if model.tagger is None:
        raise ConfigError(f"{model_name}: this model has no tagger (train it with --set "
                          "tagger.enabled=true)")
    sentences, _ = read_training_trees(train_path)
    dev = list(read_conll(dev_path, check_trees=True)) if dev_path else None
    model.taglink = train_taglink(model, sentences, dev, folds, epochs, hash_bits, say=say,
                                  tagger_options=tagger_options(model.config),
                                  max_candidates=max_candidates)
    model.meta["taglink"] = {"train": str(train_path), "folds": folds, "epochs": epochs}
    save_model(model, out_path)
    say(f"wrote {out_path}")
