"""``bpparse eval``: score predicted trees against gold ones."""
import click

from bpparse.cli.options import format_option, refuse_unless


@click.command("eval")
@click.argument("gold", type=click.Path(dir_okay=False, allow_dash=True))
@click.argument("pred", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--punct/--no-punct", default=True, show_default=True,
              help="Count words whose gold UPOS is PUNCT (the CoNLL 2018 evaluation counts them).")
@click.option("--details", is_flag=True, help="Add scores by sentence length and by gold DEPREL.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (scores in percent).")
@click.option("--calibration", is_flag=False, flag_value="", default=None, metavar="[FILE]",
              help="Also assess HeadProb/LabelProb/UposProb of PRED (from `parse --marginals`): "
                   "ECE, Brier score, reliability table; with FILE (.svg, .html, or .png through "
                   "matplotlib: pip install 'bpparse[plots]') the reliability diagram.")
@click.option("--bins", type=click.IntRange(2, 100), default=10, show_default=True,
              help="Equal-width confidence bins of --calibration.")
@format_option
@click.pass_context
def eval_command(ctx, gold, pred, punct, details, as_json, calibration, bins, fmt):
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

    refuse_unless(ctx, calibration is not None, ("bins",), "--calibration")
    if calibration is not None:
        # both passes read the files: stdin is kept in memory
        gold_sentences, pred_sentences = list(read_conll(gold, fmt)), list(read_conll(pred, fmt))
    else:
        gold_sentences, pred_sentences = read_conll(gold, fmt), read_conll(pred, fmt)
    result = evaluate(gold_sentences, pred_sentences, punct=punct, details=details)
    if result["sentences"] == 0:
        raise BpparseError(f"{'<stdin>' if gold == '-' else gold}: no sentences to evaluate")
    if calibration is not None:
        from bpparse.calibration import assess, format_calibration, write_reliability

        result["calibration"] = assess(gold_sentences, pred_sentences, bins)
        if calibration:
            write_reliability(result["calibration"], calibration,
                              title=f"Reliability of {'<stdin>' if pred == '-' else pred}")
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        report = format_report(result, punct=punct)
        if calibration is not None:
            report += format_calibration(result["calibration"])
        click.echo(report, nl=False)
