"""Accuracy of loopy BP against exact enumeration on small random second-order models (not a test).

    python3 scripts/bp_accuracy.py [--cases 200] [--childseq]

For random models (n = 3..6 words, projective or not, single- or multi-root; LINK ~ N(0, s²),
GRAND / SIB / NOCROSS log-potentials uniform in [-b, b]) prints, per (s, b, NOCROSS form,
iterations): the mean |BP marginal - exact marginal| over possible arcs, and how often the MBR tree
from BP marginals is the exact MBR tree. Uses the brute-force oracle of the test suite.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from oracle_factor_graph import exact_childseq, exact_second_order, tree_table  # noqa: E402

from bpparse.bp import bp_marginals  # noqa: E402


def mbr(marginals, projective, single_root):
    n = marginals.shape[0] - 1
    trees = tree_table(n, projective, single_root)
    return trees[int(np.argmax(marginals[trees[:, 1:], np.arange(1, n + 1)].sum(axis=1)))]


def cases(count, link_scale, bound):
    for seed in range(count):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(3, 7))
        projective = bool(rng.random() < 0.5)
        single_root = bool(rng.random() < 0.75)
        link = rng.normal(0.0, link_scale, (n + 1, n + 1))
        size = n + 1
        grand = rng.uniform(-bound, bound, (size, size, size))
        sib = rng.uniform(-bound, bound, (size, size, size))
        cross = rng.uniform(-bound, bound, (size, size))
        yield projective, single_root, link, grand, sib, cross


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--childseq", action="store_true")
    args = parser.parse_args()
    print(f"{args.cases} random models per row; n = 3..6")
    if args.childseq:
        return childseq_rows(args)
    print(f"{'link s':>7}{'bound b':>8}{'nocross':>10}{'iters':>6}{'mean err':>10}{'MBR same':>10}")
    for link_scale in (0.5, 1.0, 2.0):
        for bound in (0.5, 1.0, 2.0):
            data = list(cases(args.cases, link_scale, bound))
            exact = [exact_second_order(link, g, s, c, p, r)[0]
                     for p, r, link, g, s, c in data]
            exact_trees = [mbr(e, p, r) for e, (p, r, *_rest) in zip(exact, data)]
            for mode in ("grouped", "exactly1"):
                for iterations in (5, 10):
                    errors = []
                    same = 0
                    for (p, r, link, g, s, c), e, t in zip(data, exact, exact_trees):
                        res = bp_marginals(link, g, s, c, projective=p, single_root=r,
                                           max_iter=iterations, cross_mode=mode)
                        errors.append(np.abs(res.marginals - e)[e > 0].mean())
                        same += np.array_equal(mbr(res.marginals, p, r), t)
                    print(f"{link_scale:>7}{bound:>8}{mode:>10}{iterations:>6}"
                          f"{np.mean(errors):>10.4f}{same / len(data):>10.2f}", flush=True)


def childseq_rows(args):
    print(f"{'link s':>7}{'bound b':>8}{'iters':>6}{'mean err':>10}{'MBR same':>10}")
    for link_scale in (1.0, 2.0):
        for bound in (0.5, 1.0, 2.0):
            data = []
            for p, r, link, _, _, _ in cases(args.cases, link_scale, bound):
                rng = np.random.default_rng(int(abs(link[0, 1]) * 1e6))
                seq = rng.uniform(-bound, bound, (link.shape[0],) * 3)
                exact = exact_childseq(link, seq, p, r)[0]
                data.append((p, r, link, seq, exact, mbr(exact, p, r)))
            for iterations in (5, 10, 20):
                errors = []
                same = 0
                for p, r, link, seq, e, t in data:
                    res = bp_marginals(link, childseq=seq, projective=p, single_root=r,
                                       max_iter=iterations, damping=0.3)
                    errors.append(np.abs(res.marginals - e)[e > 0].mean())
                    same += np.array_equal(mbr(res.marginals, p, r), t)
                print(f"{link_scale:>7}{bound:>8}{iterations:>6}"
                      f"{np.mean(errors):>10.4f}{same / len(data):>10.2f}", flush=True)


if __name__ == "__main__":
    main()
