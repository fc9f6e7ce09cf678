"""How much a tag-pair arc filter would prune, and which gold arcs it would lose.

    python3 scripts/arc_filter_coverage.py ../shared/data/ud/en_ewt [--column upos xpos] [--min-count 1 2 3]

A filter of this kind keeps the arc h -> m only when some gold arc of the training treebank had the
same (tag of h, tag of m, direction, McDonald et al.'s distance bin); a word left with no head keeps
all. This script counts, over every candidate arc of the test treebank, the share the filter keeps,
the gold arcs it removes and the words it would leave without a head, for each tag column and
minimum count, from the treebank's DIR/*-ud-train.conllu and DIR/*-ud-test.conllu (the distance
bins are the LINK templates', `features.attributes.link_distance_bin`). docs/benchmarks.md ("A
tag-pair arc filter") has the figures and the parse times of the filter tried in the scoring
kernels.
"""
import argparse
import collections
import glob
import os

from bpparse.conll import read_conll
from bpparse.features.attributes import link_distance_bin

distance_bin = link_distance_bin.py_func  # plain Python: one call an arc, no kernel to load


def arc_class(tags, h, m):
    return tags[h], tags[m], m > h, distance_bin(abs(m - h))


def gold_classes(path, column):
    seen = collections.Counter()
    for s in read_conll(path):
        tags, heads = getattr(s, column), s.heads
        for m in range(1, s.n + 1):
            seen[arc_class(tags, heads[m], m)] += 1
    return seen


def coverage(path, column, seen, min_count):
    arcs = kept = gold = lost = headless = 0
    for s in read_conll(path):
        tags, heads = getattr(s, column), s.heads
        for m in range(1, s.n + 1):
            ok = [h != m and seen[arc_class(tags, h, m)] >= min_count for h in range(s.n + 1)]
            arcs += s.n
            kept += sum(ok)
            headless += not any(ok)
            gold += 1
            lost += any(ok) and not ok[heads[m]]
    return kept / arcs, lost, gold, headless


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("treebank", metavar="DIR")
    ap.add_argument("--column", nargs="+", choices=["upos", "xpos"], default=["upos", "xpos"])
    ap.add_argument("--min-count", nargs="+", type=int, default=[1, 2, 3])
    args = ap.parse_args()
    train = glob.glob(os.path.join(args.treebank, "*-ud-train.conllu"))[0]
    test = glob.glob(os.path.join(args.treebank, "*-ud-test.conllu"))[0]
    print("column  min count  arcs kept  gold arcs lost  words without a head")
    for column in args.column:
        seen = gold_classes(train, column)
        for c in args.min_count:
            share, lost, gold, headless = coverage(test, column, seen, c)
            print(f"{column:<7} {c:>9}  {share:9.3f}  {lost:>5} ({lost / gold:.3%})  {headless:>5}")


if __name__ == "__main__":
    main()
