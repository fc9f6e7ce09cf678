"""The compiled kernels shipped with the package: built from these sources, copied where numba
looks (once, only when they match), and a first run in an empty cache compiles nothing."""
import hashlib
import json
import os
import pickle
import shutil
import subprocess
import sys
import zipfile
from collections import Counter
from pathlib import Path

import numba
import pytest

from bpparse import kernel_cache
from bpparse.kernel_cache import environment, seed, source_hashes, stale_reason

SAMPLE = kernel_cache.PACKAGE / "data" / "sample.conllu"
REBUILD = "rebuild it: python3 scripts/build_kernel_cache.py"


def _shipped_manifest():
    return json.loads(kernel_cache.MANIFEST.read_text())


def test_shipped_archive_is_built_from_these_sources():
    manifest = _shipped_manifest()
    here, built = source_hashes(), manifest["sources"]
    changed = sorted(p for p in here.keys() | built.keys() if here.get(p) != built.get(p))
    assert not changed, f"the kernel archive is stale ({', '.join(changed[:5])} changed): {REBUILD}"
    fields = {k: v for k, v in manifest.items() if k != "build_id"}
    assert manifest["build_id"] == kernel_cache.build_id(fields)
    with zipfile.ZipFile(kernel_cache.ARCHIVE) as bundle:
        names = bundle.namelist()
    assert len(names) == manifest["archive"]["files"]
    assert {n.rsplit("/", 1)[0] for n in names if "/" in n} <= {"kernels", "kernels/factors", "features"}


# ------------------------------------------------------------------------ seeding, on a toy package
@pytest.fixture
def toy(tmp_path, monkeypatch):
    """A package of two modules with an archive of cache entries for them, built for this process,
    and numba's cache directory pointed at an empty tmp_path/cache."""
    if environment()["cpu"] != kernel_cache.CPU_NAME:
        pytest.skip("numba is not set to the portable CPU here (BPPARSE_KERNEL_CACHE=0?)")
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    (root / "mod.py").write_text("def f():\n    return 1\n")
    (root / "sub" / "other.py").write_text("def g():\n    return 2\n")
    tag = f"py{sys.version_info[0]}{sys.version_info[1]}"
    entries = {f"mod.f-1.{tag}.nbi": b"index f", f"mod.f-1.{tag}.1.nbc": b"code f",
               f"mod.f-1.{tag}.2.nbc": b"code f 2", f"sub/other.g-1.{tag}.nbi": b"index g",
               f"sub/other.g-1.{tag}.1.nbc": b"code g"}
    archive = tmp_path / "kernels.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        for name, data in entries.items():
            bundle.writestr(name, data)
    fields = {"environment": environment(), "sources": source_hashes(root), "archive": {}}
    manifest = tmp_path / "kernels.json"
    manifest.write_text(json.dumps({"build_id": kernel_cache.build_id(fields), **fields}))
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(numba.core.config, "CACHE_DIR", str(tmp_path / "cache"))

    def cached(name):  # where numba looks for an archive member
        directory, _, filename = name.rpartition("/")
        return kernel_cache.numba_cache_dir(root / directory) / filename

    return root, archive, manifest, entries, cached


def test_seed_copies_every_entry_where_numba_looks_once(toy, tmp_path):
    root, archive, manifest, entries, cached = toy
    tag = f"py{sys.version_info[0]}{sys.version_info[1]}"
    assert seed(archive, manifest, root) == len(entries)
    for name, data in entries.items():
        assert cached(name).read_bytes() == data
    assert cached("mod.f-1.x").parent != cached("sub/other.g-1.x").parent
    cached(f"mod.f-1.{tag}.2.nbc").unlink()  # numba's own business from now on
    assert seed(archive, manifest, root) == 0  # seeded once: the marker says so
    shutil.rmtree(tmp_path / "cache")  # the user deletes numba's cache directory
    assert seed(archive, manifest, root) == len(entries)  # seeded again, not compiled


def test_seed_copies_nothing_for_other_sources_or_another_numba(toy):
    root, archive, manifest, entries, cached = toy
    (root / "sub" / "other.py").write_text("def g():\n    return 3\n")
    assert "1 files differ, e.g. sub/other.py" in stale_reason(json.loads(manifest.read_text()), root)
    assert seed(archive, manifest, root) == 0
    assert not any(cached(name).exists() for name in entries)

    (root / "sub" / "other.py").write_text("def g():\n    return 2\n")
    foreign = json.loads(manifest.read_text())
    foreign["environment"]["numba"] = "0.1.0"
    manifest.write_text(json.dumps(foreign))
    assert stale_reason(foreign, root) == f"built for numba '0.1.0', this is '{numba.__version__}'"
    assert seed(archive, manifest, root) == 0


def test_seed_replaces_every_entry_numba_had_before(toy):
    """An index current for its own source may embed callees of an older version of another file,
    so seeding a new archive replaces it too, and removes entries the archive does not have."""
    root, archive, manifest, entries, cached = toy
    tag = f"py{sys.version_info[0]}{sys.version_info[1]}"
    own, stale = cached(f"mod.f-1.{tag}.nbi"), cached(f"sub/other.g-1.{tag}.nbi")
    for index, source in ((own, (root / "mod.py").read_bytes()), (stale, b"an older source")):
        index.parent.mkdir(parents=True, exist_ok=True)  # numba's format: version, (stamp, overloads)
        stamp = hashlib.sha256(source).digest()
        index.write_bytes(pickle.dumps(numba.__version__) + pickle.dumps((stamp, {})))
    extra = [cached(f"mod.h-9.{tag}.nbi"), cached(f"mod.h-9.{tag}.1.nbc")]
    for path in extra:
        path.write_bytes(b"compiled here from older sources")
    other = own.parent / "mod.cpython-311.pyc"
    other.write_bytes(b"not numba's")
    assert seed(archive, manifest, root) == len(entries)
    for name, data in entries.items():
        assert cached(name).read_bytes() == data
    assert not any(path.exists() for path in extra) and other.exists()


# ------------------------------------------------------------------------ the first run of a user
@pytest.mark.slow
def test_first_parse_in_an_empty_cache_loads_every_kernel_and_compiles_none(tmp_path):
    reason = stale_reason(_shipped_manifest())
    if reason is not None:
        pytest.skip(f"the shipped kernels do not apply here: {reason}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_CPU", "BPPARSE_KERNEL"))}
    env["NUMBA_CACHE_DIR"] = str(tmp_path)
    env["BPPARSE_AOT"] = "0"  # the numba kernels, not the ahead-of-time ones (tests/test_aot.py)
    proc = subprocess.run([sys.executable, "-m", "bpparse", "parse", str(SAMPLE)], env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("\n1\t") == 5 and "compiling" not in proc.stderr

    def contents(files):
        return Counter((name.rpartition("/")[2], hashlib.sha256(data()).hexdigest())
                       for name, data in files)

    with zipfile.ZipFile(kernel_cache.ARCHIVE) as bundle:
        shipped = contents((n, lambda n=n: bundle.read(n)) for n in bundle.namelist())
    on_disk = contents((p.name, p.read_bytes) for p in tmp_path.rglob("*.nb[ic]"))
    assert on_disk == shipped  # numba wrote no entry of its own: every kernel came from the archive


@pytest.mark.slow
def test_shipped_kernels_load_cheaply_and_still_link_into_new_code(tmp_path):
    """`kernel_cache.load_kernels_cheaply`: a parse whose kernels all load from the cache leaves
    what only numba's target-context refresh imports (typed lists, heapq, gdb hooks) and the modules
    of the numba helpers the kernels embed (numba.np.arrayobj) unimported and the parse kernel's
    bitcode unparsed; a function compiled afterwards that calls a loaded kernel links it (its
    bitcode parsed then) and computes what the kernel does; environments still pickle as numba's.
    numba's runtime library is compiled by the first process and saved, loaded (unparsed) from
    that file by the next, and compiled again over a damaged file."""
    reason = stale_reason(_shipped_manifest())
    if reason is not None:
        pytest.skip(f"the shipped kernels do not apply here: {reason}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_CPU", "BPPARSE_KERNEL"))}
    env["NUMBA_CACHE_DIR"] = str(tmp_path)
    env["BPPARSE_AOT"] = "0"  # the numba kernels, not the ahead-of-time ones (tests/test_aot.py)
    script = (
        "import pickle, sys\n"
        "import numba, numpy as np\n"
        "from numba.core import environment\n"
        "from bpparse.conll import read_conll\n"
        "from bpparse.kernels.matrix_tree import matrix_tree_marginals\n"
        "from bpparse.model import load_model\n"
        "from bpparse.parse import parse_chunk, parse_sentences\n"
        f"parsed = parse_sentences(load_model(None), list(read_conll({str(SAMPLE)!r})))\n"
        "print(len(parsed), [m for m in ('numba.typed.typedlist', 'numba.cpython.heapq',\n"
        "                                 'numba.misc.gdb_hook', 'numba.np.arrayobj') if m in sys.modules])\n"
        "library = next(iter(parse_chunk.overloads.values())).library\n"
        "runtime = numba.core.runtime.nrt.rtsys.library\n"
        "print(library._shared_module is None, getattr(runtime, '_bpparse_bitcode', None) is not None)\n"
        "a = np.arange(36.0).reshape(6, 6) % 7 / 7\n"
        "mu = matrix_tree_marginals(a, True)[0]\n"
        "library = next(iter(matrix_tree_marginals.overloads.values())).library\n"
        "unparsed = library._shared_module is None\n"
        "caller = numba.njit(lambda a: matrix_tree_marginals(a, True)[0] * 2.0)\n"
        "print(unparsed, np.array_equal(caller(a), mu * 2.0), library._shared_module is not None)\n"
        "kept = environment.Environment(sys.modules['bpparse.parse'].__dict__)\n"
        "kept.env_name = 'test'\n"
        "data = pickle.dumps(kept)\n"
        "print(pickle.loads(data).globals is kept.globals, b'numba.core.environment' in data)\n")

    def run():
        proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.split("\n")[:4]

    assert run() == ["5 []", "True False", "True True True", "True True"]  # runtime compiled
    (saved,) = tmp_path.rglob("numba-runtime.*.nrt")
    assert run() == ["5 []", "True True", "True True True", "True True"]  # loaded from the file
    saved.write_bytes(b"damaged")
    assert run() == ["5 []", "True False", "True True True", "True True"]  # compiled again
    assert saved.read_bytes() != b"damaged"
