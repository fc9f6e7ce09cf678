"""What the first run after install spends compiling: numba compile time per kernel, cold cache.

    python3 scripts/compile_times.py [--without-shipped] [bpparse arguments]
                                               (default: parse bpparse/data/sample.conllu)

Runs the bpparse command in a child process with an empty ``NUMBA_CACHE_DIR`` (as after a fresh
install), records numba's ``numba:compile`` events, and prints per kernel (dispatcher and
argument types) the compile time it adds by itself (its own time minus that of the kernels it
compiled on the way) and with them, the number of specialisations of each kernel, and the
command's whole wall time. Then runs the command again on the now warm cache for comparison.
The first run loads the compiled kernels shipped with the package where they apply
(bpparse/kernel_cache.py); ``--without-shipped`` measures what compiling them costs instead (as
on a machine the archive does not serve).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child(out_path, argv):
    """In the child: run the CLI under a compile-event recorder, write the events as JSON."""
    from numba.core import event

    stack, rows = [], []

    class Listener(event.Listener):
        def on_start(self, ev):
            stack.append([time.perf_counter(), 0.0])

        def on_end(self, ev):
            start, children = stack.pop()
            took = time.perf_counter() - start
            if stack:
                stack[-1][1] += took
            d = ev.data["dispatcher"]
            rows.append({"kernel": f"{d.py_func.__module__}.{d.py_func.__qualname__}",
                         "args": str(ev.data["args"])[:120], "total": took, "self": took - children})

    from bpparse.cli import main

    with event.install_listener("numba:compile", Listener()):
        try:
            main(argv)
        except SystemExit:
            pass
        finally:
            Path(out_path).write_text(json.dumps(rows))


def run(argv, cache_dir, shipped):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
        out = fh.name
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    if not shipped:
        env["BPPARSE_KERNEL_CACHE"] = "0"
    t = time.perf_counter()
    subprocess.run([sys.executable, __file__, "--child", out, *argv], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    rows = json.loads(Path(out).read_text())
    os.unlink(out)
    return wall, rows


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3:])
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--without-shipped", action="store_true",
                    help="compile every kernel (do not load the ones shipped with the package)")
    ap.add_argument("command", nargs=argparse.REMAINDER,
                    help="bpparse arguments (default: parse bpparse/data/sample.conllu)")
    args = ap.parse_args()
    argv = args.command or ["parse", str(ROOT / "bpparse" / "data" / "sample.conllu")]
    with tempfile.TemporaryDirectory() as cache:
        cold, rows = run(argv, cache, not args.without_shipped)
        warm, _ = run(argv, cache, not args.without_shipped)
    per = defaultdict(lambda: [0.0, 0.0, 0])
    for r in rows:
        p = per[r["kernel"]]
        p[0] += r["self"]
        p[1] = max(p[1], r["total"])
        p[2] += 1
    print(f"bpparse {' '.join(argv)}: cold {cold:.1f} s, warm {warm:.1f} s; "
          f"{len(rows)} compilations of {len(per)} kernels, {sum(r['self'] for r in rows):.1f} s compiling")
    print(f"{'kernel':70s} {'self s':>7s} {'incl s':>7s} {'specs':>5s}")
    for name, (own, incl, n) in sorted(per.items(), key=lambda kv: -kv[1][0])[:40]:
        print(f"{name:70s} {own:7.2f} {incl:7.2f} {n:5d}")
    print("kernels compiled for more than one signature (duplicate specialisations):")
    for name, (own, _, n) in sorted(per.items(), key=lambda kv: -kv[1][0]):
        if n > 1 and name.startswith("bpparse"):
            print(f"  {name} ({own:.1f} s):")
            for r in rows:
                if r["kernel"] == name:
                    print(f"    {r['self']:6.2f} s  {r['args']}")


if __name__ == "__main__":
    main()
