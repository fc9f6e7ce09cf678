"""Calibration of bpparse's marginals on a test set, and the README's pictures.

    python3 scripts/calibration_figures.py --test ../shared/data/ud/en_ewt/en_ewt-ud-test.conllu \\
        --model second-order=en_ewt --model "second-order, uncalibrated=en_ewt@raw" \\
        --model first-order=/tmp/fo/ewt_first.bpm --out docs/images

For each model (``@raw``: parsed with ``--uncalibrated``, the probabilities without the model's
temperatures): `bpparse parse --marginals --marginals-file` on the test file, then ECE and Brier
score of HeadProb and LabelProb against gold (bpparse.calibration; 10 bins). Writes
OUT/reliability_ewt.svg (HeadProb of every model in one reliability diagram; .png too when
matplotlib is installed) and OUT/ewt_sentence.svg, the arc diagram of one test sentence under the
first model with its alternative heads (p >= 0.1): the first sentence of 10-16 words with at
least two such alternatives. Prints a markdown table.
"""
import argparse
import subprocess
import sys
import tempfile
from pathlib import Path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--test", default="../shared/data/ud/en_ewt/en_ewt-ud-test.conllu")
    ap.add_argument("--model", action="append", required=True, metavar="NAME=MODEL[@raw]",
                    help="a label and a model file or bundled name; @raw: uncalibrated (repeatable)")
    ap.add_argument("--out", default="docs/images", help="directory for the pictures")
    ap.add_argument("--bins", type=int, default=10)
    opts = ap.parse_args()

    from bpparse.calibration import assess, write_reliability
    from bpparse.conll import read_conll
    from bpparse.parse import read_marginals
    from bpparse.show import sentence_svg

    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    gold = list(read_conll(opts.test))
    work = Path(tempfile.mkdtemp(prefix="bpparse-calibration-"))
    heads, rows, first = {}, [], None
    for spec in opts.model:
        name, _, model = spec.rpartition("=")
        model, _, raw = model.partition("@")
        if raw not in ("", "raw"):
            ap.error(f"{spec}: only @raw may follow the model")
        pred, marg = work / f"{len(rows)}.conllu", work / f"{len(rows)}.npz"
        subprocess.run([sys.executable, "-m", "bpparse", "parse", "-m", model, "--marginals",
                        "--marginals-file", str(marg), opts.test, "-o", str(pred)]
                       + (["--uncalibrated"] if raw == "raw" else []), check=True)
        parsed = list(read_conll(pred))
        result = assess(gold, parsed, opts.bins)
        heads[f"{name} HeadProb"] = result["HeadProb"]
        for key, r in result.items():
            rows.append(f"| {name} | {key} | {100 * r['ece']:.2f} | {r['brier']:.4f} | {r['words']} |")
        if first is None:
            first = (parsed, list(read_marginals(marg)))
    write_reliability(heads, out / "reliability_ewt.svg", title="Reliability of HeadProb, EWT test")
    try:
        write_reliability(heads, out / "reliability_ewt.png", title="Reliability of HeadProb, EWT test")
    except Exception as e:  # matplotlib missing: the SVG is enough
        print(f"no PNG: {e}", file=sys.stderr)
    parsed, marginals = first
    for sentence, mu in zip(parsed, marginals, strict=True):
        alternatives = sum(1 for m in range(1, sentence.n + 1) for h in range(sentence.n + 1)
                           if h not in (m, sentence.heads[m]) and mu[h, m] >= 0.1)
        if 10 <= sentence.n <= 16 and alternatives >= 2:
            (out / "ewt_sentence.svg").write_text(sentence_svg(sentence, mu, 0.1) + "\n", encoding="utf-8")
            print(f"picture: {sentence.sent_id}, {alternatives} alternatives", file=sys.stderr)
            break
    print("| model | probability | ECE (%) | Brier | words |\n|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
