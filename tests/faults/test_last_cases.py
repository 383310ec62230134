"""The fault battery's last cases (tests/faults/battery.py): each a one-line error naming
the flag typed, or a warning where a value is used but changed or silently meaningless."""
from __future__ import annotations

import numpy as np
import pytest

from reidcli.errors import ParameterError, UsageError
from tests.faults.helpers import assert_one_line_error_in_process, reid_in_process


def _npz(path, pid_start: int, query_first_ids: bool):
    """40 rows of 10 identities (pids from ``pid_start``), 4 cameras; the first 5 ids are
    query/gallery rows when ``query_first_ids``, else training rows."""
    rng = np.random.default_rng(0)
    pid = np.repeat(np.arange(pid_start, pid_start + 10), 4)
    first = pid < pid_start + 5
    test = first if query_first_ids else ~first
    split = np.where(test, np.where(np.arange(40) % 4 == 0, "query", "gallery"), "train")
    np.savez(path, features=(rng.normal(size=(40, 8)) + pid[:, None]).astype(np.float32),
             pid=pid, camid=np.tile(np.arange(4), 10), split=split)


@pytest.fixture
def store(tmp_path):
    from reidcli.store.importer import import_store

    _npz(tmp_path / "a.npz", 1, True)
    return import_store(tmp_path / "s.h5", npz=tmp_path / "a.npz")


# Case eval.seed-negative: `reid eval --seed -1` was accepted.
def test_eval_seed_out_of_range_is_one_line(store, capsys):
    result = reid_in_process("eval", "--store", store, "--quiet", "--seed", "-1", capsys=capsys)
    assert_one_line_error_in_process(result, "--seed", "-1")


# Case eval.query-cams-9: the message did not name --query-cams.
def test_query_cams_without_queries_names_the_flag(store, capsys):
    result = reid_in_process("eval", "--store", store, "--quiet", "--protocol",
                             "camera-split", "--query-cams", "9", capsys=capsys)
    assert_one_line_error_in_process(result, "--query-cams", "9")


# Case extract.map-size-0x0: the message did not name --map-size.
def test_zero_map_size_names_the_parameter():
    from reidcli.data.transforms import parse_size

    with pytest.raises(UsageError, match="map_size '0x0' must have positive"):
        parse_size("0x0", "map_size")


# Case weightmaps.num-maps-0: a traceback (an empty reduction).
def test_weight_maps_num_maps_zero_is_refused_before_reading(tmp_path):
    from reidcli.plotting.weight_maps import plot_weight_maps

    with pytest.raises(ParameterError, match="num_maps=0"):
        plot_weight_maps(tmp_path / "missing.h5", tmp_path / "w.png", num_maps=0)


# Case tsne.perplexity-above-points: the perplexity was capped without a word.
def test_tsne_perplexity_cap_warns():
    from reidcli.plotting.tsne import embed_2d

    points = np.random.default_rng(0).normal(size=(30, 5)).astype(np.float32)
    with pytest.warns(UserWarning, match="perplexity 500 is above what 30 points allow"):
        assert embed_2d(points, seed=0, perplexity=500).shape == (30, 2)


# Cases demo.preset-typo, demo.seed-negative (two error lines), demo.out-is-file (traceback).
@pytest.mark.parametrize("args, needles", [
    (["--preset", "tinyy"], ["--preset", "tinyy"]),
    (["--preset", "tiny", "--seed", "-1"], ["--seed", "-1"]),
    (["--preset", "tiny", "--out", "{file}"], ["--out", "is a file"]),
])
def test_demo_values_are_checked_before_any_stage(tmp_path, capsys, args, needles):
    (tmp_path / "f").write_text("mine")
    args = [a.replace("{file}", str(tmp_path / "f")) for a in args]
    if "--out" not in args:
        args += ["--out", str(tmp_path / "o")]
    result = reid_in_process("demo", "--root", tmp_path / "data", *args, capsys=capsys)
    assert_one_line_error_in_process(result, *needles)
    assert (tmp_path / "f").read_text() == "mine" and not (tmp_path / "data").exists()


# Cases import.pid-0-based-warns and eval.pid0-queries: person 0 of 0-based pids vanished
# without a word — as training rows (dropped by training) and as queries (not scored).
@pytest.mark.parametrize("query_first_ids", [False, True])
def test_pid_zero_rows_warn_on_import(tmp_path, query_first_ids):
    from reidcli.store.importer import import_store

    _npz(tmp_path / "a.npz", 0, query_first_ids)
    role = "query" if query_first_ids else "train"
    with pytest.warns(UserWarning, match=rf"\d+ {role} row\(s\) carry pid 0.*pid_base=0"):
        import_store(tmp_path / "s.h5", npz=tmp_path / "a.npz")


def test_pid_zero_queries_warn_on_eval(tmp_path):
    from reidcli.evaluation.run import StoreEvalRequest, evaluate_store
    from reidcli.store.importer import import_store

    _npz(tmp_path / "a.npz", 0, True)
    with pytest.warns(UserWarning):
        store = import_store(tmp_path / "s.h5", npz=tmp_path / "a.npz")
    with pytest.warns(UserWarning, match=r"1 query row\(s\) carry pid 0.*not scored"):
        evaluation = evaluate_store(StoreEvalRequest(store=store))
    assert evaluation.trials[0].skipped
