"""Attachment scores of predicted against gold trees, counted on syntactic words (integer IDs).

UAS: HEAD right; LAS: HEAD and the full DEPREL (subtypes included) right; label accuracy: DEPREL
right. With ``punct=False`` words whose gold UPOS is PUNCT are not counted; the default counts every
word, as the CoNLL 2018 shared-task evaluation does. Scores are percentages; with no word counted
they are 0.0. A sentence is an exact match when every counted word is right (vacuously so when none
is counted). Multiword-token and empty-node lines are ignored, so the two files may tokenize
differently into them as long as their syntactic words agree FORM by FORM.

Tags: when the prediction has POS tags (some UPOS is not ``_``), UPOS, XPOS and FEATS accuracy
and AllTags (all three right) are reported too, on the same words; FEATS compare as sets of
``Attr=Value`` pairs, so their order does not matter.
"""
from bpparse.errors import InputError

LENGTH_BINS = ((1, 10), (11, 20), (21, 30), (31, 40), (41, 50), (51, None))


def length_bin(n):
    for low, high in LENGTH_BINS:
        if high is None or n <= high:
            return f"{low}-{high}" if high is not None else f"{low}+"
    raise AssertionError(n)


def _percent(part, whole):
    return 100.0 * part / whole if whole else 0.0


TAG_SCORES = ("upos", "xpos", "feats", "alltags")


def _new_counts():
    return {"words": 0, "heads": 0, "both": 0, "labels": 0, "sentences": 0, "exact_uas": 0,
            "exact_las": 0, "tagged": 0, **{k: 0 for k in TAG_SCORES}}


def _feats(value):
    return frozenset(value.split("|")) if value != "_" else frozenset()


def _scores(c, sentences=True):
    out = {
        "uas": _percent(c["heads"], c["words"]),
        "las": _percent(c["both"], c["words"]),
        "label_acc": _percent(c["labels"], c["words"]),
        "words": c["words"],
    }
    if c["tagged"]:
        for key in TAG_SCORES:
            out[key] = _percent(c[key], c["words"])
    if sentences:
        out["sentences"] = c["sentences"]
        out["exact_uas"] = _percent(c["exact_uas"], c["sentences"])
        out["exact_las"] = _percent(c["exact_las"], c["sentences"])
    return out


def evaluate(gold_sentences, pred_sentences, punct=True, details=False):
    """Compare two aligned streams of ``conll.Sentence``.

    Returns a dict: uas, las, label_acc, exact_uas, exact_las (percent), words (counted), sentences;
    with ``details`` also by_length (sentence-length bin "1-10" ... "51+" -> the same keys) and
    by_deprel (gold DEPREL -> uas, las, label_acc, words).
    Raises InputError naming file and line where the inputs first differ: the number of sentences,
    of words, or a FORM; or where a gold HEAD is ``_``.
    """
    total = _new_counts()
    by_length = {}
    by_deprel = {}
    gold_iter, pred_iter = iter(gold_sentences), iter(pred_sentences)
    count = 0
    while True:
        gold = next(gold_iter, None)
        pred = next(pred_iter, None)
        if gold is None or pred is None:
            if gold is not None:
                raise InputError(gold.path, gold.first_line,
                                 f"sentence {count + 1} is missing from the prediction, which has {count} sentences")
            if pred is not None:
                raise InputError(pred.path, pred.first_line,
                                 f"sentence {count + 1} is not in gold, which has {count} sentences")
            break
        count += 1
        _check_aligned(gold, pred, count)
        gheads, pheads = gold.heads.tolist(), pred.heads.tolist()
        gdeps, pdeps = gold.deprels, pred.deprels
        gupos = gold.upos
        tagged = any(t != "_" for t in pred.upos[1:])
        if tagged:
            pupos, gxpos, pxpos, gfeats, pfeats = pred.upos, gold.xpos, pred.xpos, gold.feats, pred.feats
        s = _new_counts()
        for i in range(1, gold.n + 1):
            if gheads[i] < 0:
                raise InputError(gold.path, gold.line_of(i), "gold HEAD is '_'")
            if not punct and gupos[i] == "PUNCT":
                continue
            head_ok = gheads[i] == pheads[i]
            label_ok = gdeps[i] == pdeps[i]
            s["words"] += 1
            s["heads"] += head_ok
            s["labels"] += label_ok
            s["both"] += head_ok and label_ok
            if tagged:
                u, x, f = gupos[i] == pupos[i], gxpos[i] == pxpos[i], _feats(gfeats[i]) == _feats(pfeats[i])
                s["upos"] += u
                s["xpos"] += x
                s["feats"] += f
                s["alltags"] += u and x and f
            if details:
                d = by_deprel.setdefault(gdeps[i], _new_counts())
                d["words"] += 1
                d["heads"] += head_ok
                d["labels"] += label_ok
                d["both"] += head_ok and label_ok
        s["sentences"] = 1
        s["tagged"] = int(tagged)
        s["exact_uas"] = int(s["heads"] == s["words"])
        s["exact_las"] = int(s["both"] == s["words"])
        for key, value in s.items():
            total[key] += value
        if details:
            b = by_length.setdefault(length_bin(gold.n), _new_counts())
            for key, value in s.items():
                b[key] += value
    result = _scores(total)
    if details:
        order = [length_bin(low) for low, _ in LENGTH_BINS]
        result["by_length"] = {k: _scores(by_length[k]) for k in order if k in by_length}
        result["by_deprel"] = {k: _scores(by_deprel[k], sentences=False) for k in sorted(by_deprel)}
    return result


def _check_aligned(gold, pred, number):
    gforms, pforms = gold.forms, pred.forms
    for i in range(1, min(gold.n, pred.n) + 1):
        if gforms[i] != pforms[i]:
            raise InputError(pred.path, pred.line_of(i),
                             f"word {i} of sentence {number} is {pforms[i]!r} but {gforms[i]!r} in "
                             f"gold ({gold.path}:{gold.line_of(i)})")
    if gold.n != pred.n:
        raise InputError(pred.path, pred.first_line,
                         f"sentence {number} has {pred.n} words but {gold.n} in gold ({gold.path}:{gold.first_line})")


def format_report(result, punct=True):
    """Plain-text report of an ``evaluate`` result (with its tables when it has details)."""
    counted = "punctuation counted" if punct else "punctuation (UPOS PUNCT) not counted"
    lines = [
        f"words       {result['words']:>8}  ({counted})",
        f"sentences   {result['sentences']:>8}",
        f"UAS         {result['uas']:8.2f}",
        f"LAS         {result['las']:8.2f}",
        f"label acc   {result['label_acc']:8.2f}",
        f"exact UAS   {result['exact_uas']:8.2f}",
        f"exact LAS   {result['exact_las']:8.2f}",
    ]
    lines += [f"{key.upper() if key != 'alltags' else 'AllTags':<12}{result[key]:8.2f}"
              for key in TAG_SCORES if key in result]
    if "by_length" in result:
        lines += ["", "by sentence length", f"{'length':<10}{'sents':>7}{'words':>8}{'UAS':>8}{'LAS':>8}"]
        for key, r in result["by_length"].items():
            lines.append(f"{key:<10}{r['sentences']:>7}{r['words']:>8}{r['uas']:8.2f}{r['las']:8.2f}")
        lines += ["", "by gold DEPREL", f"{'deprel':<20}{'words':>8}{'UAS':>8}{'LAS':>8}{'label':>8}"]
        for key, r in result["by_deprel"].items():
            lines.append(f"{key:<20}{r['words']:>8}{r['uas']:8.2f}{r['las']:8.2f}{r['label_acc']:8.2f}")
    return "\n".join(lines) + "\n"
