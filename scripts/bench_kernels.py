"""Time the first-order kernels (matrix-tree, Eisner, Chu-Liu-Edmonds) and their JIT compilation.

    python3 scripts/bench_kernels.py                  # per-call times for n = 10..160, then cold JIT
    python3 scripts/bench_kernels.py --sizes 40 --no-compile
    python3 scripts/bench_kernels.py --batch 2000     # batched marginals over mixed lengths

Per-call time is the best of --repeat rounds of the mean CPU time over enough calls for ~50 ms,
after a warm-up call, on one thread. Cold compile time runs each kernel's first call in a subprocess whose
NUMBA_CACHE_DIR is a fresh temporary directory (then again with that cache filled: load time).
While timing, results are checked (columns of marginals sum to 1, log Z finite, Eisner max = CLE
when CLE's tree is projective), so a fast wrong kernel cannot pass unnoticed.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

GOALS_US = {("matrix_tree_marginals", 40): 100.0, ("mst_decode", 40): 50.0, ("eisner_marginals", 40): 300.0}

COLD_SNIPPET = r"""
import time, sys
t0 = time.perf_counter()
import numpy as np
from bpparse.kernels import matrix_tree, eisner, cle, batch
t_import = time.perf_counter() - t0
s = np.random.default_rng(0).normal(size=(8, 8))
out = [("import", t_import)]
for name, f in [("matrix_tree_marginals", lambda: matrix_tree.matrix_tree_marginals(s, True)),
                ("eisner_marginals", lambda: eisner.eisner_marginals(s, True)),
                ("eisner_decode", lambda: eisner.eisner_decode(s, True)),
                ("mst_decode", lambda: cle.mst_decode(s, True)),
                ("batch_tree_marginals", lambda: batch.batch_tree_marginals(
                    s.ravel().copy(), np.array([0, 64]), False, True, np.empty(64), np.empty(1))),
                ("batch_decode", lambda: batch.batch_decode(
                    s.ravel().copy(), np.array([0, 64]), False, True, np.empty(8, dtype=np.int64),
                    np.array([0, 8])))]:
    t = time.perf_counter(); f(); out.append((name, time.perf_counter() - t))
for name, t in out:
    print(f"{name} {t:.3f}")
"""


def time_call(f, args, repeat):
    """Best over `repeat` rounds of the mean CPU time per call (process time, not wall time: the
    machine is shared, and waiting for a core is not the kernel's cost). One thread."""
    f(*args)  # warm-up (compiles or loads from cache)
    t = time.process_time()
    f(*args)
    once = max(time.process_time() - t, 1e-6)
    calls = max(1, int(0.05 / once))
    best = np.inf
    for _ in range(repeat):
        t = time.process_time()
        for _ in range(calls):
            f(*args)
        best = min(best, (time.process_time() - t) / calls)
    return best * 1e6


def is_projective_heads(heads):
    arcs = [(min(h, m), max(h, m)) for m, h in enumerate(heads) if m > 0]
    for a, b in arcs:
        for c, d in arcs:
            if a < c < b < d:
                return False
    return True


def bench_sizes(sizes, repeat, scale, single_root):
    from bpparse.kernels.cle import mst_decode
    from bpparse.kernels.eisner import eisner_decode, eisner_marginals
    from bpparse.kernels.matrix_tree import matrix_tree_marginals, matrix_tree_marginals_fast

    rng = np.random.default_rng(0)
    # matrix_tree_marginals_fast: the TREE-message fast path (Gauss-Jordan inverse + error check)
    kernels = [("matrix_tree_marginals", matrix_tree_marginals),
               ("matrix_tree_marginals_fast", matrix_tree_marginals_fast),
               ("eisner_marginals", eisner_marginals),
               ("mst_decode", mst_decode), ("eisner_decode", eisner_decode)]
    print(f"per call, µs of CPU time (one thread; scores N(0, {scale}²); single_root={single_root})")
    print("n      " + "  ".join(f"{name:>26}" for name, _ in kernels))
    failures = []
    for n in sizes:
        scores = rng.normal(size=(n + 1, n + 1)) * scale
        row = []
        for name, f in kernels:
            us = time_call(f, (scores, single_root), repeat)
            goal = GOALS_US.get((name, n))
            mark = "" if goal is None else (" ok" if us <= goal else " SLOW")
            if goal is not None and us > goal:
                failures.append(f"{name} at n={n}: {us:.1f} µs > {goal:.0f} µs")
            row.append(f"{us:>23.1f}{mark:>3}")
        print(f"{n:<6} " + "  ".join(row))
        # agreement checks on the timed inputs
        for f in (matrix_tree_marginals, eisner_marginals):
            marg, log_z = f(scores, single_root)
            assert np.isfinite(log_z) and np.allclose(marg[:, 1:].sum(axis=0), 1.0, atol=1e-9)
        fast, _, ok = matrix_tree_marginals_fast(scores, single_root)
        if ok:
            assert np.allclose(fast, matrix_tree_marginals(scores, single_root)[0], rtol=0, atol=1e-9)
        cle_heads = mst_decode(scores, single_root)
        eis_heads = eisner_decode(scores, single_root)
        words = np.arange(1, n + 1)
        assert scores[eis_heads[1:], words].sum() <= scores[cle_heads[1:], words].sum() + 1e-9
        if is_projective_heads(cle_heads):
            assert (cle_heads == eis_heads).all()
    return failures


def bench_log_space(sizes, repeat, single_root):
    """The exact log-space fallbacks (taken only for extreme score ranges), for reference."""
    from bpparse.kernels.eisner import _eisner_log, _workspace
    from bpparse.kernels.matrix_tree import _matrix_tree_log

    rng = np.random.default_rng(1)
    print("log-space fallback, µs per call (taken only when a column spans > e^600 or underflows)")
    for n in sizes:
        scores = rng.normal(size=(n + 1, n + 1)) * 3
        marg = np.zeros((n + 1, n + 1))
        work = _workspace(n)
        mt = time_call(_matrix_tree_log, (scores, single_root, marg), max(1, repeat // 2))
        ei = time_call(_eisner_log, (scores, single_root, work, marg), max(1, repeat // 2))
        print(f"n={n:<5} matrix_tree {mt:10.1f}   eisner {ei:10.1f}")


def bench_batch(count, threads, single_root):
    import numba

    from bpparse.kernels.batch import batch_offsets, batch_tree_marginals, batch_decode

    numba.set_num_threads(threads)
    rng = np.random.default_rng(2)
    lengths = np.clip(rng.gamma(2.5, 8.0, size=count).astype(np.int64), 1, 120)  # UD-like lengths
    offsets, head_offsets = batch_offsets(lengths)
    flat = rng.normal(size=offsets[-1]) * 3
    out = np.empty_like(flat)
    log_z = np.empty(count)
    heads = np.empty(head_offsets[-1], dtype=np.int64)
    for projective in (False, True):
        batch_tree_marginals(flat[:offsets[1]], offsets[:2], projective, single_root, out, log_z)
        t = time.perf_counter()
        batch_tree_marginals(flat, offsets, projective, single_root, out, log_z)
        dt = time.perf_counter() - t
        assert np.isfinite(log_z).all()
        print(f"batch marginals ({'Eisner' if projective else 'matrix-tree'}), {count} sentences, "
              f"mean length {lengths.mean():.1f}, {threads} thread(s): {dt:.3f} s = {count / dt:,.0f} sentences/s")
        batch_decode(flat[:offsets[1]], offsets[:2], projective, single_root, heads, head_offsets)
        t = time.perf_counter()
        batch_decode(flat, offsets, projective, single_root, heads, head_offsets)
        dt = time.perf_counter() - t
        print(f"batch decode    ({'Eisner' if projective else 'CLE'}): {dt:.3f} s = {count / dt:,.0f} sentences/s")


def bench_compile():
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as cache:
        env["NUMBA_CACHE_DIR"] = cache
        for label in ("cold cache (compile)", "warm cache (load)"):
            t = time.perf_counter()
            res = subprocess.run([sys.executable, "-c", COLD_SNIPPET], env=env, capture_output=True,
                                 text=True, check=True)
            total = time.perf_counter() - t
            print(f"first use, {label}: whole process {total:.2f} s")
            for line in res.stdout.split("\n"):
                if line.strip():
                    name, sec = line.split()
                    print(f"    {name:<24} {float(sec):8.3f} s")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[10, 20, 40, 80, 160])
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--scale", type=float, default=3.0, help="standard deviation of the random scores")
    p.add_argument("--multi-root", action="store_true")
    p.add_argument("--log-space", action="store_true", help="also time the log-space fallbacks")
    p.add_argument("--batch", type=int, default=0, help="also time a batch of this many sentences")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--no-compile", action="store_true", help="skip the cold-cache compile timing")
    args = p.parse_args()
    import numba

    numba.set_num_threads(1)
    single_root = not args.multi_root
    failures = bench_sizes(args.sizes, args.repeat, args.scale, single_root)
    if args.log_space:
        bench_log_space(args.sizes, args.repeat, single_root)
    if args.batch:
        bench_batch(args.batch, args.threads, single_root)
    if not args.no_compile:
        bench_compile()
    for f in failures:
        print("goal missed:", f)


if __name__ == "__main__":
    main()
