"""How kernels run: ahead-of-time compiled where the package ships them, else under numba, which is
imported only when a kernel needs it.

Every kernel module writes ``from bpparse.jit import njit`` (numba's options) instead of importing
numba. `njit` makes a `Kernel`: it holds the Python function and runs it

- ahead of time, when the shipped extension module (``data/aot/``, built by
  ``scripts/build_aot.py`` with numba.pycc for the portable ``generic`` x86-64 CPU, from exactly
  these sources: ``data/aot.json`` says what from, for which Python and machine, and which
  kernels it exports for which argument types) exports the kernel for exactly the argument types
  of the call (`type_key`). These are the few kernels a parse calls from Python (`parse_chunk`,
  the tagger's); such a process never imports numba: about 75 MB less memory and 0.2 s less start;
- under numba otherwise: `materialise` imports numba once (with `kernel_cache`'s cheap loading),
  turns every kernel made so far into a numba dispatcher and puts it in place of the `Kernel`
  wherever a module holds one, so that compiled callers see dispatchers; kernels made later are
  dispatchers from the start. From then on every call runs under numba.

Both run the same code: the extension is compiled from these functions by the same compiler
(a test compares their output byte for byte). ``BPPARSE_AOT=0`` turns the ahead-of-time path off.
`prange` and `intrinsic` stand for numba's until then, in the same way. A user's numba function may
call a `Kernel` like a dispatcher: numba asks it for its type (``_numba_type_``, the
dispatcher's), which imports numba's side of it.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import os
import sys
import threading
from pathlib import Path

import numpy as np

PACKAGE = Path(__file__).resolve().parent
AOT_DIR = PACKAGE / "data" / "aot"
AOT_MANIFEST = PACKAGE / "data" / "aot.json"
AOT_VARIABLE = "BPPARSE_AOT"

# numba's options for a leaf kernel: one that allocates no array and returns none (scalars, tuples
# of scalars). numba then keeps no reference counts on the arrays it is given or reads from a
# record: two atomic operations each, 35,000 a sentence in the bundled model's parse (6% of its
# time) before the feature emitters, the labeler's scores and BP's inner loops became leaves. An
# array made inside one does not compile; one it returned would be freed under its caller.
LEAF = {"_nrt": False}

_lock = threading.RLock()
_pending: list = []  # every stand-in made before numba was imported
_numba = None  # numba, once `materialise` imported it
_exports = None  # kernel name -> [(type key, compiled function)], once the extension is looked at


class _StandIn:
    """A numba object (``make(numba)``) not made yet; `materialise` makes it and puts it in place."""

    def __init__(self, make):
        self._make = make
        self._target = None

    @property
    def target(self):
        if self._target is None:
            materialise()
        return self._target


class Kernel(_StandIn):
    """An ``@njit`` function before numba is imported (see the module docstring). Calling it runs
    the ahead-of-time code for these argument types, or the numba dispatcher; any other attribute
    (``_numba_type_`` included) is the dispatcher's; ``.py_func`` is the Python function."""

    def __init__(self, py_func, options):
        super().__init__(lambda numba: numba.njit(**options)(py_func))
        functools.update_wrapper(self, py_func)
        self.py_func = py_func
        self.name = f"{py_func.__module__}.{py_func.__qualname__}"

    def __call__(self, *args):
        if self._target is None:
            compiled = ahead_of_time(self.name, args)
            if compiled is not None:
                return compiled(*args)
        return self.target(*args)

    def __getattr__(self, name):  # only for what the Kernel itself lacks
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.target, name)

    def __reduce__(self):  # by name, as pickle does functions: the module's dispatcher, or this
        return _kernel_named, (self.py_func.__module__, self.py_func.__qualname__)

    def __repr__(self):
        return f"<bpparse kernel {self.name}>"


def _kernel_named(module, qualname):
    import importlib

    value = importlib.import_module(module)
    for part in qualname.split("."):
        value = getattr(value, part)
    return value


def njit(*args, **options):
    """numba's ``njit`` (same options), made when first needed: a `Kernel`, or the dispatcher
    itself once numba is imported."""
    if args and callable(args[0]):
        return njit(**options)(args[0])

    def wrap(py_func):
        with _lock:
            if _numba is not None:
                return _numba.njit(**options)(py_func)
            kernel = Kernel(py_func, options)
            _pending.append(kernel)
            return kernel

    return wrap


def intrinsic(typer):
    """numba's ``numba.extending.intrinsic``, made when numba is imported (``typer`` imports numba's
    types itself)."""
    with _lock:
        if _numba is not None:
            return _numba.extending.intrinsic(typer)
        stand_in = _StandIn(lambda numba: numba.extending.intrinsic(typer))
        _pending.append(stand_in)
        return stand_in


prange = _StandIn(lambda numba: numba.prange)
_pending.append(prange)


def materialise():
    """Import numba (once) and put a numba object in place of every stand-in, in every module that
    holds one; returns numba."""
    global _numba
    with _lock:
        if _numba is not None:
            return _numba
        from bpparse.kernel_cache import load_kernels_cheaply, prepare

        prepare()  # the shipped numba kernels where numba looks, before numba is imported
        load_kernels_cheaply()  # before any kernel loads (bpparse.kernel_cache)
        import numba
        import numba.extending  # noqa: F401

        for stand_in in _pending:
            stand_in._target = stand_in._make(numba)
        for module in list(sys.modules.values()):
            namespace = getattr(module, "__dict__", None)
            if type(namespace) is not dict:
                continue
            for key, value in list(namespace.items()):
                if type(value) in (Kernel, _StandIn):
                    namespace[key] = value._target
        _pending.clear()
        _numba = numba
        return numba


def preload(kernel, example_args):
    """Get ``kernel`` ready for calls with the types of ``example_args`` (load or compile it) unless
    the ahead-of-time code serves them: meant for a thread started before a model file is read."""
    if type(kernel) is Kernel and kernel._target is None and \
            ahead_of_time(kernel.name, example_args) is not None:
        return
    numba = materialise()
    kernel.compile(tuple(numba.typeof(a) for a in example_args))  # a Kernel: its dispatcher's


# ------------------------------------------------------------------ the ahead-of-time extension

def type_key(value) -> str:
    """A string that determines numba's type of ``value`` for the kinds of value kernels take
    (arrays: dtype, dimensions, layout, read-only, aligned; bool, int, float and numpy scalars;
    tuples and named tuples of them); anything else gets a key no export has."""
    kind = type(value)
    if kind is np.ndarray:
        flags = value.flags
        layout = "C" if flags.c_contiguous else "F" if flags.f_contiguous else "A"
        return (f"{value.dtype.str}[{value.ndim}{layout}{'' if flags.writeable else 'r'}"
                f"{'' if flags.aligned else 'u'}]")
    if kind is bool or kind is np.bool_:
        return "?"
    if kind is int:
        return "i8"
    if kind is float:
        return "f8"
    if isinstance(value, np.generic):
        return value.dtype.str
    if isinstance(value, tuple):
        return f"{kind.__name__}({','.join(type_key(v) for v in value)})"
    return f"<{kind.__module__}.{kind.__qualname__}>"


def aot_environment() -> dict[str, str]:
    """What the extension is specific to besides the sources."""
    import platform

    return {"python": sys.implementation.cache_tag, "platform": sys.platform,
            "machine": platform.machine(), "numpy": np.__version__.split(".")[0]}


def aot_stale_reason(manifest: dict) -> str | None:
    """Why the extension of ``manifest`` cannot serve this installation, or None when it can."""
    from bpparse.kernel_cache import source_hashes

    here = aot_environment()
    for key, value in manifest["environment"].items():
        if here.get(key) != value:
            return f"built for {key} {value!r}, this is {here.get(key)!r}"
    if source_hashes() != manifest["sources"]:
        return "built from other sources"
    return None


def _load_exports() -> dict:
    if os.environ.get(AOT_VARIABLE, "1") == "0" or not AOT_MANIFEST.is_file():
        return {}
    try:
        manifest = json.loads(AOT_MANIFEST.read_text())
        if aot_stale_reason(manifest) is not None:
            return {}
        spec = importlib.util.spec_from_file_location("bpparse._aot", AOT_DIR / manifest["module"])
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return {name: [(key, getattr(module, symbol)) for symbol, key in entries]
                for name, entries in manifest["exports"].items()}
    except Exception:  # an optimisation only: numba runs what the extension would have
        return {}


def _aot_exports() -> dict:
    global _exports
    if _exports is None:
        with _lock:
            if _exports is None:
                _exports = _load_exports()
    return _exports


def aot_status() -> str:
    """One line for `bpparse info`: whether parses run ahead of time here, or why not."""
    if os.environ.get(AOT_VARIABLE, "1") == "0":
        return f"numba ({AOT_VARIABLE}=0)"
    try:
        reason = aot_stale_reason(json.loads(AOT_MANIFEST.read_text()))
    except (OSError, ValueError, KeyError) as e:
        reason = f"no readable {AOT_MANIFEST.name} ({e.__class__.__name__})"
    if reason is None and not _aot_exports():
        reason = "its module does not load here"
    if reason is not None:
        return f"numba (the ahead-of-time kernels are not used: {reason})"
    names = sorted(name.rsplit(".", 1)[1] for name in _aot_exports())
    return f"ahead of time for parsing ({', '.join(names)}), numba for the rest"


def ahead_of_time(name: str, args: tuple):
    """The ahead-of-time function of kernel ``name`` (module.qualname) for exactly the types of
    ``args``, or None."""
    entries = _aot_exports().get(name)
    if not entries:
        return None
    key = type_key(args)
    for entry_key, function in entries:
        if entry_key == key:
            return function
    return None
