"""The package's structure: layers import only downwards, kernels take records, scripts run.

These guard the layout of docs/design.md §6: an import cycle (lazy imports inside functions count
too), a numba kernel with more than 12 parameters, or a script in scripts/ that no longer starts
fails here rather than in a user's hands.
"""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "bpparse"
SCRIPTS = sorted((ROOT / "scripts").glob("*.py"))


def _modules():
    mods = {}
    for f in PACKAGE.rglob("*.py"):
        parts = f.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mods[name] = f
    return mods


def import_graph():
    """{module: set of bpparse modules it imports}, every import statement of the file counted."""
    mods = _modules()
    edges = {m: set() for m in mods}
    for m, f in mods.items():
        package = m if f.name == "__init__.py" else m.rpartition(".")[0]
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            for t in targets:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != m and t != "bpparse":
                    edges[m].add(t)
    return edges


def cycles(edges):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in edges:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle():
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_model_imports_no_layer_above_it():
    above = {"bpparse.train", "bpparse.parse", "bpparse.relax", "bpparse.inference",
             "bpparse.decode", "bpparse.cli"}
    reach, todo = set(), ["bpparse.model"]
    edges = import_graph()
    while todo:
        for w in edges[todo.pop()]:
            if w not in reach:
                reach.add(w)
                todo.append(w)
    assert not {m for m in reach if m in above or m.startswith("bpparse.cli.")}


def test_no_numba_kernel_takes_more_than_12_parameters():
    wide = []
    for f in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list):
                a = node.args
                count = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs)
                if count > 12:
                    wide.append(f"{f.relative_to(ROOT)}:{node.lineno} {node.name} ({count})")
    assert wide == []


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_script_starts(script):
    run = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert "usage:" in run.stdout
