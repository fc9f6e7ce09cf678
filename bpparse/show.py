"""Arc diagrams of parsed sentences: one SVG per sentence, or a self-contained HTML page of them.

In the style of displaCy: the words in a row with their UPOS beneath, every arc drawn above them
from head to dependent with its label at the top and an arrowhead at the dependent. An arc's
opacity and width grow with the word's ``HeadProb`` (MISC, written by ``bpparse parse
--marginals``); given a head distribution per word (a ``--marginals-file`` array, or the parser's
marginals), every other head of probability ≥ ``alternatives`` is a dashed arc labelled with its
probability. Arc heights grow with the number of arcs they span, so nested arcs never overlap;
long sentences scroll sideways in the page. No script, no network: inline SVG and CSS only.

Every string from the input is escaped for XML, and characters XML cannot hold (C0 controls) are
replaced by U+FFFD, so a FORM such as ``<b>&"`` or right-to-left text cannot break the page: each
word is its own ``<text>`` element, isolated for the bidirectional algorithm.
"""
from html import escape

import numpy as np

LEVEL_HEIGHT = 34
MIN_GAP = 56
CHAR_WIDTH = 8.2
MARGIN = 20

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
section { margin-bottom: 2em; }
h2 { font-size: 1em; margin: 0 0 .2em 0; color: #555; font-weight: normal; }
p.text { margin: .2em 0 .5em 0; }
div.scroll { overflow-x: auto; border-top: 1px solid #eee; }
svg.bpparse text { font-family: system-ui, sans-serif; }
svg.bpparse .form { font-size: 15px; unicode-bidi: isolate; }
svg.bpparse .upos { font-size: 11px; fill: #777; }
svg.bpparse .label { font-size: 11px; fill: #333; }
svg.bpparse .alt { font-size: 10px; fill: #b35; }
"""


def _clean(text):
    """``text`` safe inside XML: escaped, C0 controls other than tab/newline replaced."""
    text = "".join("\ufffd" if (ord(c) < 32 and c not in "\t\n") or c in "\ufffe\uffff" else c
                   for c in str(text))
    return escape(text, quote=True)


def _misc_value(misc, key):
    """Float value of ``key=...`` in a MISC field, or None."""
    if misc in ("_", ""):
        return None
    for item in misc.split("|"):
        name, sep, value = item.partition("=")
        if sep and name == key:
            try:
                return float(value)
            except ValueError:
                return None
    return None


def _levels(heads):
    """Height level of each word's arc (1 = lowest): one more than the highest arc strictly
    inside its span, so that arcs nest without overlapping."""
    h = np.asarray(heads, dtype=np.int64)
    words = np.arange(h.shape[0])
    lo, hi = np.minimum(h, words), np.maximum(h, words)
    drawn = (words >= 1) & (h >= 1)
    level = np.zeros(h.shape[0], dtype=np.int64)
    for m in sorted(np.flatnonzero(drawn), key=lambda k: hi[k] - lo[k]):
        inside = drawn & (lo >= lo[m]) & (hi <= hi[m]) & (words != m)
        level[m] = 1 + (level[inside].max() if inside.any() else 0)
    return level


def sentence_svg(sentence, marginals=None, alternatives=None, uid=""):
    """SVG (a string, one ``<svg>`` element) of one `conll.Sentence`.

    ``marginals``: float ``(n+1, n+1)`` head distributions ``[head, child]`` (probabilities), or
    None; with ``alternatives`` = P, every head h ≠ HEAD of word m with ``marginals[h, m] >= P`` is
    drawn as a dashed arc labelled with its probability. ``uid`` makes the element ids unique
    among several diagrams of one page.
    """
    n = sentence.n
    forms, upos, deprels, misc = sentence.forms, sentence.upos, sentence.deprels, sentence.misc
    heads = [int(h) for h in sentence.heads]
    widths = [0.0] + [max(MIN_GAP, CHAR_WIDTH * max(len(forms[i]), len(upos[i]) * 0.8) + 18)
                      for i in range(1, n + 1)]
    x = [0.0] * (n + 1)
    pos = MARGIN
    for i in range(1, n + 1):
        x[i] = pos + widths[i] / 2
        pos += widths[i]
    width = pos + MARGIN

    alt = []
    if marginals is not None and alternatives is not None:
        mu = np.asarray(marginals, dtype=float)
        if mu.shape != (n + 1, n + 1):
            raise ValueError(f"marginals of shape {mu.shape} for a sentence of {n} words")
        for m in range(1, n + 1):
            for h in range(n + 1):
                if h != m and h != heads[m] and mu[h, m] >= alternatives:
                    alt.append((h, m, float(mu[h, m])))
    tree_levels = _levels(heads)
    top = max([int(v) for v in tree_levels[1:]] + [1])
    alt_levels = {(h, m): top + 1 + k for k, (h, m, _) in enumerate(
        sorted(alt, key=lambda a: abs(a[0] - a[1])))}
    highest = max([top] + list(alt_levels.values()))
    base_y = MARGIN + 24 + highest * LEVEL_HEIGHT  # the y of arc feet
    height = base_y + 48

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="bpparse" width="{width:.0f}" '
           f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" role="img" '
           f'aria-label="{_clean(sentence.sent_id or "sentence")}">',
           "<defs>" + "".join(
               f'<marker id="{name}{uid}" viewBox="0 0 10 10" refX="9" refY="5" '
               f'markerUnits="userSpaceOnUse" markerWidth="{size}" markerHeight="{size}" '
               f'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{colour}"/></marker>'
               for name, size, colour in (("arrow", 8, "#333"), ("arrow-alt", 7, "#b35"))) + "</defs>"]
    for i in range(1, n + 1):
        out.append(f'<text class="form" x="{x[i]:.1f}" y="{base_y + 20:.1f}" text-anchor="middle">'
                   f'{_clean(forms[i])}</text>')
        out.append(f'<text class="upos" x="{x[i]:.1f}" y="{base_y + 36:.1f}" text-anchor="middle">'
                   f'{_clean(upos[i])}</text>')

    def arc(h, m, level, label, title, style):
        y_top = base_y - level * LEVEL_HEIGHT
        if h == 0:
            path = f"M{x[m]:.1f},{MARGIN + 4:.1f} L{x[m]:.1f},{base_y:.1f}"
            lx, ly = x[m] + 4, MARGIN + 14
            anchor = "start"
        else:
            x0 = x[h] + (4 if m > h else -4)
            x1 = x[m] + (-4 if m > h else 4)
            path = (f"M{x0:.1f},{base_y:.1f} C{x0:.1f},{y_top:.1f} {x1:.1f},{y_top:.1f} "
                    f"{x1:.1f},{base_y:.1f}")
            lx, ly = (x0 + x1) / 2, base_y - level * LEVEL_HEIGHT * 0.75 - 3
            anchor = "middle"
        out.append(f'<g class="arc"><title>{_clean(title)}</title><path d="{path}" fill="none" '
                   f'{style}/><text class="{"alt" if "dash" in style else "label"}" x="{lx:.1f}" '
                   f'y="{ly:.1f}" text-anchor="{anchor}">{_clean(label)}</text></g>')

    for m in range(1, n + 1):
        h = heads[m]
        if h < 0:
            continue
        p = _misc_value(misc[m], "HeadProb")
        opacity = 1.0 if p is None else 0.25 + 0.75 * p
        stroke = 1.6 if p is None else 0.8 + 1.8 * p
        title = f"{forms[h] if h else 'ROOT'} → {forms[m]} ({deprels[m]})"
        if p is not None:
            title += f", HeadProb {p:.3f}"
        arc(h, m, int(tree_levels[m]) if h else highest, deprels[m], title,
            f'stroke="#333" stroke-width="{stroke:.2f}" stroke-opacity="{opacity:.2f}" '
            f'marker-end="url(#arrow{uid})"')
    for h, m, p in alt:
        arc(h, m, alt_levels[(h, m)], f"{p:.2f}",
            f"alternative head {forms[h] if h else 'ROOT'} → {forms[m]}: p = {p:.3f}",
            f'stroke="#b35" stroke-width="1.2" stroke-dasharray="5,4" '
            f'marker-end="url(#arrow-alt{uid})"')
    out.append("</svg>")
    return "\n".join(out)


def _extras(sentence):
    """Multiword tokens and empty nodes, as a caption (they are not words of the basic tree)."""
    parts = []
    for line in sentence.lines:
        if line.startswith("#"):
            continue
        cols = line.split("\t")
        if "-" in cols[0]:
            parts.append(f"{cols[0]} {cols[1]}")
        elif "." in cols[0]:
            parts.append(f"empty node {cols[0]} {cols[1]}")
    return "; ".join(parts)


def sentence_html(sentence, marginals=None, alternatives=None, number=None):
    """One ``<section>``: a heading (sent_id or number), the text, the diagram."""
    name = sentence.sent_id or (f"sentence {number}" if number else "sentence")
    text = " ".join(sentence.forms[1:])
    for line in sentence.lines:
        if line.startswith("# text") and line[1:].partition("=")[0].strip() == "text":
            text = line.partition("=")[2].strip()
    extras = _extras(sentence)
    caption = f'<p class="text" dir="auto">{_clean(text)}</p>'
    if extras:
        caption += f'<p class="text upos">{_clean(extras)}</p>'
    return (f"<section><h2>{_clean(name)}</h2>{caption}<div class=\"scroll\">"
            f"{sentence_svg(sentence, marginals, alternatives, f'-{number or 0}')}</div></section>")


def page(sections, title="bpparse"):
    """A self-contained HTML document of the ``sections`` (strings of `sentence_html`)."""
    body = "\n".join(sections)
    return (f'<!DOCTYPE html>\n<html lang="und"><head><meta charset="utf-8">'
            f"<title>{_clean(title)}</title><style>{_STYLE}</style></head>\n<body>\n{body}\n"
            f"</body></html>\n")
