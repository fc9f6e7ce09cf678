"""Accuracy of bpparse's raw-text reader (`bpparse.text.read_raw`) against a UD treebank's tokens.

    python3 scripts/tokenizer_f1.py ../shared/data/ud/en_ewt/en_ewt-ud-test.conllu
    python3 scripts/tokenizer_f1.py --per-sentence --language en TREEBANK.conllu

What is measured. The treebank's ``# text`` lines are put back together into raw text: one
document per ``# newdoc``, its paragraphs (``# newpar``) on lines of their own, the sentences of a
paragraph joined by one space (``--per-sentence``: each ``# text`` on a line of its own, so the
gold sentence boundaries are given and only tokenization is measured). ``read_raw`` reads that
text. Gold and predicted units are compared by their character spans in the text with all
whitespace removed, as the CoNLL 2018 shared task's evaluation does:
- tokens: surface tokens (a multiword-token line such as ``don't`` counts once, with its range's
  FORM; its words ``do`` ``n't`` do not count as tokens);
- words: syntactic words; a word matches when its token's span and the token's split into words
  both match;
- sentences: the span from a sentence's first to its last character.
Precision, recall and F1 in %.
"""
import argparse
import io
import sys


def surface(sentence):
    """[(form, words)] of a bpparse Sentence: multiword tokens once, with their words."""
    out = []
    end = 0
    words = []
    for line in sentence.lines:
        if line.startswith("#"):
            continue
        cols = line.split("\t")
        wid = cols[0]
        if "." in wid:
            continue
        if "-" in wid:
            first, last = (int(x) for x in wid.split("-"))
            end = last
            out.append([cols[1], []])
            words = out[-1][1]
            continue
        if end and int(wid) <= end:
            words.append(cols[1])
            continue
        out.append([cols[1], [cols[1]]])
    return [(form, tuple(w)) for form, w in out]


def spans(sentences):
    """(token spans with their words, sentence spans) in whitespace-free character offsets."""
    tokens, sents = [], []
    pos = 0
    for toks in sentences:
        start = pos
        for form, words in toks:
            size = len("".join(form.split()))
            tokens.append(((pos, pos + size), words))
            pos += size
        sents.append((start, pos))
    return tokens, sents, pos


def prf(matched_p, total_p, matched_r, total_r):
    p = 100.0 * matched_p / max(total_p, 1)
    r = 100.0 * matched_r / max(total_r, 1)
    return p, r, 2 * p * r / max(p + r, 1e-12)


def documents(path, per_sentence):
    """[(raw text, [gold sentences as surface token lists])] of a treebank."""
    from bpparse.conll import read_conll

    docs = []
    text, gold = [], []
    for sentence in read_conll(path):
        comments = sentence.comments
        new_doc = any(c.startswith("# newdoc") for c in comments)
        new_par = any(c.startswith("# newpar") for c in comments)
        raw = next((c.partition("=")[2].strip() for c in comments if c.startswith("# text")), None)
        if raw is None:
            sys.exit(f"{path}:{sentence.first_line}: sentence without '# text'")
        if new_doc and gold:
            docs.append(("".join(text), gold))
            text, gold = [], []
        if text:
            text.append("\n" if per_sentence or new_par else " ")
        text.append(raw)
        gold.append(surface(sentence))
    if gold:
        docs.append(("".join(text), gold))
    return docs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("treebank", help="CoNLL-U file with # text lines (e.g. en_ewt-ud-test.conllu)")
    ap.add_argument("--language", default="en", help="language code for the tokenizer (default en)")
    ap.add_argument("--per-sentence", action="store_true",
                    help="one # text per line: gold sentence boundaries, tokenization only")
    args = ap.parse_args()

    from bpparse.text import read_raw

    counts = {"tok": [0, 0, 0], "word": [0, 0, 0, 0], "sent": [0, 0, 0]}
    docs = documents(args.treebank, args.per_sentence)
    for raw, gold in docs:
        system = [surface(s) for s in read_raw(io.StringIO(raw), args.language)]
        g_tok, g_sent, g_len = spans(gold)
        s_tok, s_sent, s_len = spans(system)
        if g_len != s_len:
            sys.exit(f"the text has {s_len} characters for the tokenizer, {g_len} in the gold "
                     f"FORMs: # text and FORM disagree")
        gold_words = dict(g_tok)
        matched_tok = matched_words = 0
        for span, words in s_tok:
            if span in gold_words:
                matched_tok += 1
                if gold_words[span] == words:
                    matched_words += len(words)
        counts["tok"][0] += matched_tok
        counts["tok"][1] += len(s_tok)
        counts["tok"][2] += len(g_tok)
        counts["word"][0] += matched_words
        counts["word"][1] += sum(len(w) for _, w in s_tok)
        counts["word"][2] += sum(len(w) for _, w in g_tok)
        counts["sent"][0] += len(set(s_sent) & set(g_sent))
        counts["sent"][1] += len(s_sent)
        counts["sent"][2] += len(g_sent)
    mode = "gold sentence boundaries (one # text per line)" if args.per_sentence else \
        "one document per # newdoc, paragraphs on lines of their own"
    print(f"{args.treebank}: {len(docs)} documents, {mode}")
    print(f"{'unit':<10} {'gold':>7} {'system':>7} {'P':>7} {'R':>7} {'F1':>7}")
    for name, key in (("tokens", "tok"), ("words", "word"), ("sentences", "sent")):
        m, s, g = counts[key][:3]
        p, r, f = prf(m, s, m, g)
        print(f"{name:<10} {g:>7} {s:>7} {p:>7.2f} {r:>7.2f} {f:>7.2f}")


if __name__ == "__main__":
    main()
