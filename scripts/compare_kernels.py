"""The parse kernel of this checkout against another checkout's, in one process, chunk by chunk.

    git worktree add /tmp/before d85d5be
    python3 scripts/compare_kernels.py /tmp/before ../shared/data/ud/en_ewt/en_ewt-ud-test.conllu
    python3 scripts/compare_kernels.py /tmp/before test.conllu --model full.bpm --relax

Whole-process timings on a shared machine vary by more than a few percent from run to run (see
docs/benchmarks.md). This loads the other checkout's shipped ahead-of-time extension
(``bpparse/data/aot/``, which must match that checkout's sources) beside this one's, parses the
input with this checkout's bundled model (or ``--model``) and hands every chunk to both
extensions' ``parse_chunk`` (with ``--relax``: ``parse_chunk_relaxed``, relaxed inference at
`bpparse relax`'s defaults), in alternating order, timing each call: both see the same machine at
the same moment. Prints ms a sentence of each and their ratio, over ``--passes`` passes. The two
must take the same argument types (the records of `bpparse.parse`): compare checkouts whose
kernels' signatures agree. Both write the same output buffers; the second writer's trees are kept.
"""
import argparse
import importlib.util
import json
import time
from pathlib import Path

import numpy as np

def other_kernels(root, kernel):
    """{type key: compiled ``kernel``} of the extension shipped in checkout ``root``."""
    manifest = json.loads((root / "bpparse" / "data" / "aot.json").read_text())
    spec = importlib.util.spec_from_file_location(
        "bpparse_other._aot", root / "bpparse" / "data" / "aot" / manifest["module"])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {key: getattr(module, symbol) for symbol, key in manifest["exports"][kernel]}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("other", type=Path, help="the other checkout (its bpparse/data/aot built)")
    ap.add_argument("input", help="CoNLL-U file")
    ap.add_argument("--model", default=None, help="model path or bundled name (default: bundled)")
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--relax", action="store_true", help="relaxed inference (bpparse relax)")
    args = ap.parse_args()
    kernel = "bpparse.parse.parse_chunk" + ("_relaxed" if args.relax else "")

    from bpparse import jit
    from bpparse.conll import read_conll
    from bpparse.model import load_model
    from bpparse.parse import iter_parse, parse_settings
    from bpparse.relax import relaxed_settings

    exports = jit._aot_exports()
    if not exports.get(kernel):
        raise SystemExit("this checkout's ahead-of-time kernels do not load (bpparse info says why)")
    other = other_kernels(args.other.resolve(), kernel)
    spent = {"this": [], "other": []}

    def timed(key, here):
        there = other[key]

        def both(*call):
            order = [("this", here), ("other", there)]
            if len(spent["this"]) % 2:
                order.reverse()
            for name, compiled in order:
                start = time.perf_counter()
                compiled(*call)
                spent[name].append(time.perf_counter() - start)
        return both

    exports[kernel] = [(key, timed(key, here)) for key, here in exports[kernel]]
    model = load_model(args.model)
    settings = parse_settings(model)
    if args.relax:
        settings = settings._replace(relax=relaxed_settings(settings.inference))
    sentences = list(read_conll(args.input))
    list(iter_parse(model, sentences[:50], settings))  # page in both before timing
    for times in spent.values():
        times.clear()
    for _ in range(args.passes):
        list(iter_parse(model, sentences, settings))
    this, there = np.array(spent["this"]), np.array(spent["other"])
    n = len(sentences) * args.passes
    print(f"this checkout {1000 * this.sum() / n:.4f} ms a sentence, {args.other}: "
          f"{1000 * there.sum() / n:.4f}; ratio {this.sum() / there.sum():.4f} "
          f"(chunk by chunk: median {np.median(this / there):.4f} of {this.shape[0]} chunks)")


if __name__ == "__main__":
    main()
