"""``bpparse check``: validate CoNLL-U / CoNLL-X files."""
import click

from bpparse.cli.options import format_option, warn


@click.command("check")
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
