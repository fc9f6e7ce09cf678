"""How much a tag-pair arc filter would prune, and which gold arcs it would lose.

    python3 scripts/arc_filter_coverage.py ../shared/data/ud/en_ewt [--column upos xpos] [--min-count 1 2 3]

A filter of this kind keeps the arc h -> m only when some gold arc of the training treebank had the
same class: (tag of h, tag of m, direction), with `bins` also McDonald et al.'s distance bin (the
LINK templates', `features.attributes.link_distance_bin`), with `slack S` no longer than S times
the longest training arc of the class (S = 2 is `features.arc_limits`, the shipped
`model.arc_filter`, which also always keeps ROOT's arcs and those between adjacent words). This
script counts, over every candidate arc of the test treebank, the share the filter keeps, the gold
arcs it removes and, for the filters without those always-kept arcs, the words it would leave
without a head (they would keep all), for each tag column and minimum count, from the treebank's
DIR/*-ud-train.conllu and DIR/*-ud-test.conllu. docs/benchmarks.md ("A tag-pair arc filter") has
the figures and the parse times.
"""
import argparse
import collections
import glob
import os

from bpparse.conll import read_conll
from bpparse.features.attributes import link_distance_bin

distance_bin = link_distance_bin.py_func  # plain Python: one call an arc, no kernel to load
FILTERS = ("pairs", "bins", "slack 1.5", "slack 2")


def arc_class(tags, h, m, bins):
    return (tags[h], tags[m], m > h) + ((distance_bin(abs(m - h)),) if bins else ())


def gold_classes(path, column, bins):
    """{class: (count, longest arc)} of the training treebank's gold arcs."""
    count, longest = collections.Counter(), collections.Counter()
    for s in read_conll(path):
        tags, heads = getattr(s, column), s.heads
        for m in range(1, s.n + 1):
            c = arc_class(tags, heads[m], m, bins)
            count[c] += 1
            longest[c] = max(longest[c], abs(m - heads[m]))
    return count, longest


def coverage(path, column, seen, min_count, name):
    count, longest = seen
    slack = float(name.split()[1]) if name.startswith("slack") else None
    arcs = kept = gold = lost = headless = 0
    for s in read_conll(path):
        tags, heads = getattr(s, column), s.heads
        for m in range(1, s.n + 1):
            ok = []
            for h in range(s.n + 1):
                c = arc_class(tags, h, m, name == "bins")
                keep = h != m and count[c] >= min_count
                if slack is not None:
                    keep = h != m and (h == 0 or abs(h - m) == 1
                                       or keep and abs(h - m) <= slack * longest[c])
                ok.append(keep)
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
    ap.add_argument("--filter", nargs="+", choices=FILTERS, default=list(FILTERS))
    args = ap.parse_args()
    train = glob.glob(os.path.join(args.treebank, "*-ud-train.conllu"))[0]
    test = glob.glob(os.path.join(args.treebank, "*-ud-test.conllu"))[0]
    print("filter     column  min count  arcs kept  gold arcs lost  words without a head")
    for name in args.filter:
        for column in args.column:
            seen = gold_classes(train, column, name == "bins")
            for c in args.min_count:
                share, lost, gold, headless = coverage(test, column, seen, c, name)
                print(f"{name:<10} {column:<7} {c:>9}  {share:9.3f}  {lost:>5} ({lost / gold:.3%})"
                      f"  {headless:>5}")


if __name__ == "__main__":
    main()
