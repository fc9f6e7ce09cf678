"""``bpparse eval``: score predicted trees against gold ones."""
import click

from bpparse.cli.options import format_option


@click.command("eval")
@click.argument("gold", type=click.Path(dir_okay=False, allow_dash=True))
@click.argument("pred", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--punct/--no-punct", default=True, show_default=True,
              help="Count words whose gold UPOS is PUNCT (the CoNLL 2018 evaluation counts them).")
@click.option("--details", is_flag=True, help="Add scores by sentence length and by gold DEPREL.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (scores in percent).")
@format_option
def eval_command(gold, pred, punct, details, as_json, fmt):
    """Score the trees of PRED against GOLD: UAS, LAS, label accuracy, exact match.

    Scores count syntactic words (integer IDs) and are percentages. The two files must have the same
    sentences and words (FORM by FORM); the first difference is an error. GOLD or PRED may be -
    (stdin), e.g. `bpparse parse ... | bpparse eval gold.conllu -`.
    """
    if gold == "-" and pred == "-":
        raise click.UsageError("GOLD and PRED cannot both be - (stdin)")
    import json

    from bpparse.conll import read_conll
    from bpparse.errors import BpparseError
    from bpparse.evaluate import evaluate, format_report

    result = evaluate(read_conll(gold, fmt), read_conll(pred, fmt), punct=punct, details=details)
    if result["sentences"] == 0:
        raise BpparseError(f"{'<stdin>' if gold == '-' else gold}: no sentences to evaluate")
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        click.echo(format_report(result, punct=punct), nl=False)
