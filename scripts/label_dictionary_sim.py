"""What restricting each arc's labels to those seen in training would cost and save (issue 15).

    python3 scripts/label_dictionary_sim.py [--model M] [--train TRAIN] [--test TEST]

Labels are a sixth of a parse's time (label scores and summing them out of every arc, for all R
labels of every candidate arc). A label dictionary, the labels that training arcs of each (head
UPOS, child UPOS, direction) cell carry, would restrict both to a few labels an arc. This script
simulates it on the library's pipeline without changing any kernel: the parser's scores are
computed as usual, then each arc's labels outside its cell's set are removed (the arc score
loses their probability mass: s[h, m] + log sum over the allowed r of p(r | h, m); arcs of cells
training never saw keep every label), and inference, decoding and the second stages run on that.
Prints the cells, the share of (arc, label) scores that would still be computed, and test UAS /
LAS with and without the restriction (punctuation counted). Built into the kernels once, the
restriction did not make parsing faster (docs/benchmarks.md): this estimates accuracy, not time.
"""
import argparse

import numpy as np

DATA = "../shared/data/ud/en_ewt/en_ewt-ud-"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="model path or bundled name (default: the bundled model)")
    ap.add_argument("--train", default=DATA + "train.conllu", help="treebank the dictionary is read from")
    ap.add_argument("--test", default=DATA + "test.conllu", help="treebank parsed and scored")
    args = ap.parse_args()

    from bpparse import features as F
    from bpparse.conll import read_conll
    from bpparse.decode import decode_sentence
    from bpparse.features.layout import A_UTAG
    from bpparse.inference import infer_scores
    from bpparse.model import load_model
    from bpparse.parse import model_stages, parse_settings, second_stages
    from bpparse.scoring import sentence_scores

    model = load_model(args.model)
    settings = parse_settings(model)
    st, weights, stages = settings.inference, model.weights, model_stages(model)
    n_labels, nohead = len(model.labels), np.empty(0, dtype=np.int64)

    def cell(attrs, h, m):
        return int(attrs[A_UTAG, h + 1]), int(attrs[A_UTAG, m + 1]), m > h

    allowed = {}
    for s in read_conll(args.train):
        e = model.encode(s)
        attrs = F.sentence_attributes(e.tokens, model.fine_tags)
        for m in range(1, e.n + 1):
            if e.heads[m] >= 0 and e.labels[m] >= 0:
                allowed.setdefault(cell(attrs, int(e.heads[m]), m), np.zeros(n_labels, bool))[e.labels[m]] = True
    print(f"{len(allowed)} cells, {np.mean([v.sum() for v in allowed.values()]):.1f} of {n_labels} "
          "labels a seen cell")

    def restricted(scores, attrs):
        arc, lp = scores.arc.copy(), scores.label_logp.copy()
        kept = []
        for h in range(arc.shape[0]):
            for m in range(1, arc.shape[0]):
                if h == m:
                    continue
                ok = allowed.get(cell(attrs, h, m))
                kept.append(1.0 if ok is None else ok.mean())
                if ok is None or arc[h, m] == -np.inf:
                    continue
                z = np.log(np.exp(lp[h, m, ok]).sum())
                arc[h, m] += z
                lp[h, m, ok] -= z
                lp[h, m, ~ok] = -np.inf
        return scores._replace(arc=arc, label_logp=lp), kept

    test = list(read_conll(args.test))
    for restrict in (False, True):
        right_heads = right_both = words = 0
        kept = []
        for s in test:
            e = model.encode(s)
            attrs = F.sentence_attributes(e.tokens, model.fine_tags)
            scores = sentence_scores(attrs, weights, st, nohead)
            if restrict:
                scores, share = restricted(scores, attrs)
                kept.extend(share)
            r = infer_scores(scores, st, False)
            n1 = r.mu.shape[0]
            out = [np.empty(n1, dtype=np.int64), np.empty(n1, dtype=np.int64), np.empty(n1), np.empty(n1)]
            decode_sentence(r.mu, r.label_logp, r.map_scores, settings.decoder, st.projective,
                            st.single_root, *out)
            second_stages(attrs, stages, r.mu, *out, st.projective)
            heads, labels = out[0][1:], out[1][1:]
            words += n1 - 1
            right_heads += int(np.sum(heads == e.heads[1:]))
            right_both += int(np.sum((heads == e.heads[1:]) & (labels == e.labels[1:])))
        what = f"restricted ({100 * np.mean(kept):.1f}% of the label scores)" if restrict else "all labels"
        print(f"{what}: UAS {100 * right_heads / words:.2f} LAS {100 * right_both / words:.2f}")


if __name__ == "__main__":
    main()
