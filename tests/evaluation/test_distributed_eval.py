"""``reid eval`` under torchrun (reidcli.evaluation.distributed; docs/evaluation.md,
"Evaluation across machines"): two gloo ranks on the CPU split the streamed gallery blocks and
give one process's numbers bit for bit, ties included; a failing or dying rank leaves no
report and the other rank stops with one error line."""
from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import socket
import sys
import traceback

import numpy as np
import pandas as pd
import pytest

from reidcli.data.records import normalize_frame
from reidcli.distributed_env import read_launch
from reidcli.errors import UsageError
from reidcli.evaluation.distributed import GallerySplit, evaluate_on_ranks
from reidcli.evaluation.engine import EvalOptions
from reidcli.evaluation.multi import evaluate_stores
from reidcli.evaluation.report import build_report
from reidcli.evaluation.run import StoreEvalRequest, evaluate_store
from reidcli.store import StoreWriter
from tests.evaluation.test_streamed import problem

pytestmark = [pytest.mark.usefixtures("one_torch_thread"),
              pytest.mark.filterwarnings("ignore:.*carry pid 0")]   # problem()'s distractor

#: seconds a test waits for its ranks (generous: the machine may be oversubscribed)
RANK_WAIT_S = 120
#: gallery rows per streamed block: 300 gallery rows → 7 blocks, split 3 + 4
BLOCK = 45


def write_store(path, seed=0, integer=False, nan_gallery_row=None):
    """problem()'s query and gallery rows as a store; ``integer``: ±1 features (many exact
    distance ties); ``nan_gallery_row``: a damaged copy, NaN in that gallery row."""
    labels, qf, gf = problem(seed=seed, integer=integer)
    if nan_gallery_row is not None:
        gf = gf.copy()
        gf[nan_gallery_row, 0] = np.nan
    n_q, n_g = len(qf), len(gf)
    records = normalize_frame(pd.DataFrame({
        "path": [f"img/{i:05d}.jpg" for i in range(n_q + n_g)],
        "pid": np.concatenate([labels.query_pids, labels.gallery_pids]),
        "camid": np.concatenate([labels.query_cams, labels.gallery_cams]),
        "split": ["query"] * n_q + ["gallery"] * n_g, "dataset": "synthetic"}))
    with StoreWriter(path, records, dataset="synthetic", provenance={"command": "test"}) as w:
        w.set_feature("emb", np.concatenate([qf, gf]), metric="euclidean")
    return path


def request(store, stream="on", **kw):
    return StoreEvalRequest(store=store, device="cpu", stream=stream, options=EvalOptions(
        max_rank=20, gallery_block_rows=BLOCK, full_curve=True), **kw)


def numbers(evaluation):
    """Every number of a StoreEvaluation's trials: the curves, means and per-query arrays."""
    out = []
    for t in evaluation.trials:
        o = t.outcomes
        out.append({"cmc": t.cmc, "cmc_full": t.cmc_full, "mAP": t.mAP, "mINP": t.mINP,
                    "pur": t.pur, "auc": t.auc, "status": o.status, "first_rank": o.first_rank,
                    "ap": o.ap, "inp": o.inp, "num_positives": o.num_positives})
    return out


def assert_bitwise_equal(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for key in x:
            u, v = np.atleast_1d(x[key]), np.atleast_1d(y[key])
            assert u.dtype == v.dtype and u.shape == v.shape, key
            if u.dtype.kind == "f":                     # the same bits, NaN where NaN
                assert (u.view(np.uint8) == v.view(np.uint8)).all(), key
            else:
                assert (u == v).all(), key


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank_main(rank, world, port, outcome_dir, job):
    """One forked rank: torchrun's environment, then ``job(rank)``; the outcome (the error's
    class and message, or what the job returned) goes to ``outcome_dir/rank<r>.pkl``."""
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                       "WORLD_SIZE": str(world), "RANK": str(rank), "LOCAL_RANK": str(rank)})
    outcome = {"rank": rank}
    try:
        outcome["result"] = job(rank)
    except BaseException as exc:                     # noqa: BLE001 - reported to the test
        outcome.update(error=exc.__class__.__name__, message=str(exc),
                       trace=traceback.format_exc())
    with open(os.path.join(outcome_dir, f"rank{rank}.pkl"), "wb") as f:
        pickle.dump(outcome, f)
    os._exit(0)                                      # no pytest/atexit teardown in the child


def _run_ranks(tmp_path, job, world=2, name="outcomes"):
    """Fork ``world`` ranks (children inherit the imported modules: no start-up cost) and
    return their outcomes in rank order (None for a rank that left none)."""
    ctx = multiprocessing.get_context("fork")
    port, outcomes = _free_port(), tmp_path / name
    outcomes.mkdir()
    procs = [ctx.Process(target=_rank_main, args=(r, world, port, str(outcomes), job))
             for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(RANK_WAIT_S)
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()
    found = []
    for r in range(world):
        path = outcomes / f"rank{r}.pkl"
        found.append(pickle.loads(path.read_bytes()) if path.exists() else None)
    return found


def test_block_ranges_partition_every_gallery():
    for world in (1, 2, 3, 8):
        for blocks in (0, 1, 2, 7, 64):
            ranges = [GallerySplit(rank=r, world_size=world).block_range(blocks)
                      for r in range(world)]
            assert ranges[0][0] == 0 and ranges[-1][1] == blocks
            assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))        # contiguous
            sizes = [hi - lo for lo, hi in ranges]
            assert min(sizes) >= 0 and max(sizes) - min(sizes) <= 1            # even


def test_what_a_launch_cannot_split_is_refused_before_the_ranks_meet(tmp_path):
    launch = read_launch({"WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "127.0.0.1",
                          "MASTER_PORT": "1"})
    store = tmp_path / "s.h5"
    for kw, needle in ((dict(stream="off"), "stream.off"), (dict(nmi=True), "NMI")):
        with pytest.raises(UsageError, match=needle) as info:
            evaluate_on_ranks([request(store, **kw)], launch)
        assert "torchrun" in str(info.value)
    with pytest.raises(UsageError, match="timeout"):
        evaluate_on_ranks([request(store)], launch, timeout=float("nan"))


def test_two_gloo_ranks_give_one_process_numbers_bitwise(tmp_path, monkeypatch):
    from reidcli.evaluation import streamed

    # a float store, and a ±1 store whose distances tie often (ties broken by column)
    stores = [write_store(tmp_path / "float.h5", seed=4),
              write_store(tmp_path / "ties.h5", seed=5, integer=True)]
    real, read = streamed.StreamedGallery.gallery, {}

    def recorded(self, positions):                   # the gallery rows a rank reads, per store
        read.setdefault(id(self), set()).update(np.asarray(positions).tolist())
        return real(self, positions)

    monkeypatch.setattr(streamed.StreamedGallery, "gallery", recorded)

    def job(rank):
        done = evaluate_on_ranks([request(s) for s in stores], read_launch(), timeout=60)
        return [numbers(e) for e in done.evaluations], list(read.values())

    outcomes = _run_ranks(tmp_path, job)
    assert [o and o.get("error") for o in outcomes] == [None, None], outcomes
    (first, read_0), (second, read_1) = outcomes[0]["result"], outcomes[1]["result"]
    assert len(read_0) == len(read_1) == len(stores)
    for mine, theirs in zip(read_0, read_1):          # each rank reads its own blocks only
        assert mine and theirs and not mine & theirs
    single = evaluate_stores([request(s) for s in stores]).evaluations   # one process
    for k in range(len(stores)):
        expected = numbers(single[k])
        assert_bitwise_equal(first[k], expected)
        assert_bitwise_equal(second[k], expected)                  # every rank knows them
    # ±1 features: every GEMM is exact, so the in-memory engine agrees bit for bit too
    assert_bitwise_equal(numbers(evaluate_store(request(stores[1], stream="off"))),
                         numbers(single[1]))
    assert single[1].trials[0].num_valid_queries > 10


def test_one_store_whose_blocks_are_fewer_than_the_ranks(tmp_path):
    store = write_store(tmp_path / "s.h5", seed=6)
    whole = StoreEvalRequest(store=store, device="cpu", stream="on",
                             options=EvalOptions(max_rank=20, gallery_block_rows=1000))
    outcomes = _run_ranks(tmp_path, lambda rank: evaluate_on_ranks(
        [whole], read_launch(), timeout=60).meta)         # rank 1 owns no block
    assert [o and o.get("error") for o in outcomes] == [None, None], outcomes
    meta = outcomes[0]["result"]
    assert meta["gallery_streamed"] == [0]
    assert meta["distributed"]["world_size"] == 2
    assert meta["distributed"]["backend"] == "gloo"
    assert [r["rank"] for r in meta["distributed"]["ranks"]] == [0, 1]


def _cli_job(args_of_rank, out_dir):
    """A rank running ``reid ARGS`` in its (forked) interpreter: exit code, stdout, stderr."""
    def job(rank):
        from reidcli.cli.main import main

        out_path, err_path = out_dir / f"out{rank}.txt", out_dir / f"err{rank}.txt"
        with open(out_path, "w") as out, open(err_path, "w") as err:
            sys.stdout, sys.stderr = out, err
            try:
                code = main([str(a) for a in args_of_rank(rank)])
            except SystemExit as done:
                code = done.code if isinstance(done.code, int) else int(done.code is not None)
        return code, out_path.read_text(), err_path.read_text()
    return job


COMMON = ["eval", "--quiet", "--gallery-block", BLOCK, "--device", "cpu", "--dist-timeout", 60]


@pytest.fixture
def cli_imported(capsys):
    """The eval command's modules imported once, before the ranks fork."""
    from tests.faults.helpers import reid_in_process

    assert reid_in_process("eval", "--help", capsys=capsys)[0] == 0
    import reidcli.evaluation.report  # noqa: F401
    import reidcli.provenance  # noqa: F401


def test_cli_rank_0_alone_writes_the_report_of_one_process(tmp_path, cli_imported):
    store = write_store(tmp_path / "s.h5", seed=7)
    good = tmp_path / "good.json"
    done = _run_ranks(tmp_path, _cli_job(lambda r: [*COMMON, "--store", store, "--json", good],
                                         tmp_path), name="good")
    assert [o and o.get("error") for o in done] == [None, None], done
    assert [o["result"][0] for o in done] == [0, 0], done
    assert "wrote" in done[0]["result"][2] and "wrote" not in done[1]["result"][2]
    report = json.loads(good.read_text())
    assert report["distributed"]["world_size"] == 2 and report["gallery_streamed"] == [0]
    single = evaluate_store(StoreEvalRequest(store=store, device="cpu", stream="on",
                                             options=EvalOptions(gallery_block_rows=BLOCK)))
    expected = build_report(single.protocol, single.trials, single.meta)   # one process
    for key in ("mAP", "mINP", "cmc", "num_valid_queries"):
        assert report[key] == json.loads(json.dumps(expected[key], default=float)), key
    assert sorted(p.name for p in tmp_path.glob("*.json")) == ["good.json"]


def test_cli_a_failing_rank_leaves_no_report_and_one_error_line(tmp_path, cli_imported):
    store = write_store(tmp_path / "s.h5", seed=7)
    # rank 1's copy of the store is damaged in a gallery row of rank 1's blocks
    damaged = write_store(tmp_path / "damaged.h5", seed=7, nan_gallery_row=290)
    bad = tmp_path / "bad.json"
    failed = _run_ranks(tmp_path, _cli_job(lambda r: [*COMMON, "--json", bad, "--store",
                                                      store if r == 0 else damaged],
                                           tmp_path), name="bad")
    assert [o and o.get("error") for o in failed] == [None, None], failed
    (code0, _, err0), (code1, _, err1) = failed[0]["result"], failed[1]["result"]
    assert code1 == 2 and code0 == 2, (err0, err1)
    lines0 = [line for line in err0.splitlines() if line.startswith("error:")]
    assert len(lines0) == 1 and "rank 1 of 2 failed" in lines0[0], err0
    assert "no report was written" in lines0[0] and "Traceback" not in err0
    assert "Traceback" not in err1 and "error:" in err1
    assert not bad.exists() and not list(tmp_path.glob("*.json"))    # no temp file either
    assert "NaN" in err1 and "NaN" in lines0[0]           # rank 0 names rank 1's cause


def test_a_rank_that_dies_makes_the_other_stop_in_one_error(tmp_path, monkeypatch):
    from reidcli.evaluation import streamed

    store = write_store(tmp_path / "s.h5", seed=8)
    real = streamed.StreamedGallery.gallery

    def dies_on_rank_1(self, positions):
        if os.environ.get("RANK") == "1":
            os._exit(3)                              # no error report: the process is gone
        return real(self, positions)

    monkeypatch.setattr(streamed.StreamedGallery, "gallery", dies_on_rank_1)
    outcomes = _run_ranks(tmp_path, lambda rank: evaluate_on_ranks(
        [request(store)], read_launch(), timeout=60).meta)
    assert outcomes[1] is None                           # it died before reporting
    assert outcomes[0]["error"] == "RankFailure", outcomes[0]
    assert "no report was written" in outcomes[0]["message"]


@pytest.mark.parametrize("args, needles", [
    (["--stream", "off"], ["--stream off", "torchrun"]),
    (["--rerank"], ["re-ranking", "torchrun"]),
    (["--search", "3"], ["--search", "torchrun"]),
    (["--dist-timeout", "0"], ["--dist-timeout 0"]),
])
def test_cli_refuses_what_a_launch_cannot_split_in_one_line(args, needles, tmp_path, capsys,
                                                            monkeypatch):
    from tests.faults.helpers import assert_one_line_error_in_process, reid_in_process

    store = write_store(tmp_path / "s.h5")
    for name, value in {"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0",
                        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}.items():
        monkeypatch.setenv(name, value)                   # refused before any rank waits
    result = reid_in_process("eval", "--store", store, "--device", "cpu", "--json",
                             tmp_path / "r.json", *args, capsys=capsys)
    assert_one_line_error_in_process(result, *needles)
    assert not (tmp_path / "r.json").exists()


@pytest.mark.slow
def test_torchrun_reid_eval_end_to_end(tmp_path):
    """``python -m torch.distributed.run --nproc_per_node 2 -m reidcli.cli.main eval …``."""
    import subprocess

    store = write_store(tmp_path / "s.h5", seed=9)
    out = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
           "--master_addr", "127.0.0.1", "--master_port", str(_free_port()),
           "-m", "reidcli.cli.main", *map(str, [*COMMON, "--store", store, "--json", out])]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "OMP_NUM_THREADS": "1",                  # this checkout's reidcli
           "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    run = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=RANK_WAIT_S)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stderr.count(f"wrote {out}") == 1
    report = json.loads(out.read_text())
    assert report["distributed"]["world_size"] == 2
    single = evaluate_store(StoreEvalRequest(store=store, device="cpu", stream="on",
                                             options=EvalOptions(gallery_block_rows=BLOCK)))
    assert report["mAP"] == single.trials[0].mAP
    assert report["cmc"] == single.trials[0].cmc.tolist()
