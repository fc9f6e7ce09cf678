#!/usr/bin/env python3
"""Relaxed marginal inference experiments (issue 7).

    python3 scripts/relax_experiments.py mu-approx [--cases 40]

Measures on small sentences (exact enumeration, n = 4..6) how far the firing probability μ used in
practice for a factor not yet in the graph (the product of its two arc marginals; for a NOCROSS group
the sum of such products over the group's crossing pairs) is from the exact μ, and what that does to
the gains and to the add / don't-add decision at ε = 1e-4.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))


def mu_approx(args):
    from oracle_relax import TreeModel, grand_sib_pairs

    from bpparse.kernels.relax_kernels import crossing_probs, factor_gains, pair_firing_probs

    rng = np.random.default_rng(args.seed)
    rows = {}
    for case in range(args.cases):
        n = (4, 5, 6)[case % 3]
        pair_a, pair_b, n_grand = grand_sib_pairs(n)
        model = TreeModel(n, pair_a, pair_b, projective=False, single_root=True)
        # real-ish first-order scores: one clearly best head per word plus noise
        link = rng.normal(0.0, args.link_scale, size=(n + 1, n + 1))
        for m in range(1, n + 1):
            link[rng.integers(0, n + 1), m] += args.link_margin
        pair_w = rng.normal(0.0, args.pair_scale, size=pair_a.shape[0])
        cross_w = np.triu(rng.normal(0.0, args.pair_scale, size=(n + 1, n + 1)), 1)
        cross_w[0] = 0.0
        cross_vec = np.array([cross_w[m, l] for (m, l) in model.groups])
        for graph in ("seed", "seed+10%"):
            on = rng.random(pair_a.shape[0]) < (0.0 if graph == "seed" else 0.1)
            p = model.probs(model.log_weights(link, pair_w, on))
            marg = model.arc_marginals(p)
            exact_pair = p @ model.pair_fire
            approx_pair = pair_firing_probs(marg.ravel(), pair_a, pair_b)
            # single root: two ROOT arcs never co-occur; relaxed_marginals knows this structural zero
            approx_pair[(pair_a // (n + 1) == 0) & (pair_b // (n + 1) == 0)] = 0.0
            exact_cross = p @ model.cross_fire
            cp = crossing_probs(marg)
            approx_cross = np.array([cp[m, l] for (m, l) in model.groups])
            fams = {
                "GRAND": (slice(0, n_grand), exact_pair, approx_pair, pair_w),
                "SIB": (slice(n_grand, None), exact_pair, approx_pair, pair_w),
                "NOCROSS": (slice(None), exact_cross, approx_cross, cross_vec),
            }
            for fam, (sl, ex, ap, th) in fams.items():
                cand = ~on[sl] if fam != "NOCROSS" else np.ones(len(model.groups), dtype=bool)
                ex, ap, th = ex[sl][cand], ap[sl][cand], th[sl][cand]
                g_ex, g_ap = factor_gains(ex, th), factor_gains(ap, th)
                r = rows.setdefault((graph, fam), [[], [], [], [], [], []])
                r[0].append(np.abs(ex - ap))
                r[1].append(np.abs(g_ex - g_ap))
                r[2].append((g_ex >= 1e-4) == (g_ap >= 1e-4))
                r[3].append(ex)
                r[4].append(np.abs(ex - ap) / np.maximum(ex, 1e-12))
                r[5].append(ap - ex)
    print(f"{'graph':9s} {'family':8s} {'mean|dmu|':>10s} {'max|dmu|':>9s} {'mean mu':>8s} "
          f"{'med rel':>8s} {'bias':>8s} {'mean|dg|':>9s} {'max|dg|':>8s} {'agree@1e-4':>10s}")
    for (graph, fam), r in rows.items():
        dmu, dg, agree, ex, rel, bias = (np.concatenate(x) for x in r)
        print(f"{graph:9s} {fam:8s} {dmu.mean():10.4f} {dmu.max():9.4f} {ex.mean():8.4f} "
              f"{np.median(rel[ex > 1e-3]):8.3f} {bias.mean():+8.4f} {dg.mean():9.5f} {dg.max():8.4f} {agree.mean():10.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("mu-approx", help="exact vs approximated firing probabilities (small n)")
    p.add_argument("--cases", type=int, default=30)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--link-scale", type=float, default=1.0)
    p.add_argument("--link-margin", type=float, default=3.0)
    p.add_argument("--pair-scale", type=float, default=1.0)
    p.set_defaults(func=mu_approx)
    args = ap.parse_args()
    t0 = time.perf_counter()
    args.func(args)
    print(f"# {time.perf_counter() - t0:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
