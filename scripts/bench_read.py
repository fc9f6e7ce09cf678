"""Time reading a treebank into arrays, and check byte-identical round trips of CoNLL-U files.

    python3 scripts/bench_read.py [TRAIN] [--roundtrip DIR]

TRAIN (default: EWT train) is read with tree checks, vocabularies are built and every sentence is
encoded; the three phases are timed (one run, wall clock). With --roundtrip every *.conllu file
under DIR is read and written back, and compared byte for byte with the file.
"""
import argparse
import glob
import io
import os
import time

from bpparse.conll import read_conll, write_conll
from bpparse.encode import Vocabularies, encode_corpus

UD = "../shared/data/ud"


def bench(path):
    t0 = time.perf_counter()
    sentences = list(read_conll(path, check_trees=True))
    t1 = time.perf_counter()
    vocabs = Vocabularies.build(sentences, min_count=2)
    t2 = time.perf_counter()
    encoded = encode_corpus(sentences, vocabs)
    t3 = time.perf_counter()
    words = sum(e.n for e in encoded)
    assert words == sum(s.n for s in sentences)
    print(f"{path}: {len(sentences)} sentences, {words} words")
    print(f"  read+check {t1 - t0:.2f} s, vocabularies {t2 - t1:.2f} s, encode {t3 - t2:.2f} s, "
          f"total {t3 - t0:.2f} s ({words / (t3 - t0):,.0f} words/s)")
    return t3 - t0


def round_trip(directory):
    ok = True
    for path in sorted(glob.glob(os.path.join(directory, "**", "*.conllu"), recursive=True)):
        out = io.StringIO()
        count = write_conll(read_conll(path), out)
        with open(path, "rb") as f:
            same = out.getvalue().encode("utf-8") == f.read()
        ok &= same
        print(f"  {'identical' if same else 'DIFFERENT'}  {count:6d} sentences  {path}")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("train", nargs="?", default=os.path.join(UD, "en_ewt", "en_ewt-ud-train.conllu"))
    ap.add_argument("--roundtrip", metavar="DIR", default=None)
    args = ap.parse_args()
    bench(args.train)
    if args.roundtrip:
        print(f"round trips under {args.roundtrip}:")
        if not round_trip(args.roundtrip):
            raise SystemExit("some round trips differ")


if __name__ == "__main__":
    main()
