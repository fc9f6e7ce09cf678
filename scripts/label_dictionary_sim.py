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
    from bpparse.encode import UPOS
    from bpparse.inference import infer_scores
    from bpparse.model import load_model
    from bpparse.parse import iter_parse
    from bpparse.scoring import encoded_scores

    model = load_model(args.model)

    def cell(upos, h, m):
        return int(upos[h]), int(upos[m]), m > h

    allowed = {}
    for s in read_conll(args.train):
        e = model.encode(s)
        for m in range(1, e.n + 1):
            if e.heads[m] >= 0 and e.labels[m] >= 0:
                key = cell(e.tokens[UPOS], int(e.heads[m]), m)
                allowed.setdefault(key, np.zeros(len(model.labels), bool))[e.labels[m]] = True
    print(f"{len(allowed)} cells, {np.mean([v.sum() for v in allowed.values()]):.1f} of "
          f"{len(model.labels)} labels a seen cell")
    kept = []

    def restricted(model, encoded, settings):
        """The built-in inference on scores whose arcs keep only their cell's labels."""
        scores = encoded_scores(model, encoded, settings)
        arc, lp = scores.arc.copy(), scores.label_logp.copy()
        for h in range(arc.shape[0]):
            for m in range(1, arc.shape[0]):
                ok = None if h == m else allowed.get(cell(encoded.tokens[UPOS], h, m))
                if h != m:
                    kept.append(1.0 if ok is None else ok.mean())
                if ok is None or arc[h, m] == -np.inf:
                    continue
                z = np.log(np.exp(lp[h, m, ok]).sum())
                arc[h, m] += z
                lp[h, m, ok] -= z
                lp[h, m, ~ok] = -np.inf
        r = infer_scores(scores._replace(arc=arc, label_logp=lp), settings, False)
        return r.mu, r.label_logp, r.map_scores

    test = list(read_conll(args.test))
    for hook in (None, restricted):
        right_heads = right_both = words = 0
        for parsed in iter_parse(model, test, inference=hook):
            gold = parsed.sentence
            words += gold.n
            for m in range(1, gold.n + 1):
                if parsed.heads[m] == gold.heads[m]:
                    right_heads += 1
                    right_both += parsed.deprels[m] == gold.deprels[m]
        what = f"restricted ({100 * np.mean(kept):.1f}% of the label scores)" if hook else "all labels"
        print(f"{what}: UAS {100 * right_heads / words:.2f} LAS {100 * right_both / words:.2f}")


if __name__ == "__main__":
    main()
