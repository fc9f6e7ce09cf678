"""``bpparse train``: train a model from a treebank."""
import sys

import click


@click.command("train")
@click.option("--config", "config_path", required=True,
              help="Model config: a TOML file or a name from configs/ (first-order, second-order, full, ...).")
@click.option("--train", "train_path", required=True, type=click.Path(dir_okay=False),
              help="Training treebank (CoNLL-U/CoNLL-X).")
@click.option("--dev", "dev_path", type=click.Path(dir_okay=False),
              help="Held-out treebank: UAS/LAS after each epoch; the best epoch is kept.")
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False),
              help="Model file to write; OUT.log.jsonl and OUT.ckpt are written beside it.")
@click.option("--epochs", type=click.IntRange(min=1), help="Passes over the data  [default: the config's]")
@click.option("--seed", type=int, help="Shuffling seed  [default: the config's]")
@click.option("--jobs", type=click.IntRange(min=0), help="Parallel chunks per mini-batch (cores; 0: all "
              "cores); the result is fixed by seed and jobs  [default: the config's]")
@click.option("--set", "settings", multiple=True, metavar="SECTION.KEY=VALUE",
              help="Override any config value (TOML syntax), e.g. --set optimizer.learning_rate=0.05.")
@click.option("--resume", is_flag=True, help="Continue from OUT.ckpt (same config and data).")
@click.option("--skip-bad-trees", is_flag=True,
              help="Leave out (and report) training sentences that are not trees (HEAD _, HEAD = "
                   "self, a cycle) instead of stopping at the first.")
@click.option("--progress/--no-progress", default=None, help="Progress bar on stderr  [default: if a terminal]")
def train_command(config_path, train_path, dev_path, out_path, epochs, seed, jobs, settings, resume,
                  skip_bad_trees, progress):
    """Train a parser by stochastic gradient on conditional likelihood with BP gradients.

    Command-line values override the config; the resolved config is stored in the model.
    """
    import numba

    from bpparse.config import load_config, parse_override
    from bpparse.cli.options import say
    from bpparse.parse import thread_count
    from bpparse.train import train

    overrides = dict(parse_override(s) for s in settings)
    # options given on the command line win over --set, which wins over the config file
    given = {"train.epochs": epochs, "train.seed": seed, "train.jobs": jobs}
    overrides.update({key: value for key, value in given.items() if value is not None})
    config = load_config(config_path, overrides)
    numba.set_num_threads(min(thread_count(config.train.jobs), numba.config.NUMBA_NUM_THREADS))
    if progress is None:
        progress = sys.stderr.isatty()
    model = train(config, train_path, out_path, dev_path=dev_path, resume=resume, progress=progress,
                  log=say, skip_bad_trees=skip_bad_trees)
    meta = model.meta
    line = f"bpparse: wrote {out_path} (best epoch {meta['best_epoch']}"
    if meta.get("dev_uas") is not None:
        line += f", dev UAS {meta['dev_uas']:.2f} LAS {meta['dev_las']:.2f}"
    click.echo(line + f", {meta['train_seconds']:.0f} s)", err=True)
