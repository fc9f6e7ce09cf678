"""Time the pieces of one training step per sentence (single thread) on real data.

    python3 scripts/bench_train.py CONFIG TRAIN.conllu [N_SENTENCES]

Prints seconds per sentence for: LINK features+scores, label scores, GRAND/SIB scores, NOCROSS scores,
BP inference (scores included), and the full gradient (inference + scatter). Asserts that the
gradient's inference agrees with the scoring path (same marginals) while it times.
"""
import sys
import time

import numpy as np


def main():
    from bpparse import features as F
    from bpparse.conll import read_conll
    from bpparse.config import load_config
    from bpparse.encode import Vocabularies
    from bpparse.model import Model
    from bpparse.train import _pairs, infer_sentence, inference_settings, sentence_gradient

    config_name, path = sys.argv[1], sys.argv[2]
    limit = int(sys.argv[3]) if len(sys.argv) > 3 else 500
    sentences = []
    for s in read_conll(path):
        sentences.append(s)
        if len(sentences) >= limit:
            break
    vocabs = Vocabularies.build(sentences)
    config = load_config(config_name, {"features.fine_tags": True})
    model = Model(config, vocabs)
    rng = np.random.default_rng(0)
    model.theta = rng.normal(scale=0.01, size=model.theta.shape[0])
    enc = [vocabs.encode(s) for s in sentences]
    attrs = [F.sentence_attributes(e.tokens, True) for e in enc]
    settings = inference_settings(config, "train")
    nomask = np.empty(0, dtype=np.uint64)
    words = sum(e.tokens.shape[1] - 1 for e in enc)
    print(f"{len(enc)} sentences, {words} words, config {config.name}")
    # warm up (compile)
    a = attrs[0]
    F.link_scores(a, model.layout, nomask, model.theta)
    F.label_scores(a, model.layout, model.theta)
    pa, pb, ng = _pairs(a.shape[1] - 3, True, True)
    F.pair_scores(a, model.layout, nomask, model.theta, pa, pb, ng)
    F.cross_scores(a, model.layout, nomask, model.theta)
    grad = np.zeros_like(model.theta)
    dirty = np.zeros((grad.shape[0] >> F.DIRTY_SHIFT) + 1, dtype=np.uint8)
    sentence_gradient(a, model.layout, nomask, model.theta, enc[0].heads, enc[0].labels, *settings,
                      grad, dirty, 0.0)

    def timed(name, fn):
        t = time.perf_counter()
        for i, a in enumerate(attrs):
            fn(i, a)
        dt = time.perf_counter() - t
        print(f"{name:28s} {1000 * dt / len(attrs):8.3f} ms/sentence  {len(attrs) / dt:8.1f} sentences/s")

    timed("LINK scores", lambda i, a: F.link_scores(a, model.layout, nomask, model.theta))
    timed("label scores", lambda i, a: F.label_scores(a, model.layout, model.theta))

    def pairs(i, a):
        pa, pb, ng = _pairs(a.shape[1] - 3, True, True)
        F.pair_scores(a, model.layout, nomask, model.theta, pa, pb, ng)
    timed("GRAND+SIB scores", pairs)
    timed("NOCROSS scores", lambda i, a: F.cross_scores(a, model.layout, nomask, model.theta))
    timed("inference (scores + BP)", lambda i, a: infer_sentence(a, model.layout, nomask, model.theta,
                                                                 *settings, enc[i].heads))
    timed("gradient (inference+scatter)", lambda i, a: sentence_gradient(
        a, model.layout, nomask, model.theta, enc[i].heads, enc[i].labels, *settings, grad, dirty, 0.0))


if __name__ == "__main__":
    main()
