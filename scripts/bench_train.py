"""Time the pieces of one training step per sentence (single thread) on real data.

    python3 scripts/bench_train.py CONFIG TRAIN.conllu [--limit N]

Prints seconds per sentence for: LINK features+scores, label scores, GRAND/SIB scores, NOCROSS scores,
inference (scores + BP) and the full gradient (inference + scatter), every GRAND/SIB factor kept
(no pruning), random weights.
"""
import argparse
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config", help="config name or TOML file, e.g. second-order")
    ap.add_argument("train", help="CoNLL-U file, e.g. ../shared/data/ud/en_ewt/en_ewt-ud-train.conllu")
    ap.add_argument("--limit", type=int, default=500, help="first N sentences")
    args = ap.parse_args()

    from bpparse import features as F
    from bpparse.config import load_config
    from bpparse.conll import read_conll
    from bpparse.encode import Vocabularies
    from bpparse.inference import infer
    from bpparse.model import Model
    from bpparse.scoring import kept_pairs
    from bpparse.train import sentence_gradient

    sentences = []
    for s in read_conll(args.train):
        sentences.append(s)
        if len(sentences) >= args.limit:
            break
    vocabs = Vocabularies.build(sentences)
    config = load_config(args.config, {"features.fine_tags": True, "features.morph": False,
                                       "features.lemma": False, "train.prune": 0.0})
    model = Model(config, vocabs)
    rng = np.random.default_rng(0)
    model.theta = rng.normal(scale=0.01, size=model.theta.shape[0])
    weights = model.weights
    enc = [vocabs.encode(s) for s in sentences]
    attrs = [F.sentence_attributes(e.tokens, True) for e in enc]
    settings = config.inference_settings("train")
    layout, nomask, theta = model.layout, np.empty(0, dtype=np.uint64), model.theta
    weights = F.dense_weights(model.fine_tags, layout, nomask, theta, F.NO_LABEL_FILTER)
    words = sum(e.tokens.shape[1] - 1 for e in enc)
    print(f"{len(enc)} sentences, {words} words, config {config.name}")

    def every_pair(a):
        n1 = a.shape[1] - 2
        keep = ~np.eye(n1, dtype=bool)
        keep[:, 0] = False
        return kept_pairs(keep, True, True, True)

    grad = np.zeros_like(theta)
    dirty = np.zeros((grad.shape[0] >> F.DIRTY_SHIFT) + 1, dtype=np.uint8)

    def timed(name, fn):
        fn(0, attrs[0])  # compile / load outside the timing
        t = time.perf_counter()
        for i, a in enumerate(attrs):
            fn(i, a)
        dt = time.perf_counter() - t
        print(f"{name:28s} {1000 * dt / len(attrs):8.3f} ms/sentence  {len(attrs) / dt:8.1f} sentences/s")

    timed("LINK scores", lambda i, a: F.link_scores(a, weights))
    timed("label scores", lambda i, a: F.label_scores(a, weights))
    timed("GRAND+SIB scores", lambda i, a: F.pair_scores(a, weights, *every_pair(a)))
    timed("NOCROSS scores", lambda i, a: F.cross_scores(a, weights))
    timed("inference (scores + BP)", lambda i, a: infer(a, weights, settings, enc[i].heads, True))
    timed("gradient (inference+scatter)", lambda i, a: sentence_gradient(
        a, weights, settings, enc[i].heads, np.asarray(enc[i].labels, dtype=np.int32), grad, dirty, 0.0, 0.0))


if __name__ == "__main__":
    main()
