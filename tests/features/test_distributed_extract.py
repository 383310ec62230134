"""Extraction under torchrun (reidcli.features.distributed; docs/formats.md, "Distributed
extraction"): two gloo ranks on CPU write a shard each and rank 0 joins them into the store a
single process writes; a failing rank leaves no merged store."""
from __future__ import annotations

import json
import multiprocessing
import os
import socket
import traceback

import numpy as np
import pytest
import torch

from reidcli.errors import UsageError
from reidcli.features.distributed import (DistributedEnv, check_requested_shard,
                                          distributed_extract_model_store, shard_path)
from reidcli.features.layout import dataset_layout
from reidcli.features.model_extract import extract_model_store
from reidcli.models.checkpoint import ModelSpec, build_model, save_model
from reidcli.store.reader import open_store

pytestmark = pytest.mark.usefixtures("one_torch_thread")

#: seconds a test waits for its ranks
RANK_WAIT_S = 120


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    torch.manual_seed(3)
    spec = ModelSpec(kind="pcb", backbone="tiny", num_classes=4, input_size=(96, 32))
    path = tmp_path_factory.mktemp("dist_model") / "model.pt"
    save_model(path, build_model(spec), spec)
    return path


@pytest.fixture(scope="module")
def tiny_layout(tiny_synthetic_root):
    return dataset_layout("synthetic", tiny_synthetic_root, progress=False, name="tiny")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank_main(rank, world, port, outcome_dir, extract_kwargs):
    """One forked rank: torchrun's environment, then the library call; the outcome (the
    error's class and message, or the result) goes to ``outcome_dir/rank<r>.json``."""
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                       "WORLD_SIZE": str(world), "RANK": str(rank), "LOCAL_RANK": str(rank)})
    outcome = {"rank": rank}
    try:
        result = distributed_extract_model_store(**extract_kwargs)
        outcome.update(path=str(result.path), merged=result.merged,
                       shards=[str(p) for p in result.shard_paths], backend=result.backend)
    except BaseException as exc:                     # noqa: BLE001 - reported to the test
        outcome.update(error=exc.__class__.__name__, message=str(exc),
                       trace=traceback.format_exc())
    with open(os.path.join(outcome_dir, f"rank{rank}.json"), "w") as f:
        json.dump(outcome, f)
    os._exit(0)                                      # no pytest/atexit teardown in the child


def _run_ranks(tmp_path, world, kwargs_of_rank):
    """Fork ``world`` ranks (children inherit the imported modules: no start-up cost) and
    return their outcomes in rank order."""
    ctx = multiprocessing.get_context("fork")
    port, outcomes = _free_port(), tmp_path / "outcomes"
    outcomes.mkdir()
    procs = [ctx.Process(target=_rank_main, args=(r, world, port, str(outcomes),
                                                  kwargs_of_rank(r))) for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(RANK_WAIT_S)
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    return [json.loads((outcomes / f"rank{r}.json").read_text()) for r in range(world)]


def test_launch_environment_and_shard_names(tmp_path):
    assert DistributedEnv.from_environ({}) is None
    assert DistributedEnv.from_environ({"WORLD_SIZE": "1", "RANK": "0"}) is None
    env = DistributedEnv.from_environ({"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1",
                                       "MASTER_ADDR": "::1", "MASTER_PORT": "29500"})
    assert (env.rank, env.world_size, env.local_rank, env.shard) == (3, 4, 1, (3, 4))
    assert env.endpoint == "[::1]:29500"
    with pytest.raises(UsageError, match="RANK=4"):
        DistributedEnv.from_environ({"WORLD_SIZE": "4", "RANK": "4"})
    assert shard_path(tmp_path / "m.h5", (1, 4)) == tmp_path / "m.shard-1-of-4.h5"
    check_requested_shard(env, None)
    check_requested_shard(env, (3, 4))
    with pytest.raises(UsageError, match="disagrees"):
        check_requested_shard(env, (0, 4))
    with pytest.raises(UsageError, match="torchrun"):
        distributed_extract_model_store(None, tmp_path / "m.h5", tmp_path / "model.pt",
                                        env=None)


def test_two_gloo_ranks_merge_into_the_single_process_store(tiny_layout, tiny_model, tmp_path):
    common = dict(features=["pcb_g", "pcb_h"], maps=["conv4_x"], map_size=(6, 2),
                  maps_dtype="float32", batch_size=8)
    single = extract_model_store(tiny_layout, tmp_path / "single.h5", tiny_model, device="cpu",
                                 progress=False, **common)
    out = tmp_path / "merged.h5"
    outcomes = _run_ranks(tmp_path, 2, lambda r: dict(
        layout=tiny_layout, out=out, model_path=tiny_model, device="cpu", timeout=60,
        progress=False, **common))
    assert [o.get("error") for o in outcomes] == [None, None], outcomes
    assert outcomes[0]["merged"] and not outcomes[1]["merged"]
    assert outcomes[0]["path"] == str(out) and outcomes[0]["backend"] == "gloo"
    assert not any(os.path.exists(p) for p in outcomes[0]["shards"])      # removed after
    with open_store(single) as a, open_store(out) as b:
        assert a.num_rows == b.num_rows == len(tiny_layout.records)
        assert a.records.equals(b.records)
        for name in ("pcb_g", "pcb_h"):
            np.testing.assert_allclose(b.features(name), a.features(name), rtol=1e-5,
                                       atol=1e-6)
        np.testing.assert_allclose(b.convmaps("conv4_x"), a.convmaps("conv4_x"), rtol=1e-5,
                                   atol=1e-6)
        np.testing.assert_array_equal(b.protocol.trials[0]["query_idx"],
                                      a.protocol.trials[0]["query_idx"])
        dist = b.provenance["distributed"]
        assert dist["world_size"] == 2 and dist["backend"] == "gloo"
        assert [r["rank"] for r in dist["ranks"]] == [0, 1]
        assert sum(r["rows"] for r in dist["ranks"]) == a.num_rows
        assert [m["distributed"]["rank"] for m in b.provenance["merged_from"]] == [0, 1]


def test_a_failing_rank_leaves_no_merged_store(tiny_layout, tiny_model, tmp_path):
    out = tmp_path / "merged.h5"

    def broken_layout():                              # rank 1 cannot load its dataset
        from reidcli.errors import DatasetError
        raise DatasetError("synthetic/tiny is damaged", "generate it again")

    outcomes = _run_ranks(tmp_path, 2, lambda r: dict(
        layout=tiny_layout if r == 0 else broken_layout, out=out, model_path=tiny_model,
        device="cpu", timeout=60, progress=False, batch_size=8))
    assert outcomes[1]["error"] == "DatasetError", outcomes[1]
    assert outcomes[0]["error"] == "OutputError", outcomes[0]
    assert "rank 1 of 2 failed" in outcomes[0]["message"]
    assert "damaged" in outcomes[0]["message"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["merged.shard-0-of-2.h5", "outcomes"]
    kept = shard_path(out, (0, 2))                    # the finished shard stays, for a re-run
    assert kept.exists() and not shard_path(out, (1, 2)).exists()
    with open_store(kept) as st:
        assert st.num_rows == len(tiny_layout.records) // 2


def test_a_rank_that_never_reports_times_out_without_merging(tiny_layout, tiny_model,
                                                             tmp_path):
    out = tmp_path / "merged.h5"

    def stuck_layout():                               # rank 1 outlives the 2 s timeout
        import time
        time.sleep(6)
        return tiny_layout

    outcomes = _run_ranks(tmp_path, 2, lambda r: dict(
        layout=tiny_layout if r == 0 else stuck_layout, out=out, model_path=tiny_model,
        device="cpu", timeout=2, progress=False, batch_size=8))
    assert outcomes[0]["error"] == "OutputError", outcomes[0]
    assert "not every rank reported" in outcomes[0]["message"]
    assert outcomes[1].get("error") is not None, outcomes[1]     # its partner is gone
    assert not out.exists()


def test_no_merge_keeps_shards_that_store_merge_joins(tiny_layout, tiny_model, tmp_path):
    from reidcli.store.merge import merge_shards

    out = tmp_path / "m.h5"
    outcomes = _run_ranks(tmp_path, 2, lambda r: dict(
        layout=tiny_layout, out=out, model_path=tiny_model, device="cpu", timeout=60,
        progress=False, merge=False, batch_size=8))
    assert [o.get("error") for o in outcomes] == [None, None], outcomes
    assert not out.exists() and not any(o["merged"] for o in outcomes)
    shards = [shard_path(out, (r, 2)) for r in range(2)]
    assert [o["path"] for o in outcomes] == [str(s) for s in shards]
    merged = merge_shards(out, shards[::-1])
    single = extract_model_store(tiny_layout, tmp_path / "single.h5", tiny_model, device="cpu",
                                 progress=False, batch_size=8)
    with open_store(single) as a, open_store(merged) as b:
        assert a.records.equals(b.records)
        np.testing.assert_allclose(b.features("pcb_h"), a.features("pcb_h"), rtol=1e-5,
                                   atol=1e-6)


def test_an_output_that_exists_fails_every_rank_before_extracting(tiny_layout, tiny_model,
                                                                 tmp_path):
    out = tmp_path / "m.h5"
    out.write_text("an earlier result")
    outcomes = _run_ranks(tmp_path, 2, lambda r: dict(
        layout=tiny_layout, out=out, model_path=tiny_model, device="cpu", timeout=60,
        progress=False, batch_size=8))
    assert outcomes[0]["error"] == "OutputExistsError", outcomes[0]
    assert outcomes[1]["error"] == "OutputError", outcomes[1]
    assert "rank 0 of 2 failed" in outcomes[1]["message"]
    assert "no rank extracted anything" in outcomes[1]["message"]
    assert out.read_text() == "an earlier result"
    assert not shard_path(out, (0, 2)).exists() and not shard_path(out, (1, 2)).exists()


def _cli_data(root):
    return ["--dataset", "synthetic", "--root", str(root), "--option", "name=tiny"]


def test_cli_refuses_what_a_launch_cannot_do(capsys, monkeypatch, tiny_synthetic_root,
                                             tiny_model, tmp_path):
    from tests.cli.helpers import run_cli

    code, _, err = run_cli(capsys, "extract", "--model", tiny_model,
                           *_cli_data(tiny_synthetic_root), "--no-merge", "--out",
                           tmp_path / "a.h5")
    assert code == 2 and "--no-merge" in err and "torchrun" in err
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29500")
    code, _, err = run_cli(capsys, "extract", *_cli_data(tiny_synthetic_root), "--out",
                           tmp_path / "b.h5")
    assert code == 2 and "needs --model" in err
    assert not (tmp_path / "a.h5").exists() and not (tmp_path / "b.h5").exists()


def _torchrun(tmp_path, *args):
    """``python -m torch.distributed.run --nproc_per_node 2 -m reidcli.cli.main ARGS``."""
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
           "--master_addr", "127.0.0.1", "--master_port", str(_free_port()),
           "-m", "reidcli.cli.main", *map(str, args)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=RANK_WAIT_S)


@pytest.mark.slow
def test_torchrun_reid_extract_end_to_end(tiny_synthetic_root, tiny_layout, tiny_model,
                                          tmp_path):
    base = ["extract", "--model", tiny_model, *_cli_data(tiny_synthetic_root), "--device",
            "cpu", "--features", "pcb_h", "--batch-size", "8"]
    out = tmp_path / "m.h5"
    run = _torchrun(tmp_path, *base, "--out", out)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "from 2 ranks (gloo)" in run.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.h5"]         # shards removed
    single = extract_model_store(tiny_layout, tmp_path / "single.h5", tiny_model,
                                 features=["pcb_h"], device="cpu", progress=False)
    with open_store(single) as a, open_store(out) as b:
        assert a.records.equals(b.records)
        np.testing.assert_allclose(b.features("pcb_h"), a.features("pcb_h"), rtol=1e-5,
                                   atol=1e-6)
        assert b.provenance["distributed"]["world_size"] == 2
        assert b.provenance["command"].startswith("reid extract --model")
    failed = tmp_path / "f.h5"                        # rank 1's shard is in the way
    shard_path(failed, (1, 2)).write_text("not a store")
    run = _torchrun(tmp_path, *base, "--out", failed)
    assert run.returncode != 0
    assert "rank 1 of 2 failed" in run.stderr and "no rank extracted anything" in run.stderr
    assert not failed.exists() and not shard_path(failed, (0, 2)).exists()
    assert shard_path(failed, (1, 2)).read_text() == "not a store"


def test_extract_speed_benchmark_times_one_process_against_two_ranks(capsys):
    import importlib.util
    import re
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "extract_speed.py"
    spec = importlib.util.spec_from_file_location("extract_speed", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(["--ranks", "2", "--backbone", "tiny", "--input-size", "96x32", "--ids", "2",
                 "--batch-size", "8"])
    out = capsys.readouterr().out
    one = re.search(r"^1 process, \d+ threads\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$", out, re.M)
    two = re.search(r"^2 gloo ranks, \d+ thread\(s\) each, merged\s+([\d.]+)\s+([\d.]+)\s+"
                    r"([\d.]+)$", out, re.M)
    assert one and two, out
    assert float(one.group(3)) == 1.0
    # the ratio of the rates (printed to 0.1 images/s; the seconds, printed to 0.01 s, are too
    # coarse for a tiny run), itself printed to 2 decimals
    assert float(two.group(3)) == pytest.approx(float(two.group(2)) / float(one.group(2)),
                                                rel=0.01, abs=0.006)
    assert "same records: True" in out
