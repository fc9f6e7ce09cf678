"""How well the probabilities in a parse's MISC are calibrated, against gold trees.

For each word, a confidence p (``HeadProb``: the probability of the chosen head; ``LabelProb``:
of the chosen label; ``UposProb``: of the chosen UPOS) and an outcome y (1 if the choice equals
gold). Reported per key:

- ECE, expected calibration error: the words are put into B equal-width bins of p ([0, 1/B), ...,
  [(B-1)/B, 1]); ECE = Σ_b (n_b / N) |accuracy_b − mean confidence_b| (Guo et al. 2017).
- Brier score: mean (p − y)² (Brier 1950), over the same words.
- the reliability table: per bin its count, mean confidence and accuracy.

A perfectly calibrated parser has accuracy_b = confidence_b in every bin and ECE 0.

Calibrating HeadProb (temperature scaling, Guo et al. 2017, with the log arc marginals as the
logits): each word's head distribution, its column mu[:, m] of the arc marginals, is raised to 1/T
and renormalised, so HeadProb = mu[h, m]^(1/T) / Σ_g mu[g, m]^(1/T) (`bpparse.decode.temper_head_probs`
in the parse kernels). T > 1 softens an over-confident model; the MBR tree does not change.
`fit_head_temperature` chooses T on held-out trees by the Brier score of the chosen heads.
LabelProb likewise: the labeler's scores s of each arc's labels divided by a label temperature
before the softmax (`bpparse.features.relabel_tree`; `fit_label_temperature`).
"""
from html import escape

import numpy as np

from bpparse.errors import BpparseError, InputError

KEYS = ("HeadProb", "LabelProb", "UposProb")


def _misc_probs(misc):
    found = {}
    if misc in ("_", ""):
        return found
    for item in misc.split("|"):
        name, sep, value = item.partition("=")
        if sep and name in KEYS:
            try:
                found[name] = float(value)
            except ValueError:
                pass
    return found


def collect(gold_sentences, pred_sentences):
    """{key: (confidence float64 [N], outcome bool [N])} for every key of `KEYS` that the
    prediction carries, over aligned sentences (same words; see `evaluate.evaluate`)."""
    conf = {k: [] for k in KEYS}
    hit = {k: [] for k in KEYS}
    for gold, pred in zip(gold_sentences, pred_sentences, strict=False):
        if gold.n != pred.n:
            raise InputError(pred.path, pred.first_line,
                             f"sentence has {pred.n} words, gold has {gold.n}")
        gheads, pheads = gold.heads, pred.heads
        gdeps, pdeps, gupos, pupos = gold.deprels, pred.deprels, gold.upos, pred.upos
        for i, misc in enumerate(pred.misc):
            if i == 0:
                continue
            for key, p in _misc_probs(misc).items():
                conf[key].append(p)
                if key == "HeadProb":
                    hit[key].append(gheads[i] == pheads[i])
                elif key == "LabelProb":
                    hit[key].append(gdeps[i] == pdeps[i])
                else:
                    hit[key].append(gupos[i] == pupos[i])
    return {k: (np.asarray(conf[k], dtype=float), np.asarray(hit[k], dtype=bool))
            for k in KEYS if conf[k]}


def calibration(confidence, outcome, bins=10):
    """{"words", "ece", "brier", "bins": [{"low", "high", "count", "confidence", "accuracy"}]}
    (ECE and Brier as fractions; empty bins have count 0 and confidence/accuracy None)."""
    p = np.asarray(confidence, dtype=float)
    y = np.asarray(outcome, dtype=float)
    if p.shape[0] == 0:
        raise BpparseError("no probabilities to assess calibration")
    which = np.minimum((p * bins).astype(np.int64), bins - 1)
    table = []
    ece = 0.0
    for b in range(bins):
        sel = which == b
        count = int(sel.sum())
        row = {"low": b / bins, "high": (b + 1) / bins, "count": count, "confidence": None,
               "accuracy": None}
        if count:
            row["confidence"] = float(p[sel].mean())
            row["accuracy"] = float(y[sel].mean())
            ece += count / p.shape[0] * abs(row["accuracy"] - row["confidence"])
        table.append(row)
    return {"words": int(p.shape[0]), "ece": float(ece), "brier": float(np.mean((p - y) ** 2)),
            "bins": table}


TEMPERATURE_RANGE = (0.25, 16.0)


def tempered_head_probs(marginals, heads, temperature):
    """float64 (N,): the tempered probability of each word's head (the formula above), for the
    words m >= 1 of every sentence in order; ``marginals`` float64 (n+1, n+1) arc marginals
    [head, child] and ``heads`` int64 (n+1,) the decoded tree, per sentence."""
    return _HeadColumns(marginals, heads).probs(temperature)


class _HeadColumns:
    """Each word's log head marginals relative to its chosen head's, flattened (so that every
    temperature costs one vectorised pass): ``diffs`` float64 over all words' nonzero entries,
    word k's at diffs[starts[k]:starts[k + 1]]; words whose chosen head has marginal 0 keep
    probability 0; ``raw`` float64 (N,) the chosen heads' marginals themselves (HeadProb
    uncalibrated)."""

    def __init__(self, marginals, heads):
        diffs, sizes, alive, raw = [], [], [], []
        for mu, h in zip(marginals, heads, strict=True):
            mu = np.asarray(mu, dtype=np.float64)
            n1 = mu.shape[0]
            with np.errstate(divide="ignore"):
                logs = np.log(mu)
            logs[np.arange(n1), np.arange(n1)] = -np.inf  # a word is not its own head
            raw.extend(mu[h[1:], np.arange(1, n1)])
            for m in range(1, n1):
                top = logs[h[m], m]
                alive.append(top > -np.inf)
                col = logs[:, m][logs[:, m] > -np.inf] - top if alive[-1] else np.zeros(0)
                diffs.append(col)
                sizes.append(col.shape[0])
        self.alive = np.array(alive, dtype=bool)
        self.raw = np.array(raw, dtype=np.float64)
        self.diffs = np.concatenate(diffs) if diffs else np.zeros(0)
        self.starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)

    def probs(self, temperature):
        out = np.zeros(self.alive.shape[0])
        if self.diffs.shape[0]:
            with np.errstate(over="ignore"):
                sums = np.add.reduceat(np.exp(self.diffs / temperature), self.starts[self.alive])
            out[self.alive] = 1.0 / sums
        return out


def fit_head_temperature(marginals, heads, gold):
    """(T, before, after) for the chosen heads: the temperature `fit_temperature` finds for their
    tempered probabilities against whether they are right (the gold heads ``gold``, int64 (n+1,)
    per sentence; other arguments as in `tempered_head_probs`), and the `calibration` of their
    marginals (HeadProb uncalibrated) and of their tempered probabilities."""
    columns = _HeadColumns(marginals, heads)
    return fit_temperature(columns.probs, _right(heads, gold), columns.raw)


def tempered_label_probs(scores, labels, temperature):
    """float64 (N,): each word's probability of its label ``labels`` (int64 (n+1,) per sentence,
    the argmax of its scores) under softmax(scores / T); ``scores`` float64 (n+1, R) per sentence
    (the labeler's, `features.tree_label_scores`; row 0 unread)."""
    return _LabelScores(scores, labels).probs(temperature)


class _LabelScores:
    """Each word's label scores minus its chosen label's, stacked: ``diffs`` float64 (N, R)."""

    def __init__(self, scores, labels):
        diffs = []
        for s, y in zip(scores, labels, strict=True):
            rows, chosen = np.asarray(s, dtype=np.float64)[1:], np.asarray(y)[1:]
            diffs.append(rows - rows[np.arange(rows.shape[0]), chosen][:, None])
        self.diffs = np.concatenate(diffs) if diffs else np.zeros((0, 1))

    def probs(self, temperature):
        with np.errstate(over="ignore"):
            return 1.0 / np.exp(self.diffs / temperature).sum(axis=1)


def fit_label_temperature(scores, labels, gold):
    """(T, before, after) for the chosen labels, as `fit_head_temperature` (other arguments as in
    `tempered_label_probs`; ``gold`` the gold label indices, int64 (n+1,) per sentence)."""
    table = _LabelScores(scores, labels)
    return fit_temperature(table.probs, _right(labels, gold), table.probs(1.0))


def _right(chosen, gold):
    return np.concatenate([np.asarray(c)[1:] == np.asarray(g)[1:]
                           for c, g in zip(chosen, gold, strict=True)]).astype(np.float64)


def fit_temperature(probs, right, raw):
    """(T, before, after): the temperature in `TEMPERATURE_RANGE` (4 significant digits) that
    minimises the Brier score of ``probs(T)`` (float64 (N,), the tempered probabilities of N
    choices) against ``right`` (float64 (N,), 1 where the choice is right), and the `calibration`
    of the untempered probabilities ``raw`` and of ``probs(T)``. A geometric grid of ratio
    2^(1/8), then one of ratio 2^(1/64) around its best point."""
    if right.shape[0] == 0:
        raise BpparseError("no words to fit a temperature on")

    def brier(t):
        return float(np.mean((probs(t) - right) ** 2))

    low, high = np.log2(TEMPERATURE_RANGE)
    grid = 2.0 ** np.arange(low, high + 1e-9, 1 / 8)
    best = min(grid, key=brier)
    fine = best * 2.0 ** (np.arange(-8, 9) / 64)
    best = float(min(fine[(fine >= grid[0]) & (fine <= grid[-1])], key=brier))
    best = float(f"{best:.4g}")
    return best, calibration(raw, right), calibration(probs(best), right)


def assess(gold_sentences, pred_sentences, bins=10):
    """{key: `calibration`} for every probability the prediction carries; BpparseError if none."""
    pairs = collect(gold_sentences, pred_sentences)
    if not pairs:
        raise BpparseError("the prediction carries no HeadProb/LabelProb/UposProb in MISC "
                           "(parse with --marginals)")
    return {key: calibration(conf, hit, bins) for key, (conf, hit) in pairs.items()}


def format_calibration(result):
    """Text lines of the ECE and Brier score per key (percent points / fractions)."""
    lines = []
    for key, r in result.items():
        lines.append(f"{key + ' ECE':<14} {100 * r['ece']:6.2f}  (Brier {r['brier']:.4f}, "
                     f"{r['words']} words)")
    return "\n".join(lines) + "\n"


_PALETTE = ("#1f5fa8", "#d0782a", "#3a9a4a", "#8a3ab9", "#b33")


def reliability_svg(result, title="Reliability"):
    """A reliability diagram as SVG (no extra needed): accuracy against confidence per bin, one
    series per key, the diagonal of perfect calibration, and bin counts under the axis."""
    size, pad = 360, 50
    w, h = size + 2 * pad + 150, size + 2 * pad + 20

    def sx(v):
        return pad + v * size

    def sy(v):
        return pad + (1 - v) * size

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           f'viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">',
           f'<text x="{pad}" y="24" font-size="14">{escape(title)}</text>',
           f'<rect x="{pad}" y="{pad}" width="{size}" height="{size}" fill="none" stroke="#999"/>',
           f'<line x1="{sx(0)}" y1="{sy(0)}" x2="{sx(1)}" y2="{sy(1)}" stroke="#bbb" '
           f'stroke-dasharray="4,4"/>']
    for t in range(0, 11, 2):
        v = t / 10
        out.append(f'<text x="{sx(v):.1f}" y="{sy(0) + 16:.1f}" text-anchor="middle">{v:.1f}</text>')
        out.append(f'<text x="{sx(0) - 6:.1f}" y="{sy(v) + 4:.1f}" text-anchor="end">{v:.1f}</text>')
    out.append(f'<text x="{sx(0.5):.1f}" y="{sy(0) + 34:.1f}" text-anchor="middle">confidence</text>')
    out.append(f'<text x="14" y="{sy(0.5):.1f}" transform="rotate(-90 14 {sy(0.5):.1f})" '
               f'text-anchor="middle">accuracy</text>')
    for k, (key, r) in enumerate(result.items()):
        colour = _PALETTE[k % len(_PALETTE)]
        points = [(row["confidence"], row["accuracy"]) for row in r["bins"] if row["count"]]
        path = " ".join(f"{'M' if j == 0 else 'L'}{sx(c):.1f},{sy(a):.1f}"
                        for j, (c, a) in enumerate(points))
        out.append(f'<path d="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for c, a in points:
            out.append(f'<circle cx="{sx(c):.1f}" cy="{sy(a):.1f}" r="3" fill="{colour}"/>')
        ly = pad + 14 + 40 * k
        out.append(f'<text x="{pad + size + 16}" y="{ly}" fill="{colour}">{escape(key)}</text>')
        out.append(f'<text x="{pad + size + 16}" y="{ly + 15}" fill="#555">ECE {100 * r["ece"]:.2f}, '
                   f'Brier {r["brier"]:.4f}</text>')
    first = next(iter(result.values()))
    counts = " ".join(str(row["count"]) for row in first["bins"])
    out.append(f'<text x="{pad}" y="{h - 8}" fill="#777" font-size="10">words per bin '
               f'({escape(next(iter(result)))}): {escape(counts)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def write_reliability(result, path, title="Reliability"):
    """Write the reliability diagram: ``.svg`` or ``.html`` without extras, ``.png`` (or any
    other matplotlib format) through matplotlib (``pip install 'bpparse[plots]'``)."""
    from bpparse.conll import open_output

    name = str(path)
    if name.endswith(".svg") or name.endswith(".html"):
        svg = reliability_svg(result, title)
        text = svg if name.endswith(".svg") else (
            f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f"</head><body>{svg}</body></html>\n")
        with open_output(name) as fh:
            fh.write(text + "\n")
        return
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise BpparseError(f"{name}: writing this format needs matplotlib: pip install "
                           f"'bpparse[plots]' (or write .svg / .html)") from None
    fig, (ax, bars) = plt.subplots(2, 1, figsize=(5, 6), height_ratios=(3, 1), sharex=True)
    ax.plot([0, 1], [0, 1], ls="--", color="#bbb")
    for k, (key, r) in enumerate(result.items()):
        rows = [row for row in r["bins"] if row["count"]]
        ax.plot([row["confidence"] for row in rows], [row["accuracy"] for row in rows], "o-",
                color=_PALETTE[k % len(_PALETTE)],
                label=f"{key}: ECE {100 * r['ece']:.2f}, Brier {r['brier']:.4f}")
    ax.set(ylabel="accuracy", title=title, xlim=(0, 1), ylim=(0, 1))
    ax.legend(loc="upper left", fontsize=8)
    first = next(iter(result.values()))
    width = 1 / len(first["bins"])
    bars.bar([row["low"] + width / 2 for row in first["bins"]],
             [row["count"] for row in first["bins"]], width=width * 0.9, color="#999")
    bars.set(xlabel="confidence", ylabel="words", yscale="log")
    fig.tight_layout()
    with open_output(name, binary=True) as fh:
        fig.savefig(fh, format=name.rsplit(".", 1)[-1] if "." in name else "png", dpi=120)
    plt.close(fig)
