"""Parse what users have: a test file with its tags stripped, against the same file with gold tags.

    python3 scripts/tagging_eval.py ../shared/data/ud/en_ewt/en_ewt-ud-test.conllu [--model en_ewt]
        [--modes pipeline joint joint:dd]

Writes the test file with UPOS, XPOS, FEATS and LEMMA set to `_` (HEAD, DEPREL, DEPS too: nothing
of the answer is left), then times `bpparse parse --jobs 1` (whole process, warm cache, best of
--repeat) on the tagged file and on the stripped one once per mode (`--tagging` pipeline or joint,
`:dd` adding `--decoder dd`; joint needs a model from `bpparse train-joint`), and scores each with
`bpparse eval` against the original: UPOS / XPOS / FEATS accuracy, UAS and LAS (punctuation
counted), and the speed of each stripped parse relative to the tagged one.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

BPPARSE = [sys.executable, "-m", "bpparse"]


def strip(src, dst):
    """Copy a CoNLL-U file with columns 3-9 (LEMMA .. DEPS) of every word line set to _."""
    with open(src, encoding="utf-8") as f, open(dst, "w", encoding="utf-8") as out:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            if len(cols) == 10 and not line.startswith("#"):
                cols[2:9] = ["_"] * 7
                line = "\t".join(cols) + "\n"
            out.write(line)


def timed_parse(model, path, out, repeat, options=()):
    """(best wall time, the dd summary line of stderr or None)."""
    best = None
    for _ in range(repeat):
        start = time.perf_counter()
        run = subprocess.run(BPPARSE + ["parse", "-j", "1", *model, *options, path, "-o", out],
                             check=True, stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - start
        best = wall if best is None else min(best, wall)
    summary = [line for line in run.stderr.splitlines() if line.startswith("bpparse: dd")]
    return best, (summary[0] if summary else None)


def score(gold, pred):
    out = subprocess.run(BPPARSE + ["eval", "--json", gold, pred], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("test", help="a gold CoNLL-U test file")
    ap.add_argument("--model", help="model path or bundled name (default: the bundled default)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--modes", nargs="+", default=["pipeline"],
                    help="tagging modes for the stripped file: pipeline, joint, joint:dd, pipeline:dd")
    opts = ap.parse_args()
    model = ["--model", opts.model] if opts.model else []
    with tempfile.TemporaryDirectory(prefix="bpparse-tagging-") as tmp:
        stripped = os.path.join(tmp, "stripped.conllu")
        strip(opts.test, stripped)
        runs = [("tags given (gold)", opts.test, [])]
        for mode in opts.modes:
            tagging, _, decoder = mode.partition(":")
            options = ["--tagging", tagging] + (["--decoder", decoder] if decoder else [])
            runs.append((f"tags stripped, {mode}", stripped, options))
        for _, path, options in runs:  # warm numba's cache
            subprocess.run(BPPARSE + ["parse", *model, *options, path, "-o", os.devnull],
                           check=True, stderr=subprocess.DEVNULL)
        rows = []
        for name, path, options in runs:
            out = os.path.join(tmp, "out.conllu")
            wall, dd = timed_parse(model, path, out, opts.repeat, options)
            rows.append((name, wall, score(opts.test, out)))
            if dd:
                print(f"{name}: {dd}")
        print("| input | UPOS | XPOS | FEATS | UAS | LAS | parse -j 1 (s) | speed vs tagged |")
        print("|---|---|---|---|---|---|---|---|")
        for name, wall, s in rows:
            tags = [s.get(k) for k in ("upos", "xpos", "feats")]
            cells = ["-" if v is None else f"{v:.2f}" for v in tags]
            print(f"| {name} | {' | '.join(cells)} | {s['uas']:.2f} | {s['las']:.2f} | {wall:.2f} "
                  f"| {100 * rows[0][1] / wall:.0f}% |")


if __name__ == "__main__":
    main()
