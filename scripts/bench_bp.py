"""Benchmark of the BP engine (inference only, one core): not a test, prints figures.

    python3 scripts/bench_bp.py                 # everything below
    python3 scripts/bench_bp.py --only ewt      # one section: ewt, bosque, scaling, memory

- per-sentence time on random scores at the real sentence lengths of UD English EWT test and
  Portuguese Bosque test, for first order, +GRAND, +GRAND+SIB, +GRAND+SIB+NOCROSS, 5 and 10
  iterations (tol = 0, so exactly that many iterations run);
- growth of the time with n (expected ~n³ once the pairwise factors dominate);
- peak memory at n = 100 and n = 200 with all factor families (a fresh process per size).
Timed (CPU time of this process, so that other processes on the machine do not count): allocating
the messages and one `bp_engine` call per sentence (the graph's index arrays are built beforehand, as
a parser would cache them per length).
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np

from bpparse.graph import all_pairs
from bpparse.kernels.bp_engine import TREE, CrossFactors, PairFactors, bp_engine, bp_options
from bpparse.kernels.factors.childseq import no_childseq

DATA = "../shared/data/ud"
CONFIGS = ("first-order", "+grand", "+grand+sib", "+grand+sib+nocross")


def sentence_lengths(path):
    """Number of syntactic words per sentence (integer IDs; multiword ranges and empty nodes skipped)."""
    lengths = []
    count = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                if count:
                    lengths.append(count)
                count = 0
            elif not line.startswith("#") and line.split("\t", 1)[0].isdigit():
                count += 1
    if count:
        lengths.append(count)
    return lengths


_PAIRS = {}


def pairs_for(n, config):
    """Index arrays of the graph for one length and configuration (cached per length)."""
    if n not in _PAIRS:
        _PAIRS[n] = all_pairs(n)
    pa, pb, n_grand = _PAIRS[n]
    if config == "first-order":
        return pa[:0], pb[:0]
    if config == "+grand":
        return pa[:n_grand], pb[:n_grand]
    return pa, pb


def make_inputs(rng, n, config):
    size = n + 1
    link = rng.normal(0.0, 1.0, (size, size))
    pa, pb = pairs_for(n, config)
    pair_w = rng.normal(0.0, 0.5, pa.shape[0])
    cross_w = np.zeros((size, size))
    cross_active = np.zeros((size, size), np.bool_)
    if config.endswith("nocross"):
        cross_w = np.triu(rng.normal(0.0, 0.5, (size, size)), 1)
        cross_active = np.triu(np.ones((size, size), np.bool_), 1)
        cross_active[0, :] = False
    return link, pa, pb, pair_w, cross_w, cross_active


def run_one(inputs, iterations, projective=False):
    link, pa, pb, pair_w, cross_w, cross_active = inputs
    size = link.shape[0]
    k = pa.shape[0]
    active = np.arange(k, dtype=np.int64)
    cross_shape = (size, size, size) if cross_active.any() else (0, 0, 0)
    msg_a = np.zeros(k)
    msg_b = np.zeros(k)
    cross_msg = np.zeros(cross_shape)
    global_msg = np.zeros((size, size))
    return bp_engine(link, PairFactors(pa, pb, pair_w), active, msg_a, msg_b,
                     CrossFactors(cross_w, cross_active, 0, cross_msg, np.zeros((0, 0), bool)),
                     no_childseq(), global_msg,
                     bp_options(TREE, projective, True, iterations, 0.0, 0.0))


def time_corpus(lengths, config, iterations, seed=0):
    rng = np.random.default_rng(seed)
    inputs = [make_inputs(rng, n, config) for n in lengths]
    run_one(make_inputs(rng, 3, config), 1)  # compile / load outside the timing
    start = time.process_time()
    for x in inputs:
        bel, it, _, _ = run_one(x, iterations)
        assert it == iterations and not np.isnan(bel).any()
    return time.process_time() - start


def corpus_section(name, path, limit=None):
    lengths = sentence_lengths(path)
    if limit:
        lengths = lengths[:limit]
    k_mean = np.mean([len(pairs_for(n, "+grand+sib")[0]) for n in lengths])
    print(f"\n{name}: {len(lengths)} sentences, mean length {np.mean(lengths):.1f}, "
          f"max {max(lengths)}, mean GRAND+SIB factors per sentence {k_mean:.0f}")
    print(f"{'config':<22}{'iters':>6}{'total s':>10}{'ms/sent':>10}{'sent/s':>10}")
    for config in CONFIGS:
        for iterations in (5, 10):
            total = time_corpus(lengths, config, iterations)
            print(f"{config:<22}{iterations:>6}{total:>10.2f}{1000 * total / len(lengths):>10.3f}"
                  f"{len(lengths) / total:>10.0f}")


def scaling_section():
    print("\nscaling (10 iterations, single sentence of length n, random scores; ms, and ms / n³·1e6)")
    sizes = (10, 20, 40, 80, 160)
    print(f"{'config':<22}" + "".join(f"{n:>16}" for n in sizes))
    for config in CONFIGS:
        row = f"{config:<22}"
        for n in sizes:
            rng = np.random.default_rng(n)
            x = make_inputs(rng, n, config)
            run_one(make_inputs(rng, 3, config), 1)
            reps = max(1, int(2000 / n ** 2))
            start = time.process_time()
            for _ in range(reps):
                run_one(x, 10)
            ms = 1000 * (time.process_time() - start) / reps
            row += f"{ms:>9.2f} ({1e6 * ms / n ** 3:>4.2f})"
        print(row)


def memory_child(n):
    """Run in a fresh process: peak RSS growth of one all-families BP run at length n."""
    import resource
    rng = np.random.default_rng(0)
    run_one(make_inputs(rng, 4, "+grand+sib+nocross"), 1)  # compile first
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    x = make_inputs(rng, n, "+grand+sib+nocross")
    run_one(x, 10)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    k = x[1].shape[0]
    size = n + 1
    # pair_a, pair_b, pair_w, active, msg_a, msg_b (inputs) + e^w (engine scratch); NOCROSS
    # messages (n+1)³; a few (n+1)² arrays
    state = 8 * (7 * k + size ** 3 + 12 * size * size)
    print(f"n={n}: K={k} pairwise factors, peak RSS growth {(after - before) / 1024:.0f} MiB "
          f"(arrays of the graph and BP state: {state / 2 ** 20:.0f} MiB)")


def memory_section():
    print("\npeak memory, all families (GRAND+SIB+NOCROSS), one sentence, fresh process each")
    for n in (100, 200):
        subprocess.run([sys.executable, os.path.abspath(__file__), "--memory-child", str(n)],
                       check=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("ewt", "bosque", "scaling", "memory"))
    parser.add_argument("--data", default=DATA, help="UD directory  [default: %(default)s]")
    parser.add_argument("--memory-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        memory_child(args.memory_child)
        return
    if args.only in (None, "ewt"):
        corpus_section("UD English EWT test", f"{args.data}/en_ewt/en_ewt-ud-test.conllu")
    if args.only in (None, "bosque"):
        corpus_section("UD Portuguese Bosque test", f"{args.data}/pt_bosque/pt_bosque-ud-test.conllu")
    if args.only in (None, "scaling"):
        scaling_section()
    if args.only in (None, "memory"):
        memory_section()


if __name__ == "__main__":
    main()
