#!/usr/bin/env python3
"""Dual decomposition on a treebank: certificates, iterations, accuracy and time (Rush et al. 2010
Figure 5 and Table 1; Koo et al. 2010).

    python3 scripts/dd_experiments.py --model M.bpm [--treebank TEST.conllu] [--limit N]
        [--iterations 50] [--rules polyak rush] [--json OUT.json]

Per sentence (single thread, kernels compiled before the clock starts): the model's scores, BP as
`bpparse parse` runs it (MBR and "map" trees), then `dual_decompose` with each step rule and BP's
MBR tree as the first candidate. Prints, per rule, the share of sentences certified within K = 5,
10, 20, 50 iterations and UAS / LAS-free accuracy of the trees returned with at most K iterations
(Rush et al. Fig. 5), a histogram of the iterations to a certificate (their Table 1), the mean dual
gap of the uncertified sentences (dual bound − score of the tree returned), UAS of the mbr / map /
dd trees, and the mean time of BP and of dd per sentence. Whole-process speed: time `bpparse parse
--decoder dd -j 1` (docs/experiments.md).
"""
import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

KS = (5, 10, 20, 50)
BUCKETS = ((1, 1), (2, 2), (3, 3), (4, 4), (5, 10), (11, 20), (21, 50))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--treebank", default=str(Path(__file__).resolve().parent.parent.parent
                                              / "shared/data/ud/en_ewt/en_ewt-ud-test.conllu"))
    ap.add_argument("--limit", type=int, default=0, help="first N sentences (0: all)")
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--rules", nargs="+", default=["ad3", "polyak", "rush"])
    ap.add_argument("--json", help="write the per-sentence records here")
    args = ap.parse_args()

    from bpparse import features as F
    from bpparse.conll import read_conll
    from bpparse.decode import mbr_decode
    from bpparse.inference import infer_scores
    from bpparse.kernels.cle import mst_decode
    from bpparse.kernels.dual_decomposition import RULES, dual_decompose
    from bpparse.kernels.eisner import eisner_decode
    from bpparse.model import load_model
    from bpparse.parse import parse_settings
    from bpparse.scoring import sentence_scores

    model = load_model(args.model)
    settings = parse_settings(model, decoder="dd").inference  # refuses models dd cannot decode
    sentences = list(read_conll(args.treebank))
    if args.limit:
        sentences = sentences[:args.limit]
    empty = np.empty(0, dtype=np.int64)

    def prepare(sentence):
        encoded = model.vocabs.encode(sentence)
        attrs = F.sentence_attributes(encoded.tokens, model.fine_tags)
        return np.asarray(encoded.heads), sentence_scores(attrs, model.weights, settings, empty)

    def bp(sc):
        res = infer_scores(sc, settings, False)
        mbr = mbr_decode(res.mu, settings.projective, settings.single_root)
        w = res.map_scores.copy()
        np.fill_diagonal(w, -np.inf)
        w[:, 0] = -np.inf
        decode = eisner_decode if settings.projective else mst_decode
        return mbr, decode(w, settings.single_root)

    def dd(sc, rule, k, mbr):
        code, step = RULES[rule]
        return dual_decompose(sc.arc, sc.pair_a, sc.pair_b, sc.pair_w, sc.n_grand, sc.seq,
                              settings.projective, settings.single_root, k, code, step, mbr[None])

    gold0, sc0 = prepare(sentences[0])  # compile before the clock starts
    mbr0, _ = bp(sc0)
    for rule in args.rules:
        dd(sc0, rule, 2, mbr0)

    records = []
    for sentence in sentences:
        gold, sc = prepare(sentence)
        t0 = time.perf_counter()
        mbr, map_tree = bp(sc)
        rec = {"n": int(len(gold) - 1), "bp_ms": 1e3 * (time.perf_counter() - t0),
               "mbr": int((mbr[1:] == gold[1:]).sum()), "map": int((map_tree[1:] == gold[1:]).sum())}
        for rule in args.rules:
            for k in KS if args.iterations == 50 else (args.iterations,):
                t0 = time.perf_counter()
                res = dd(sc, rule, k, mbr)
                ms = 1e3 * (time.perf_counter() - t0)
                key = f"{rule}{k}"
                rec[key] = int((res.heads[1:] == gold[1:]).sum())
                if k == args.iterations:
                    rec[rule] = {"certified": bool(res.certified), "iterations": int(res.iterations),
                                 "ms": ms, "gap": float(res.dual.min() - res.score)}
        records.append(rec)

    words = sum(r["n"] for r in records)
    S = len(records)
    print(f"{args.model} on {args.treebank}: {S} sentences, {words} words; "
          f"{' + '.join(model.config.model.factors)} under "
          f"{'PTREE' if settings.projective else 'TREE'}, prune {settings.prune:g}")
    print(f"UAS  mbr {100 * sum(r['mbr'] for r in records) / words:.2f}   "
          f"map {100 * sum(r['map'] for r in records) / words:.2f}   "
          f"(BP {np.mean([r['bp_ms'] for r in records]):.2f} ms a sentence)")
    for rule in args.rules:
        its = np.array([r[rule]["iterations"] if r[rule]["certified"] else 10**9 for r in records])
        print(f"\n[{rule}] certified within K iterations, and UAS of the trees returned:")
        for k in KS if args.iterations == 50 else (args.iterations,):
            uas = 100 * sum(r[f"{rule}{k}"] for r in records) / words
            print(f"  K = {k:3d}: {100 * np.mean(its <= k):5.1f}% certified   UAS {uas:.2f}")
        print("  iterations to a certificate: " + ", ".join(
            f"{lo}{'' if lo == hi else f'-{hi}'}: {100 * np.mean((its >= lo) & (its <= hi)):.1f}%"
            for lo, hi in BUCKETS) + f", none: {100 * np.mean(its > args.iterations):.1f}%")
        gaps = [r[rule]["gap"] for r in records if not r[rule]["certified"]]
        print(f"  uncertified: mean dual gap {np.mean(gaps) if gaps else 0.0:.3f} (log-odds); "
              f"dd {np.mean([r[rule]['ms'] for r in records]):.2f} ms a sentence "
              f"(mean {np.mean([r[rule]['iterations'] for r in records]):.1f} iterations)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(records, f)


if __name__ == "__main__":
    sys.exit(main())
