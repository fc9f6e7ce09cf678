"""``bpparse show``: arc diagrams of parsed sentences as a self-contained HTML page or SVG files."""
import click

from bpparse.cli.options import announce_model, model_option


def _sentence_range(text):
    """'A:B' (1-based, inclusive, either side optional) -> (first, last or None)."""
    first, sep, last = text.partition(":")
    try:
        a = int(first) if first else 1
        b = int(last) if last else None
        if not sep:
            b = a
    except ValueError:
        raise click.BadParameter(f"{text!r} is not A:B (sentence numbers from 1)") from None
    if a < 1 or (b is not None and b < a):
        raise click.BadParameter(f"{text!r}: need 1 <= A <= B")
    return a, b


@click.command("show")
@click.argument("inputs", nargs=-1, type=click.Path(dir_okay=False, allow_dash=True))
@click.option("-o", "--output", default="-", show_default=True,
              help="HTML file (- for stdout), or with --format svg a directory for one SVG per sentence.")
@click.option("--format", "out_format", type=click.Choice(["html", "svg"]), default="html",
              show_default=True, help="One HTML page, or one SVG file per sentence.")
@click.option("--parse", "do_parse", is_flag=True,
              help="Parse the input first (with -m), with marginals for opacity and alternatives.")
@model_option
@click.option("--marginals-file", type=click.Path(dir_okay=False, exists=True),
              help="Head distributions written by `bpparse parse --marginals-file` for the same input.")
@click.option("--alternatives", type=click.FloatRange(0, 1, min_open=True), default=None,
              help="Draw every other head of probability >= P as a dashed arc (needs --parse or "
                   "--marginals-file).")
@click.option("--sent-id", "sent_ids", multiple=True, help="Show only these sentences (repeatable).")
@click.option("--range", "span", help="Show only sentences A:B (numbers from 1, inclusive; A: or :B).")
@click.option("--input-format", "fmt", type=click.Choice(["auto", "conllu", "conllx", "text", "raw"]),
              default="auto", show_default=True,
              help="Input format (as --format of bpparse parse; text and raw need --parse).")
def show_command(inputs, output, out_format, do_parse, model, marginals_file, alternatives, sent_ids,
                 span, fmt):
    """Draw the trees of parsed CoNLL-U INPUTS (default: stdin) as arc diagrams.

    Words in a row with UPOS beneath, arcs above with their labels; an arc's opacity and width
    follow HeadProb in MISC (`bpparse parse --marginals`, or --parse). No network, no script: the
    page opens anywhere.
    """
    import os
    import re

    from bpparse.conll import check_outputs, open_output, read_conll
    from bpparse.errors import BpparseError
    from bpparse.show import page, sentence_html, sentence_svg

    if alternatives is not None and not (do_parse or marginals_file):
        raise click.UsageError("--alternatives needs --parse or --marginals-file")
    if do_parse and marginals_file:
        raise click.UsageError("--parse computes the marginals: drop --marginals-file")
    if model and not do_parse:
        raise click.UsageError("-m/--model applies only with --parse")
    if fmt in ("text", "raw") and not do_parse:
        raise click.UsageError(f"--input-format {fmt} needs --parse (plain text has no trees)")
    first, last = _sentence_range(span) if span else (1, None)
    inputs = inputs or ("-",)
    if out_format == "html":
        check_outputs(inputs, [output])

    def numbered():
        """(number, Sentence, marginals or None) of every input sentence."""
        def sentences():
            from bpparse.text import read_input

            for path in inputs:
                yield from read_input(path, fmt)

        if do_parse:
            import io

            from bpparse.model import load_model
            from bpparse.parse import iter_parse, parse_settings

            loaded = load_model(announce_model(model))
            parsed = iter_parse(loaded, sentences(), parse_settings(loaded), jobs=1, misc_probs=True,
                                keep_marginals=True)
            for k, p in enumerate(parsed, 1):
                yield k, next(read_conll(io.StringIO(p.text))), p.marginals
            return
        marginals = None
        if marginals_file:
            from bpparse.parse import read_marginals

            marginals = read_marginals(marginals_file)
        for k, sentence in enumerate(sentences(), 1):
            mu = None
            if marginals is not None:
                mu = next(marginals, None)
                if mu is None or mu.shape[0] != sentence.n + 1:
                    raise BpparseError(f"{marginals_file}: no head distribution of {sentence.n} "
                                       f"words for sentence {k}: not written for this input")
            yield k, sentence, mu

    def chosen():
        wanted = set(sent_ids)
        for k, sentence, mu in numbered():
            if last is not None and k > last:
                return
            if k >= first and (not wanted or sentence.sent_id in wanted):
                yield k, sentence, mu

    count = 0
    if out_format == "html":
        sections = []
        for k, sentence, mu in chosen():
            sections.append(sentence_html(sentence, mu, alternatives, k))
            count += 1
        if not sections:
            raise BpparseError("no sentence matched --sent-id / --range")
        with open_output(output) as out:
            out.write(page(sections, title=", ".join(os.path.basename(p) for p in inputs)))
    else:
        if output == "-":
            raise click.UsageError("--format svg writes one file per sentence: give -o DIRECTORY")
        os.makedirs(output, exist_ok=True)
        for k, sentence, mu in chosen():
            name = re.sub(r"[^\w.-]+", "_", sentence.sent_id or "")[:80]
            with open_output(os.path.join(output, f"{k:06d}{'-' + name if name else ''}.svg")) as out:
                out.write(sentence_svg(sentence, mu, alternatives) + "\n")
            count += 1
    if count == 0:
        raise BpparseError("no sentence matched --sent-id / --range")
    click.echo(f"bpparse: drew {count} sentence(s)", err=True)
