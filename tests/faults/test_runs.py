"""Training run directories (issue 28): written into ``OUT.partial`` and renamed when complete,
locked while written, ``--force`` replaces a run only once the new one is complete, a folder
that is not a run is never touched, and ``--resume`` checks method, data and options."""
from __future__ import annotations

import errno
import json
import os
import random
import shutil
import signal
import time
from pathlib import Path

import pytest

from reidcli.data.synthetic import generate
from reidcli.io import lock_output
from tests.faults.helpers import (assert_one_line_error_in_process, reid_in_process,
                                  requires_posix_signals, start_reid)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TRAIN = ["train", "pcb", "--dataset", "synthetic", "--option", "name=tiny", "--preset", "tiny",
         "--batch-size", "8", "--epochs", "2", "--quiet"]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def _leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if ".partial" in p.name or
                  p.name.endswith(".lock"))


@pytest.fixture(scope="module")
def finished(tmp_path_factory, tiny_synthetic_root):
    """A complete PCB run (2 epochs on the tiny synthetic data) to copy per test."""
    from reidcli.training.config import make_config
    from reidcli.training.engine import train_model

    run = tmp_path_factory.mktemp("finished") / "run"
    cfg = make_config("pcb", preset="tiny", dataset="synthetic", root=str(tiny_synthetic_root),
                      options={"name": "tiny"}, batch_size=8, epochs=2)
    train_model(cfg, run, progress=False)
    return run


@pytest.fixture
def run(finished, tmp_path):
    out = tmp_path / "runs" / "a"
    shutil.copytree(finished, out)
    return out


# -- data lost: run directories were not written atomically ------------------------------------
def test_force_run_that_fails_leaves_the_previous_run(capsys, run, tmp_path):
    """`--force` over a finished run whose replacement fails (dataset not found): the old run
    was deleted first and an empty folder left."""
    before = _snapshot(run)
    result = reid_in_process("train", "pcb", "--dataset", "market1501", "--root",
                             tmp_path / "nodata", "--preset", "tiny", "--out", run, "--force",
                             "--quiet", capsys=capsys)
    assert_one_line_error_in_process(result, "market1501")
    assert _snapshot(run) == before and _leftovers(run.parent) == []


def test_force_replaces_only_when_complete_and_keeps_the_users_files(capsys, run,
                                                                     tiny_synthetic_root):
    (run / "market.h5").write_bytes(b"the user's store")
    old_model = (run / "model.pt").read_bytes()
    result = reid_in_process(*TRAIN, "--root", tiny_synthetic_root, "--out", run, "--force",
                             "--seed", "5", capsys=capsys)
    assert result[0] == 0, result
    assert (run / "model.pt").read_bytes() != old_model                # replaced
    assert (run / "market.h5").read_bytes() == b"the user's store"       # carried over
    config = json.loads((run / "config.json").read_text())
    assert config["format"] == "reidcli.run" and config["status"] == "complete"
    assert _leftovers(run.parent) == []


@pytest.mark.parametrize("force", [False, True])
def test_a_folder_with_a_users_config_json_is_never_a_run(capsys, tmp_path, force,
                                                          tiny_synthetic_root):
    """A folder holding a user's own `config.json` was taken for a run and, with `--force`,
    deleted by a run that failed."""
    out = tmp_path / "mine"
    out.mkdir()
    (out / "config.json").write_text('{"learning": "notes"}')
    (out / "notes.txt").write_text("keep")
    before = _snapshot(out)
    result = reid_in_process(*TRAIN, "--root", tiny_synthetic_root, "--out", out,
                             *(["--force"] if force else []), capsys=capsys)
    assert_one_line_error_in_process(result, "not a reidcli training run", "config.json")
    assert _snapshot(out) == before and _leftovers(tmp_path) == []


def test_second_writer_is_refused_and_changes_nothing(capsys, run, tiny_synthetic_root):
    """A second `reid train --force` into the --out of a running one deleted its files while
    it trained; both exited 0 with one run's config and the other's model."""
    before = _snapshot(run)
    with lock_output(run, f"run directory {run}"):         # the running writer
        result = reid_in_process(*TRAIN, "--root", tiny_synthetic_root, "--out", run,
                                 "--force", capsys=capsys)
        assert_one_line_error_in_process(result, "another process")
        result = reid_in_process("train", "pcb", "--resume", run, "--quiet", capsys=capsys)
        assert_one_line_error_in_process(result, "another process")
    assert _snapshot(run) == before
    assert not (run.parent / "a.partial").exists()


def test_out_that_cannot_be_written(capsys, tmp_path, tiny_synthetic_root, monkeypatch):
    """--out an existing file, a folder under a file, an unwritable folder: tracebacks."""
    afile = tmp_path / "file"
    afile.write_text("x")
    for out, needle in ((afile, "is a file"), (afile / "run", "is a file")):
        result = reid_in_process(*TRAIN, "--root", tiny_synthetic_root, "--out", out,
                                 capsys=capsys)
        assert_one_line_error_in_process(result, needle)
    assert afile.read_text() == "x"

    real_mkdir = Path.mkdir

    def read_only(self, *a, **k):
        if self.name.endswith(".partial"):
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        return real_mkdir(self, *a, **k)

    monkeypatch.setattr(Path, "mkdir", read_only)
    result = reid_in_process(*TRAIN, "--root", tiny_synthetic_root, "--out",
                             tmp_path / "ro" / "run", capsys=capsys)
    assert_one_line_error_in_process(result, "cannot write", "Read-only")


def test_full_disk_during_training_keeps_the_previous_run(capsys, run, tiny_synthetic_root,
                                                          monkeypatch):
    import torch

    real_save = torch.save

    def full(obj, f, *a, **k):
        if "model.pt" in str(f):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_save(obj, f, *a, **k)

    monkeypatch.setattr(torch, "save", full)
    before = _snapshot(run)
    result = reid_in_process(*TRAIN, "--root", tiny_synthetic_root, "--out", run, "--force",
                             capsys=capsys)
    assert_one_line_error_in_process(result, "disk full")
    assert _snapshot(run) == before
    # the run had checkpoints: it stays resumable in a.partial, and --resume completes it
    assert (run.parent / "a.partial" / "checkpoint.pt").exists()
    monkeypatch.setattr(torch, "save", real_save)
    assert reid_in_process("train", "pcb", "--resume", run, "--quiet", capsys=capsys)[0] == 0
    assert _snapshot(run) != before and _leftovers(run.parent) == []


def test_interrupted_run_is_resumed_and_force_restores_it_on_failure(capsys, tmp_path,
                                                                    tiny_synthetic_root):
    from reidcli.training.config import make_config
    from reidcli.training.engine import train_model

    out = tmp_path / "cut"
    cfg = make_config("pcb", preset="tiny", dataset="synthetic", root=str(tiny_synthetic_root),
                      options={"name": "tiny"}, batch_size=8, epochs=2)

    def interrupt(epoch):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_model(cfg, out, progress=False, on_epoch_end=interrupt)
    partial = tmp_path / "cut.partial"
    assert not out.exists() and (partial / "checkpoint.pt").exists()
    config = json.loads((partial / "config.json").read_text())
    assert config["status"] == "running"                    # never mistaken for a finished run
    before = _snapshot(partial)
    # a --force run that fails puts the interrupted run back
    result = reid_in_process("train", "pcb", "--dataset", "market1501", "--root",
                             tmp_path / "nodata", "--out", out, "--force", capsys=capsys)
    assert_one_line_error_in_process(result, "market1501")
    assert _snapshot(partial) == before and not out.exists()
    result = reid_in_process("train", "pcb", "--resume", out, "--quiet", capsys=capsys)
    assert result[0] == 0, result
    assert (out / "model.pt").exists() and _leftovers(tmp_path) == []


def test_legacy_interrupted_run_dir_is_resumed(capsys, run):
    """A run directory of an older version (no format key) holding only a checkpoint."""
    (run / "model.pt").unlink()
    config = json.loads((run / "config.json").read_text())
    for key in ("format", "status", "data"):
        config.pop(key)
    (run / "config.json").write_text(json.dumps(config))
    result = reid_in_process("train", "pcb", "--resume", run, "--quiet", capsys=capsys)
    assert result[0] == 0, result
    assert (run / "model.pt").exists()


# -- silent wrong: --resume trusted what it should check --------------------------------------
def test_resume_refuses_changed_options_and_applies_epochs(capsys, run):
    """Flags given with --resume were ignored while the provenance recorded them."""
    before = _snapshot(run)
    result = reid_in_process("train", "pcb", "--resume", run, "--lr", "5", "--dropout", "0.1",
                             capsys=capsys)
    assert_one_line_error_in_process(result, "--lr 5", "--dropout 0.1", "lr=0.05",
                                     "--epochs")
    assert _snapshot(run) == before and _leftovers(run.parent) == []
    # the same values as recorded are no change; --epochs extends the run and is recorded
    result = reid_in_process("train", "pcb", "--resume", run, "--epochs", "3",
                             "--batch-size", "8", "--quiet", capsys=capsys)
    assert result[0] == 0, result
    config = json.loads((run / "config.json").read_text())
    assert config["config"]["epochs"] == 3
    assert config["resumes"][0]["changes"] == {"epochs": [2, 3]}
    assert "--epochs 3" in config["resumes"][0]["command"]
    assert config["provenance"]["resumed_with"] == {"epochs": [2, 3]}
    rows = (run / "metrics.csv").read_text().splitlines()
    assert rows[-1].split(",")[0] == "2"                    # epoch 3 (0-based 2) was trained


def test_resume_of_another_method_is_refused(capsys, run):
    result = reid_in_process("train", "bot", "--resume", run, capsys=capsys)
    assert_one_line_error_in_process(result, "pcb run", "reid train pcb")


def test_relative_root_resumed_from_another_folder_reads_the_recorded_data(
        capsys, tmp_path, tiny_synthetic_root, monkeypatch):
    """A run started with a relative --root resumed from another working directory trained
    on whatever images were there."""
    data = tmp_path / "work" / "data"
    shutil.copytree(tiny_synthetic_root, data)
    monkeypatch.chdir(tmp_path / "work")
    out = tmp_path / "run"
    assert reid_in_process(*TRAIN, "--root", "data", "--out", out, capsys=capsys)[0] == 0
    recorded = json.loads((out / "config.json").read_text())["data"]
    assert recorded["root"] == str(data)
    elsewhere = tmp_path / "elsewhere"
    generate(elsewhere / "data", "tiny", overrides={"num_train_ids": 3}, progress=False)
    monkeypatch.chdir(elsewhere)                  # ./data here holds other images
    result = reid_in_process("train", "pcb", "--resume", out, "--root", "data",
                             capsys=capsys)
    assert_one_line_error_in_process(result, "--root data", str(data))
    assert reid_in_process("train", "pcb", "--resume", out, "--epochs", "3", "--quiet",
                           capsys=capsys)[0] == 0
    assert json.loads((out / "config.json").read_text())["data"] == recorded


def test_resume_on_changed_data_is_refused(capsys, tmp_path, tiny_synthetic_root):
    """A root that now holds fewer identities gave a traceback (classifier size mismatch)."""
    data = tmp_path / "data"
    shutil.copytree(tiny_synthetic_root, data)
    out = tmp_path / "run"
    assert reid_in_process(*TRAIN, "--root", data, "--out", out, capsys=capsys)[0] == 0
    shutil.rmtree(data / "synthetic" / "tiny")
    generate(data, "tiny", overrides={"num_train_ids": 3}, progress=False)
    before = _snapshot(out)
    result = reid_in_process("train", "pcb", "--resume", out, "--epochs", "3", capsys=capsys)
    assert_one_line_error_in_process(result, "not what run directory", "images now")
    assert _snapshot(out) == before and _leftovers(tmp_path) == []


# -- tracebacks: damaged run files -------------------------------------------------------------
@pytest.mark.parametrize("damage, needle", [
    ("truncated", "truncated"),
    ("random", "not a torch file"),
    ("directory", "directory"),
    ("model", "model file, not a training checkpoint"),
    ("metrics", "metrics.csv"),
])
def test_damaged_run_files_are_one_line(capsys, run, damage, needle):
    ckpt = run / "checkpoint.pt"
    if damage == "truncated":
        ckpt.write_bytes(ckpt.read_bytes()[:3000])
    elif damage == "random":
        ckpt.write_bytes(random.Random(0).randbytes(5000))
    elif damage == "directory":
        ckpt.unlink()
        ckpt.mkdir()
        (ckpt / "data.pkl").write_bytes(b"x")
    elif damage == "model":
        shutil.copy(run / "model.pt", ckpt)
    else:
        (run / "metrics.csv").write_bytes(b"epoch;iteration\n\x00\xff garbage\n")
    before = _snapshot(run)
    result = reid_in_process("train", "pcb", "--resume", run, "--epochs", "3", capsys=capsys)
    assert_one_line_error_in_process(result, needle)
    assert _snapshot(run) == before and _leftovers(run.parent) == []


# -- fault injection: kill a `--force` replacement at random points ----------------------------
@requires_posix_signals
def test_two_killed_force_runs_never_damage_the_previous_run(run, tiny_synthetic_root):
    """The default tier's shrunk form of the fault injection below: two seeded kills."""
    _kill_force_runs(run, tiny_synthetic_root, kills=2, min_states=1)


@pytest.mark.slow
@requires_posix_signals
def test_killed_force_runs_never_damage_the_previous_run(run, tiny_synthetic_root):
    """SIGKILL `reid train --force` at seeded random moments: every time, the previous run is
    byte-identical (or, killed inside the final renames, restored by the next writer), and no
    partial folder is a complete-looking run."""
    _kill_force_runs(run, tiny_synthetic_root, kills=5, min_states=2)


def _kill_force_runs(run, tiny_synthetic_root, kills: int, min_states: int) -> None:
    """Run `reid train --force` over ``run`` once, then ``kills`` times SIGKILL it at seeded
    random moments of its writing window, checking the previous run after each kill."""
    from reidcli.training.run_dir import RunDirectory, read_run_config

    before = _snapshot(run)
    args = [*TRAIN, "--root", tiny_synthetic_root, "--out", run, "--force", "--epochs", "3",
            "--seed", "9"]
    partial = run.with_name(run.name + ".partial")

    def start_and_wait_for_the_partial_folder(*extra):
        proc = start_reid(*args, *extra)
        while not partial.exists() and proc.poll() is None:   # past the imports: writing
            time.sleep(0.005)
        return proc, time.monotonic()

    proc, started = start_and_wait_for_the_partial_folder()
    while partial.exists() and proc.poll() is None:
        time.sleep(0.005)
    writing = time.monotonic() - started           # from the first folder to the rename
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    replaced = _snapshot(run)
    assert replaced != before
    before = replaced
    rng = random.Random(28)
    states = set()
    for delay in sorted(rng.uniform(0.0, 1.2 * writing) for _ in range(kills)):
        proc, started = start_and_wait_for_the_partial_folder("--seed", str(rng.randrange(99)))
        time.sleep(max(0.0, delay - (time.monotonic() - started)))
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
        if not run.exists():                          # killed between the two renames
            RunDirectory(run, force=True).abort()     # what the next writer does first
        now = _snapshot(run)
        states.add("replaced" if now != before else
                   "resumable" if (partial / "checkpoint.pt").exists() else "early")
        before = now
        assert read_run_config(run)["status"] == "complete" and (run / "model.pt").exists()
        assert not partial.exists() or not (partial / "model.pt").exists() or \
            read_run_config(partial)["status"] == "complete"    # a killed run: never at --out
        shutil.rmtree(partial, ignore_errors=True)    # the next kill waits for a fresh one
    assert len(states) >= min_states, states          # the kills hit different moments
    # the next writer cleans whatever the kills left and replaces the run
    proc = start_reid(*args)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert _leftovers(run.parent) == []
