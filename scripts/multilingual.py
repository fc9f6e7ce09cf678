"""Train first-order and second-order bpparse on every UD treebank with a train file and score test.

    python3 scripts/multilingual.py [--data ../shared/data/ud] [--treebanks tr_imst pt_bosque ...]
        [--configs first-order second-order] [--out /tmp/bpparse-multilingual] [--peers docs/udpipe_peers.json]

For each treebank DIR with DIR/*-ud-train.conllu, -dev and -test: `bpparse train --config C --train
TRAIN --dev DEV` (the shipped config as a user would run it, the epoch best on dev kept), then
`bpparse parse` of test (gold tags) and `bpparse eval` (punctuation counted). Prints one JSON line
per run (test UAS/LAS, training seconds, best epoch) and a table; with --peers, a JSON file of
UDPipe 1 figures {treebank: {"uas": .., "las": .., "train_seconds": ..}} (scripts/udpipe_peer.py)
is printed beside them. One training at a time (the machine may be shared).
"""
import argparse
import glob
import json
import os
import time


def treebank_files(directory):
    files = {}
    for split in ("train", "dev", "test"):
        found = sorted(glob.glob(os.path.join(directory, f"*-ud-{split}.conllu")))
        if found:
            files[split] = found[0]
    return files


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="../shared/data/ud")
    ap.add_argument("--treebanks", nargs="*", help="names of directories under --data (default: all with a train file)")
    ap.add_argument("--configs", nargs="+", default=["first-order", "second-order"])
    ap.add_argument("--out", default="/tmp/bpparse-multilingual")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                    help="config override for every run (as bpparse train --set)")
    ap.add_argument("--peers", help="JSON file with UDPipe 1 figures per treebank")
    ap.add_argument("--dev-only", action="store_true",
                    help="report the dev scores of the kept epoch only (for choosing settings; test "
                         "is read once per shipped configuration)")
    args = ap.parse_args()

    from bpparse.config import load_config, parse_override
    from bpparse.conll import read_conll
    from bpparse.evaluate import evaluate
    from bpparse.parse import parse_file
    from bpparse.train import train

    names = args.treebanks or sorted(d for d in os.listdir(args.data)
                                     if "train" in treebank_files(os.path.join(args.data, d)))
    peers = json.load(open(args.peers)) if args.peers else {}
    os.makedirs(args.out, exist_ok=True)
    overrides = dict(parse_override(s) for s in args.overrides)
    rows = []
    for tb in names:
        files = treebank_files(os.path.join(args.data, tb))
        for name in args.configs:
            config = load_config(name, {**overrides, "train.jobs": args.jobs})
            out = os.path.join(args.out, f"{tb}-{name}.bpm")
            t = time.time()
            model = train(config, files["train"], out, dev_path=files.get("dev"), progress=False,
                          log=lambda m: None)
            seconds = time.time() - t
            row = {"treebank": tb, "config": name, "train_seconds": round(seconds, 1),
                   "best_epoch": model.meta["best_epoch"], "dev_uas": model.meta["dev_uas"],
                   "dev_las": model.meta["dev_las"], "overrides": args.overrides}
            if not args.dev_only:
                parsed = parse_file(model, files["test"], jobs=args.jobs)
                result = evaluate(read_conll(files["test"]), [_reread(p) for p in parsed])
                row.update(test_uas=round(result["uas"], 2), test_las=round(result["las"], 2))
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.dev_only:
        return
    print(f"\n{'treebank':<12}{'config':<16}{'UAS':>8}{'LAS':>8}{'train s':>10}   UDPipe 1 UAS / LAS")
    for r in rows:
        p = peers.get(r["treebank"], {})
        peer = f"{p['uas']:.2f} / {p['las']:.2f}" if p else "-"
        print(f"{r['treebank']:<12}{r['config']:<16}{r['test_uas']:>8.2f}{r['test_las']:>8.2f}"
              f"{r['train_seconds']:>10.0f}   {peer}")


def _reread(parsed):
    import io

    from bpparse.conll import read_conll

    (sentence,) = read_conll(io.StringIO(parsed.text))
    return sentence


if __name__ == "__main__":
    main()
