"""bpparse.distributed: shards, and parsing on a Dask LocalCluster (processes) against a local run.

The cluster tests need the ``dask`` extra (in the ``test`` extra, so CI runs them); they share one
two-worker LocalCluster, and every one compares with `parse_corpus`'s bytes.
"""
import os
import signal
import sys
from functools import partial
from pathlib import Path

import pytest
from click.testing import CliRunner

from bpparse.cli import cli
from bpparse.distributed import parse_on_cluster, plan_shards
from bpparse.errors import BpparseError, InputError
from bpparse.model import load_model
from bpparse.parse import parse_corpus

DATA = Path(__file__).parent / "data"
SAMPLE = DATA / "en_ewt_sample.conllu"
SAMPLE_X = DATA / "en_ewt_sample.conllx"
TINY = DATA / "en_ewt_train_tiny.conllu"


def shard_bytes(path, shard):
    data = Path(path).read_bytes()
    return data[shard.start:None if shard.end < 0 else shard.end]


@pytest.mark.parametrize("size", [1, 700, 5000, 10**9])
def test_shards_cover_the_file_and_cut_at_sentence_boundaries(size):
    shards = plan_shards([SAMPLE, TINY], shard_bytes=size)
    for k, path in enumerate([SAMPLE, TINY]):
        mine = [s for s in shards if s.input == k]
        assert b"".join(shard_bytes(path, s) for s in mine) == path.read_bytes()
        assert [s.last for s in mine] == [False] * (len(mine) - 1) + [True]
        for s in mine[1:]:
            assert path.read_bytes()[:s.start].endswith(b"\n\n")
    assert [s.index for s in shards] == list(range(len(shards)))
    if size == 10**9:
        assert len(shards) == 2


def test_shards_know_the_format():
    assert {s.fmt for s in plan_shards([SAMPLE_X], shard_bytes=2000)} == {"conllx"}
    assert {s.fmt for s in plan_shards([SAMPLE])} == {"conllu"}


def test_missing_input_is_named():
    with pytest.raises(InputError, match="nope.conllu"):
        plan_shards([DATA / "nope.conllu"])


# ---------------------------------------------------------------- on a cluster

distributed = pytest.importorskip("distributed", reason="the dask extra is not installed "
                                                        "(pip install 'bpparse[dask]')")


@pytest.fixture(scope="module")
def client():
    import cloudpickle

    # the fault hooks below are functions of this module, which the workers cannot import
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=":0")
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="module")
def local_output(tmp_path_factory):
    out = tmp_path_factory.mktemp("local") / "local.conllu"
    parse_corpus(load_model(None), [str(SAMPLE), str(TINY)], str(out), jobs=1, misc_probs=True)
    return out.read_bytes()


def test_output_is_byte_identical_to_a_local_run(client, tmp_path, local_output):
    out = tmp_path / "cluster.conllu"
    stats = parse_on_cluster(None, [SAMPLE, TINY], str(out), cluster=client, misc_probs=True,
                             shard_bytes=6000)
    assert stats["shards"] > 4
    assert out.read_bytes() == local_output
    assert stats["sentences"] == local_output.count(b"\n\n")
    assert stats["workers"] and all(mb > 0 for mb in stats["workers"].values())


def kill_first_attempt(marker, index):
    """Hook: the first worker to finish a sentence of shard 2 dies (SIGKILL) in the middle of it."""
    if index == 2 and not os.path.exists(marker):
        Path(marker).touch()
        os.kill(os.getpid(), signal.SIGKILL)


def test_a_worker_killed_mid_shard_loses_and_duplicates_nothing(client, tmp_path, local_output):
    out = tmp_path / "cluster.conllu"
    marker = tmp_path / "killed"
    parse_on_cluster(None, [SAMPLE, TINY], str(out), cluster=client, misc_probs=True,
                     shard_bytes=6000, hook=partial(kill_first_attempt, str(marker)))
    assert marker.exists()  # a worker did die
    assert out.read_bytes() == local_output
    client.wait_for_workers(2, timeout=60)


def test_malformed_input_fails_with_the_line_of_the_original_file(client, tmp_path):
    lines = SAMPLE.read_text().split("\n")
    bad_line = next(k for k in range(len(lines) * 3 // 4, len(lines)) if lines[k][:1].isdigit())
    cols = lines[bad_line].split("\t")
    cols[6] = "x"
    lines[bad_line] = "\t".join(cols)
    bad = tmp_path / "bad.conllu"
    bad.write_text("\n".join(lines))
    out = tmp_path / "out.conllu"
    with pytest.raises(InputError) as e:
        parse_on_cluster(None, [bad], str(out), cluster=client, shard_bytes=4000)
    assert f"{bad}:{bad_line + 1}:" in str(e.value) and "HEAD" in str(e.value)
    assert not out.exists()  # the atomic output is never renamed into place

    stats = parse_on_cluster(None, [bad], str(out), cluster=client, shard_bytes=4000, skip_bad=True,
                             on_warning=(warnings := []).append)
    assert stats["skipped"] == 1 and f"{bad}:" in warnings[0]
    assert stats["sentences"] == SAMPLE.read_bytes().count(b"\n\n") - 1


def test_output_dir_and_resume_redo_only_what_is_missing(client, tmp_path, local_output):
    inputs = [tmp_path / "a.conllu", tmp_path / "b.conllu"]
    inputs[0].write_bytes(SAMPLE.read_bytes())
    inputs[1].write_bytes(TINY.read_bytes())
    out_dir = tmp_path / "out"
    stats = parse_on_cluster(None, inputs, None, output_dir=str(out_dir), cluster=client,
                             misc_probs=True, shard_bytes=6000)
    a, b = out_dir / "a.conllu", out_dir / "b.conllu"
    assert a.read_bytes() + b.read_bytes() == local_output
    kept = a.stat().st_mtime_ns
    b.unlink()
    stats = parse_on_cluster(None, inputs, None, output_dir=str(out_dir), cluster=client,
                             misc_probs=True, resume=True)
    assert stats["resumed"] == 1 and stats["inputs"] == 1
    assert a.stat().st_mtime_ns == kept
    assert a.read_bytes() + b.read_bytes() == local_output
    assert sorted(p.name for p in out_dir.iterdir()) == ["a.conllu", "b.conllu"]  # no temporaries


def test_stdin_cannot_go_to_a_cluster(client):
    with pytest.raises(BpparseError, match="stdin"):
        parse_on_cluster(None, ["-"], "-", cluster=client)


def test_cli_without_dask_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    result = CliRunner().invoke(cli, ["parse", "--cluster", "local:1", str(SAMPLE)])
    assert result.exit_code == 1
    assert "pip install 'bpparse[dask]'" in result.output


@pytest.mark.parametrize("args, message", [
    (["--output-dir", "d"], "--cluster"),
    (["--cluster", "local:1", "--jobs", "2"], "--jobs"),
    (["--cluster", "local:1", "--output-dir", "d", "-o", "x.conllu"], "not both"),
    (["--cluster", "local:1", "-"], "stdin"),
])
def test_cli_refuses_options_that_do_not_apply(args, message):
    result = CliRunner().invoke(cli, ["parse", *args] + ([] if "-" in args else [str(SAMPLE)]))
    assert result.exit_code == 2 and message in result.output
