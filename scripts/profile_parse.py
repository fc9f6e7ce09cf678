"""Where the time of `bpparse parse` goes: one thread, warm JIT cache, stage by stage.

    python3 scripts/profile_parse.py ../shared/data/ud/en_ewt/en_ewt-ud-test.conllu [--model M ...]

For each model (default: the bundled one) the corpus is run through the parse pipeline's own
pieces one stage at a time, each over the whole corpus so that no stage's cache state depends on
another's: reading and encoding (`read_conll`, `Vocabularies.encode`); attribute tables
(`features.sentence_attributes`); feature extraction and scoring (`scoring.sentence_scores`:
LINK, label, GRAND/SIB, NOCROSS features hashed and summed against the weights, plus pruning's
first-order marginals); inference (`inference.infer_scores` on those scores: BP or exact
first-order marginals); decoding (`decode.decode_sentence`); the second stages (labeler and
punctuation, `parse.second_stages`); formatting (`conll.format_sentence`).
Prints ms per sentence and the share of each stage, and checks while it times that the heads
equal what `bpparse.parse.parse_sentences` produces.
"""
import argparse
import time

import numpy as np


def profile(model_name, path, limit):
    from bpparse import features as F
    from bpparse.conll import format_sentence, read_conll
    from bpparse.decode import decode_sentence
    from bpparse.inference import infer_scores
    from bpparse.model import load_model
    from bpparse.parse import model_stages, parse_sentences, parse_settings, second_stages
    from bpparse.scoring import sentence_scores

    t = time.perf_counter()
    model = load_model(model_name)
    load = time.perf_counter() - t
    settings = parse_settings(model)
    st, weights, nohead = settings.inference, model.weights, np.empty(0, dtype=np.int64)
    first = list(read_conll(path))[:2]
    for s in first:  # compile / load every kernel outside the timing
        e = model.encode(s)
        a = F.sentence_attributes(e.tokens, model.fine_tags)
        r = infer_scores(sentence_scores(a, weights, st, nohead), st, False)
        n1 = e.tokens.shape[1]
        out = [np.empty(n1, dtype=np.int64), np.empty(n1, dtype=np.int64), np.empty(n1), np.empty(n1)]
        decode_sentence(r.mu, r.label_logp, r.map_scores, settings.decoder, st.projective,
                        st.single_root, *out)
        second_stages(a, model_stages(model, settings), r.mu, *out, st.projective)

    rows = []

    def stage(name, fn, items):
        t0 = time.perf_counter()
        result = [fn(x) for x in items]
        rows.append((name, time.perf_counter() - t0))
        return result

    def read():
        out = []
        for s in read_conll(path):
            out.append(s)
            if limit and len(out) >= limit:
                break
        return out

    t0 = time.perf_counter()
    sentences = read()
    rows.append(("reading", time.perf_counter() - t0))
    encoded = stage("encoding", model.encode, sentences)
    attrs = stage("attribute tables", lambda e: F.sentence_attributes(e.tokens, model.fine_tags), encoded)
    scores = stage("features + scoring", lambda a: sentence_scores(a, weights, st, nohead), attrs)
    results = stage("inference (BP / exact)", lambda sc: infer_scores(sc, st, False), scores)

    def decode(r):
        n1 = r.mu.shape[0]
        out = [np.empty(n1, dtype=np.int64), np.empty(n1, dtype=np.int64), np.empty(n1), np.empty(n1)]
        decode_sentence(r.mu, r.label_logp, r.map_scores, settings.decoder, st.projective,
                        st.single_root, *out)
        return out
    trees = stage("decoding", decode, results)
    stages = model_stages(model, settings)

    def second(x):
        a, r, tree = x
        second_stages(a, stages, r.mu, *tree, st.projective)
    stage("second stages", second, list(zip(attrs, results, trees)))
    labels = list(model.labels) + ["_"]
    stage("formatting", lambda x: format_sentence(x[0], x[1][0], [None] + [labels[i] for i in x[1][1][1:].tolist()]),
          list(zip(sentences, trees)))

    check = parse_sentences(model, sentences, jobs=1)
    assert all(np.array_equal(c.heads, t[0]) for c, t in zip(check, trees) if c.sentence.n <= settings.max_length)

    d = dict(rows)
    order = ["reading", "encoding", "attribute tables", "features + scoring", "inference (BP / exact)",
             "decoding", "second stages", "formatting"]
    total = sum(d[k] for k in order)
    n = len(sentences)
    print(f"\n{model_name}: {model.config.name} ({'+'.join(model.config.model.factors)}), {n} sentences, "
          f"model load {load:.2f} s")
    print(f"{'stage':<26}{'ms/sentence':>12}{'share':>8}")
    for k in order:
        print(f"{k:<26}{1000 * d[k] / n:>12.3f}{100 * d[k] / total:>7.1f}%")
    print(f"{'total':<26}{1000 * total / n:>12.3f}{'':>8}  ({n / total:.0f} sentences/s)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input", help="CoNLL-U file, e.g. ../shared/data/ud/en_ewt/en_ewt-ud-test.conllu")
    ap.add_argument("--model", nargs="+", default=[None],
                    help="model paths or bundled names (default: the bundled model)")
    ap.add_argument("--limit", type=int, default=0, help="first N sentences (0 = all)")
    args = ap.parse_args()
    for m in args.model:
        profile(m, args.input, args.limit)


if __name__ == "__main__":
    main()
