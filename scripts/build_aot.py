"""Build the ahead-of-time compiled kernels that ship with the package (bpparse/jit.py).

    python3 scripts/build_aot.py        # run by scripts/build_kernel_cache.py at its end

Runs what a parse calls from Python (the bundled model on tagged and untagged input, with
marginals, the map and dd decoders, relaxed inference, and first-order and second-order models
trained on the tiny fixture) in this process, records the argument values of each call of the
exported kernels, then compiles those kernels with numba.pycc for each argument type seen, for
numba's portable ``generic`` x86-64 CPU and releasing the GIL as their ``nogil`` dispatchers do, into
bpparse/data/aot/ and writes bpparse/data/aot.json (the sources, Python, platform and machine it
was built for, and each kernel's symbols with the `bpparse.jit.type_key` of their arguments).
The extension serves only the exact sources it was built from (tests/test_aot.py fails until it is
rebuilt). Loading the shipped numba kernels first (scripts/build_kernel_cache.py) makes it take
seconds instead of minutes.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["BPPARSE_AOT"] = "0"  # record under numba; the extension being built must not serve
os.environ.setdefault("NUMBA_CPU_NAME", "generic")

import bpparse  # noqa: E402,F401  (seeds numba's cache from the shipped kernels)
from bpparse import jit  # noqa: E402
from bpparse.kernel_cache import source_hashes  # noqa: E402

TINY = ROOT / "tests" / "data" / "en_ewt_train_tiny.conllu"
SAMPLE = ROOT / "bpparse" / "data" / "sample.conllu"
MODULE = "_aot"
# (module, attribute) through which Python calls each exported kernel
EXPORTS = [("bpparse.parse", "parse_chunk"), ("bpparse.parse", "parse_chunk_dd"),
           ("bpparse.parse", "parse_chunk_relaxed"),
           ("bpparse.features", "dense_weights"), ("bpparse.features.store", "expand_held"),
           ("bpparse.features.tags", "tag_bases"),
           ("bpparse.tagger", "column_predict")]


def workloads(work: Path):
    from bpparse.conll import read_conll, write_conll
    from bpparse.tagging import strip_tags

    small = ["--epochs", "1", "--set", "features.hash_bits=16", "--no-progress"]
    untagged = work / "untagged.conllu"
    write_conll([strip_tags(s) for s in read_conll(str(SAMPLE))], str(untagged))
    out = ["-o", str(work / "out.conllu")]
    yield ["parse", str(SAMPLE), "--marginals", "--marginals-file", str(work / "m.npz"), *out]
    yield ["parse", str(untagged), *out]
    yield ["parse", str(TINY), "--jobs", "2", "--decoder", "map", *out]
    yield ["parse", str(SAMPLE), "--decoder", "dd", *out]
    # a relaxation option: without NOCROSS factors `relax` at its defaults runs full BP
    relaxed = ["--jobs", "1", "--threshold", "1e-4"]
    yield ["relax", str(SAMPLE), *relaxed, *out]
    for config in ("first-order", "second-order"):
        model = work / f"{config}.bpm"
        yield ["train", "--config", config, "--train", str(TINY), "--out", str(model), *small]
        yield ["parse", "-m", str(model), str(TINY), *out]
        yield ["relax", "-m", str(model), str(TINY), *relaxed, *out]


class Recorder:
    """Stands in front of a kernel where Python calls it: records each call's arguments by type
    into ``calls`` and passes the call, and every attribute (``compile``), to the kernel."""

    def __init__(self, kernel, calls):
        self.kernel, self.calls = kernel, calls

    def __call__(self, *args):
        self.calls.setdefault(self.kernel.name, {}).setdefault(jit.type_key(args), args)
        return self.kernel(*args)

    def __getattr__(self, name):
        return getattr(self.kernel, name)


def record(calls):
    """Put a `Recorder` in front of each exported kernel; returns the kernels by name."""
    import importlib

    kernels = {}
    for module_name, attribute in EXPORTS:
        module = importlib.import_module(module_name)
        kernel = kernels[getattr(module, attribute).name] = getattr(module, attribute)
        setattr(module, attribute, Recorder(kernel, calls))
    return kernels


def main():
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    from bpparse.cli import main as bpparse_main

    calls = {}
    kernels = record(calls)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bpparse-aot-") as tmp:
        for argv in workloads(Path(tmp)):
            print("build_aot: bpparse", " ".join(argv), file=sys.stderr, flush=True)
            try:
                bpparse_main(argv)
            except SystemExit as e:
                if e.code:
                    sys.exit(f"build_aot: bpparse {' '.join(argv)} exited {e.code}")
        missed = sorted(set(kernels) - set(calls))
        if missed:  # a workload that no longer reaches a kernel would drop it from the extension
            sys.exit(f"build_aot: no workload called {', '.join(missed)}")
        numba = jit.materialise()
        import numba.pycc.compiler as pycc_compiler
        from numba.core.compiler import Flags
        from numba.pycc import CC

        class ReleasingFlags(Flags):  # what the kernels' nogil=True does for their dispatchers
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                self.release_gil = True

        pycc_compiler.Flags = ReleasingFlags
        cc = CC(MODULE)
        cc.output_dir = tmp
        cc.target_cpu = "generic"
        exports = {}
        for name, seen in sorted(calls.items()):
            dispatcher = kernels[name].target
            for i, (key, args) in enumerate(sorted(seen.items())):
                argtypes = tuple(numba.typeof(a) for a in args)
                restype = dispatcher.overloads[argtypes].signature.return_type
                symbol = f"{dispatcher.py_func.__name__}_{i}"
                cc.export(symbol, restype(*argtypes))(dispatcher.py_func)
                exports.setdefault(name, []).append([symbol, key])
        print(f"build_aot: compiling {sum(map(len, exports.values()))} exports of "
              f"{len(exports)} kernels", file=sys.stderr, flush=True)
        cc.compile()
        built = Path(tmp) / cc.output_file
        jit.AOT_DIR.mkdir(parents=True, exist_ok=True)
        for old in jit.AOT_DIR.glob(f"{MODULE}.*"):
            old.unlink()
        shutil.copy(built, jit.AOT_DIR / built.name)
    manifest = {"module": built.name, "environment": jit.aot_environment(),
                "sources": source_hashes(), "exports": exports}
    jit.AOT_MANIFEST.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    size = (jit.AOT_DIR / built.name).stat().st_size
    print(f"build_aot: {built.name}, {size / 1e6:.1f} MB, in {time.perf_counter() - start:.0f} s",
          file=sys.stderr)


if __name__ == "__main__":
    main()
