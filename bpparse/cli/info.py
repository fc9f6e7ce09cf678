"""``bpparse info``: describe a model file."""
import os

import click


@click.command("info")
@click.argument("model_path", default="", metavar="[MODEL]")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def info_command(model_path, as_json):
    """Describe MODEL (a model file or a bundled name, as -m takes; default: the bundled default):
    config, training data, dev scores, size; and how this installation runs the kernels."""
    import json

    from bpparse.bundled import resolve_model
    from bpparse.jit import aot_status
    from bpparse.model import load_model

    model_path, _ = resolve_model(model_path or None)
    model = load_model(model_path)
    d = model.describe()
    d["file_bytes"] = os.path.getsize(model_path)
    d["config"] = model.config.to_dict()
    d["kernels"] = aot_status()
    if as_json:
        click.echo(json.dumps(d, indent=2))
        return
    meta = d["meta"]
    click.echo(f"model      {model_path} ({d['file_bytes'] / 1e6:.1f} MB, format {d['format_version']})")
    click.echo(f"config     {d['name']}: {'+'.join(d['factors'])}, train {d['train_constraint']}, "
               f"parse {d['parse_constraint']}, single root {d['single_root']}")
    click.echo(f"weights    {d['nonzero_weights']:,} nonzero of {d['weights']:,}; {d['labels']} labels"
               + (f" ({d['label_filter']} an arc by its tags)" if d["label_filter"] is not None else "")
               + (f"; arcs filtered by tags, length-limited ({d['arc_filter']} tag classes)"
                  if d["arc_filter"] is not None else "")
               + f"; {d['vocabulary']['forms']:,} forms")
    tagger = d["tagger"]
    click.echo("tagger     " + (", ".join(f"{name.upper()} ({count} values)" for name, count in tagger.items())
                                if tagger else "none (input must carry UPOS)"))
    labeler = d["labeler"]
    click.echo("labeler    " + (f"tree-context labels, 2^{labeler['hash_bits']} rows, "
                                f"{labeler.get('nonzero', 0):,} nonzero weights"
                                if labeler else "none (the parser's own labels)"))
    punct = d["punct"]
    click.echo("punct      " + (f"punctuation re-attached from the tree, 2^{punct['hash_bits']} "
                                f"weights, scale {punct['scale']}" + (
                                    f" (dev PUNCT heads {punct['dev_parser']:.2f}% -> "
                                    f"{punct['dev_stage']:.2f}%)"
                                    if "dev_stage" in punct else "")
                                if punct else "none (the parser's own heads)"))
    reattach = d["reattach"]
    click.echo("reattach   " + (f"words re-attached from the labelled tree, 2^{reattach['hash_bits']} "
                                f"weights, {reattach['candidates']} candidates, scale "
                                f"{reattach['scale']}" + (
                                    f" (dev UAS {reattach['dev_parser']:.2f} -> "
                                    f"{reattach['dev_stage']:.2f})"
                                    if "dev_stage" in reattach else "")
                                if reattach else "none (the parser's own heads)"))
    cal = d["calibration"] or {}
    for key, name in (("HeadProb", "head"), ("LabelProb", "label")):
        t = cal.get(f"{name}_temperature")
        fit = cal.get(key) if isinstance(cal.get(key), dict) else {}
        ece = fit.get("ece") if isinstance(fit.get("ece"), list) and len(fit["ece"]) == 2 else None
        click.echo(f"{key:<10} " + (f"temperature {t:g}" + (
            f" (fitted on dev, tags {cal.get('tags', 'given')}: ECE {ece[0]:.2f} -> {ece[1]:.2f})"
            if ece else "") if t is not None else "as inferred (no temperature)"))
    if meta:
        click.echo(f"trained on {meta.get('train_file')} ({meta.get('train_sentences')} sentences), "
                   f"{meta.get('epochs_run')} epochs, best epoch {meta.get('best_epoch')}, "
                   f"{meta.get('train_seconds')} s")
        if meta.get("dev_uas") is not None:
            click.echo(f"dev        {meta.get('dev_file')}: UAS {meta['dev_uas']:.2f} LAS {meta['dev_las']:.2f}")
        gold = meta.get("gold") or {}
        dropped = {k: v for k, v in gold.items() if k not in ("sentences", "ok") and v}
        if dropped:
            click.echo("gold trees " + ", ".join(f"{k} {v}" for k, v in dropped.items()))
    click.echo(f"kernels    {d['kernels']}")
