#!/usr/bin/env python3
"""Relaxed marginal inference experiments (issue 7). Single runs on one core; prints tables.

    python3 scripts/relax_experiments.py table [--model M.bpm] [--corpus ewt bosque] [--limit N]
                                               [--prune P]
    python3 scripts/relax_experiments.py mu-approx [--cases 30]
    python3 scripts/relax_experiments.py fixed-points --model M.bpm [--corpus ewt]

``table``: the analogue of Riedel & Smith (2010) Tables 1-2 and Riedel, Smith & McCallum Table 1 on
UD EWT test and Bosque test: full BP (at most 10 iterations), Rel(R, ε, B), MinJoint, MinSize,
MinDivergence, and pruning by |θ|; columns: % of second-order factors used, ms per sentence
(CPU time of inference only: the factor graph's arrays are built before the clock starts, as for full BP), mean
and mean-of-max absolute marginal error against full BP, UAS of the MBR tree. Without ``--model`` the
scores are synthetic (see `synthetic_scores`), one fixed seed per sentence.

``mu-approx``: on small sentences (exact enumeration, n = 4..6), how far the firing probability μ
used in practice for a factor not yet in the graph (the product of its two arc marginals; for a
NOCROSS group the sum of such products over the group's crossing pairs) is from the exact μ, and
what that does to the gains and to the add / don't-add decision at ε = 1e-4.

``fixed-points``: the sentences where relaxed and (converged, damped) full BP disagree by more than
0.5 on some arc, and whether the relaxed marginals are themselves a fixed point of full BP.
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
            # single root: two ROOT arcs never co-occur; the kernel knows this structural zero
            approx_pair = pair_firing_probs(marg.ravel(), pair_a, pair_b, pair_a.shape[0], True)
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


DATA = "../shared/data/ud"
CORPORA = {"ewt": f"{DATA}/en_ewt/en_ewt-ud-test.conllu",
           "bosque": f"{DATA}/pt_bosque/pt_bosque-ud-test.conllu",
           "ddt": f"{DATA}/da_ddt/da_ddt-ud-test.conllu"}


def synthetic_scores(gold, rng, args):
    """Real-ish scores for one sentence with gold heads ``gold`` (int64 n+1): LINK scores favour the
    gold head by ``link_margin`` over N(0, link_noise) noise and penalise distance (a first-order
    model of roughly the accuracy of a trained one); GRAND / SIB weights are N(0, pair_noise) plus
    ``pair_bonus`` when both arcs are gold, so that second-order factors correct some first-order
    errors; NOCROSS weights (with --cross) N(0, pair_noise). Returns (link, pair_a, pair_b, pair_w,
    n_grand, cross_w or None)."""
    from bpparse.graph import all_pairs

    n = gold.shape[0] - 1
    n1 = n + 1
    idx = np.arange(n1)
    dist = np.abs(idx[:, None] - idx[None, :]).astype(float)
    link = rng.normal(0.0, args.link_noise, (n1, n1)) - args.link_distance * np.log1p(dist)
    link[gold[1:], idx[1:]] += args.link_margin
    pa, pb, n_grand = all_pairs(n)
    gold_arc = np.zeros(n1 * n1, dtype=bool)
    gold_arc[gold[1:] * n1 + idx[1:]] = True
    pw = rng.normal(0.0, args.pair_noise, pa.shape[0]) + args.pair_bonus * (gold_arc[pa] & gold_arc[pb])
    cross_w = None
    if args.cross:
        cross_w = np.triu(rng.normal(0.0, args.pair_noise, (n1, n1)), 1)
        cross_w[0] = 0.0
    return link, pa, pb, pw, n_grand, cross_w


def model_scores(model, sentence, prune=None):
    """A model's scores of one sentence over the full graph parsing uses: GRAND / SIB pruned to the
    arcs of first-order marginal >= ``prune`` (None: the model's [parse] prune; 0: every factor,
    the issue's setting)."""
    from bpparse.scoring import encoded_scores

    settings = model.config.inference_settings("parse", prune=prune)
    arc, _, pa, pb, pw, n_grand, cross_w, _ = encoded_scores(model, model.encode(sentence), settings)
    return arc, pa, pb, pw, n_grand, (cross_w if cross_w.size else None)


CONFIGS = (
    # label, kind, options
    ("BP", "bp", {"max_iter": 10}),
    ("BP(50,d0.5)", "bp", {"max_iter": 50, "damping": 0.5}),
    ("first-order", "relax", {"method": "iterative", "threshold": np.inf}),
    ("Rel(inf,1e-4,5)", "relax", {"method": "iterative", "threshold": 1e-4, "bp_iter": 5}),
    ("Rel(1,1e-4,50)", "relax", {"method": "iterative", "threshold": 1e-4, "max_rounds": 1,
                                 "bp_iter": 50}),
    ("Rel(inf,0.1,50)", "relax", {"method": "iterative", "threshold": 0.1, "bp_iter": 50}),
    # relaxed BP with the full graph's damping (the relaxed rows default to --relax-damping, 0)
    ("Rel(inf,1e-4,5,d0.5)", "relax", {"method": "iterative", "threshold": 1e-4, "bp_iter": 5,
                                       "damping": 0.5}),
    ("Rel(1,1e-4,50,d0.5)", "relax", {"method": "iterative", "threshold": 1e-4, "max_rounds": 1,
                                      "bp_iter": 50, "damping": 0.5}),
    ("MinJoint", "relax", {"method": "joint", "bp_iter": 10}),
    ("MinSize", "relax", {"method": "size", "bp_iter": 10}),
    ("MinDivergence", "relax", {"method": "divergence", "bp_iter": 10}),
    ("Pruned0.1", "prune", {"t": 0.1, "max_iter": 10}),
    ("Pruned0.5", "prune", {"t": 0.5, "max_iter": 10}),
)


LENGTH_BINS = np.array([10, 20, 30, 40, 10 ** 6])


def table(args):
    from bpparse.bp import mbr_decode
    from bpparse.conll import read_conll
    from bpparse.kernels.factors.childseq import no_childseq
    from bpparse.kernels.bp_engine import (DEFAULT_CLIP, TREE, CrossFactors, PairFactors,
                                           beliefs_to_marginals, bp_engine, bp_options)
    from bpparse.kernels.relax_kernels import relaxed_bp
    from bpparse.relax import graph_from_flat, relax_kernel_args, result_bounds, result_from_kernel

    model = None
    projective, single_root, constraint, cross_mode = args.projective, True, "tree", "grouped"
    if args.model:
        from bpparse.model import load_model

        model = load_model(args.model)
        projective = model.config.parse.constraint.upper().startswith("PTREE")
        single_root = bool(model.config.model.single_root)
        cross_mode = model.config.model.nocross
        if args.damping is None:
            args.damping = float(model.config.parse.damping)
        if args.prune is None:
            args.prune = float(getattr(model.config.parse, "prune", 0.0))
    if args.damping is None:
        args.damping = 0.0
    configs = [c for c in CONFIGS if not args.only or c[0] in args.only]
    baseline = configs[0][0]  # speed-ups are against it (BP unless --only leaves it out)
    reference = args.reference or baseline
    # per sentence the relaxed and pruned rows run first and full BP last: the first kernel to
    # touch a sentence's arrays finds them colder, which costs relaxed inference up to ~10% (it
    # reads them a few times) and full BP nothing measurable (it streams them every iteration)
    configs.sort(key=lambda c: c[1] == "bp")
    opts = {"MinJoint": {"threshold": args.joint_gamma}, "MinSize": {"threshold": args.size_eps},
            "MinDivergence": {"max_factors": args.divergence_m}}
    print(f"# scores: {'model ' + args.model if model else 'synthetic'}; projective={projective}; "
          f"single_root={single_root}; prune={args.prune} (second-order factors on arcs of "
          f"first-order marginal >= prune; 0: the full graph); tol={args.tol}; "
          f"damping: full/pruned BP {args.damping}, relaxed {args.relax_damping} (except where "
          f"the label says); MinJoint gamma={args.joint_gamma}, MinSize eps={args.size_eps}, "
          f"MinDivergence m={args.divergence_m}")

    def bp_args(link, pa, pb, pw, graph, cross_active, max_iter, damping):
        size = graph.n + 1
        k = pa.shape[0]
        if graph.cross_w is None:
            cw, ca, cmsg = np.zeros((size, size)), np.zeros((size, size), bool), np.zeros((0, 0, 0))
        else:
            cw, ca, cmsg = graph.cross_w, cross_active, np.zeros((size, size, size))
        return (link, PairFactors(pa, pb, pw), np.arange(k), np.zeros(k), np.zeros(k),
                CrossFactors(cw, ca, 1 if cross_mode == "exactly1" else 0, cmsg,
                             np.zeros((0, 0), bool)), no_childseq(),
                np.zeros((size, size)),
                bp_options(TREE, projective, single_root, max_iter, args.tol, damping, DEFAULT_CLIP))

    def prepare(kind, o, link, graph):
        """(kernel, its arguments, finish(output) -> (marginals, (used, total), rounds, bound,
        converged, BP iterations)): everything but the kernel call is done here or in finish,
        untimed."""
        n_cross = 0 if graph.cross_w is None else int(graph.cross_active.sum())
        total = graph.n_grand + graph.n_sib + n_cross
        if kind == "bp":
            # the engine call alone (what a parser needs: beliefs), as relaxed inference is timed
            a = bp_args(link, graph.pair_a, graph.pair_b, graph.pair_w, graph, graph.cross_active,
                        o["max_iter"], o.get("damping", args.damping))
            return bp_engine, a, lambda out: (beliefs_to_marginals(out[0]), (total, total), 0,
                                              0.0, out[2], out[1])
        if kind == "prune":
            # full BP on the compact subgraph of the factors with |θ| ≥ t (NAND pairs kept)
            on = np.abs(graph.pair_w) >= o["t"]
            on[graph.n_grand + graph.n_sib:] = True
            ca = graph.cross_active
            used = int(on[:graph.n_grand + graph.n_sib].sum())
            if graph.cross_w is not None:
                ca = graph.cross_active & (np.abs(graph.cross_w) >= o["t"])
                used += int(ca.sum())
            sel = np.nonzero(on)[0]
            a = bp_args(link, graph.pair_a[sel], graph.pair_b[sel], graph.pair_w[sel], graph, ca,
                        o["max_iter"], args.damping)
            return bp_engine, a, lambda out: (beliefs_to_marginals(out[0]), (used, total), 0,
                                              np.nan, out[2], out[1])
        kw = {k: v for k, v in o.items() if k not in ("damping",)}
        a = relax_kernel_args(link, graph, projective=projective, single_root=single_root,
                              tol=args.tol, damping=o.get("damping", args.relax_damping),
                              cross_mode=cross_mode,
                              constraint=constraint, **kw)

        def finish(out):
            r = result_from_kernel(graph, out, single_root, constraint, cross_mode, None)
            used = r.active.shape[0] - graph.n_nand + (
                0 if r.cross_active is None else int(r.cross_active.sum()))
            # the KL bound is not needed to parse: computed here, untimed
            return (r.marginals, (used, total), r.rounds,
                    result_bounds(r, single_root, constraint)[0], out[11], out[9])
        return relaxed_bp, a, finish

    for corpus in args.corpus:
        path = CORPORA.get(corpus, corpus)
        sents = list(read_conll(path))
        if args.limit:
            sents = sents[:args.limit]
        stats = {c[0]: {"t": 0.0, "used": 0, "total": 0, "err": 0.0, "maxerr": 0.0, "worst": 0.0,
                        "correct": 0, "rounds": 0, "bound": 0.0, "conv": 0, "its": 0,
                        "by_len": np.zeros(len(LENGTH_BINS))} for c in configs}
        per_bin = np.zeros(len(LENGTH_BINS), dtype=np.int64)
        words = 0
        warm = False
        for i, sent in enumerate(sents):
            gold = np.asarray(sent.heads, dtype=np.int64)
            n = gold.shape[0] - 1
            if model is not None:
                link, pa, pb, pw, n_grand, cross_w = model_scores(model, sent, args.prune)
            else:
                link, pa, pb, pw, n_grand, cross_w = synthetic_scores(
                    gold, np.random.default_rng([args.seed, i]), args)
            graph = graph_from_flat(n, pa, pb, pw, n_grand, cross_w, constraint)
            if not warm:  # compile every kernel before the clock starts
                for label, kind, o in configs:
                    kernel, a, finish = prepare(kind, {**o, **opts.get(label, {})}, link, graph)
                    finish(kernel(*a))
                warm = True
            words += n
            b = int(np.searchsorted(LENGTH_BINS, n, side="left"))
            per_bin[b] += 1
            mask = np.zeros((n + 1, n + 1), dtype=bool)
            mask[:, 1:] = True
            np.fill_diagonal(mask, False)
            margs = {}
            for label, kind, o in configs:
                kernel, a, finish = prepare(kind, {**o, **opts.get(label, {})}, link, graph)
                # CPU time of this process: the machine is shared, wall time is not comparable
                t0 = time.process_time()
                out = kernel(*a)
                dt = time.process_time() - t0
                marg, frac, rounds, bound, converged, its = finish(out)
                heads = mbr_decode(marg, projective, single_root)
                st = stats[label]
                st["t"] += dt
                st["by_len"][b] += dt
                st["used"] += frac[0]
                st["total"] += frac[1]
                st["rounds"] += rounds
                st["bound"] += bound
                st["conv"] += bool(converged)
                st["its"] += its
                st["correct"] += int(np.sum(heads[1:] == gold[1:]))
                margs[label] = marg
            for label in margs:
                d = np.abs(margs[label] - margs[reference])[mask]
                st = stats[label]
                st["err"] += d.mean()
                st["maxerr"] += d.max()
                st["worst"] = max(st["worst"], d.max())
        ns = len(sents)
        bp_t = stats[baseline]["t"]
        print(f"\n## {corpus}: {ns} sentences, {words} words, mean length {words / ns:.1f}; "
              f"speed-up against {baseline}, marginal errors against {reference}")
        print(f"| {'configuration':16s} | {'% factors':>9s} | {'ms/sent':>8s} | {'speed-up':>8s} | "
              f"{'mean err':>8s} | {'max err':>8s} | {'worst':>6s} | {'UAS':>6s} | {'rounds':>6s} | "
              f"{'conv %':>6s} | {'BP its':>6s} | {'bound':>8s} |")
        print("|" + "---|" * 12)
        for label, _, _ in sorted(configs, key=lambda c: [x[0] for x in CONFIGS].index(c[0])):
            st = stats[label]
            print(f"| {label:16s} | {100 * st['used'] / max(st['total'], 1):9.2f} | "
                  f"{1000 * st['t'] / ns:8.3f} | {bp_t / st['t']:8.1f} | {st['err'] / ns:8.5f} | "
                  f"{st['maxerr'] / ns:8.4f} | {st['worst']:6.3f} | "
                  f"{100 * st['correct'] / words:6.2f} | {st['rounds'] / ns:6.2f} | "
                  f"{100 * st['conv'] / ns:6.1f} | {st['its'] / ns:6.2f} | {st['bound'] / ns:8.3f} |")
        lo = [1] + [x + 1 for x in LENGTH_BINS[:-1]]
        heads = [f"{a}-{z}" if z < 10 ** 6 else f">{a - 1}" for a, z in zip(lo, LENGTH_BINS)]
        print(f"\nspeed-up against {baseline} by sentence length (words; sentences per bin: "
              f"{', '.join(f'{h}: {c}' for h, c in zip(heads, per_bin))})")
        print("| configuration | " + " | ".join(heads) + " |")
        print("|" + "---|" * (len(heads) + 1))
        for label, _, _ in sorted(configs, key=lambda c: [x[0] for x in CONFIGS].index(c[0])):
            ratio = stats[baseline]["by_len"] / np.maximum(stats[label]["by_len"], 1e-12)
            print(f"| {label} | " + " | ".join(f"{r:.1f}" if c else "-"
                                                for r, c in zip(ratio, per_bin)) + " |")


def fixed_points(args):
    """Where relaxed and full BP disagree by more than --min-error on some arc: is the relaxed
    result a fixed point of full BP? Full BP (damped, run to --tol) from zero messages, and again
    from the relaxed run's final messages (its factors' messages, zero for the others, the TREE
    messages); if the warm-started full BP stays at the relaxed marginals, the full model has
    (at least) two BP fixed points and the two runs found different ones."""
    from bpparse.conll import read_conll
    from bpparse.kernels.factors.childseq import no_childseq
    from bpparse.kernels.bp_engine import (DEFAULT_CLIP, TREE, CrossFactors, PairFactors,
                                           beliefs_to_marginals, bp_engine, bp_options)
    from bpparse.kernels.relax_kernels import relaxed_bp
    from bpparse.model import load_model
    from bpparse.relax import graph_from_flat, relax_kernel_args

    model = load_model(args.model)
    single_root = bool(model.config.model.single_root)
    sents = list(read_conll(CORPORA.get(args.corpus, args.corpus)))
    if args.limit:
        sents = sents[:args.limit]
    print(f"# {args.corpus}: relaxed Rel(R={args.max_rounds}, eps={args.threshold}, B={args.bp_iter}) "
          f"vs full BP (damping {args.damping}, <= {args.iterations} iterations, tol {args.tol})")
    print("| sentence | words | max error | arc | relaxed | full BP | full BP from the relaxed "
          "state: converged, max dist. to relaxed / to full |")
    print("|---|---|---|---|---|---|---|")
    found = stays = 0
    for i, sent in enumerate(sents):
        link, pa, pb, pw, n_grand, cross_w = model_scores(model, sent)
        n = link.shape[0] - 1
        if cross_w is not None:
            raise SystemExit("fixed-points: models with NOCROSS are not handled")
        graph = graph_from_flat(n, pa, pb, pw, n_grand, None, "tree")
        out = relaxed_bp(*relax_kernel_args(
            link, graph, "iterative", args.threshold, args.max_rounds, args.bp_iter,
            single_root=single_root, tol=1e-4))
        k = pa.shape[0]
        size = n + 1

        def full(msg_a, msg_b, global_msg):
            no_cross = CrossFactors(np.zeros((size, size)), np.zeros((size, size), bool), 0,
                                    np.zeros((0, 0, 0)), np.zeros((0, 0), bool))
            bel, _, conv, _ = bp_engine(link, PairFactors(pa, pb, pw), np.arange(k), msg_a, msg_b,
                                        no_cross, no_childseq(), global_msg,
                                        bp_options(TREE, False, single_root, args.iterations,
                                                   args.tol, args.damping, DEFAULT_CLIP))
            return beliefs_to_marginals(bel), conv

        cold, cold_conv = full(np.zeros(k), np.zeros(k), np.zeros((size, size)))
        d = np.abs(out[1] - cold)
        if d.max() <= args.min_error:
            continue
        found += 1
        msg_a = np.zeros(k)
        msg_b = np.zeros(k)
        msg_a[out[2]] = out[3]
        msg_b[out[2]] = out[4]
        warm, warm_conv = full(msg_a, msg_b, out[7].copy())
        h, m = np.unravel_index(d.argmax(), d.shape)
        to_rel = np.abs(warm - out[1]).max()
        stays += bool(warm_conv and to_rel < 0.01)
        print(f"| {i + 1} | {n} | {d.max():.3f} | {h}->{m} | {out[1][h, m]:.3f} | "
              f"{cold[h, m]:.3f} ({'converged' if cold_conv else 'not converged'}) | "
              f"{'yes' if warm_conv else 'no'}, {to_rel:.3f} / {np.abs(warm - cold).max():.3f} |")
    print(f"\n{found} of {len(sents)} sentences differ by more than {args.min_error} on some arc; "
          f"on {stays} of them the relaxed marginals are a fixed point of full BP (warm-started "
          f"full BP converges within 0.01 of them)")


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
    p = sub.add_parser("fixed-points", help="sentences where relaxed and full BP disagree: "
                                            "two BP fixed points?")
    p.add_argument("--model", required=True)
    p.add_argument("--corpus", default="ewt")
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("--min-error", type=float, default=0.5)
    p.add_argument("--threshold", type=float, default=1e-4)
    p.add_argument("--max-rounds", type=int, default=None)
    p.add_argument("--bp-iter", type=int, default=5)
    p.add_argument("--iterations", type=int, default=300, help="full BP")
    p.add_argument("--damping", type=float, default=0.5, help="full BP")
    p.add_argument("--tol", type=float, default=1e-7, help="full BP")
    p.set_defaults(func=fixed_points)
    p = sub.add_parser("table", help="BP vs relaxed inference on UD test sets")
    p.add_argument("--model", help="a trained second-order model (default: synthetic scores)")
    p.add_argument("--corpus", nargs="+", default=["ewt", "bosque"],
                   help="ewt, bosque, ddt or CoNLL-U paths")
    p.add_argument("--limit", type=int, default=0, help="first N sentences only")
    p.add_argument("--only", nargs="*", help="configuration labels to run (BP first for errors)")
    p.add_argument("--tol", type=float, default=1e-4, help="BP convergence tolerance (all configs)")
    p.add_argument("--reference", help="row label the marginal errors are measured against "
                                       "[default: the first row, BP]")
    p.add_argument("--damping", type=float, default=None,
                   help="BP damping of full and pruned BP [default: the model's parse damping; 0 "
                        "for synthetic scores]")
    p.add_argument("--relax-damping", type=float, default=0.0,
                   help="BP damping of the relaxed rows whose label does not say otherwise (as "
                        "`bpparse relax --damping`)")
    p.add_argument("--prune", type=float, default=None,
                   help="GRAND / SIB factors only on arcs of first-order marginal >= PRUNE; 0: the "
                        "unpruned second-order graph (the issue's setting) [default: the model's "
                        "[parse] prune]")
    p.add_argument("--joint-gamma", type=float, default=1e-3)
    p.add_argument("--size-eps", type=float, default=0.2)
    p.add_argument("--divergence-m", type=int, default=100)
    p.add_argument("--projective", action="store_true", help="PTREE (synthetic scores only)")
    p.add_argument("--cross", action="store_true", help="synthetic NOCROSS weights too")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--link-noise", type=float, default=1.0)
    p.add_argument("--link-distance", type=float, default=0.5)
    p.add_argument("--link-margin", type=float, default=2.8)
    p.add_argument("--pair-noise", type=float, default=0.2)
    p.add_argument("--pair-bonus", type=float, default=0.25)
    p.set_defaults(func=table)
    args = ap.parse_args()
    t0 = time.perf_counter()
    args.func(args)
    print(f"# {time.perf_counter() - t0:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
