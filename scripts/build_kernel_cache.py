"""Build the compiled-kernel archive that ships with the package (bpparse/kernel_cache.py).

    python3 scripts/build_kernel_cache.py [--no-tests]

Compiles bpparse's kernels for numba's portable ``generic`` CPU into an empty ``NUMBA_CACHE_DIR``
by running what users run (parsing tagged, untagged, text and raw input with the bundled model,
marginals, relaxed inference, the DD decoder, training every shipped config, with a tagger and
TAGLINK) and, unless ``--no-tests``, the test suite (so that CI loads what its tests call), then
packs the cache entries of the package's modules into bpparse/data/kernel_cache.zip and writes
bpparse/data/kernel_cache.json (the sources, Python, numba and machine it was built for). Run it
after changing any ``.py`` file of the package: the archive is used only with the exact sources it
was built from (tests/test_kernel_cache.py fails until it is rebuilt). Then, unless ``--no-aot``,
it rebuilds the ahead-of-time kernels from them (scripts/build_aot.py), which are keyed on the
same sources.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["BPPARSE_KERNEL_CACHE"] = "0"  # importing bpparse here must not seed or import numba

from bpparse import kernel_cache  # noqa: E402

TINY = ROOT / "tests" / "data" / "en_ewt_train_tiny.conllu"
SAMPLE = ROOT / "bpparse" / "data" / "sample.conllu"
CONFIGS = ["first-order", "second-order", "childseq", "grand-childseq", "full",
           "first-order-projective", "second-order-projective", "childseq-projective"]


def workloads(work: Path):
    """The commands, as argument lists for ``python -m bpparse``, and their stdin."""
    text = "The cat sat on the mat .\nShe did n't go .\n"
    raw = "I don't think so. She left at 5 p.m. yesterday!\n"
    small = ["--epochs", "1", "--set", "features.hash_bits=16", "--no-progress"]
    yield ["parse", str(SAMPLE), "--marginals", "--marginals-file", str(work / "m.npz")], None
    yield ["parse", "--format", "text", "-", "--marginals-file", str(work / "m.jsonl")], text
    yield ["parse", "--format", "raw", "-"], raw
    yield ["parse", str(TINY), "--jobs", "2"], None
    yield ["parse", str(TINY), "--inference", "relaxed"], None
    yield ["parse", str(TINY), "--decoder", "map"], None
    yield ["eval", str(TINY), str(TINY)], None
    for config in CONFIGS:
        model = work / f"{config}.bpm"
        yield ["train", "--config", config, "--train", str(TINY), "--dev", str(TINY),
               "--out", str(model), *small], None
        yield ["parse", "-m", str(model), str(TINY)], None
        if not config.startswith("full"):  # dd decodes models without NOCROSS
            yield ["parse", "-m", str(model), str(TINY), "--decoder", "dd"], None
    for config in ("first-order", "second-order"):
        tagged, joint = work / f"{config}-tagger.bpm", work / f"{config}-joint.bpm"
        yield ["train", "--config", config, "--train", str(TINY), "--out", str(tagged),
               "--set", "tagger.enabled=true", *small], None
        yield ["parse", "-m", str(tagged), "--format", "text", "-"], text
        yield ["train-joint", "-m", str(tagged), "--train", str(TINY), "--out", str(joint),
               "--folds", "2", "--epochs", "1"], None
        yield ["parse", "-m", str(joint), "--format", "text", "-", "--tagging", "joint"], text
    yield ["parse", "-m", str(work / "first-order-joint.bpm"), "--format", "text", "-",
           "--tagging", "joint", "--decoder", "dd"], text


def package_dirs():
    return sorted({p.parent for p in kernel_cache.PACKAGE.rglob("*.py")})


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-tests", action="store_true", help="only the user workloads")
    parser.add_argument("--no-aot", action="store_true",
                        help="do not rebuild the ahead-of-time kernels afterwards (scripts/build_aot.py)")
    parser.add_argument("--work-dir", type=Path,
                        help="compile into (and keep) this directory, e.g. to resume a failed build")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bpparse-kernels-") as tmp:
        base = args.work_dir or Path(tmp)
        cache, work = base / "cache", base / "work"
        sources = kernel_cache.source_hashes()
        # a reused work dir resumes a build of these very sources only: numba keys an entry on its
        # own file, so one compiled before another file changed would keep that file's old code
        # inlined, or a specialisation for a record type that no longer exists
        built_from = base / "sources.json"
        if cache.exists() and (not built_from.exists()
                               or json.loads(built_from.read_text()) != sources):
            shutil.rmtree(cache)
        work.mkdir(parents=True, exist_ok=True)
        built_from.write_text(json.dumps(sources))
        env = {k: v for k, v in os.environ.items() if k != "NUMBA_CPU_FEATURES"}
        env.update(NUMBA_CACHE_DIR=str(cache), NUMBA_CPU_NAME=kernel_cache.CPU_NAME,
                   PYTHONPATH=str(ROOT))
        env[kernel_cache.ENABLE_VARIABLE] = "0"  # compile everything here, seed nothing
        env["BPPARSE_AOT"] = "0"  # and under numba: the ahead-of-time kernels must not serve
        start = time.perf_counter()
        for argv, stdin in workloads(work):
            print("build_kernel_cache: bpparse", " ".join(argv), file=sys.stderr, flush=True)
            subprocess.run([sys.executable, "-m", "bpparse", *argv], env=env, check=True,
                           input=stdin, text=True, stdout=subprocess.DEVNULL)
        if not args.no_tests:  # (the archive's own test needs the archive being built)
            subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                            "--ignore", "tests/test_kernel_cache.py", "--ignore", "tests/test_aot.py"], env=env, check=True, cwd=ROOT)
        compiled = time.perf_counter() - start

        os.environ["NUMBA_CACHE_DIR"] = str(cache)  # where numba put the entries of each module
        os.environ["NUMBA_CPU_NAME"] = kernel_cache.CPU_NAME
        os.environ.pop("NUMBA_CPU_FEATURES", None)
        import numba  # noqa: F401  (reads the variables above: `numba_cache_dir` asks its config)

        if kernel_cache.source_hashes() != sources:
            sys.exit("build_kernel_cache: the package's sources changed during the build")
        members = 0
        with zipfile.ZipFile(kernel_cache.ARCHIVE, "w", zipfile.ZIP_DEFLATED) as bundle:
            for directory in package_dirs():
                where = kernel_cache.numba_cache_dir(directory)
                relative = directory.relative_to(kernel_cache.PACKAGE).as_posix()
                for entry in sorted(where.glob("*.nb[ic]")) if where and where.is_dir() else ():
                    bundle.write(entry, entry.name if relative == "." else f"{relative}/{entry.name}")
                    members += 1
    fields = {"environment": kernel_cache.environment(), "sources": sources,
              "archive": {"files": members, "bytes": kernel_cache.ARCHIVE.stat().st_size}}
    manifest = {"build_id": kernel_cache.build_id(fields), **fields}
    kernel_cache.MANIFEST.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    print(f"build_kernel_cache: compiled in {compiled:.0f} s; {members} files, "
          f"{manifest['archive']['bytes'] / 1e6:.1f} MB in {kernel_cache.ARCHIVE}", file=sys.stderr)
    if not args.no_aot:  # built from the kernels just archived: seconds, not minutes
        # with the archive just built seeded where numba looks by default, not this build's cache
        env = {k: v for k, v in os.environ.items()
               if k not in (kernel_cache.ENABLE_VARIABLE, "NUMBA_CACHE_DIR", "NUMBA_CPU_NAME")}
        subprocess.run([sys.executable, str(ROOT / "scripts" / "build_aot.py")], check=True, env=env)


if __name__ == "__main__":
    main()
