"""UDPipe 1 as a peer of bpparse: train, tag and parse, score, and time it, side by side.

UDPipe stays out of bpparse's dependencies: install it in a virtual environment of its own,

    python3 -m venv /tmp/udpipe-venv && /tmp/udpipe-venv/bin/pip install ufal.udpipe

and run this script with any python. A subcommand that needs ufal.udpipe, when the running python
lacks it, re-executes the script under --udpipe-python (default: $UDPIPE_PYTHON, else
/tmp/udpipe-venv/bin/python). `score` needs nothing but the standard library.

    python3 scripts/udpipe_peer.py train --treebank ../shared/data/ud/en_ewt --out /tmp/udpipe/en_ewt.udpipe
    python3 scripts/udpipe_peer.py tag-parse --model M --input test.conllu --output pred.conllu --strip
    python3 scripts/udpipe_peer.py tag-parse --model M --input test.conllu --output pred.conllu   # gold tags
    python3 scripts/udpipe_peer.py score --gold test.conllu --pred pred.conllu
    python3 scripts/udpipe_peer.py time-parser --model M --input test.conllu --repeat 5

train: ufal.udpipe.Trainer.train("morphodita_parsito", DIR/*-ud-train.conllu, DIR/*-ud-dev.conllu,
tokenizer="none", tagger=..., parser=...) with UDPipe's default tagger options (two models, 20
iterations with early stopping on dev) and default parser options (parsito, 10 iterations, trained
on the tags its own tagger predicts), unless --tagger-options / --parser-options / --parser-iterations
say otherwise. The tagger and parser times are read off UDPipe's own log (its first parser line).
Writes MODEL and MODEL.json (options and times).

tag-parse --strip: LEMMA, UPOS, XPOS, FEATS, HEAD, DEPREL, DEPS of every word (and empty node)
become _, then the model tags and parses; without --strip the gold tags are kept and only the
parser runs. Reports model load time, wall time of the processing and syntactic words per second.

score: UPOS, XPOS, FEATS, AllTags (all three), LEMMA accuracy, UAS and LAS (HEAD and full DEPREL,
subtypes included, as `bpparse eval`), punctuation counted, syntactic words only (multiword-token
ranges and empty nodes skipped). Gold and pred must have the same words (FORM by FORM).

time-parser: whole-process wall time (python start, model load, parsing, writing) of parsing a
gold-tagged file with UDPipe's parser in a child process, N runs one at a time: median, min, max,
and the child's peak RSS (os.wait4). Children run with their bytecode cached, as installed
programs do (PYTHONDONTWRITEBYTECODE is removed from their environment; one untimed run each first). With --bpparse [MODEL], each run alternates with `bpparse parse
--jobs 1` on the same file (the `bpparse` console script on PATH, resolved past a pyenv shim, as the
UDPipe worker is started by its interpreter's path), and the ratio of the medians is printed:

    python3 scripts/udpipe_peer.py train --no-tagger --parser-iterations 1 --treebank ../shared/data/ud/en_ewt --out M
    python3 scripts/udpipe_peer.py time-parser --model M --input en_ewt-ud-test.conllu --repeat 5 --bpparse
"""
import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

DEFAULT_UDPIPE_PYTHON = "/tmp/udpipe-venv/bin/python"
STRIP_COLUMNS = (2, 3, 4, 5, 6, 7, 8)  # LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS


# --- running under a python that has ufal.udpipe -------------------------------------------------

def _has_udpipe():
    try:
        import ufal.udpipe  # noqa: F401
    except ImportError:
        return False
    return True


def ensure_udpipe(args):
    """Return if ufal.udpipe imports here; else re-execute this script under --udpipe-python."""
    if _has_udpipe():
        return
    py = args.udpipe_python
    if os.environ.get("_UDPIPE_PEER_REEXEC") or not py or not os.path.exists(py):
        sys.exit(f"ufal.udpipe is not importable by {sys.executable} and --udpipe-python {py!r} is not "
                 "usable; install it in a venv: python3 -m venv /tmp/udpipe-venv && "
                 "/tmp/udpipe-venv/bin/pip install ufal.udpipe")
    env = dict(os.environ, _UDPIPE_PEER_REEXEC="1")
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(py, [py, os.path.abspath(__file__)] + sys.argv[1:], env)


# --- CoNLL-U text helpers (standard library only) ------------------------------------------------

def is_word(cols):
    return len(cols) >= 10 and cols[0].isdigit()


def strip_text(text):
    """Blank LEMMA/UPOS/XPOS/FEATS/HEAD/DEPREL/DEPS of words and empty nodes; keep ranges, comments."""
    out = []
    for line in text.split("\n"):
        cols = line.split("\t")
        if len(cols) >= 10 and "-" not in cols[0]:
            for i in STRIP_COLUMNS:
                cols[i] = "_"
            line = "\t".join(cols)
        out.append(line)
    return "\n".join(out)


def read_words(path):
    """[[columns of each syntactic word] for each sentence]."""
    sentences, cur = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\r\n")
            if not line.strip():
                if cur:
                    sentences.append(cur)
                    cur = []
                continue
            if line.startswith("#"):
                continue
            cols = line.split("\t")
            if is_word(cols):
                cur.append(cols)
    if cur:
        sentences.append(cur)
    return sentences


def count_words(text):
    return sum(1 for line in text.split("\n") if is_word(line.split("\t")))


def score(gold_path, pred_path):
    gold, pred = read_words(gold_path), read_words(pred_path)
    if len(gold) != len(pred):
        sys.exit(f"{gold_path} has {len(gold)} sentences, {pred_path} {len(pred)}")
    keys = ("upos", "xpos", "feats", "alltags", "lemma", "uas", "las")
    right = dict.fromkeys(keys, 0)
    words = 0
    for n, (gs, ps) in enumerate(zip(gold, pred), 1):
        if [w[1] for w in gs] != [w[1] for w in ps]:
            sys.exit(f"sentence {n}: the words differ between {gold_path} and {pred_path}")
        for g, p in zip(gs, ps):
            words += 1
            upos, xpos = g[3] == p[3], g[4] == p[4]
            feats = set(g[5].split("|")) - {"_"} == set(p[5].split("|")) - {"_"}
            right["upos"] += upos
            right["xpos"] += xpos
            right["feats"] += feats
            right["alltags"] += upos and xpos and feats
            right["lemma"] += g[2] == p[2]
            if g[6] == p[6]:
                right["uas"] += 1
                right["las"] += g[7] == p[7]
    result = {k: round(100.0 * v / max(words, 1), 2) for k, v in right.items()}
    result["words"] = words
    result["sentences"] = len(gold)
    return result


# --- subcommands ---------------------------------------------------------------------------------

def treebank_file(directory, split, required=True):
    found = sorted(glob.glob(os.path.join(directory, f"*-ud-{split}.conllu")))
    if not found and required:
        sys.exit(f"no *-ud-{split}.conllu in {directory}")
    return found[0] if found else None


def load_sentences(path):
    import ufal.udpipe as u
    fmt = u.InputFormat.newConlluInputFormat()
    with open(path, encoding="utf-8") as f:
        fmt.setText(f.read())
    sentences = u.Sentences()
    err = u.ProcessingError()
    s = u.Sentence()
    while fmt.nextSentence(s, err):
        sentences.append(s)
        s = u.Sentence()
    if err.occurred():
        sys.exit(f"{path}: {err.message}")
    return sentences


def cmd_train_worker(args):
    """Runs in a child with stderr piped to the parent (UDPipe logs on C++ stderr)."""
    import ufal.udpipe as u
    train = load_sentences(args.train_file)
    dev = load_sentences(args.dev_file) if args.dev_file else u.Sentences()
    print(f"[udpipe_peer] train {len(train)} sentences, dev {len(dev)}", file=sys.stderr, flush=True)
    err = u.ProcessingError()
    model = u.Trainer.train("morphodita_parsito", train, dev, "none", args.tagger_opts, args.parser_opts, err)
    if err.occurred():
        sys.exit(f"training failed: {err.message}")
    with open(args.out, "wb") as f:
        f.write(model if isinstance(model, bytes) else model.encode("latin-1"))


def cmd_train(args):
    ensure_udpipe(args)
    train_file = treebank_file(args.treebank, "train")
    dev_file = treebank_file(args.treebank, "dev", required=False)
    tagger = "none" if not args.tagger else (args.tagger_options or "default")
    parser = args.parser_options or ""
    if args.parser_iterations is not None:
        parser = ";".join(p for p in (parser, f"iterations={args.parser_iterations}") if p)
    parser = parser or "default"
    if args.no_parser:
        parser = "none"
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    cmd = [sys.executable, os.path.abspath(__file__), "_train-worker", "--train-file", train_file,
           "--out", args.out + ".part", "--tagger-opts", tagger, "--parser-opts", parser]
    if dev_file:
        cmd += ["--dev-file", dev_file]
    print(f"train {train_file}\ndev   {dev_file}\ntagger={tagger!r} parser={parser!r}", flush=True)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, bufsize=1)
    parser_start = None
    log = open(args.out + ".log", "w", encoding="utf-8")
    for line in proc.stderr:
        t = time.perf_counter() - start
        if parser_start is None and line.startswith("Parser"):
            parser_start = t
        log.write(f"{t:9.1f}s {line}")
        log.flush()
        if args.verbose or not line.startswith(("Iteration", "Training epoch")):
            print(f"{t:9.1f}s {line}", end="", flush=True)
    rc = proc.wait()
    total = time.perf_counter() - start
    log.close()
    if rc != 0:
        sys.exit(f"training failed ({rc}); log in {args.out}.log")
    os.replace(args.out + ".part", args.out)
    if parser == "none":
        tagger_s, parser_s = total, 0.0
    elif tagger == "none":
        tagger_s, parser_s = 0.0, total
    else:
        tagger_s = parser_start if parser_start is not None else None
        parser_s = total - parser_start if parser_start is not None else None
    meta = {"model": args.out, "train_file": train_file, "dev_file": dev_file, "tagger": tagger,
            "parser": parser, "train_seconds": round(total, 1),
            "tagger_seconds": None if tagger_s is None else round(tagger_s, 1),
            "parser_seconds": None if parser_s is None else round(parser_s, 1),
            "ufal.udpipe": _udpipe_version(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "cores": os.cpu_count()}
    with open(args.out + ".json", "w") as f:
        json.dump(meta, f, indent=1)
    print(json.dumps(meta))


def _udpipe_version():
    try:
        from importlib.metadata import version
        return version("ufal.udpipe")
    except Exception:
        return None


def _load_model(path):
    import ufal.udpipe as u
    model = u.Model.load(path)
    if model is None:
        sys.exit(f"cannot load UDPipe model {path}")
    return model


def _process(model, text, tag):
    import ufal.udpipe as u
    pipeline = u.Pipeline(model, "conllu", u.Pipeline.DEFAULT if tag else u.Pipeline.NONE,
                          u.Pipeline.DEFAULT, "conllu")
    err = u.ProcessingError()
    out = pipeline.process(text, err)
    if err.occurred():
        sys.exit(f"UDPipe failed: {err.message}")
    return out


def cmd_tag_parse(args):
    ensure_udpipe(args)
    with open(args.input, encoding="utf-8") as f:
        text = f.read()
    if args.strip:
        text = strip_text(text)
    words = count_words(text)
    t = time.perf_counter()
    model = _load_model(args.model)
    load_s = time.perf_counter() - t
    t = time.perf_counter()
    out = _process(model, text, tag=args.strip)
    wall = time.perf_counter() - t
    with open(args.output, "w", encoding="utf-8") as f:
        f.write(out)
    mode = "tag+parse (stripped input)" if args.strip else "parse (gold tags kept)"
    result = {"mode": mode, "input": args.input, "output": args.output, "words": words,
              "load_seconds": round(load_s, 2), "seconds": round(wall, 2),
              "words_per_second": round(words / wall, 1)}
    print(json.dumps(result))


def cmd_parse_worker(args):
    """A whole `parse` process for time-parser: load, parse gold-tagged input, write."""
    import ufal.udpipe  # noqa: F401  (the import is part of the timed process)
    with open(args.input, encoding="utf-8") as f:
        text = f.read()
    out = _process(_load_model(args.model), text, tag=False)
    with open(args.output, "w", encoding="utf-8") as f:
        f.write(out)


def console_script(name):
    """The path of the console script ``name`` on PATH, past a launcher that is not Python (pyenv's
    shims are bash scripts that run ``pyenv exec``: 0.1-0.4 s of every start here, which the UDPipe
    worker, started by the interpreter's own path, does not pay)."""
    exe = shutil.which(name)
    if exe is None:
        sys.exit(f"no `{name}` on PATH (activate the environment it is installed in)")
    with open(exe, "rb") as f:
        if b"python" in f.readline():
            return exe
    try:
        real = subprocess.run(["pyenv", "which", name], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        sys.exit(f"{exe} is not a Python console script and `pyenv which {name}` does not resolve it")
    return real


def cmd_time_parser(args):
    ensure_udpipe(args)
    with open(args.input, encoding="utf-8") as f:
        words = count_words(f.read())
    runners = {"udpipe": [sys.executable, os.path.abspath(__file__), "_parse-worker", "--model",
                          args.model, "--input", args.input, "--output", args.output]}
    if args.bpparse:
        exe = console_script("bpparse")
        print(f"bpparse: {exe}; udpipe: {sys.executable}", file=sys.stderr, flush=True)
        runners["bpparse"] = [exe, "parse", "--jobs", "1", "-m", args.bpparse, args.input]
    runs = {name: ([], [], []) for name in runners}  # wall, CPU, peak RSS
    # both run as a user's installed program does: with its bytecode cached (a sandbox's
    # PYTHONDONTWRITEBYTECODE=1 made every bpparse start compile its modules again, 0.12 s), after
    # one untimed run each that writes it
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for cmd in runners.values():
        if subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env).returncode:
            sys.exit(f"parsing failed: {cmd}")
    for i in range(args.repeat):
        for name, cmd in runners.items():  # alternated, so both see the machine in the same state
            start = time.perf_counter()
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=env)
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - start
            if os.waitstatus_to_exitcode(status) != 0:
                sys.exit(f"parsing failed: {cmd}")
            walls, cpu, rss = runs[name]
            walls.append(wall)
            cpu.append(usage.ru_utime + usage.ru_stime)
            rss.append(usage.ru_maxrss / 1024.0)
            print(f"run {i + 1} {name}: {wall:.2f} s wall, {cpu[-1]:.2f} s CPU, peak RSS {rss[-1]:.0f} MB",
                  flush=True)
    result = {"input": args.input, "model": args.model, "words": words, "repeat": args.repeat}
    for name, (walls, cpu, rss) in runs.items():
        med = statistics.median(walls)
        result[name] = {"median_seconds": round(med, 2), "min_seconds": round(min(walls), 2),
                        "max_seconds": round(max(walls), 2),
                        "median_cpu_seconds": round(statistics.median(cpu), 2),
                        "words_per_second": round(words / med, 1), "peak_rss_mb": round(max(rss), 1)}
    if args.bpparse:
        result["bpparse_model"] = args.bpparse
        result["ratio_bpparse_to_udpipe"] = round(result["bpparse"]["median_seconds"]
                                                  / result["udpipe"]["median_seconds"], 2)
    print(json.dumps(result))


def cmd_score(args):
    r = score(args.gold, args.pred)
    if args.json:
        print(json.dumps(r))
        return
    print(f"{r['words']} words, {r['sentences']} sentences (punctuation counted)")
    for k in ("upos", "xpos", "feats", "alltags", "lemma", "uas", "las"):
        print(f"{k.upper() if k != 'alltags' else 'AllTags':<8}{r[k]:>7.2f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--udpipe-python", default=os.environ.get("UDPIPE_PYTHON", DEFAULT_UDPIPE_PYTHON),
                    help="python with ufal.udpipe, used when this one lacks it (default: $UDPIPE_PYTHON "
                         f"or {DEFAULT_UDPIPE_PYTHON})")
    sub = ap.add_subparsers(dest="command", required=True, metavar="{train,tag-parse,score,time-parser}")

    p = sub.add_parser("train", help="train a UDPipe 1 tagger+parser model on DIR's train (dev: DIR's dev)")
    p.add_argument("--treebank", required=True, metavar="DIR")
    p.add_argument("--out", required=True, metavar="MODEL")
    p.add_argument("--tagger", action=argparse.BooleanOptionalAction, default=True,
                   help="train the tagger too (default: yes)")
    p.add_argument("--no-parser", action="store_true", help="train the tagger only")
    p.add_argument("--tagger-options", help="UDPipe tagger options, e.g. 'iterations=10' (default: default)")
    p.add_argument("--parser-options", help="UDPipe parser options, e.g. 'hidden_layer=200'")
    p.add_argument("--parser-iterations", type=int, metavar="K", help="parser iterations=K (default 10)")
    p.add_argument("--verbose", action="store_true", help="echo every line of UDPipe's log")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("_train-worker", help=argparse.SUPPRESS)
    for o in ("--train-file", "--dev-file", "--out", "--tagger-opts", "--parser-opts"):
        p.add_argument(o)
    p.set_defaults(func=cmd_train_worker)

    p = sub.add_parser("tag-parse", help="tag (with --strip) and parse FILE with a UDPipe model")
    p.add_argument("--model", required=True)
    p.add_argument("--input", required=True, metavar="FILE")
    p.add_argument("--output", required=True, metavar="FILE")
    p.add_argument("--strip", action="store_true",
                   help="blank LEMMA/UPOS/XPOS/FEATS/HEAD/DEPREL/DEPS, then tag and parse (default: "
                        "parse the gold-tagged input, tags kept)")
    p.set_defaults(func=cmd_tag_parse)

    p = sub.add_parser("score", help="UPOS/XPOS/FEATS/AllTags/LEMMA accuracy, UAS, LAS of PRED against GOLD")
    p.add_argument("--gold", required=True)
    p.add_argument("--pred", required=True)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_score)

    p = sub.add_parser("time-parser", help="whole-process wall time and peak RSS of UDPipe parsing a file")
    p.add_argument("--model", required=True)
    p.add_argument("--input", required=True)
    p.add_argument("--output", default=os.devnull)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--bpparse", nargs="?", const="en_ewt", metavar="MODEL",
                   help="alternate every run with `bpparse parse --jobs 1 -m MODEL` on the same file "
                        "(default model: the bundled en_ewt) and print the ratio of the medians")
    p.set_defaults(func=cmd_time_parser)

    p = sub.add_parser("_parse-worker", help=argparse.SUPPRESS)
    for o in ("--model", "--input", "--output"):
        p.add_argument(o)
    p.set_defaults(func=cmd_parse_worker)

    args = ap.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
