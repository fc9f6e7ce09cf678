"""Cut the test fixtures in tests/data/ and the bundled sample from the UD treebanks (run once).

    python3 scripts/make_fixtures.py [/work/shared/data/ud]

The cuts are raw blocks copied byte for byte (comments, multiword tokens, empty nodes included);
only the CoNLL-X file is converted. The malformed inputs are one good sentence (lines 1-10)
followed by a sentence whose word 4 (line 16) has one defect each.
"""
import argparse
import os
import shutil

from bpparse.conll import read_conll

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS_DATA = os.path.join(HERE, "..", "tests", "data")
PACKAGE_DATA = os.path.join(HERE, "..", "bpparse", "data")

SAMPLE_IDS = [  # short EWT test sentences for bpparse/data/sample.conllu
    "weblog-blogspot.com_marketview_20050511222700_ENG_20050511_222700-0003",
    "weblog-juancole.com_juancole_20030914114200_ENG_20030914_114200-0005",
    "weblog-blogspot.com_tacitusproject_20040715092419_ENG_20040715_092419-0002",
    "weblog-juancole.com_juancole_20040722101300_ENG_20040722_101300-0020",
    "email-enronsent18_01-0014",
]


def is_projective(heads):
    arcs = [(min(h, m), max(h, m)) for m, h in enumerate(heads) if m > 0]
    return not any(a < c < b < d for a, b in arcs for c, d in arcs)


def has_mwt(s):
    return any("-" in line.split("\t")[0] for line in s.lines if not line.startswith("#"))


def has_empty(s):
    return any("." in line.split("\t")[0] for line in s.lines if not line.startswith("#"))


def write(path, sentences, header=""):
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        out.write(header)
        for s in sentences:
            out.write(s.text)
    print(path, len(sentences), "sentences")


def main(ud):
    os.makedirs(TESTS_DATA, exist_ok=True)
    ewt_dev = list(read_conll(os.path.join(ud, "en_ewt", "en_ewt-ud-dev.conllu")))
    ewt_train = list(read_conll(os.path.join(ud, "en_ewt", "en_ewt-ud-train.conllu")))
    ewt_test = list(read_conll(os.path.join(ud, "en_ewt", "en_ewt-ud-test.conllu")))
    bosque_dev = list(read_conll(os.path.join(ud, "pt_bosque", "pt_bosque-ud-dev.conllu")))
    bosque_train = list(read_conll(os.path.join(ud, "pt_bosque", "pt_bosque-ud-train.conllu")))
    ddt_dev = list(read_conll(os.path.join(ud, "da_ddt", "da_ddt-ud-dev.conllu")))

    # EWT: the first 24 dev sentences, words starting with '#', FORM '_' (train), an empty node
    ewt = ewt_dev[:24]
    ewt += [s for s in ewt_dev if any(f.startswith("#") for f in s.forms[1:])][:2]
    ewt += [s for s in ewt_train if "_" in s.forms[1:]][:2]
    ewt += [s for s in ewt_dev if has_empty(s)][:1]
    assert any(has_mwt(s) for s in ewt)
    write(os.path.join(TESTS_DATA, "en_ewt_sample.conllu"), ewt)
    write(os.path.join(TESTS_DATA, "en_ewt_empty_nodes.conllu"), [s for s in ewt_dev if has_empty(s)])

    # Bosque: 10 sentences with multiword tokens, 8 non-projective ones, the 201-word sentence
    mwt = [s for s in bosque_dev if has_mwt(s) and s.n <= 30][:10]
    nonproj = [s for s in bosque_dev if not is_projective(s.heads) and s.n <= 40 and s not in mwt][:8]
    write(os.path.join(TESTS_DATA, "pt_bosque_sample.conllu"), mwt + nonproj)
    longest = max(bosque_train, key=lambda s: s.n)
    assert longest.n >= 200
    write(os.path.join(TESTS_DATA, "pt_bosque_long.conllu"), [longest])

    write(os.path.join(TESTS_DATA, "da_ddt_sample.conllu"), ddt_dev[:12])

    # CoNLL-X: 10 EWT sentences without comments or MWT/empty lines; PHEAD/PDEPREL copy HEAD/DEPREL
    with open(os.path.join(TESTS_DATA, "en_ewt_sample.conllx"), "w", encoding="utf-8", newline="\n") as out:
        for s in ewt_dev[:10]:
            for i in range(1, s.n + 1):
                cols = s.lines[s.word_lines[i]].split("\t")
                out.write("\t".join(cols[:8] + [cols[6], cols[7]]) + "\n")
            out.write("\n")

    for name in ("en_ewt", "pt_bosque", "da_ddt"):
        shutil.copyfile(os.path.join(ud, name, "LICENSE.txt"), os.path.join(TESTS_DATA, f"LICENSE.{name}.txt"))

    by_id = {s.sent_id: s for s in ewt_test}
    source = ("# source: UD English EWT v2.15, test set (CC BY-SA 4.0),"
              " https://github.com/UniversalDependencies/UD_English-EWT\n")
    sample = [by_id[i] for i in SAMPLE_IDS]
    write(os.path.join(TESTS_DATA, "sample_gold.conllu"), sample,
          source + "# the five sentences of bpparse/data/sample.conllu with their gold trees (for tests)\n")
    os.makedirs(PACKAGE_DATA, exist_ok=True)
    # the README's first command shows the parser's work: the shipped sample has tags, no trees
    with open(os.path.join(PACKAGE_DATA, "sample.conllu"), "w", encoding="utf-8", newline="\n") as out:
        out.write(source + "# five short sentences with gold tags and no trees (HEAD, DEPREL, DEPS _): "
                  "`bpparse parse` fills them in\n")
        for s in sample:
            rows = [line.split("\t") for line in s.text.rstrip("\n").split("\n")]
            for cols in rows:
                if len(cols) == 10 and cols[0].isdigit():
                    cols[6:9] = ["_", "_", "_"]
            out.write("\n".join("\t".join(cols) for cols in rows) + "\n\n")
    write_malformed()


BASE = [
    "1\tThe\tthe\tDET\tDT\tDefinite=Def|PronType=Art\t2\tdet\t2:det\t_",
    "2\tcat\tcat\tNOUN\tNN\tNumber=Sing\t3\tnsubj\t3:nsubj\t_",
    "3\tsat\tsit\tVERB\tVBD\tMood=Ind|Tense=Past|VerbForm=Fin\t0\troot\t0:root\t_",
    "4\ton\ton\tADP\tIN\t_\t6\tcase\t6:case\t_",
    "5\tthe\tthe\tDET\tDT\tDefinite=Def|PronType=Art\t6\tdet\t6:det\t_",
    "6\tmat\tmat\tNOUN\tNN\tNumber=Sing\t3\tobl\t3:obl:on\tSpaceAfter=No",
    "7\t.\t.\tPUNCT\t.\t_\t3\tpunct\t3:punct\t_",
]


def write_malformed():
    def sent(sid, rows):
        return "\n".join([f"# sent_id = {sid}", "# text = The cat sat on the mat."] + rows) + "\n\n"

    def edit(i, col, value):
        rows = [r.split("\t") for r in BASE]
        rows[i][col] = value
        return ["\t".join(r) for r in rows]

    def put(name, text):
        with open(os.path.join(TESTS_DATA, name), "w", encoding="utf-8", newline="\n") as f:
            f.write(text)

    first = sent("good-1", BASE)
    nine = list(BASE)
    nine[3] = "\t".join(BASE[3].split("\t")[:9])
    put("bad_columns.conllu", first + sent("bad", nine))
    put("bad_id.conllu", first + sent("bad", edit(3, 0, "4a")))
    put("bad_order.conllu", first + sent("bad", edit(3, 0, "5")))
    put("bad_head_range.conllu", first + sent("bad", edit(3, 6, "8")))
    put("bad_head_value.conllu", first + sent("bad", edit(3, 6, "six")))
    put("bad_mwt.conllu", first + sent("bad", BASE[:3] + ["5-6\tonthe\t_\t_\t_\t_\t_\t_\t_\t_"] + BASE[3:]))
    put("cycle.conllu", first + sent("bad", edit(5, 6, "4")))          # 4 -> 6 -> 4
    put("self_head.conllu", first + sent("bad", edit(3, 6, "4")))
    put("head_missing.conllu", first + sent("bad", edit(3, 6, "_")))
    put("multi_root.conllu", first + sent("two-roots", edit(6, 6, "0")))
    put("empty.conllu", "")
    put("no_final_blank.conllu", first + sent("last", BASE).rstrip("\n"))
    bad = (first + sent("bad", edit(3, 1, "\x00MARK"))).encode("utf-8").replace(b"\x00MARK", b"o\xffn")
    with open(os.path.join(TESTS_DATA, "bad_utf8.conllu"), "wb") as f:
        f.write(bad)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ud", nargs="?", default="../shared/data/ud", help="UD directory  [default: %(default)s]")
    main(ap.parse_args().ud)
