"""Time `bpparse parse` as a user sees it: whole process wall time, time to the first output byte,
sentences per second and peak memory, for several --jobs, cold (empty JIT cache) and warm; checks
that every --jobs gives the same bytes and scores the output against the input's trees.

    python3 scripts/bench_parse.py --model en_ewt /work/shared/data/ud/en_ewt/en_ewt-ud-test.conllu
    python3 scripts/bench_parse.py --model m.bpm --jobs 1 2 --cold --repeat 2 test.conllu

Cold runs use a fresh NUMBA_CACHE_DIR (a temporary directory), so they include compiling every
kernel; warm runs share one cache directory that a first (unreported) run fills unless --cache-dir
is given. Runs are one at a time (the machine may be shared).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def run_once(args, env):
    """(wall seconds, seconds to the first stdout byte, output bytes, stderr, peak RSS in MB, CPU
    seconds (user + system, all threads): on a shared machine, CPU time is the steadier figure)."""
    start = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    first = proc.stdout.read(1)
    t_first = time.perf_counter() - start
    rest = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak RSS
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"bpparse parse failed ({proc.returncode}):\n{err.decode()}")
    return wall, t_first, first + rest, err.decode(), usage.ru_maxrss / 1024.0, usage.ru_utime + usage.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input")
    ap.add_argument("--model", default=None, help="model path or bundled name (default: bundled default)")
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--cold", action="store_true", help="also time runs with an empty JIT cache")
    ap.add_argument("--repeat", type=int, default=1, help="warm runs per --jobs value (best reported)")
    ap.add_argument("--cache-dir", help="NUMBA_CACHE_DIR of the warm runs (default: a fresh one, filled first)")
    ap.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more `bpparse parse` options")
    opts = ap.parse_args()

    base = [sys.executable, "-c", "from bpparse.cli import main; main()", "parse"]
    if opts.model:
        base += ["--model", opts.model]
    base += opts.extra
    results = []
    outputs = {}
    with tempfile.TemporaryDirectory(prefix="bpparse-bench-") as tmp:
        warm_dir = opts.cache_dir or os.path.join(tmp, "warm")
        env = dict(os.environ, NUMBA_CACHE_DIR=warm_dir)
        if opts.cache_dir is None:
            run_once(base + ["-j", "1", opts.input], env)  # fill the warm cache
        for jobs in opts.jobs:
            args = base + ["-j", str(jobs), opts.input]
            if opts.cold:
                cold_env = dict(os.environ, NUMBA_CACHE_DIR=os.path.join(tmp, f"cold{jobs}"))
                wall, first, out, err, rss, cpu = run_once(args, cold_env)
                results.append(_record("cold", jobs, wall, first, out, err, rss, cpu))
                outputs.setdefault(jobs, out)
            best = None
            for _ in range(opts.repeat):
                wall, first, out, err, rss, cpu = run_once(args, env)
                if best is None or wall < best[0]:
                    best = (wall, first, out, err, rss, cpu)
                outputs.setdefault(jobs, out)
                if out != outputs[jobs]:
                    sys.exit(f"--jobs {jobs}: two runs gave different bytes")
            results.append(_record("warm", jobs, *best))
    first_bytes = next(iter(outputs.values()))
    identical = all(out == first_bytes for out in outputs.values())
    for r in results:
        print(f"{r['cache']:4s} --jobs {r['jobs']}: {r['sentences']} sentences in {r['wall']:.2f} s wall "
              f"({r['sentences_per_second']:.0f} sentences/s end to end), first output after "
              f"{r['first_output']:.2f} s, CPU {r['cpu']:.2f} s ({r['sentences_per_cpu_second']:.0f} sentences "
              f"per CPU-second), peak RSS {r['peak_rss_mb']:.0f} MB")
    print(f"outputs identical for --jobs {' '.join(map(str, opts.jobs))}: {identical}")
    scores = _score(opts.input, first_bytes)
    if scores:
        print(f"UAS {scores['uas']:.2f}  LAS {scores['las']:.2f}  ({scores['words']} words)")
    print(json.dumps({"runs": results, "identical": identical, "scores": scores}))
    if not identical:
        sys.exit(1)


def _record(cache, jobs, wall, first, out, err, rss, cpu):
    sentences = out.count(b"\n\n")
    return {"cache": cache, "jobs": jobs, "wall": round(wall, 3), "first_output": round(first, 3),
            "sentences": sentences, "sentences_per_second": round(sentences / wall, 1),
            "cpu": round(cpu, 3), "sentences_per_cpu_second": round(sentences / cpu, 1),
            "peak_rss_mb": round(rss, 1), "stderr": err.strip().splitlines()[-1:]}


def _score(gold_path, pred_bytes):
    import io

    from bpparse.conll import read_conll
    from bpparse.evaluate import evaluate

    gold = list(read_conll(gold_path))
    if any((s.heads[1:] < 0).any() for s in gold):
        return None
    pred = read_conll(io.BytesIO(pred_bytes))
    r = evaluate(iter(gold), pred)
    return {"uas": r["uas"], "las": r["las"], "words": r["words"]}


if __name__ == "__main__":
    main()
