"""The ahead-of-time kernels shipped with the package (bpparse/jit.py): built from these sources,
used only for exactly the argument types they were compiled for, and writing what numba writes,
in a process that never imports numba."""
import json
import os
import pickle
import subprocess
import sys
from collections import namedtuple

import numba
import numpy as np
import pytest

from bpparse import jit
from bpparse.conll import read_conll, write_conll
from bpparse.kernel_cache import source_hashes
from bpparse.tagging import strip_tags

SAMPLE = jit.PACKAGE / "data" / "sample.conllu"
TINY = os.path.join(os.path.dirname(__file__), "data", "en_ewt_train_tiny.conllu")
REBUILD = "rebuild it: python3 scripts/build_kernel_cache.py (which runs scripts/build_aot.py)"


def _manifest():
    return json.loads(jit.AOT_MANIFEST.read_text())


def _applies():
    reason = jit.aot_stale_reason(_manifest())
    if reason is not None and reason != "built from other sources":
        pytest.skip(f"the shipped ahead-of-time kernels do not apply here: {reason}")


def test_shipped_extension_is_built_from_these_sources():
    manifest = _manifest()
    here, built = source_hashes(), manifest["sources"]
    changed = sorted(p for p in here.keys() | built.keys() if here.get(p) != built.get(p))
    assert not changed, f"the ahead-of-time kernels are stale ({', '.join(changed[:5])} changed): {REBUILD}"
    assert (jit.AOT_DIR / manifest["module"]).is_file()
    assert {"bpparse.parse.parse_chunk", "bpparse.kernels.chain.column_predict"} <= set(manifest["exports"])


def test_type_key_determines_numbas_type():
    Pair = namedtuple("Pair", "a b")
    base = np.zeros((3, 4))
    readonly = np.zeros(3)
    readonly.flags.writeable = False
    values = [base, np.asfortranarray(base), base[:, ::2], base[0], base.astype(np.float32),
              np.zeros(3, np.int64), np.zeros(3, np.int32), np.zeros(3, np.uint8), readonly,
              np.zeros(3, np.bool_), np.zeros((2, 2, 2)), True, np.True_, 3, 3.0, np.float32(3),
              np.int64(3), np.uint64(3), np.int32(3), (1, 2.0), (1, 2), Pair(np.zeros(3), 1),
              Pair(np.zeros(3, np.int64), 1), Pair(np.zeros(3), 1.0), (np.zeros(3), (True, 2))]
    for a in values:
        for b in values:
            if jit.type_key(a) == jit.type_key(b):
                assert numba.typeof(a) == numba.typeof(b), (jit.type_key(a), a, b)
    keys = [jit.type_key(v) for v in values]
    assert len(set(keys[:11])) == 11  # every array kind above is told apart
    assert jit.type_key(object()) != jit.type_key(None) and "object" in jit.type_key(object())


def test_exports_serve_only_their_own_argument_types():
    _applies()
    i64, u64, f64 = np.zeros(2, np.int64), np.zeros(2, np.uint64), np.zeros(2)
    nf = np.zeros((0, 0, 2, 1), np.int16)  # features.NO_LABEL_FILTER
    name = "bpparse.features.store.dense_weights"
    if jit.aot_stale_reason(_manifest()) is None:
        assert jit.ahead_of_time(name, (True, i64, u64, f64, nf)) is not None
    assert jit.ahead_of_time(name, (True, i64, u64, f64.astype(np.float32), nf)) is None
    assert jit.ahead_of_time(name, (True, i64, u64, np.zeros((2, 2))[:, 0], nf)) is None
    assert jit.ahead_of_time("bpparse.features.store.no_such_kernel", (True,)) is None


def test_a_stale_or_foreign_extension_is_never_loaded(tmp_path, monkeypatch):
    manifest = _manifest()
    for key, value in (("sources", {**manifest["sources"], "parse.py": "0" * 64}),
                       ("environment", {**manifest["environment"], "python": "cpython-27"})):
        changed = tmp_path / f"{key}.json"
        changed.write_text(json.dumps({**manifest, key: value}))
        monkeypatch.setattr(jit, "AOT_MANIFEST", changed)
        assert jit.aot_stale_reason({**manifest, key: value}) is not None
        assert jit._load_exports() == {}
    monkeypatch.setattr(jit, "AOT_MANIFEST", tmp_path / "missing.json")
    assert jit._load_exports() == {}


def test_info_says_how_kernels_run(monkeypatch, tmp_path):
    _applies()
    if jit.aot_stale_reason(_manifest()) is None:
        assert jit.aot_status().startswith("ahead of time for parsing (") and "parse_chunk" in jit.aot_status()
    monkeypatch.setenv("BPPARSE_AOT", "0")
    assert jit.aot_status() == "numba (BPPARSE_AOT=0)"
    monkeypatch.delenv("BPPARSE_AOT")
    changed = tmp_path / "aot.json"
    changed.write_text(json.dumps({**_manifest(), "sources": {}}))
    monkeypatch.setattr(jit, "AOT_MANIFEST", changed)
    assert jit.aot_status() == ("numba (the ahead-of-time kernels are not used: built from other "
                                "sources)")


def test_a_kernel_pickles_by_name():
    from bpparse.features import store

    kernel = jit.Kernel(store.dense_weights.py_func, {"cache": True})
    assert kernel.name == "bpparse.features.store.dense_weights"
    assert pickle.loads(pickle.dumps(kernel)) is store.dense_weights


def _run(script, aot=True, cache_dir=None):
    env = dict(os.environ)
    env["BPPARSE_AOT"] = "1" if aot else "0"
    if cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = str(cache_dir)
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.slow
def test_a_parse_runs_ahead_of_time_without_numba_and_writes_what_numba_writes(tmp_path):
    _applies()
    if jit.aot_stale_reason(_manifest()) is not None:
        pytest.fail(f"the ahead-of-time kernels are stale: {REBUILD}")
    untagged = tmp_path / "untagged.conllu"
    write_conll([strip_tags(s) for s in read_conll(str(SAMPLE))], str(untagged))
    commands = [["parse", str(SAMPLE), "--marginals"], ["parse", str(untagged), "--marginals"],
                ["parse", TINY, "--jobs", "2", "--decoder", "map"], ["parse", str(SAMPLE), "--decoder", "dd"]]
    script = (
        "import contextlib, io, sys\n"
        "from bpparse.cli import main\n"
        f"for argv in {commands!r}:\n"
        "    out = io.StringIO()\n"
        "    with contextlib.redirect_stdout(out):\n"
        "        try:\n"
        "            main(argv)\n"
        "        except SystemExit as e:\n"
        "            assert not e.code, e.code\n"
        "    print(repr(out.getvalue()))\n"
        "print('numba' in sys.modules)\n")
    cache = tmp_path / "cache"  # as after a fresh install: nothing seeded, nothing compiled
    ahead, under_numba = _run(script, cache_dir=cache).splitlines(), _run(script, aot=False).splitlines()
    assert ahead[-1] == "False" and under_numba[-1] == "True"
    assert not cache.exists() or not any(cache.rglob("*.nb[ic]"))
    assert ahead[:-1] == under_numba[:-1]  # byte for byte, tagger, marginals, threads and dd included
    assert all(r.count("\\n1\\t") >= 5 for r in ahead[:-1])


@pytest.mark.slow
def test_other_argument_types_bring_numba_in_and_every_module_sees_dispatchers():
    _applies()
    script = (
        "import sys\n"
        "import numpy as np\n"
        "import bpparse.parse as P\n"
        "from bpparse import features as F, jit\n"
        "i64, u64 = np.zeros(2, np.int64), np.zeros(2, np.uint64)\n"
        "w = F.dense_weights(True, i64, u64, np.arange(2.0), F.NO_LABEL_FILTER)\n"
        "before = 'numba' in sys.modules\n"
        "w32 = F.dense_weights(True, i64, u64, np.arange(2.0, dtype=np.float32), F.NO_LABEL_FILTER)\n"
        "from numba.core.dispatcher import Dispatcher\n"
        "print(before, 'numba' in sys.modules, w32.dense.dtype, w.dense.tolist(),\n"
        "      isinstance(P.parse_chunk, Dispatcher), isinstance(F.dense_weights, Dispatcher),\n"
        "      jit._numba is not None)\n")
    assert _run(script).split() == ["False", "True", "float32", "[0.0,", "1.0]", "True", "True",
                                    "True"]


@pytest.mark.slow
def test_numba_code_calls_a_kernel_before_numba_was_needed():
    script = (
        "import numpy as np\n"
        "from bpparse.kernels.matrix_tree import matrix_tree_marginals\n"
        "import numba\n"
        "caller = numba.njit(lambda a: matrix_tree_marginals(a, True)[0] * 2.0)\n"
        "a = np.arange(36.0).reshape(6, 6) % 7 / 7\n"
        "print(type(matrix_tree_marginals).__name__,\n"
        "      np.array_equal(caller(a), matrix_tree_marginals(a, True)[0] * 2.0))\n")
    assert _run(script).split() == ["Kernel", "True"]
