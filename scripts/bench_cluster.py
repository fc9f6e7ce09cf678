"""`bpparse parse --cluster local:N` against `bpparse parse --jobs 1`, side by side in one run, on a
corpus made of COPIES copies of a treebank file (10 x EWT train is about 2 M words): whole-process
wall time, sentences/s, the ratio, peak RSS of the local process and of every Dask worker, and a
check that both outputs are the same bytes.

    python3 scripts/bench_cluster.py /work/shared/data/ud/en_ewt/en_ewt-ud-train.conllu --copies 10
    python3 scripts/bench_cluster.py test.conllu --copies 2 --workers 2 --model m.bpm --shard-mb 4

The corpus is written as COPIES files (the layout --cluster shards best: files, each cut into
shards of --shard-mb); both runs read the same files. The JIT cache is warmed first, once.
"""
import argparse
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import time

BPPARSE = [sys.executable, "-m", "bpparse", "parse"]


def run(args):
    """(wall seconds, stderr text, peak RSS of this process in MB)."""
    start = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(args)}\n{err}")
    return wall, err, usage.ru_maxrss / 1024.0


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input", help="a tagged CoNLL-U file (e.g. EWT train)")
    ap.add_argument("--copies", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2, help="--cluster local:N")
    ap.add_argument("--shard-mb", type=float, default=2)
    ap.add_argument("--model", help="model path or bundled name (default: the bundled default)")
    opts = ap.parse_args()

    model = ["--model", opts.model] if opts.model else []
    with tempfile.TemporaryDirectory(prefix="bpparse-cluster-") as tmp:
        data = open(opts.input, "rb").read()
        inputs = []
        for k in range(opts.copies):
            inputs.append(os.path.join(tmp, f"part{k:03d}.conllu"))
            with open(inputs[-1], "wb") as f:
                f.write(data)
        sentences = data.count(b"\n\n") * opts.copies
        words = sum(1 for line in data.decode().split("\n") if re.match(r"\d+\t", line)) * opts.copies
        print(f"corpus: {opts.copies} x {opts.input}: {sentences} sentences, {words} words, "
              f"{len(data) * opts.copies / 2**20:.0f} MB", flush=True)
        run(BPPARSE + model + ["-j", "1", "-o", os.path.join(tmp, "warm.conllu"), opts.input])

        local_out = os.path.join(tmp, "local.conllu")
        wall_local, _, rss_local = run(BPPARSE + model + ["-j", "1", "-o", local_out, *inputs])
        print(f"bpparse parse --jobs 1: {wall_local:.1f} s, {sentences / wall_local:.0f} sentences/s, "
              f"peak RSS {rss_local:.0f} MB", flush=True)

        cluster_out = os.path.join(tmp, "cluster.conllu")
        wall_cluster, err, rss_client = run(
            BPPARSE + model + ["--cluster", f"local:{opts.workers}", "--shard-mb", str(opts.shard_mb),
                               "-o", cluster_out, *inputs])
        workers = re.search(r"workers' peak memory \(MB\): ([^;\n]*)", err)
        shards = re.search(r"(\d+) shards", err)
        print(f"bpparse parse --cluster local:{opts.workers}: {wall_cluster:.1f} s, "
              f"{sentences / wall_cluster:.0f} sentences/s, {shards.group(1) if shards else '?'} shards, "
              f"client peak RSS {rss_client:.0f} MB, workers' peak RSS (MB) "
              f"{workers.group(1) if workers else '?'}", flush=True)
        print(f"speed-up: {wall_local / wall_cluster:.2f}x; outputs identical: "
              f"{digest(local_out) == digest(cluster_out)}")


if __name__ == "__main__":
    main()
