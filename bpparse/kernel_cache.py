"""The compiled kernels that ship with the package, so that the first run loads instead of compiling.

numba caches each kernel's machine code beside its source (``__pycache__``, or ``NUMBA_CACHE_DIR``)
in an index file per function (``.nbi``) and one data file per compiled signature (``.nbc``),
keyed on the source file's content, the Python and numba versions and the target CPU. Compiling
bpparse's kernels takes minutes; loading them takes about a second. So the package carries such a
cache, ``data/kernel_cache.zip``, built by ``scripts/build_kernel_cache.py`` for numba's portable
``generic`` x86-64 CPU (one archive serves every x86-64 machine), with ``data/kernel_cache.json``
saying what it was built from. `prepare` (run by `bpparse.jit.materialise` before bpparse first
imports numba, so never by a parse that runs ahead of time) copies it to where numba looks, once,
when it was built from exactly these sources (every ``.py`` file of the package: a
compiled caller embeds its callees and the module constants it reads) and for this Python, numba
and machine. Otherwise nothing is copied and numba compiles as usual, so a stale or foreign
archive costs time, never correctness.

Loading a cached kernel is also made cheaper: numba refreshes its target context before every
cache load, which imports and registers all of numba's typing and lowering (0.1-0.3 s, the largest
part of a warm start), although only compiling needs them (its compiler refreshes the context
itself); `load_kernels_cheaply` makes bpparse's kernels load with the runtime (NRT) initialised
only, without parsing the bitcode numba keeps beside each kernel's machine code (to list its
symbols and to link it into callers compiled later) until a symbol lookup or a link needs it,
without importing the numba modules whose nopython helpers a kernel embeds, and with numba's
runtime library loaded from machine code saved the first time instead of compiled in every process
(which pages in LLVM's optimiser and code generator: 20-40 MB of resident memory).

``BPPARSE_KERNEL_CACHE=0`` turns both off: numba then compiles the kernels for this machine's own
CPU. The portable code is also used when it has to be compiled here, so that the archive matches:
``NUMBA_CPU_NAME`` is set to ``generic`` unless the user set it or numba has compiled a kernel
before bpparse was imported.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pickle
import platform
import re
import sys
import zipfile
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
ARCHIVE = PACKAGE / "data" / "kernel_cache.zip"
MANIFEST = PACKAGE / "data" / "kernel_cache.json"
CPU_NAME = "generic"
ENABLE_VARIABLE = "BPPARSE_KERNEL_CACHE"
LAZY_NUMBA = ("0.68",)  # numba versions whose loading steps `load_kernels_cheaply` was checked on


def enabled() -> bool:
    return os.environ.get(ENABLE_VARIABLE, "1") != "0"


def select_cpu() -> None:
    """Select the portable CPU for numba's code (see `_select_portable_cpu`); never raises."""
    if not enabled():
        return
    try:
        _select_portable_cpu()
    except Exception:  # an optimisation only: numba then compiles for this machine's CPU
        pass


def prepare() -> None:
    """Select the portable CPU and seed numba's cache from the archive (once); never raises."""
    select_cpu()
    if enabled():
        try:
            seed()
        except Exception:  # an optimisation only: on any failure numba compiles, as without it
            pass


def load_kernels_cheaply() -> None:
    """Make numba load bpparse's cached kernels without refreshing its target context and without
    parsing their bitcode until something needs it (see the module docstring; the lazy steps on
    the numba versions of LAZY_NUMBA only); other functions' loads, and every compile, are
    unchanged. Imports numba."""
    try:
        import threading

        from numba import __version__ as numba_version
        from numba.core import caching, codegen, compiler, environment
        from numba.core.runtime import nrt, nrtdynmod

        load = caching.Cache.load_overload
        initialize_runtime = nrt.rtsys.initialize
        unserialize = codegen.CPUCodeLibrary._unserialize.__func__
        rebuild = compiler.CompileResult._rebuild.__func__
        module_for_linking = codegen.CPUCodeLibrary._get_module_for_linking
        is_symbol_defined = codegen.JitEngine.is_symbol_defined
        parse_bitcode = codegen.ll.parse_bitcode
        rebuild_environment = environment._rebuild_env
        create_nrt_module = nrtdynmod.create_nrt_module
    except (ImportError, AttributeError):  # a numba without these keeps its own loading
        return
    if not enabled() or getattr(load, "bpparse", False):
        return
    class Loading(threading.local):
        bpparse = False  # a bpparse kernel (or numba's runtime for one) is loaded on this thread

    loading = Loading()
    unparsed = []  # libraries whose bitcode is not parsed yet

    @contextlib.contextmanager
    def loading_bpparse():
        outer, loading.bpparse = loading.bpparse, True
        try:
            yield
        finally:
            loading.bpparse = outer

    def load_overload(self, sig, target_context):
        if not getattr(self._py_func, "__module__", "").startswith("bpparse."):
            return load(self, sig, target_context)
        initialize_runtime(target_context)  # what a loaded kernel needs of the refresh
        with loading_bpparse(), self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)

    # A cached kernel is machine code plus the bitcode of everything it embeds, which numba parses
    # at once (tens of ms for the parse kernel) to list the symbols it defines and to link it into
    # callers it may compile later. Loading needs only the entry point's address: the bitcode is
    # parsed when a caller links it or a symbol is looked up that the parsed libraries lack.
    def lazy_unserialize(cls, codegen_, state):
        name, kind, data = state
        if kind != "object" or not loading.bpparse:
            return unserialize(cls, codegen_, state)
        library = codegen_.create_library(name)
        library.enable_object_caching()
        library._set_compiled_object(data[0])
        library._bpparse_bitcode = data[1]
        library._finalize_final_module()
        unparsed.append(library)
        return library

    def parse(library):
        if getattr(library, "_bpparse_bitcode", None) is not None:
            library._shared_module = parse_bitcode(library._bpparse_bitcode)
            library._bpparse_bitcode = None
            library._codegen._engine._load_defined_symbols(library._shared_module)

    def lazy_rebuild(cls, target_context, libdata, fndesc, *rest):
        if loading.bpparse:  # the entry points, looked up next
            engine = target_context.codegen()._engine
            engine._defined_symbols.update((fndesc.llvm_func_name, fndesc.llvm_cpython_wrapper_name))
        return rebuild(cls, target_context, libdata, fndesc, *rest)

    def lazy_module_for_linking(self):
        parse(self)
        return module_for_linking(self)

    def lazy_is_symbol_defined(self, name):
        while unparsed and not is_symbol_defined(self, name):
            parse(unparsed.pop())
        return is_symbol_defined(self, name)

    # A kernel embeds numba's own helpers (array allocation, math), and loading it rebuilds their
    # environments, each importing the module that defined the helper (numba.np.arrayobj, the ufunc
    # tables: tens of ms). Only object-mode code reads an environment's globals; these helpers are
    # compiled in nopython mode, so their environments get the module's name alone.
    def lazy_rebuild_environment(module, consts, name):
        if not (module.startswith("numba.") and loading.bpparse):
            return rebuild_environment(module, consts, name)
        env = environment.lookup_environment(name)
        if env is None:
            env = environment.Environment({"__name__": module})
            env.consts[:] = consts
            env.env_name = name
            environment.Environment._memo[name] = env
        return env

    # numba compiles its runtime's atomics and reference counting from IR in every process (19 ms,
    # and LLVM's optimiser and code generator paged in); their machine code is saved beside
    # bpparse's kernels the first time and loaded afterwards, keyed on the IR and on what numba
    # keys its own cache on
    def cached_nrt_functions(ctx):
        ir_module, library = create_nrt_module(ctx)
        key = repr((numba_version, codegen.ll.llvm_version_info, ctx.codegen().magic_tuple(),
                    str(ir_module)))
        path = _runtime_library_path(hashlib.sha256(key.encode()).hexdigest()[:16])
        if path is not None and path.is_file():
            try:
                state = pickle.loads(path.read_bytes())
            except (OSError, pickle.UnpicklingError, EOFError, ValueError):
                state = None
            if state is not None:
                with loading_bpparse():
                    return ctx.codegen().unserialize_library(state)
        library.enable_object_caching()
        library.add_ir_module(ir_module)
        library.finalize()
        if path is not None:
            try:
                _write(path, pickle.dumps(library.serialize_using_object_code()))
            except OSError:
                pass
        return library

    load_overload.bpparse = True
    caching.Cache.load_overload = load_overload
    if numba_version.rsplit(".", 1)[0] not in LAZY_NUMBA:  # they replicate that numba's own steps
        return
    # an Environment pickles as a call of whatever environment._rebuild_env is: this one, named as
    # numba's, so that what numba caches later still loads where bpparse is not imported
    lazy_rebuild_environment.__module__ = rebuild_environment.__module__
    lazy_rebuild_environment.__name__ = lazy_rebuild_environment.__qualname__ = "_rebuild_env"
    environment._rebuild_env = lazy_rebuild_environment
    codegen.CPUCodeLibrary._unserialize = classmethod(lazy_unserialize)
    compiler.CompileResult._rebuild = classmethod(lazy_rebuild)
    codegen.CPUCodeLibrary._get_module_for_linking = lazy_module_for_linking
    codegen.JitEngine.is_symbol_defined = lazy_is_symbol_defined
    nrtdynmod.compile_nrt_functions = cached_nrt_functions


def _runtime_library_path(key: str) -> Path | None:
    """Where numba's runtime library (`load_kernels_cheaply`) is saved: beside the package's
    kernels, in a file `seed` does not touch."""
    try:
        directory = numba_cache_dir(PACKAGE)
    except Exception:
        return None
    return None if directory is None else directory / f"numba-runtime.{key}.nrt"


def _select_portable_cpu() -> None:
    """Compile for the CPU the archive was built for, unless the user chose one or numba already
    generates code for this machine's (it makes its code generator once, for its first kernel)."""
    if "NUMBA_CPU_NAME" in os.environ:
        return
    if "numba" in sys.modules:
        from numba.core import config
        from numba.core.registry import cpu_target

        if "_toplevel_target_context" in vars(cpu_target):
            return
        os.environ["NUMBA_CPU_NAME"] = CPU_NAME
        config.reload_config()
    else:
        os.environ["NUMBA_CPU_NAME"] = CPU_NAME


def source_hashes(root: Path = PACKAGE) -> dict[str, str]:
    """sha256 of every ``.py`` file under ``root``, keyed by its posix path relative to it."""
    return {path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(root.rglob("*.py"))}


def environment() -> dict[str, str]:
    """What a cache entry is specific to besides the sources (numba's index key and file names)."""
    if "numba" in sys.modules:
        from numba import __version__ as numba_version, config

        cpu = config.CPU_NAME or ""
    else:
        from importlib.metadata import version

        numba_version = version("numba")
        cpu = os.environ.get("NUMBA_CPU_NAME", "")
    return {"python": sys.implementation.cache_tag, "numba": numba_version,
            "machine": platform.machine(), "platform": sys.platform, "cpu": cpu,
            "cpu_features": os.environ.get("NUMBA_CPU_FEATURES", "")}


def build_id(manifest_fields: dict) -> str:
    return hashlib.sha256(json.dumps(manifest_fields, sort_keys=True).encode()).hexdigest()


def stale_reason(manifest: dict, root: Path = PACKAGE, sources: dict | None = None) -> str | None:
    """Why the archive cannot serve this installation, or None when it can (``sources``: the
    `source_hashes` of ``root``, when the caller has them)."""
    here = environment()
    for key, value in manifest["environment"].items():
        if here.get(key) != value:
            return f"built for {key} {value!r}, this is {here.get(key)!r}"
    sources = source_hashes(root) if sources is None else sources
    changed = sorted(set(sources.items()) ^ set(manifest["sources"].items()))
    if changed:
        return f"built from other sources ({len({p for p, _ in changed})} files differ, e.g. {changed[0][0]})"
    return None


def serves_here() -> bool:
    """Whether the archive's kernels serve this installation (then numba loads, not compiles,
    what a parse needs); never raises."""
    try:
        return enabled() and stale_reason(json.loads(MANIFEST.read_text())) is None
    except Exception:
        return False


def _marker(manifest: dict, root: Path) -> Path:
    # keyed on NUMBA_CACHE_DIR too: a new cache directory is seeded again
    where = hashlib.sha1(os.environ.get("NUMBA_CACHE_DIR", "").encode()).hexdigest()[:8]
    return root / "__pycache__" / f"kernel_cache.{manifest['build_id'][:16]}.{where}.seeded"


def numba_cache_dir(package_dir: Path) -> Path | None:
    """The directory numba caches the kernels of ``package_dir``'s modules in (its own locators)."""
    from numba.core import config
    from numba.core.caching import CacheImpl

    if config.CACHE_LOCATOR_CLASSES:
        return None
    source = next(package_dir.glob("*.py"))

    def probe():
        pass

    for locator_class in CacheImpl._locator_classes:
        locator = locator_class.from_function(probe, str(source))
        if locator is not None:
            return Path(locator.get_cache_path())
    return None


def cache_entry(name: str) -> tuple[str, str]:
    """(index, source) of a numba cache file ``[dir/]module.qualname-LINE.pyXY[.K].nb[ic]`` (an
    archive member, or a file name in the cache directory of ``dir``): the file name of its
    function's index (``module.qualname-LINE.pyXY.nbi``: the index and its data files travel
    together) and its module's path as `source_hashes` keys it."""
    directory, _, filename = name.rpartition("/")
    stem = re.match(r"(.+-\d+\.py\d+)\.", filename).group(1)
    return f"{stem}.nbi", f"{directory}/{stem.split('.', 1)[0]}.py".lstrip("/")


def _clear(directory: Path | None) -> None:
    """Remove numba's index and data files from ``directory`` (one of the package's cache
    directories); other files stay."""
    if directory is None or not directory.is_dir():
        return
    for path in directory.iterdir():
        if path.suffix in (".nbi", ".nbc"):
            path.unlink(missing_ok=True)


def _write(path: Path, data: bytes) -> None:
    partial = path.with_name(f".{path.name}.{os.getpid()}.part")
    partial.write_bytes(data)
    os.replace(partial, path)


def seed(archive: Path = ARCHIVE, manifest_path: Path = MANIFEST, root: Path = PACKAGE) -> int:
    """Copy the archive's cache entries where numba will look for them; the number of files copied.

    Every entry numba had there before is removed first, even one current for its own source:
    numba stamps an entry with its function's file only, while its code embeds its callees from
    other files, which may have changed since (after an upgrade, or in a working copy). The
    archive was built from exactly these sources. Index files are written after their data.
    """
    if not manifest_path.is_file():
        return 0
    manifest = json.loads(manifest_path.read_text())
    marker = _marker(manifest, root)
    if marker.exists():
        # the marker names one index file it seeded: gone means the cache directory was deleted
        # since, and it is seeded again (else every kernel compiles: minutes); checked without
        # importing numba, which `bpparse --help` must not
        seeded = marker.read_text().strip()
        if not seeded or os.path.exists(seeded):
            return 0
    sources = source_hashes(root)
    if stale_reason(manifest, root, sources) is not None:
        return 0
    groups: dict[tuple[str, str], list[str]] = {}  # one function's index and data files
    with zipfile.ZipFile(archive) as bundle:
        for name in bundle.namelist():
            groups.setdefault((name.rpartition("/")[0], cache_entry(name)[0]), []).append(name)
        copied = 0
        sentinel = None
        targets: dict[str, Path | None] = {}
        for (directory, index), names in sorted(groups.items()):
            if directory not in targets:
                targets[directory] = numba_cache_dir(root / directory)
                _clear(targets[directory])
            target = targets[directory]
            if target is None:
                continue
            sentinel = sentinel or target / index
            for name in sorted(names, key=lambda n: n.endswith(".nbi")):  # the index last
                _write(target / Path(name).name, bundle.read(name))
                copied += 1
    try:
        marker.parent.mkdir(exist_ok=True)
        marker.write_text(str(sentinel or ""))
    except OSError:
        pass
    return copied
