#!/usr/bin/env python3
"""BP versus exact DP on a second-order projective model (Smith & Eisner 2008 §8.4, Figures 2-4).

    python3 scripts/search_error.py --model M.bpm [--treebank TEST.conllu] [--limit N]
        [--iterations 1 2 3 5 10] [--damping D] [--json OUT.json] [--plots DIR]

The model is LINK + CHILDSEQ under PTREE (configs/childseq-projective.toml; exact inference is
Eisner / McDonald & Pereira's O(n³) DP with sibling items, `bpparse.sibling_marginals`) or LINK +
GRAND under PTREE (`--set model.factors='["LINK","GRAND"]'` on second-order-projective; the O(n⁴)
grandparent DP of `bpparse.kernels.grand_dp`, SE08 Figs. 2 and 4). The same scores define BP's
factor graph, with every arc in it (prune 0), so BP and DP see one model. Per sentence, single thread, warm (compiled before the clock starts), the inference
kernels only (scores are computed before): "MBR by DP" = inside-outside + Eisner's decoder over the
marginals, "Viterbi DP" = the max-score tree, "BP k" = k flooding iterations (no early stop) + the
same MBR decoder. Search error (SE08 Fig. 4): the share of words whose head in BP's MBR tree differs
from the exact MBR tree's, averaged over sentences. UAS against the gold trees is printed too.
Prints a table by sentence length and overall; ``--plots`` writes the two figures (needs the
``[plots]`` extra, matplotlib).
"""
import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

BINS = (1, 11, 21, 31, 41, 61, 1000)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--treebank", default=str(Path(__file__).resolve().parent.parent.parent
                                              / "shared/data/ud/en_ewt/en_ewt-ud-test.conllu"))
    ap.add_argument("--limit", type=int, default=0, help="first N sentences (0: all)")
    ap.add_argument("--iterations", type=int, nargs="+", default=[1, 2, 3, 5, 10])
    ap.add_argument("--damping", type=float, default=None,
                    help="BP damping (default: the model's parse setting)")
    ap.add_argument("--json", help="write the per-sentence records here")
    ap.add_argument("--plots", help="directory for KIND_runtime.svg and KIND_search_error.svg "
                                    "(KIND: childseq or grand)")
    args = ap.parse_args()

    from bpparse import features as F
    from bpparse.conll import read_conll
    from bpparse.decode import mbr_decode
    from bpparse.inference import bp_options_of
    from bpparse.graph import scatter_pair_values
    from bpparse.kernels.bp_engine import PairFactors, beliefs_to_marginals, bp_full_graph
    from bpparse.kernels.factors.childseq import dense_transition_values
    from bpparse.model import load_model
    from bpparse.scoring import sentence_scores

    model = load_model(args.model)
    cfg = model.config
    factors = set(cfg.model.factors)
    if factors not in ({"LINK", "CHILDSEQ"}, {"LINK", "GRAND"}) or cfg.parse.constraint != "PTREE":
        sys.exit(f"{args.model}: needs a LINK + CHILDSEQ or LINK + GRAND model under PTREE")
    if "GRAND" in factors:
        from bpparse.kernels.grand_dp import grand_decode as decode
        from bpparse.kernels.grand_dp import grand_inside_outside as inside_outside
    else:
        from bpparse.kernels.sibling_dp import sibling_decode as decode
        from bpparse.kernels.sibling_dp import sibling_inside_outside as inside_outside
    settings = cfg.inference_settings("parse", prune=0.0, tolerance=0.0, damping=args.damping)
    single_root = settings.single_root
    empty = np.empty(0, dtype=np.int64)

    def run(sentence):
        e = model.encode(sentence)
        attrs = F.sentence_attributes(e.tokens, model.fine_tags)
        sc = sentence_scores(attrs, model.weights, settings, empty)
        n1 = sc.arc.shape[0]
        if "GRAND" in factors:
            dense = scatter_pair_values(sc.pair_w, sc.pair_a, sc.pair_b, 0, sc.n_grand, n1)
        else:
            dense = dense_transition_values(sc.seq, sc.seq.w, n1)
        pairs = PairFactors(sc.pair_a, sc.pair_b, sc.pair_w)
        rec = {"n": n1 - 1}
        t = time.perf_counter()
        mu, _, _ = inside_outside(sc.arc, dense, single_root)
        exact = mbr_decode(mu, True, single_root)
        rec["mbr_dp"] = time.perf_counter() - t
        t = time.perf_counter()
        viterbi, _ = decode(sc.arc, dense, single_root)
        rec["viterbi_dp"] = time.perf_counter() - t
        gold = np.asarray(e.heads)
        rec["uas_mbr_dp"] = float(np.mean(exact[1:] == gold[1:]))
        rec["uas_viterbi_dp"] = float(np.mean(viterbi[1:] == gold[1:]))
        for k in args.iterations:
            opts = bp_options_of(settings._replace(iterations=k))
            t = time.perf_counter()
            bel = bp_full_graph(sc.arc, pairs, np.zeros((0, 0)), False, 0, sc.seq, opts,
                                sc.first_mu)[0]
            tree = mbr_decode(beliefs_to_marginals(bel), True, single_root)
            rec[f"bp{k}"] = time.perf_counter() - t
            rec[f"err_bp{k}"] = float(np.mean(tree[1:] != exact[1:]))
            rec[f"uas_bp{k}"] = float(np.mean(tree[1:] == gold[1:]))
        return rec

    sentences = list(read_conll(args.treebank))
    if args.limit:
        sentences = sentences[:args.limit]
    run(sentences[0])  # compile
    records = [run(s) for s in sentences]
    if args.json:
        Path(args.json).write_text(json.dumps(records))
    report(records, args.iterations)
    if args.plots:
        plots(records, args.iterations, Path(args.plots), "grand" if "GRAND" in factors else "childseq")


def report(records, iterations):
    cols = ["mbr_dp", "viterbi_dp"] + [f"bp{k}" for k in iterations]
    print(f"{len(records)} sentences; ms per sentence (inference kernels, one thread)")
    print("| length | sentences | MBR by DP | Viterbi DP | " + " | ".join(f"BP {k}" for k in iterations) + " |")
    print("|---" * (2 + len(cols)) + "|")
    for lo, hi in zip(BINS, BINS[1:]):
        rs = [r for r in records if lo <= r["n"] < hi]
        if rs:
            name = f"{lo}-{hi - 1}" if hi < 1000 else f">= {lo}"
            print(f"| {name} | {len(rs)} | " + " | ".join(
                f"{1000 * np.mean([r[c] for r in rs]):.2f}" for c in cols) + " |")
    print(f"| all | {len(records)} | " + " | ".join(
        f"{1000 * np.mean([r[c] for r in records]):.2f}" for c in cols) + " |")
    print()
    print("| | MBR by DP | Viterbi DP | " + " | ".join(f"BP {k}" for k in iterations) + " |")
    print("|---" * (3 + len(iterations)) + "|")
    words = sum(r["n"] for r in records)

    def uas(c):
        return 100 * sum(r[c] * r["n"] for r in records) / words
    print("| UAS (words) | " + " | ".join(f"{uas(c):.2f}" for c in
                                          ["uas_mbr_dp", "uas_viterbi_dp"] + [f"uas_bp{k}" for k in iterations]) + " |")
    print("| search error vs exact MBR (% of words, sentence average) | 0 | | " + " | ".join(
        f"{100 * np.mean([r[f'err_bp{k}'] for r in records]):.2f}" for k in iterations) + " |")


def plots(records, iterations, out, kind):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    lengths = np.array([r["n"] for r in records])
    edges = np.arange(0, lengths.max() + 6, 5)
    centres, rows = [], {c: [] for c in ["mbr_dp", "viterbi_dp"] + [f"bp{k}" for k in iterations]}
    for lo, hi in zip(edges, edges[1:]):
        sel = [r for r in records if lo < r["n"] <= hi]
        if len(sel) >= 3:
            centres.append((lo + hi) / 2)
            for c in rows:
                rows[c].append(1000 * np.mean([r[c] for r in sel]))
    fig, ax = plt.subplots(figsize=(5.5, 4))
    ax.plot(centres, rows["mbr_dp"], "k-", label="MBR by DP")
    ax.plot(centres, rows["viterbi_dp"], "k--", label="Viterbi DP")
    for k in iterations:
        ax.plot(centres, rows[f"bp{k}"], label=f"{k} iterations of BP")
    ax.set_xlabel("Sentence length")
    ax.set_ylabel("Average inference time (ms)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / f"{kind}_runtime.svg")
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for lo, hi in ((1, 20), (21, 40), (41, 1000)):
        sel = [r for r in records if lo <= r["n"] <= hi]
        if not sel:
            continue
        xs = [1000 * np.mean([r[f"bp{k}"] for r in sel]) for k in iterations]
        ys = [np.mean([r[f"err_bp{k}"] for r in sel]) for k in iterations]
        label = f"{lo}-{hi} words" if hi < 1000 else f"> {lo - 1} words"
        ax.plot(xs, ys, "o-", label=label)
        for x, y, k in zip(xs, ys, iterations):
            ax.annotate(str(k), (x, y), fontsize=7, textcoords="offset points", xytext=(3, 3))
        ax.axvline(1000 * np.mean([r["mbr_dp"] for r in sel]), ls=":", color=ax.lines[-1].get_color())
    ax.set_xlabel("Inference time per sentence (ms); dotted: MBR by DP")
    ax.set_ylabel("Error relative to exact MBR")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / f"{kind}_search_error.svg")


if __name__ == "__main__":
    main()
