from pathlib import Path

import pytest

from bpparse.config import Config, load_config, parse_constraint
from bpparse.errors import ConfigError

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


def test_shipped_configs_load():
    names = {p.stem for p in CONFIGS.glob("*.toml")}
    assert {"first-order", "second-order", "full", "first-order-projective",
            "second-order-projective", "full-projective"} <= names
    for p in CONFIGS.glob("*.toml"):
        c = load_config(p)
        assert c.name == p.stem
        assert "LINK" in c.model.factors
    assert load_config(CONFIGS / "first-order.toml").model.factors == ("LINK",)
    so = load_config(CONFIGS / "second-order.toml")
    assert set(so.model.factors) == {"LINK", "GRAND", "SIB"} and so.second_order and not so.nocross
    full = load_config(CONFIGS / "full.toml")
    assert full.nocross and full.model.nocross == "grouped"
    assert load_config(CONFIGS / "full-projective.toml").train.constraint == "PTREE"
    assert load_config("second-order") == so  # bare names resolve to configs/


def _unnamed(name):
    """A shipped config as a dict, without its name (what two configs compare on)."""
    d = load_config(name).to_dict()
    del d["name"]
    return d


def test_higher_order_configs_extend_second_order():
    """`childseq` is `second-order` plus CHILDSEQ, `full` is `second-order` plus NOCROSS and
    `grand-childseq` is `second-order` with CHILDSEQ in place of SIB, as the README's config table
    says: a change to one must reach the others."""
    def without(name, *factors):
        d = _unnamed(name)
        d["model"]["factors"] = [f for f in d["model"]["factors"] if f not in factors]
        return d

    so = without("second-order")
    assert without("childseq", "CHILDSEQ") == so
    assert without("full", "NOCROSS") == so
    assert without("grand-childseq", "CHILDSEQ") == without("second-order", "SIB")


def test_projective_configs_are_their_twins_under_ptree():
    """`first-order-projective`, `second-order-projective` and `full-projective` differ from their
    non-projective configs only in the constraint and in projectivizing the gold trees they train on
    (the README's config table: "the same ... under PTREE")."""
    for name in ("first-order", "second-order", "full"):
        twin = _unnamed(name)
        twin["train"]["constraint"] = twin["parse"]["constraint"] = "PTREE"
        twin["train"]["unreachable_gold"] = "projectivize"
        assert _unnamed(f"{name}-projective") == twin, name


def test_overrides_and_round_trip(tmp_path):
    c = load_config(CONFIGS / "second-order.toml", {"train.epochs": 3, "train.seed": 7, "train.jobs": None})
    assert c.train.epochs == 3 and c.train.seed == 7
    assert c.train.jobs == load_config(CONFIGS / "second-order.toml").train.jobs
    assert Config.from_dict(c.to_dict()) == c
    c2 = c.replace({"parse.constraint": "exactly1+no2cycle", "optimizer.l2": 1})
    assert c2.parse.constraint == "exactly1+no2cycle" and c2.optimizer.l2 == 1.0
    assert c2.train == c.train
    derived = load_config(CONFIGS / "second-order.toml", {"features.fine_tags": "derived"})
    assert derived.features.fine_tags == "derived" and Config.from_dict(derived.to_dict()) == derived


@pytest.mark.parametrize("text,msg", [
    ('[model]\nfactors = ["GRAND"]\n', "must include LINK"),
    ('[model]\nfactors = ["LINK", "TRIPLE"]\n', "unknown factor"),
    ('[train]\nconstraint = "FOREST"\n', "unknown constraint"),
    ('[train]\nconstraint = "TREE+NO2CYCLE"\n', "implied"),
    ('[train]\nepochs = "ten"\n', "must be an integer"),
    ('[train]\nwhatever = 1\n', "unknown key"),
    ('[train]\nmargin = -1.0\n', "margin"),
    ('[colour]\nred = 1\n', "unknown section"),
    ('[features]\nhash_bits = 40\n', "8..30"),
    ('[features]\nfine_tags = "xpos"\n', "fine_tags"),
    ('[model]\nnocross = "maybe"\n', "grouped"),
    ('[optimizer]\nmethod = "adam"\n', "adagrad"),
    ('[train\n', "not valid TOML"),
])
def test_bad_configs_fail_clearly(tmp_path, text, msg):
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(ConfigError, match=msg):
        load_config(p)


def test_missing_file_and_bad_override(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match="unknown config key"):
        load_config(CONFIGS / "first-order.toml", {"epochs": 3})


def test_parse_constraint():
    assert parse_constraint("tree") == ("TREE", False)
    assert parse_constraint("EXACTLY1+NO2CYCLE") == ("EXACTLY1", True)
    assert parse_constraint("not2") == ("NOT2", False)


def test_parse_override():
    from bpparse.config import parse_override

    assert parse_override("train.epochs=3") == ("train.epochs", 3)
    assert parse_override("optimizer.learning_rate = 0.05") == ("optimizer.learning_rate", 0.05)
    assert parse_override("parse.constraint=EXACTLY1") == ("parse.constraint", "EXACTLY1")
    assert parse_override('model.factors=["LINK","SIB"]') == ("model.factors", ["LINK", "SIB"])
    with pytest.raises(ConfigError):
        parse_override("epochs")
