"""Fault battery of `reid` (issue 28): every command tried as a careless user, a crash and a
second process would, each outcome put in exactly one class.

Run it as a script, not under pytest::

    python -m tests.faults.battery [--tree DIR] [--out results.json] [--md summary.md]
                                   [--only PATTERN] [--workers 2] [--keep]

``--tree`` is the source tree under test (default: this checkout); every case runs
``python -m reidcli.cli.main ARGS`` in a fresh interpreter with ``PYTHONPATH=<tree>`` and its
own empty working folder as cwd. The fixtures (a tiny synthetic dataset, hand-crafted and BoT
stores, an imported store, a fitted XQDA and C-DPCF, shards, a tiny BoT run) are made once per
battery run *by the tree under test*, under a temporary folder.

Each case declares what is right:

* ``expect="error"``: exit 2 (or one of ``codes``), exactly one ``error: … — …`` line on stderr
  naming every needle, no traceback;
* ``expect="ok"``: exit 0;
* ``expect="warn"``: exit 0 with a ``warning: `` line (naming every needle);
* ``expect="error_or_warn"``: either of the two above;
* ``expect="clean"``: exit 0, or a clean one-line error;

and optionally ``check(wd, F, result)`` returning ``(class, detail)`` for data lost (an earlier
output must be intact, byte for byte) or a silent wrong result.

Classes: handled, traceback, accepted silently, unclear message, data lost, silent wrong result,
hang (the case's timeout ran out), wrong exit code. ``setup error`` marks a case whose own
preparation failed (the battery's fault, or a fixture the tree could not make).
"""
from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np

REPO = Path(__file__).resolve().parents[2]

CLASSES = ("handled", "traceback", "accepted silently", "unclear message", "data lost",
           "silent wrong result", "hang", "wrong exit code")
#: classes the slow test refuses outright
FATAL = ("traceback", "hang", "data lost", "silent wrong result")
#: sub-commands of these stages are named by two words in the tables
GROUPS = {"data", "store", "train", "fit-pooling", "adapt", "plot"}
MARKER = "PWNED_MARKER"

TRAIN_TIMEOUT = 120
DEFAULT_TIMEOUT = 60


@dataclass
class Result:
    rc: Optional[int]
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool


@dataclass
class Case:
    name: str
    args: list
    expect: str = "error"
    needles: tuple = ()
    forbid: tuple = ()                        # words a right message must not hold
    codes: tuple = (2,)
    setup: Optional[Callable] = None          # setup(wd, F)
    check: Optional[Callable] = None          # check(wd, F, result) -> (class, detail) | None
    pre: list = field(default_factory=list)   # CLI argument lists run first (must exit 0)
    env: dict = field(default_factory=dict)
    timeout: int = DEFAULT_TIMEOUT
    new: bool = False                         # uses a flag the pre-issue tree lacks
    fixtures: bool = False                    # setup/check read fixtures (F)
    note: str = ""
    extended: bool = False                    # run only with --extended

    @property
    def command(self) -> str:
        words = [a for a in self.args if isinstance(a, str)]
        if not words:
            return "reid"
        if words[0] in GROUPS and len(words) > 1 and not words[1].startswith("-"):
            return f"{words[0]} {words[1]}"
        return words[0] if not words[0].startswith("-") else "reid"

    def needs_fixtures(self) -> bool:
        text = " ".join(map(str, self.args)) + " " + " ".join(" ".join(map(str, p))
                                                           for p in self.pre)
        names = set(re.findall(r"\{(\w+)\}", text)) - {"wd"}
        return self.fixtures or bool(names)


# --------------------------------------------------------------------------- process running

def _env(tree: Path, extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                        "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID", "REIDCLI_DATA")}
    env.update({"PYTHONPATH": str(tree), "PYTHONUNBUFFERED": "1", "MPLBACKEND": "Agg",
                "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "COLUMNS": "200",
                "NO_COLOR": "1", "TERM": "dumb", "CUDA_VISIBLE_DEVICES": ""})
    env.update(extra or {})
    return env


def run_reid(python: str, tree: Path, args: list, cwd: Path, timeout: float,
             env: dict | None = None) -> Result:
    """``python -m reidcli.cli.main ARGS`` in its own session; killed (the whole process group)
    when ``timeout`` runs out."""
    start = time.monotonic()
    proc = subprocess.Popen([python, "-m", "reidcli.cli.main", *map(str, args)], cwd=cwd,
                            env=_env(tree, env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                            errors="replace", start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
        timed_out = True
    return Result(None if timed_out else proc.returncode, out, err,
                  time.monotonic() - start, timed_out)


# --------------------------------------------------------------------------- classification

def error_lines(text: str) -> list[str]:
    return [line for line in text.strip().splitlines() if line.startswith("error: ")]


def warning_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("warning: ")]


def _has_all(line: str, needles) -> list[str]:
    """The needles missing from ``line`` (case-insensitive; ``a|b`` is found by either)."""
    return [n for n in needles
            if not any(alt.lower() in line.lower() for alt in n.split("|"))]


def _clean_error(case: Case, res: Result) -> tuple[str, str]:
    """Class of a non-zero exit when an error is right."""
    if res.rc not in case.codes:
        return "wrong exit code", f"exit {res.rc}, expected {case.codes}"
    lines = error_lines(res.stderr)
    if len(lines) != 1:
        return "unclear message", f"{len(lines)} 'error: ' lines"
    if " — " not in lines[0]:
        return "unclear message", "no ' — <what to do>' part"
    missing = _has_all(lines[0], case.needles)
    if missing:
        return "unclear message", f"error line lacks {missing}"
    wrong = [w for w in case.forbid if w.lower() in lines[0].lower()]
    if wrong:
        return "unclear message", f"error line says {wrong}"
    return "handled", ""


def classify(case: Case, res: Result, extra: tuple | None) -> tuple[str, str]:
    """One class per outcome; worst first."""
    if res.timed_out:
        return "hang", f"no exit within {case.timeout} s"
    if extra is not None and extra[0] == "data lost":
        return extra
    both = res.stderr + res.stdout
    if "Traceback (most recent call last)" in both or (res.rc is not None and res.rc < 0):
        return "traceback", f"exit {res.rc}"
    if extra is not None:
        return extra
    warned = warning_lines(res.stderr)
    if case.expect == "ok":
        if res.rc == 0:
            return "handled", ""
        line = (error_lines(res.stderr) or [""])[0]
        return "wrong exit code", f"exit {res.rc} where success is right: {line[:160]}"
    if case.expect == "clean":
        if res.rc == 0:
            return "handled", "accepted"
        return _clean_error(case, res)
    if case.expect == "warn":
        if res.rc == 0:
            if warned and not _has_all(" ".join(warned), case.needles):
                return "handled", ""
            return ("accepted silently", "no warning" if not warned
                    else f"warning lacks {_has_all(' '.join(warned), case.needles)}")
        return "wrong exit code", f"exit {res.rc} where a warning is right: " \
            f"{(error_lines(res.stderr) or [''])[0][:160]}"
    # error / error_or_warn
    if res.rc == 0:
        if case.expect == "error_or_warn" and warned:
            return "handled", "warned"
        return "accepted silently", "exit 0" + (" (warned only)" if warned else "")
    return _clean_error(case, res)


# --------------------------------------------------------------------------- file helpers

def sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def tree_digest(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(Path(folder).rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(folder)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def cp(src, dst: Path) -> Path:
    src, dst = Path(src), Path(dst)
    if src.is_dir():
        shutil.copytree(src, dst)
    else:
        shutil.copyfile(src, dst)
    return dst


def truncated(src, dst: Path, fraction: float = 0.5) -> Path:
    data = Path(src).read_bytes()
    Path(dst).write_bytes(data[:max(1, int(len(data) * fraction))])
    return Path(dst)


def random_file(dst: Path, n: int = 4096, seed: int = 0) -> Path:
    Path(dst).write_bytes(np.random.default_rng(seed).integers(0, 256, n, np.uint8).tobytes())
    return Path(dst)


def intact(rel: str, key: str, on_failure: bool = False):
    """Check: ``wd/rel`` still has the bytes of fixture ``key`` (file) or its tree (folder);
    with ``on_failure``, only when the command failed (``--force`` over it, then an error:
    a success may replace it)."""
    def check(wd, F, res):
        if on_failure and res.rc == 0:
            return None
        path, ref = wd / rel, Path(F[key])
        if ref.is_dir():
            if not path.is_dir() or tree_digest(path) != tree_digest(ref):
                return "data lost", f"{rel} changed or gone"
        elif not path.is_file() or sha(path) != sha(ref):
            return "data lost", f"{rel} changed or gone"
        return None
    return check


def intact_bytes(rel: str, name: str = "before.sha"):
    """Check: ``wd/rel`` has the digest recorded in ``wd/name`` by the setup (see keep)."""
    def check(wd, F, res):
        path = wd / rel
        want = (wd / name).read_text()
        got = tree_digest(path) if path.is_dir() else sha(path) if path.is_file() else None
        if got != want:
            return "data lost", f"{rel} changed or gone"
        return None
    return check


def keep(rel: str, name: str = "before.sha"):
    """Setup step: record the digest of ``wd/rel`` (compare with :func:`intact_bytes`)."""
    def step(wd, F):
        path = wd / rel
        (wd / name).write_text(tree_digest(path) if path.is_dir() else sha(path))
    return step


def no_marker(wd, F, res):
    if (wd / MARKER).exists():
        return "silent wrong result", "SECURITY: the pickle's code was executed"
    return None


def steps(*fns):
    def setup(wd, F):
        for fn in fns:
            fn(wd, F)
    return setup


def copy_fx(key: str, rel: str):
    return lambda wd, F: cp(F[key], wd / rel)


def write(rel: str, data):
    def step(wd, F):
        p = wd / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            p.write_bytes(data)
        else:
            p.write_text(data)
    return step


def mkdir(rel: str):
    return lambda wd, F: (wd / rel).mkdir(parents=True, exist_ok=True)


# --------------------------------------------------------------------------- input makers

def npz_arrays(n_ids: int = 30, per_id: int = 10, dim: int = 16, pid_start: int = 1,
               cam_start: int = 0, seed: int = 0) -> dict:
    """Features with identity structure: ids split half train, half test; test ids give one
    query row per camera 0 and the rest gallery. ``n_ids * per_id`` rows."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_ids, dim)).astype(np.float32)
    rows, pid, camid, split = [], [], [], []
    for i in range(n_ids):
        for j in range(per_id):
            rows.append(centres[i] + 0.5 * rng.normal(size=dim).astype(np.float32))
            pid.append(pid_start + i)
            camid.append(cam_start + j % 3)
            if i < n_ids // 2:
                split.append("train")
            else:
                split.append("query" if j < 2 else "gallery")
    return {"features": np.asarray(rows, np.float32), "pid": np.asarray(pid, np.int64),
            "camid": np.asarray(camid, np.int64), "split": np.asarray(split)}


def person0_in_test(arrays: dict) -> None:
    """Swap the halves of :func:`npz_arrays`' split: the first ids (person 0 of 0-based pids)
    become test ids, with query rows."""
    ids = np.unique(arrays["pid"])
    first = np.isin(arrays["pid"], ids[:len(ids) // 2])
    within = np.arange(len(arrays["pid"])) % (len(arrays["pid"]) // len(ids))
    arrays["split"] = np.where(first, np.where(within < 2, "query", "gallery"), "train")


def npz(rel: str, mutate: Callable | None = None, **kw):
    def step(wd, F):
        arrays = npz_arrays(**kw)
        if mutate is not None:
            mutate(arrays)
        np.savez(wd / rel, **arrays)
    return step


def csv_inputs(columns: Callable | None = None, rows: int | None = None, text: str | None = None):
    """Setup: ``feats.npy`` and ``labels.csv`` from :func:`npz_arrays` (``columns`` edits the
    dict of CSV columns; ``text`` replaces the CSV)."""
    def step(wd, F):
        arrays = npz_arrays()
        np.save(wd / "feats.npy", arrays["features"])
        cols = {"pid": arrays["pid"], "camid": arrays["camid"], "split": arrays["split"]}
        if columns is not None:
            columns(cols)
        if text is not None:
            (wd / "labels.csv").write_text(text)
            return
        names = list(cols)
        n = len(arrays["pid"]) if rows is None else rows
        lines = [",".join(names)] + [",".join(str(cols[c][i]) for c in names)
                                     for i in range(n)]
        (wd / "labels.csv").write_text("\n".join(lines) + "\n")
    return step


def label_npys(wd, F):
    arrays = npz_arrays()
    for k, v in arrays.items():
        np.save(wd / f"{k}.npy", v)


def data_copy(rel: str = "data"):
    return lambda wd, F: cp(F["data"], wd / rel)


def zero_byte_image(rel: str = "data", split_dir: str = "bounding_box_test"):
    def step(wd, F):
        root = wd / rel / "synthetic" / "tiny"
        img = sorted(root.rglob(f"{split_dir}/*.jpg"))[3]
        img.write_bytes(b"")
    return step


def split_cache(payload_edit: Callable, rel: str = "data"):
    """Setup: edit the random-pairs trial cache of the copied tiny tree (fixture step makes it)."""
    def step(wd, F):
        caches = sorted((wd / rel / "synthetic" / "tiny" / "reidcli_splits").glob("*.json"))
        for path in caches:
            payload_edit(path)
    return step


def cache_trials(value):
    def edit(path: Path):
        payload = json.loads(path.read_text())
        payload["trials"] = value
        path.write_text(json.dumps(payload))
    return edit


def result_json(rel: str, edit: Callable):
    def step(wd, F):
        report = json.loads(Path(F["hsvjson"]).read_text())
        edit(report)
        (wd / rel).write_text(json.dumps(report))
    return step


def set_key(key, value):
    def edit(d):
        d[key] = value
    return edit


# --------------------------------------------------------------------------- checks on results

def zero_based_queries_kept(wd, F, res):
    """Silent wrong: person 0's queries (0-based pids) skipped by the eval with no warning,
    neither when the store was imported (the case's pre-step) nor now."""
    path = wd / "r.json"
    if res.rc != 0 or not path.is_file():
        return None
    report = json.loads(path.read_text())
    skipped = int(report.get("num_skipped_queries") or 0)
    pre = (wd / "pre.stderr").read_text() if (wd / "pre.stderr").is_file() else ""
    if skipped and not warning_lines(res.stderr) and not warning_lines(pre):
        return "silent wrong result", f"{skipped} queries (person 0) skipped without a warning"
    return None


def imported_pid0_kept(wd, F, res):
    """Silent wrong: ``--pid-base 0`` must keep every row and leave no pid 0 (person 0 → 1)."""
    import h5py
    path = wd / "o.h5"
    if res.rc != 0 or not path.is_file():
        return None
    with h5py.File(path, "r") as f:
        pid = f["records/pid"][()]
    if len(pid) != 300 or int((pid == 0).sum()):
        return "silent wrong result", f"{len(pid)} rows, {int((pid == 0).sum())} of pid 0"
    return None


def merged_rows(expected_key: str):
    def check(wd, F, res):
        import h5py
        path = wd / "m.h5"
        if res.rc != 0 or not path.is_file():
            return None
        with h5py.File(path, "r") as f, h5py.File(F[expected_key], "r") as g:
            n, m = f.attrs.get("num_rows"), g.attrs.get("num_rows")
        if int(n) != int(m):
            return "silent wrong result", f"merged {n} rows, the full store has {m}"
        return None
    return check


def mean_of_duplicates(wd, F, res):
    """Silent wrong: the hard-linked store counted twice in a mean over 'stores'."""
    path = wd / "r.json"
    if res.rc != 0 or not path.is_file():
        return None
    report = json.loads(path.read_text())
    n = report.get("num_stores") or len(report.get("stores", []) or [])
    if n and n > 1:
        return "silent wrong result", f"one store averaged as {n} stores"
    return None


# --------------------------------------------------------------------------- cases

def _evil_pickles(base: Path, python: str, tree: Path) -> None:
    """evil.pt (torch zip format) and evil.npy (object array): unpickling either runs
    ``touch PWNED_MARKER`` in the current folder."""
    code = f"""
import os, pickle, numpy as np, torch
class Evil:
    def __reduce__(self):
        return (os.system, ("touch {MARKER}",))
torch.save({{"state_dict": {{"w": Evil()}}, "meta": Evil()}}, {str(base / 'evil.pt')!r})
arr = np.empty(1, dtype=object); arr[0] = Evil()
np.save({str(base / 'evil.npy')!r}, arr, allow_pickle=True)
with open({str(base / 'evil.pkl')!r}, "wb") as f:
    pickle.dump(Evil(), f)
"""
    subprocess.run([python, "-c", code], check=True, cwd=base, env=_env(tree),
                   capture_output=True, timeout=300)
    for name in ("evil.pt", "evil.npy", "evil.pkl"):
        assert (base / name).is_file()
    assert not (base / MARKER).exists()


def build_fixtures(python: str, tree: Path, base: Path, log=print) -> dict:
    """Make the shared inputs with the tree under test; returns name → path."""
    base.mkdir(parents=True, exist_ok=True)
    F = {"data": base / "data", "hsv": base / "hsv.h5", "hsvjson": base / "hsv.json",
         "xqda": base / "xqda.h5", "cdpcf": base / "cdpcf.h5", "bot": base / "bot",
         "bot2": base / "bot2", "botstore": base / "bot.h5", "botjson": base / "bot.json",
         "npz": base / "imp.npz", "imp": base / "imp.h5", "shard0": base / "s0.h5",
         "shard1": base / "s1.h5", "shard1x": base / "s1x.h5", "evilpt": base / "evil.pt",
         "evilnpy": base / "evil.npy", "evilpkl": base / "evil.pkl"}
    np.savez(F["npz"], **npz_arrays())
    tiny = ["--dataset", "synthetic", "--root", F["data"], "--option", "name=tiny"]
    bot = ["train", "bot", "--preset", "tiny", *tiny, "--epochs", "2", "--batch-size", "16",
           "--device", "cpu", "--quiet"]
    commands = [
        ["data", "synth", "--out", F["data"], "--preset", "tiny", "--seed", "0"],
        ["data", "check", "synthetic", "--root", F["data"], "--option", "name=tiny",
         "--option", "protocol=random_pairs", "--option", "test_ids=4"],
        ["extract", *tiny, "--features", "hsv-stripes", "--maps", "color-grid",
         "--out", F["hsv"]],
        ["eval", "--store", F["hsv"], "--json", F["hsvjson"], "--quiet"],
        ["train", "xqda", "--store", F["hsv"], "--feature", "hsv-stripes", "--out", F["xqda"]],
        ["fit-pooling", "cdpcf", "--store", F["hsv"], "--out", F["cdpcf"]],
        ["store", "import", "--npz", F["npz"], "--out", F["imp"]],
        [*bot, "--out", F["bot"]],
        [*bot, "--seed", "1", "--out", F["bot2"]],
        ["extract", *tiny, "--model", F["bot"], "--device", "cpu", "--out", F["botstore"]],
        ["eval", "--store", F["botstore"], "--json", F["botjson"], "--quiet"],
        ["extract", *tiny, "--model", F["bot"], "--device", "cpu", "--shard", "0/2",
         "--out", F["shard0"]],
        ["extract", *tiny, "--model", F["bot"], "--device", "cpu", "--shard", "1/2",
         "--out", F["shard1"]],
        ["extract", *tiny, "--model", F["bot2"], "--device", "cpu", "--shard", "1/2",
         "--out", F["shard1x"]],
    ]
    for argv in commands:
        t0 = time.monotonic()
        res = run_reid(python, tree, argv, base, 600)
        log(f"  fixture: reid {' '.join(map(str, argv[:2]))} … ({time.monotonic() - t0:.1f} s)")
        if res.rc != 0:
            raise RuntimeError(f"fixture command failed (exit {res.rc}): reid "
                               f"{' '.join(map(str, argv))}\n{res.stderr[-3000:]}")
    _evil_pickles(base, python, tree)
    return {k: str(v) for k, v in F.items()}


def cases() -> list[Case]:
    """Every case of the battery (names are unique)."""
    C: list[Case] = []

    def add(name, args, expect="error", **kw):
        C.append(Case(name, list(args), expect, **kw))

    T = TRAIN_TIMEOUT
    tiny = ["--dataset", "synthetic", "--root", "{data}", "--option", "name=tiny"]
    tiny_wd = ["--dataset", "synthetic", "--root", "data", "--option", "name=tiny"]
    # P = 4 identities of K = 4 images fit the 6 training ids of the tiny preset; a case's own
    # --ids-per-batch / --images-per-id comes later and wins
    bot = ["train", "bot", "--preset", "tiny", *tiny, "--device", "cpu", "--quiet",
           "--ids-per-batch", "4", "--images-per-id", "4", "--out", "run"]
    dl = ["adapt", "dart3-lite", "--store", "{botstore}", "--out", "o.h5"]
    imp = ["store", "import", "--out", "o.h5"]

    # ---- reid (top level), methods, data list / info
    add("top.unknown-command", ["nosuchcmd"])
    add("top.typo-command", ["evl", "--store", "x.h5"])
    add("top.version", ["--version"], "ok")
    add("top.option-typo", ["eval", "--stor", "x.h5"], needles=("--stor",))
    add("top.bare-group", ["store", "nosuch"])
    add("methods.ok", ["methods", "--json"], "ok")
    add("methods.bad-stage", ["methods", "--stage", "nosuch"])
    add("data-list.ok", ["data", "list"], "ok")
    add("data-info.unknown", ["data", "info", "nosuch"], needles=("nosuch",))
    add("data-info.ok", ["data", "info", "market1501"], "ok")

    # ---- data synth
    syn = ["data", "synth", "--out", "d", "--preset", "tiny"]
    add("synth.bad-preset", ["data", "synth", "--out", "d", "--preset", "tinyy"])
    add("synth.seed-negative", [*syn, "--seed", "-1"], needles=("--seed",))
    add("synth.seed-1e20", [*syn, "--seed", "1e20"], needles=("--seed",))
    add("synth.seed-2**32", [*syn, "--seed", "4294967296"], needles=("--seed",))
    add("synth.option-zero-cameras", [*syn, "--option", "num_cameras=0"],
        needles=("num_cameras",))
    add("synth.option-abc", [*syn, "--option", "num_cameras=abc"], needles=("num_cameras",))
    add("synth.option-unknown", [*syn, "--option", "nosuch=1"], needles=("nosuch",))
    add("synth.option-nan", [*syn, "--option", "noise_std=nan"], needles=("noise_std",))
    add("synth.option-inf", [*syn, "--option", "camera_bias_strength=inf"],
        needles=("camera_bias_strength",))
    add("synth.option-negative-ids", [*syn, "--option", "num_train_ids=-3"],
        needles=("num_train_ids",))
    add("synth.option-no-equals", [*syn, "--option", "num_cameras"], needles=("--option",))
    add("synth.out-is-file", ["data", "synth", "--out", "f", "--preset", "tiny"],
        setup=write("f", "precious"), check=lambda wd, F, r: None if (wd / "f").read_text()
        == "precious" else ("data lost", "file f replaced"))
    add("synth.exists-no-force", ["data", "synth", "--out", "data", "--preset", "tiny",
                                  "--seed", "0"], "clean",
        setup=steps(data_copy(), keep("data")), check=intact_bytes("data"), fixtures=True)
    add("synth.force-then-fails", ["data", "synth", "--out", "data", "--preset", "tiny",
                                   "--force", "--option", "num_cameras=0"],
        setup=steps(data_copy(), keep("data")), check=intact_bytes("data"), fixtures=True)

    # ---- data check
    chk = ["data", "check", "synthetic", "--option", "name=tiny", "--option", "generate=false"]
    add("check.ok", [*chk, "--root", "{data}"], "ok")
    add("check.missing-root", [*chk, "--root", "nope"], codes=(1, 2))
    add("check.trial-out-of-range", [*chk, "--root", "{data}", "--trial", "5"],
        needles=("--trial",))
    add("check.trial-negative", [*chk, "--root", "{data}", "--trial", "-1"],
        needles=("--trial",))
    add("check.option-unknown", [*chk, "--root", "{data}", "--option", "nosuch=1"],
        needles=("nosuch",))
    add("check.zero-byte-image", [*chk, "--root", "data", "--open-images"], codes=(1, 2),
        setup=steps(data_copy(), zero_byte_image()), fixtures=True, new=True)
    add("extract.corrupt-jpeg", ["extract", *tiny_wd, "--features", "hsv-stripes", "--out",
                                 "o.h5"], needles=(".jpg",), fixtures=True,
        setup=steps(data_copy(), lambda wd, F: random_file(sorted(
            (wd / "data/synthetic/tiny").rglob("bounding_box_test/*.jpg"))[5], 3000)))
    add("check.images-csv-header-only", [*chk, "--root", "data"], codes=(1, 2),
        setup=steps(data_copy(), write("data/synthetic/tiny/images.csv",
                                       "relpath,domain,pid,camid,split,modality,frame\n")),
        fixtures=True)
    add("check.meta-json-garbage", [*chk, "--root", "data"], codes=(1, 2),
        setup=steps(data_copy(), write("data/synthetic/tiny/meta.json", "{not json")),
        fixtures=True)
    pairs = [*chk, "--root", "data", "--option", "protocol=random_pairs", "--option",
             "test_ids=4"]
    add("check.split-cache-empty-list", pairs, "clean", codes=(1, 2), needles=("split",),
        setup=steps(data_copy(), split_cache(cache_trials([]))), fixtures=True)
    add("check.split-cache-null", pairs, "clean", codes=(1, 2), needles=("split",),
        setup=steps(data_copy(), split_cache(cache_trials(None))), fixtures=True)
    add("check.split-cache-binary", pairs, "clean", codes=(1, 2), needles=("split",),
        setup=steps(data_copy(), split_cache(lambda p: random_file(p, 512))), fixtures=True)
    add("check.split-cache-null-trial", pairs, "clean", codes=(1, 2), needles=("split",),
        setup=steps(data_copy(), split_cache(cache_trials([None] * 10))), fixtures=True)

    # ---- store info
    add("info.ok", ["store", "info", "--store", "{hsv}"], "ok")
    add("info.missing", ["store", "info", "--store", "nope.h5"], needles=("nope.h5",))
    add("info.truncated", ["store", "info", "--store", "t.h5"], needles=("t.h5",),
        setup=lambda wd, F: truncated(F["hsv"], wd / "t.h5"), fixtures=True)
    add("info.random-bytes", ["store", "info", "--store", "r.h5"], needles=("r.h5",),
        setup=lambda wd, F: random_file(wd / "r.h5"))
    add("info.directory", ["store", "info", "--store", "d.h5"], setup=mkdir("d.h5"))
    add("info.zero-byte", ["store", "info", "--store", "z.h5"], setup=write("z.h5", b""))
    add("info.npz-given", ["store", "info", "--store", "{npz}"])
    add("info.json-given", ["store", "info", "--store", "{hsvjson}"])
    add("info.positional-store", ["store", "info", "{hsv}"], needles=("unexpected",))
    add("info.flipped-record-byte", ["store", "info", "--store", "f.h5"], needles=("digest",),
        setup=lambda wd, F: _flip_records(F["hsv"], wd / "f.h5"), fixtures=True)

    # ---- store import
    add("import.ok", [*imp, "--npz", "{npz}"], "ok")
    add("import.truncated-npz", [*imp, "--npz", "t.npz"],
        setup=lambda wd, F: truncated(F["npz"], wd / "t.npz"), fixtures=True)
    add("import.random-npz", [*imp, "--npz", "r.npz"], setup=lambda wd, F:
        random_file(wd / "r.npz"))
    add("import.npz-directory", [*imp, "--npz", "d.npz"], setup=mkdir("d.npz"))
    add("import.zero-byte-npz", [*imp, "--npz", "z.npz"], setup=write("z.npz", b""))
    add("import.npz-lacks-pid", [*imp, "--npz", "a.npz"], needles=("pid",),
        setup=npz("a.npz", lambda a: a.pop("pid")))
    add("import.nan-features", [*imp, "--npz", "a.npz"],
        setup=npz("a.npz", lambda a: a["features"].__setitem__((3, 2), np.nan)))
    add("import.inf-features", [*imp, "--npz", "a.npz"],
        setup=npz("a.npz", lambda a: a["features"].__setitem__((3, 2), np.inf)))
    add("import.features-1d", [*imp, "--npz", "a.npz"],
        setup=npz("a.npz", lambda a: a.__setitem__("features", a["features"][:, 0])))
    add("import.features-3d", [*imp, "--npz", "a.npz"],
        setup=npz("a.npz", lambda a: a.__setitem__("features",
                                                   a["features"].reshape(300, 4, 4))))
    add("import.zero-rows", [*imp, "--npz", "a.npz"],
        setup=npz("a.npz", lambda a: a.update({k: v[:0] for k, v in a.items()})))
    add("import.pid-2.5", [*imp, "--npz", "a.npz"], needles=("pid",),
        setup=npz("a.npz", lambda a: a.__setitem__("pid", a["pid"] + 0.5)))
    add("import.pid-1e20", [*imp, "--npz", "a.npz"], needles=("pid",), forbid=("below -1",),
        setup=npz("a.npz", lambda a: a.__setitem__("pid", np.where(
            np.arange(300) == 5, 1e20, a["pid"]).astype(np.float64))))
    add("import.pid-2**63+5", [*imp, "--npz", "a.npz"], needles=("pid",), forbid=("below -1",),
        setup=npz("a.npz", lambda a: a.__setitem__("pid", np.where(
            np.arange(300) == 5, np.uint64(2**63 + 5), a["pid"].astype(np.uint64)))))
    add("import.pid-strings", [*imp, "--npz", "a.npz"], needles=("pid",),
        setup=npz("a.npz", lambda a: a.__setitem__("pid", np.asarray(
            [f"p{p}" for p in a["pid"]]))))
    add("import.pid-minus-5", [*imp, "--npz", "a.npz"], "error_or_warn", needles=("pid",),
        setup=npz("a.npz", lambda a: a["pid"].__setitem__(slice(0, 10), -5)))
    add("import.length-mismatch", [*imp, "--npz", "a.npz"],
        setup=npz("a.npz", lambda a: a.__setitem__("pid", a["pid"][:-7])))
    add("import.camid-1-based", [*imp, "--npz", "a.npz"], needles=("--camid-base",),
        setup=npz("a.npz", cam_start=1))
    add("import.camid-base-1", [*imp, "--npz", "a.npz", "--camid-base", "1"], "ok",
        setup=npz("a.npz", cam_start=1))
    add("import.camid-base-5", [*imp, "--npz", "{npz}", "--camid-base", "5"],
        needles=("--camid-base",))
    add("import.camid-base-negative", [*imp, "--npz", "{npz}", "--camid-base", "-1"],
        needles=("--camid-base",))
    add("import.camid-base-abc", [*imp, "--npz", "{npz}", "--camid-base", "abc"],
        needles=("--camid-base",))
    add("import.camid-negative", [*imp, "--npz", "a.npz"], needles=("camid",),
        setup=npz("a.npz", lambda a: a["camid"].__setitem__(4, -2)))
    add("import.split-typo", [*imp, "--npz", "a.npz"], needles=("split",),
        setup=npz("a.npz", lambda a: a.__setitem__("split", np.where(
            a["split"] == "query", "qeury", a["split"]))))
    add("import.pid-0-based-warns", [*imp, "--npz", "a.npz"], "warn", needles=("pid",),
        setup=npz("a.npz", person0_in_test, pid_start=0))
    add("import.pid-base-0", [*imp, "--npz", "a.npz", "--pid-base", "0"], "ok",
        setup=npz("a.npz", person0_in_test, pid_start=0), check=imported_pid0_kept, new=True)
    add("import.object-array-npz", [*imp, "--npz", "{evilnpy}"], check=no_marker)
    add("import.mat-as-npz", [*imp, "--npz", "a.mat"], needles=("a.mat",),
        forbid=("pickled", "allow_pickle"),
        setup=lambda wd, F: _savemat(wd / "a.mat"))
    add("import.mat-ok", [*imp, "--mat", "a.mat"], "ok", new=True,
        setup=lambda wd, F: _savemat(wd / "a.mat"))
    add("import.csv-ok", [*imp, "--features", "feats.npy", "--labels", "labels.csv"], "ok",
        setup=csv_inputs())
    add("import.csv-slash-column", [*imp, "--features", "feats.npy", "--labels",
                                    "labels.csv"], "clean", needles=("a/b",),
        forbid=("damaged",), setup=csv_inputs(lambda c: c.__setitem__("a/b", np.arange(300))))
    add("import.csv-dot-column", [*imp, "--features", "feats.npy", "--labels",
                                  "labels.csv"], "clean",
        setup=csv_inputs(lambda c: c.__setitem__(".hidden", np.arange(300))))
    add("import.csv-frame-abc", [*imp, "--features", "feats.npy", "--labels", "labels.csv"],
        needles=("frame",), setup=csv_inputs(lambda c: c.__setitem__(
            "frame", np.asarray(["abc"] * 300))))
    add("import.csv-pid-1e20", [*imp, "--features", "feats.npy", "--labels", "labels.csv"],
        needles=("pid",), forbid=("below -1",), setup=csv_inputs(lambda c: c.__setitem__(
            "pid", np.asarray(["1e20"] + [str(p) for p in c["pid"][1:]]))))
    add("import.csv-pid-2**63+5", [*imp, "--features", "feats.npy", "--labels",
                                   "labels.csv"], needles=("pid",),
        setup=csv_inputs(lambda c: c.__setitem__(
            "pid", np.asarray([str(2**63 + 5)] + [str(p) for p in c["pid"][1:]]))))
    add("import.csv-short", [*imp, "--features", "feats.npy", "--labels", "labels.csv"],
        setup=csv_inputs(rows=100))
    add("import.csv-no-split", [*imp, "--features", "feats.npy", "--labels", "labels.csv"],
        needles=("split",), setup=csv_inputs(lambda c: c.pop("split")))
    add("import.csv-empty", [*imp, "--features", "feats.npy", "--labels", "labels.csv"],
        setup=csv_inputs(text=""))
    add("import.csv-binary", [*imp, "--features", "feats.npy", "--labels", "labels.csv"],
        setup=steps(csv_inputs(), lambda wd, F: random_file(wd / "labels.csv", 3000)))
    add("import.npy-arrays-ok", [*imp, "--features", "features.npy", "--pid", "pid.npy",
                                 "--camid", "camid.npy", "--split", "split.npy"], "ok",
        setup=label_npys)
    add("import.npy-pid-short", [*imp, "--features", "features.npy", "--pid", "p.npy",
                                 "--camid", "camid.npy", "--split", "split.npy"],
        setup=steps(label_npys, lambda wd, F: np.save(wd / "p.npy", np.arange(10))))
    add("import.npy-pickle-features", [*imp, "--features", "{evilnpy}", "--pid", "pid.npy",
                                       "--camid", "camid.npy", "--split", "split.npy"],
        setup=label_npys, check=no_marker)
    add("import.two-sources", [*imp, "--npz", "{npz}", "--features", "features.npy"],
        setup=label_npys)
    add("import.no-source", imp)
    add("import.name-slash", [*imp, "--npz", "{npz}", "--name", "a/b"], needles=("--name",))
    add("import.name-empty", [*imp, "--npz", "{npz}", "--name", ""], needles=("--name",))
    add("import.name-dot", [*imp, "--npz", "{npz}", "--name", ".x"], needles=("--name",))
    add("import.distance-typo", [*imp, "--npz", "{npz}", "--distance", "cosin"],
        needles=("--distance",))
    add("import.out-exists", [*imp, "--npz", "{npz}"], setup=copy_fx("hsv", "o.h5"),
        check=intact("o.h5", "hsv"), needles=("--force",))
    add("import.out-is-input", ["store", "import", "--npz", "a.npz", "--out", "a.npz",
                                "--force"], setup=steps(copy_fx("npz", "a.npz")),
        check=intact("a.npz", "npz"))
    add("import.out-is-directory", ["store", "import", "--npz", "{npz}", "--out", "d.h5",
                                    "--force"],
        setup=steps(mkdir("d.h5"), write("d.h5/keep.txt", "x")),
        check=lambda wd, F, r: None if (wd / "d.h5/keep.txt").is_file()
        else ("data lost", "folder d.h5 removed"))
    add("import.out-under-file", ["store", "import", "--npz", "{npz}", "--out",
                                  "blocker/o.h5"], setup=write("blocker", "x"))
    add("import.force-then-fails", [*imp, "--npz", "t.npz", "--force"],
        setup=steps(copy_fx("hsv", "o.h5"), lambda wd, F: truncated(F["npz"], wd / "t.npz")),
        check=intact("o.h5", "hsv", on_failure=True))
    add("import.out-missing-folder", ["store", "import", "--npz", "{npz}", "--out",
                                      "sub/dir/o.h5"], "clean")
    add("import.positional-out", ["store", "import", "o.h5", "--npz", "{npz}"],
        needles=("unexpected",))

    # ---- store merge
    mrg = ["store", "merge", "--out", "m.h5"]
    add("merge.ok", [*mrg, "{shard0}", "{shard1}"], "ok", check=merged_rows("botstore"))
    add("merge.different-models", [*mrg, "{shard0}", "{shard1x}"])
    add("merge.same-shard-twice", [*mrg, "{shard0}", "{shard0}"])
    add("merge.missing-shard", [*mrg, "{shard0}"])
    add("merge.not-a-shard", [*mrg, "{hsv}", "{shard1}"])
    add("merge.truncated-shard", [*mrg, "{shard0}", "t.h5"],
        setup=lambda wd, F: truncated(F["shard1"], wd / "t.h5"), fixtures=True)
    add("merge.hard-linked-shard", [*mrg, "{shard0}", "a.h5", "b.h5"],
        setup=lambda wd, F: (cp(F["shard1"], wd / "a.h5"), os.link(wd / "a.h5", wd / "b.h5")),
        fixtures=True)
    add("merge.out-is-shard", ["store", "merge", "--out", "a.h5", "--force", "a.h5",
                               "{shard1}"], setup=copy_fx("shard0", "a.h5"),
        check=intact("a.h5", "shard0"))
    add("merge.out-exists", [*mrg, "{shard0}", "{shard1}"], setup=copy_fx("hsv", "m.h5"),
        check=intact("m.h5", "hsv"), needles=("--force",))
    add("merge.force-then-fails", [*mrg, "--force", "{shard0}", "{shard1x}"],
        setup=copy_fx("hsv", "m.h5"), check=intact("m.h5", "hsv", on_failure=True))
    add("merge.positional-out", ["store", "merge", "m.h5", "{shard0}", "{shard1}"],
        needles=("--out",))

    # ---- extract
    ext = ["extract", *tiny, "--features", "hsv-stripes", "--out", "o.h5"]
    mext = ["extract", *tiny, "--device", "cpu", "--out", "o.h5"]
    add("extract.ok", ext, "ok")
    add("extract.feature-typo", ["extract", *tiny, "--features", "hsv-stripe", "--out",
                                 "o.h5"], needles=("hsv-stripe",))
    add("extract.batch-size-0", [*ext, "--batch-size", "0"], needles=("--batch-size",))
    add("extract.batch-size-negative", [*ext, "--batch-size", "-4"],
        needles=("--batch-size",))
    add("extract.batch-size-1e9", [*ext, "--batch-size", "1e9"], needles=("--batch-size",))
    add("extract.workers-negative", [*ext, "--workers", "-1"], needles=("--workers",))
    add("extract.maps-dtype", ["extract", *tiny, "--maps", "color-grid", "--maps-dtype",
                               "float8", "--out", "o.h5"], needles=("--maps-dtype",))
    add("extract.map-size-0x0", [*mext, "--model", "{bot}", "--maps", "conv5_x",
                                 "--map-size", "0x0"], needles=("--map-size",))
    add("extract.map-size-abc", [*mext, "--model", "{bot}", "--maps", "conv5_x",
                                 "--map-size", "abc"], needles=("--map-size",))
    add("extract.shard-2-of-2", [*mext, "--model", "{bot}", "--shard", "2/2"],
        needles=("--shard",))
    add("extract.shard-0-of-0", [*mext, "--model", "{bot}", "--shard", "0/0"],
        needles=("--shard",))
    add("extract.shard-abc", [*mext, "--model", "{bot}", "--shard", "abc"],
        needles=("--shard",))
    add("extract.trials-99", [*ext, "--trials", "99"], needles=("--trials",))
    add("extract.trials-negative", [*ext, "--trials", "-1"], needles=("--trials",))
    add("extract.trials-abc", [*ext, "--trials", "abc"], needles=("--trials",))
    add("extract.model-truncated", [*mext, "--model", "m.pt"],
        setup=lambda wd, F: truncated(Path(F["bot"]) / "model.pt", wd / "m.pt"),
        fixtures=True)
    add("extract.model-random", [*mext, "--model", "m.pt"],
        setup=lambda wd, F: random_file(wd / "m.pt"))
    add("extract.model-empty-dir", [*mext, "--model", "d"], setup=mkdir("d"))
    add("extract.model-is-store", [*mext, "--model", "{hsv}"])
    add("extract.model-malicious-pickle", [*mext, "--model", "{evilpt}"], check=no_marker)
    add("extract.model-malicious-run-dir", [*mext, "--model", "run"],
        setup=lambda wd, F: (cp(F["bot"], wd / "run"),
                             cp(F["evilpt"], wd / "run" / "model.pt")),
        fixtures=True, check=no_marker)
    add("extract.bow-words-0", ["extract", *tiny, "--features", "bow", "--bow-words", "0",
                                "--out", "o.h5"], needles=("--bow-words",))
    add("extract.bow-seed-negative", ["extract", *tiny, "--features", "bow", "--seed", "-1",
                                      "--out", "o.h5"], needles=("--seed",))
    add("extract.bow-seed-1e20", ["extract", *tiny, "--features", "bow", "--seed", "1e20",
                                  "--out", "o.h5"], needles=("--seed",))
    add("extract.bow-seed-2**32", ["extract", *tiny, "--features", "bow", "--seed",
                                   "4294967296", "--out", "o.h5"], needles=("--seed",))
    add("extract.color-names-missing", ["extract", *tiny, "--features", "bow",
                                        "--color-names", "nope.mat", "--out", "o.h5"],
        needles=("nope.mat",))
    add("extract.color-names-pickle", ["extract", *tiny, "--features", "bow",
                                       "--color-names", "{evilnpy}", "--out", "o.h5"],
        check=no_marker)
    add("extract.codebook-from-no-bow", ["extract", *tiny, "--features", "bow",
                                         "--codebook-from", "{hsv}", "--out", "o.h5"])
    add("extract.dataset-unknown", ["extract", "--dataset", "nosuch", "--root", "{data}",
                                    "--features", "hsv-stripes", "--out", "o.h5"],
        needles=("nosuch",))
    add("extract.root-missing", ["extract", "--dataset", "synthetic", "--root", "nope",
                                 "--option", "name=tiny", "--option", "generate=false",
                                 "--features", "hsv-stripes", "--out", "o.h5"], "clean")
    add("extract.option-name-unknown", ["extract", "--dataset", "synthetic", "--root",
                                        "{data}", "--option", "name=nosuch", "--option",
                                        "generate=false", "--features", "hsv-stripes",
                                        "--out", "o.h5"])
    add("extract.out-exists", ext, setup=copy_fx("hsv", "o.h5"), check=intact("o.h5", "hsv"),
        needles=("--force",))
    add("extract.out-is-directory", [*ext, "--force"], setup=steps(mkdir("o.h5"),
                                                                  write("o.h5/k", "x")),
        check=lambda wd, F, r: None if (wd / "o.h5/k").is_file() else ("data lost", "gone"))
    add("extract.force-then-fails", ["extract", *tiny_wd, "--features", "hsv-stripes",
                                     "--out", "o.h5", "--force"],
        setup=steps(data_copy(), zero_byte_image(), copy_fx("hsv", "o.h5")),
        check=intact("o.h5", "hsv", on_failure=True), fixtures=True)
    add("extract.zero-byte-image", ["extract", *tiny_wd, "--features", "hsv-stripes",
                                    "--out", "o.h5"], needles=(".jpg",),
        setup=steps(data_copy(), zero_byte_image()), fixtures=True)
    add("extract.world-size-2-alone", [*mext, "--model", "{bot}"], "error_or_warn",
        env={"WORLD_SIZE": "2"}, timeout=T)
    add("extract.dist-timeout-negative", [*mext, "--model", "{bot}", "--dist-timeout", "-5"],
        "error", needles=("--dist-timeout",))
    add("extract.dist-timeout-nan", [*mext, "--model", "{bot}", "--dist-timeout", "nan"],
        needles=("--dist-timeout",))
    add("extract.amp-fp16-cpu", [*mext, "--model", "{bot}", "--amp", "fp16"],
        needles=("fp16",))
    add("extract.device-cuda", ["extract", *tiny, "--model", "{bot}", "--device", "cuda",
                                "--out", "o.h5"], needles=("cuda",))
    add("extract.allow-overlap-no-model", [*ext, "--allow-overlap"], new=True)
    add("extract.max-images-0", ["extract", *tiny, "--features", "bow", "--max-images", "0",
                                 "--out", "o.h5"], needles=("--max-images",))

    # ---- train <metric>
    xq = ["train", "xqda", "--store", "{hsv}", "--out", "o.h5"]
    add("xqda.ok", xq, "ok")
    add("xqda.ok-imported", ["train", "xqda", "--store", "{imp}", "--out", "o.h5"], "ok")
    add("xqda.reg-negative", [*xq, "--reg", "-1"], needles=("--reg",))
    add("xqda.reg-nan", [*xq, "--reg", "nan"], needles=("--reg",))
    add("xqda.reg-inf", [*xq, "--reg", "inf"], needles=("--reg",))
    add("xqda.dim-0", [*xq, "--dim", "0"], needles=("--dim",))
    add("xqda.dim-above-feature", [*xq, "--dim", "100000"], "error_or_warn",
        needles=("--dim",))
    add("xqda.dim-2.5", [*xq, "--dim", "2.5"], needles=("--dim",))
    add("xqda.param-abc", [*xq, "--param", "lam=abc"], needles=("lam|--reg",))
    add("xqda.param-unknown", [*xq, "--param", "nosuch=1"], needles=("nosuch",))
    add("xqda.param-no-equals", [*xq, "--param", "reg"], needles=("--param",))
    add("xqda.solver-typo", [*xq, "--solver", "svdd"], needles=("--solver",))
    add("xqda.trials-out-of-range", [*xq, "--trials", "5"], needles=("--trials",))
    add("xqda.feature-unknown", [*xq, "--feature", "nosuch"], needles=("nosuch",))
    add("xqda.store-truncated", ["train", "xqda", "--store", "t.h5", "--out", "o.h5"],
        setup=lambda wd, F: truncated(F["hsv"], wd / "t.h5"), fixtures=True)
    add("xqda.out-is-store", ["train", "xqda", "--store", "s.h5", "--out", "s.h5",
                              "--force"], setup=copy_fx("hsv", "s.h5"),
        check=intact("s.h5", "hsv"))
    add("xqda.force-then-fails", [*xq, "--force", "--feature", "nosuch"],
        setup=copy_fx("xqda", "o.h5"), check=intact("o.h5", "xqda", on_failure=True))
    add("xqda.force-over-store-of-other", ["train", "xqda", "--store", "{hsv}", "--out",
                                           "o.h5", "--force", "--reg", "nan"],
        setup=copy_fx("imp", "o.h5"), check=intact("o.h5", "imp", on_failure=True))
    add("kissme.dim-negative", ["train", "kissme", "--store", "{hsv}", "--out", "o.h5",
                                "--dim", "-3"], needles=("--dim",))
    add("kissme.dim-above-feature", ["train", "kissme", "--store", "{imp}", "--out", "o.h5",
                                     "--dim", "64"], "error_or_warn", needles=("--dim",))
    add("pca.dim-above-feature", ["train", "pca", "--store", "{imp}", "--out", "o.h5",
                                  "--dim", "64"], "error_or_warn", needles=("--dim",))
    add("pca.ok", ["train", "pca", "--store", "{imp}", "--out", "o.h5", "--dim", "8"], "ok")
    add("lfda.reg-nan", ["train", "lfda", "--store", "{imp}", "--out", "o.h5", "--reg",
                         "nan"], needles=("--reg",))
    add("lfda.dim-0", ["train", "lfda", "--store", "{imp}", "--out", "o.h5", "--dim", "0"],
        needles=("--dim",))
    add("klfda.kernel-typo", ["train", "klfda", "--store", "{imp}", "--out", "o.h5",
                              "--param", "kernel=nosuch"], needles=("kernel",))
    add("rpcca.iterations-0", ["train", "rpcca", "--store", "{imp}", "--out", "o.h5",
                               "--iterations", "0"], needles=("--iterations",))
    add("warca.iterations-negative", ["train", "warca", "--store", "{imp}", "--out", "o.h5",
                                      "--iterations", "-1"], needles=("--iterations",))
    add("warca.param-lr-nan", ["train", "warca", "--store", "{imp}", "--out", "o.h5",
                               "--param", "lr=nan"], needles=("lr",))
    add("warca.seed-negative", ["train", "warca", "--store", "{imp}", "--out", "o.h5",
                                "--param", "seed=-1"], needles=("seed",))
    add("warca.seed-1e20", ["train", "warca", "--store", "{imp}", "--out", "o.h5",
                            "--param", "seed=1e20"], needles=("seed",))

    # ---- train bot / pcb / dgvae / dmgnet (refusals come before any training)
    add("bot.ids-per-batch-1", [*bot, "--ids-per-batch", "1"], needles=("--ids-per-batch",),
        timeout=T)
    add("bot.images-per-id-1", [*bot, "--images-per-id", "1"], "error_or_warn",
        needles=("--images-per-id",), timeout=T)
    add("bot.input-size-1x1", [*bot, "--input-size", "1x1"], needles=("--input-size",),
        timeout=T)
    add("bot.input-size-abc", [*bot, "--input-size", "abc"], needles=("--input-size",),
        timeout=T)
    add("bot.input-size-0x128", [*bot, "--input-size", "0x128"], needles=("--input-size",),
        timeout=T)
    add("bot.lr-nan", [*bot, "--lr", "nan"], needles=("--lr",), timeout=T)
    add("bot.lr-negative", [*bot, "--lr", "-1"], needles=("--lr",), timeout=T)
    add("bot.lr-inf", [*bot, "--lr", "inf"], needles=("--lr",), timeout=T)
    # 0 epochs / iterations save the initialised model untrained (issue 31): a valid run
    add("bot.epochs-0", [*bot, "--epochs", "0"], expect="ok", timeout=T)
    add("bot.epochs-negative", [*bot, "--epochs", "-1"], needles=("--epochs",), timeout=T)
    add("bot.seed-negative", [*bot, "--seed", "-1"], needles=("--seed",), timeout=T)
    add("bot.seed-1e20", [*bot, "--seed", "1e20"], needles=("--seed",), timeout=T)
    add("bot.seed-2**32", [*bot, "--seed", "4294967296"], needles=("--seed",), timeout=T)
    add("bot.batch-size-0", [*bot, "--batch-size", "0"], needles=("--batch-size",), timeout=T)
    add("bot.backbone-typo", [*bot, "--backbone", "resnet5"], needles=("--backbone",),
        timeout=T)
    add("bot.init-missing", [*bot, "--init", "nope.pt"], needles=("nope.pt",), timeout=T)
    add("bot.init-malicious-pickle", [*bot, "--init", "{evilpt}"], check=no_marker,
        timeout=T)
    add("bot.init-raw-pickle", [*bot, "--init", "{evilpkl}"], check=no_marker, timeout=T)
    add("bot.init-truncated", [*bot, "--init", "m.pt"], timeout=T,
        setup=lambda wd, F: truncated(Path(F["bot"]) / "model.pt", wd / "m.pt"),
        fixtures=True)
    add("bot.resume-missing", ["train", "bot", "--resume", "nope", "--device", "cpu"],
        needles=("nope",), timeout=T)
    add("bot.resume-empty-dir", ["train", "bot", "--resume", "d", "--device", "cpu"],
        setup=mkdir("d"), timeout=T)
    add("bot.resume-truncated-checkpoint", ["train", "bot", "--resume", "run", "--device",
                                            "cpu", "--quiet"], timeout=T, fixtures=True,
        setup=lambda wd, F: (cp(F["bot"], wd / "run"), truncated(
            Path(F["bot"]) / "checkpoint.pt", wd / "run" / "checkpoint.pt")))
    add("bot.resume-random-checkpoint", ["train", "bot", "--resume", "run", "--device",
                                         "cpu", "--quiet"], timeout=T, fixtures=True,
        setup=lambda wd, F: (cp(F["bot"], wd / "run"),
                             random_file(wd / "run" / "checkpoint.pt", 20000)))
    add("bot.resume-checkpoint-dir", ["train", "bot", "--resume", "run", "--device",
                                      "cpu", "--quiet"], timeout=T, fixtures=True,
        setup=lambda wd, F: (cp(F["bot"], wd / "run"),
                             os.remove(wd / "run" / "checkpoint.pt"),
                             (wd / "run" / "checkpoint.pt").mkdir()))
    add("bot.resume-malicious-checkpoint", ["train", "bot", "--resume", "run", "--device",
                                            "cpu", "--quiet"], timeout=T, fixtures=True,
        setup=lambda wd, F: (cp(F["bot"], wd / "run"),
                             cp(F["evilpt"], wd / "run" / "checkpoint.pt")), check=no_marker)
    add("bot.resume-config-garbage", ["train", "bot", "--resume", "run", "--device",
                                      "cpu", "--quiet"], timeout=T, fixtures=True,
        setup=lambda wd, F: (cp(F["bot"], wd / "run"),
                             (wd / "run" / "config.json").write_text("{garbage")))
    add("bot.out-exists", bot, setup=copy_fx("bot", "run"), check=intact("run", "bot"),
        needles=("--force",), timeout=T)
    add("bot.force-then-fails", ["train", "bot", "--preset", "tiny", *tiny_wd, "--device",
                                 "cpu", "--quiet", "--ids-per-batch", "4", "--images-per-id",
                                 "4", "--out", "run", "--force", "--epochs", "1",
                                 "--train-split", "all"],
        setup=steps(data_copy(), zero_byte_image(), copy_fx("bot", "run")),
        check=intact("run", "bot", on_failure=True), fixtures=True, timeout=T,
        note="a 0-byte image makes the new run fail; the old run directory must survive")
    add("bot.out-is-file", [*bot[:-1], "f"], setup=write("f", "precious"), timeout=T,
        check=lambda wd, F, r: None if (wd / "f").is_file() and (wd / "f").read_text()
        == "precious" else ("data lost", "file f replaced"))
    add("bot.world-size-2-alone", [*bot, "--epochs", "1", "--max-iters", "1"],
        "error_or_warn", env={"WORLD_SIZE": "2"}, timeout=T)
    add("bot.lr-steps-unsorted", [*bot, "--lr-steps", "70,40"], "error_or_warn",
        needles=("--lr-steps",), timeout=T)
    add("bot.lr-steps-abc", [*bot, "--lr-steps", "abc"], needles=("--lr-steps",), timeout=T)
    add("bot.warmup-factor-negative", [*bot, "--warmup-factor", "-1"],
        needles=("--warmup-factor",), timeout=T)
    add("bot.label-smooth-1.5", [*bot, "--label-smooth", "1.5"], needles=("--label-smooth",),
        timeout=T)
    add("bot.random-erasing-2", [*bot, "--random-erasing", "2"],
        needles=("--random-erasing",), timeout=T)
    add("bot.triplet-margin-nan", [*bot, "--triplet-margin", "nan"],
        needles=("--triplet-margin",), timeout=T)
    add("bot.max-iters-0", [*bot, "--max-iters", "0"], expect="ok", timeout=T)
    add("bot.max-images-0", [*bot, "--max-images", "0"], needles=("--max-images",),
        timeout=T)
    add("bot.amp-fp16-cpu", [*bot, "--amp", "fp16"], needles=("fp16",), timeout=T)
    add("bot.train-cams-9", [*bot, "--train-cams", "9"], needles=("--train-cams",),
        timeout=T)
    add("bot.checkpoint-every-0", [*bot, "--checkpoint-every", "0"],
        needles=("--checkpoint-every",), timeout=T)
    add("bot.log-every-negative", [*bot, "--log-every", "-1"], needles=("--log-every",),
        timeout=T)
    add("bot.dataset-unknown", ["train", "bot", "--dataset", "nosuch", "--root", "{data}",
                                "--preset", "tiny", "--out", "run"], needles=("nosuch",),
        timeout=T)
    add("bot.option-unknown", [*bot, "--option", "nosuch=1"], needles=("nosuch",), timeout=T)
    add("bot.preset-typo", ["train", "bot", "--preset", "tin", *tiny, "--out", "run"],
        needles=("--preset",), timeout=T)
    add("bot.workers-negative", [*bot, "--workers", "-2"], needles=("--workers",), timeout=T)
    add("pcb.parts-0", ["train", "pcb", "--preset", "tiny", *tiny, "--device", "cpu",
                        "--out", "run", "--parts", "0"], needles=("--parts",), timeout=T)
    add("dgvae.epochs-wrong-count", ["train", "dgvae", "--preset", "tiny", "--dataset",
                                     "synthetic", "--root", "{data}", "--option", "name=tiny",
                                     "--device", "cpu", "--out", "run", "--epochs", "1,1"],
        needles=("--epochs",), timeout=T)
    add("dgvae.stage-4", ["train", "dgvae", "--preset", "tiny", "--dataset", "synthetic",
                          "--root", "{data}", "--option", "name=tiny", "--device", "cpu",
                          "--out", "run", "--stages", "4"], needles=("--stages",), timeout=T)
    add("dmgnet.sources-unknown", ["train", "dmgnet", "--preset", "tiny", "--root", "{data}",
                                   "--sources", "nosuch", "--device", "cpu", "--out", "run"],
        needles=("nosuch",), timeout=T)

    # ---- fit-pooling
    fp = ["fit-pooling", "cdpcf", "--store", "{hsv}", "--out", "o.h5"]
    add("cdpcf.ok", fp, "ok")
    add("cdpcf.K-0", [*fp, "--K", "0"], needles=("--K",))
    add("cdpcf.E-negative", [*fp, "--E", "-1"], needles=("--E",))
    add("cdpcf.G-0", [*fp, "--G", "0"], needles=("--G",))
    add("cdpcf.grid-0x0", [*fp, "--grid", "0x0"], needles=("--grid",))
    add("cdpcf.grid-abc", [*fp, "--grid", "abc"], needles=("--grid",))
    add("cdpcf.train-ids-too-many", [*fp, "--train-ids", "1000"], needles=("--train-ids",))
    add("cdpcf.repeats-0", [*fp, "--train-ids", "3", "--repeats", "0"],
        needles=("--repeats",))
    add("cdpcf.layers-unknown", [*fp, "--layers", "conv9_x"], needles=("conv9_x",))
    add("cdpcf.no-convmaps", ["fit-pooling", "cdpcf", "--store", "{imp}", "--out", "o.h5"])
    add("cdpcf.dim-above", [*fp, "--dim", "100000"], "error_or_warn", needles=("--dim",))
    add("cdpcf.reg-nan", [*fp, "--reg", "nan"], needles=("--reg",))
    add("cdpcf.seed-negative", [*fp, "--seed", "-1"], needles=("--seed",))
    add("cdpcf.seed-1e20", [*fp, "--seed", "1e20"], needles=("--seed",))
    add("dpcf.param-K-abc", ["fit-pooling", "dpcf", "--store", "{hsv}", "--out", "o.h5",
                             "--param", "K=abc"], needles=("K",))
    add("avgp.G-nan", ["fit-pooling", "avgp", "--store", "{hsv}", "--out", "o.h5", "--G",
                       "nan"], needles=("--G",))

    # ---- adapt
    add("norm.ok", ["adapt", "norm", "--store", "{botstore}", "--out", "o.h5"], "ok")
    add("norm.ok-imported", ["adapt", "norm", "--store", "{imp}", "--out", "o.h5"], "clean")
    add("dart3lite.ok", [*dl, "--steps", "2"], "ok")
    add("dart3lite.param-tau-abc", [*dl, "--param", "tau=abc"], needles=("tau",))
    add("dart3lite.param-steps-2.5", [*dl, "--param", "steps=2.5"], needles=("steps",))
    add("dart3lite.steps-2.5", [*dl, "--steps", "2.5"], needles=("--steps",))
    add("dart3lite.steps-0", [*dl, "--steps", "0"], needles=("--steps",))
    add("dart3lite.param-episodic-maybe", [*dl, "--param", "episodic=maybe"],
        needles=("episodic",))
    add("dart3lite.param-unknown", [*dl, "--param", "nosuch=1"], needles=("nosuch",))
    add("dart3lite.lr-nan", [*dl, "--lr", "nan"], needles=("--lr",))
    add("dart3lite.lr-negative", [*dl, "--lr", "-1"], needles=("--lr",))
    add("dart3lite.lr-1e30", [*dl, "--lr", "1e30", "--steps", "5"], needles=("lr",))
    add("dart3lite.tau-0", [*dl, "--tau", "0"], needles=("--tau",))
    add("dart3lite.tau-inf", [*dl, "--tau", "inf"], needles=("--tau",))
    add("dart3lite.trial-5", [*dl, "--trial", "5"], needles=("--trial",))
    add("dart3lite.trial-negative", [*dl, "--trial", "-1"], needles=("--trial",))
    add("dart3lite.seed-negative", [*dl, "--seed", "-1"], needles=("--seed",))
    add("dart3lite.seed-1e20", [*dl, "--seed", "1e20"], needles=("--seed",))
    add("dart3lite.batch-size-0", [*dl, "--batch-size", "0"], needles=("--batch-size",))
    add("dart3lite.emit-typo", [*dl, "--emit", "pst"], needles=("--emit",))
    add("dart3lite.order-typo", [*dl, "--order", "random"], needles=("--order",))
    add("dart3lite.query-cams-9", [*dl, "--query-cams", "9"], needles=("--query-cams",))
    add("dart3lite.query-cams-abc", [*dl, "--query-cams", "a,b"], needles=("--query-cams",))
    add("dart3lite.feature-unknown", [*dl, "--feature", "nosuch"], needles=("nosuch",))
    add("dart3lite.topk-0", [*dl, "--topk", "0"], needles=("--topk",))
    add("dart3lite.grounding-negative", [*dl, "--grounding", "-1"],
        needles=("--grounding",))
    add("dart3lite.store-truncated", ["adapt", "dart3-lite", "--store", "t.h5", "--out",
                                      "o.h5"],
        setup=lambda wd, F: truncated(F["botstore"], wd / "t.h5"), fixtures=True)
    add("dart3lite.out-is-input", ["adapt", "dart3-lite", "--store", "s.h5", "--out", "s.h5",
                                   "--force"], setup=copy_fx("botstore", "s.h5"),
        check=intact("s.h5", "botstore"))
    add("dart3lite.out-hard-link-of-input", ["adapt", "dart3-lite", "--store", "s.h5",
                                             "--out", "l.h5", "--force"], fixtures=True,
        setup=lambda wd, F: (cp(F["botstore"], wd / "s.h5"), os.link(wd / "s.h5", wd / "l.h5")),
        check=intact("s.h5", "botstore"))
    add("dart3lite.force-then-diverges", [*dl, "--force", "--lr", "1e30", "--steps", "5"],
        setup=copy_fx("imp", "o.h5"), check=intact("o.h5", "imp", on_failure=True))
    add("dart3lite.out-exists", dl, setup=copy_fx("imp", "o.h5"), check=intact("o.h5", "imp"),
        needles=("--force",))
    add("dart3.distance-typo", ["adapt", "dart3", "--store", "{botstore}", "--out", "o.h5",
                                "--distance", "cos"], needles=("--distance",))
    add("dart3.full-needs-model", ["adapt", "dart3", "--store", "{botstore}", "--out", "o.h5",
                                   "--mode", "full"], needles=("--model",))
    add("tent.no-model", ["adapt", "tent", "--store", "{botstore}", "--out", "o.h5"],
        needles=("--model",))
    add("tent.model-truncated", ["adapt", "tent", "--store", "{botstore}", "--out", "o.h5",
                                 "--model", "m.pt", "--device", "cpu"],
        setup=lambda wd, F: truncated(Path(F["bot"]) / "model.pt", wd / "m.pt"),
        fixtures=True)
    add("tent.model-malicious", ["adapt", "tent", "--store", "{botstore}", "--out", "o.h5",
                                 "--model", "{evilpt}", "--device", "cpu"], check=no_marker)
    add("temp.model-raw-pickle", ["adapt", "temp", "--store", "{botstore}", "--out", "o.h5",
                                  "--model", "{evilpkl}", "--device", "cpu"], check=no_marker)
    add("norm.foreign-option-warns", ["adapt", "norm", "--store", "{botstore}", "--out",
                                      "o.h5", "--tau", "50"], "warn", needles=("--tau",))
    add("norm.old-in-flag", ["adapt", "norm", "--in", "{botstore}", "--out", "o.h5"],
        needles=("--in",))
    add("norm.eps-negative", ["adapt", "norm", "--store", "{botstore}", "--out", "o.h5",
                              "--eps", "-1"], needles=("--eps",))

    # ---- eval
    ev = ["eval", "--store", "{hsv}", "--quiet"]
    add("eval.ok", ev, "ok")
    add("eval.ok-imported", ["eval", "--store", "{imp}", "--quiet"], "ok")
    add("eval.ok-model", [*ev, "--model", "{xqda}"], "ok")
    add("eval.same-store-twice", ["eval", "--store", "{hsv}", "--store", "{hsv}", "--quiet"])
    add("eval.hard-link-twice", ["eval", "--store", "a.h5", "--store", "b.h5", "--quiet",
                                 "--json", "r.json"], fixtures=True,
        setup=lambda wd, F: (cp(F["hsv"], wd / "a.h5"), os.link(wd / "a.h5", wd / "b.h5")),
        check=mean_of_duplicates)
    add("eval.symlink-twice", ["eval", "--store", "a.h5", "--store", "b.h5", "--quiet"],
        fixtures=True, setup=lambda wd, F: (cp(F["hsv"], wd / "a.h5"),
                                            os.symlink("a.h5", wd / "b.h5")))
    add("eval.pattern-no-match", ["eval", "--store", "nomatch*.h5"])
    add("eval.max-rank-0", [*ev, "--max-rank", "0"], needles=("--max-rank",))
    add("eval.max-rank-negative", [*ev, "--max-rank", "-1"], needles=("--max-rank",))
    add("eval.max-rank-1e9", [*ev, "--max-rank", "1e9"], needles=("--max-rank",))
    add("eval.max-rank-100000", [*ev, "--max-rank", "100000"], needles=("--max-rank",))
    add("eval.trials-9", [*ev, "--trials", "9"], needles=("--trials",))
    add("eval.trials-abc", [*ev, "--trials", "abc"], needles=("--trials",))
    add("eval.protocol-typo", [*ev, "--protocol", "markt"], needles=("--protocol",))
    add("eval.protocol-sysu-on-market", [*ev, "--protocol", "sysu"], needles=("sysu",))
    add("eval.distance-typo", [*ev, "--distance", "cosin"], needles=("--distance",))
    add("eval.rerank-k1-0", [*ev, "--rerank", "--rerank-k1", "0"], needles=("--rerank-k1",))
    add("eval.rerank-lambda-2", [*ev, "--rerank", "--rerank-lambda", "2"],
        needles=("--rerank-lambda",))
    add("eval.rerank-lambda-nan", [*ev, "--rerank", "--rerank-lambda", "nan"],
        needles=("--rerank-lambda",))
    add("eval.block-size-negative", [*ev, "--block-size", "-1"], needles=("--block-size",))
    add("eval.gallery-block-negative", [*ev, "--gallery-block", "-1"],
        needles=("--gallery-block",))
    add("eval.nmi-k-abc", [*ev, "--nmi", "--nmi-k", "abc"], needles=("--nmi-k",))
    add("eval.nmi-k-0", [*ev, "--nmi", "--nmi-k", "0"], needles=("--nmi-k",))
    add("eval.seed-negative", [*ev, "--seed", "-1"], needles=("--seed",))
    add("eval.seed-1e20", [*ev, "--seed", "1e20"], needles=("--seed",))
    add("eval.precision-typo", [*ev, "--precision", "fp8"], needles=("--precision",))
    add("eval.stream-on-rerank", [*ev, "--stream", "on", "--rerank"], needles=("--stream",))
    add("eval.query-cams-9", [*ev, "--query-cams", "9"], needles=("--query-cams",))
    add("eval.query-cams-abc", [*ev, "--query-cams", "abc"], needles=("--query-cams",))
    add("eval.auc-max-rank-0", [*ev, "--full-cmc", "--auc-max-rank", "0"],
        needles=("--auc-max-rank",))
    add("eval.parts-0", [*ev, "--feat-norm", "parts", "--parts", "0"], needles=("--parts",))
    add("eval.device-cuda", [*ev, "--device", "cuda"], needles=("cuda",))
    add("eval.model-is-store", [*ev, "--model", "{hsv}"])
    add("eval.model-truncated", [*ev, "--model", "t.h5"],
        setup=lambda wd, F: truncated(F["xqda"], wd / "t.h5"), fixtures=True)
    add("eval.model-other-dim", ["eval", "--store", "{imp}", "--model", "{xqda}", "--quiet"])
    add("eval.store-truncated", ["eval", "--store", "t.h5"],
        setup=lambda wd, F: truncated(F["hsv"], wd / "t.h5"), fixtures=True)
    add("eval.store-directory", ["eval", "--store", "d.h5"], setup=mkdir("d.h5"))
    add("eval.json-exists", [*ev, "--json", "r.json"], setup=copy_fx("botjson", "r.json"),
        check=intact("r.json", "botjson"), needles=("--force",))
    add("eval.json-csv-same", [*ev, "--json", "r.out", "--csv", "r.out"])
    add("eval.json-is-store", ["eval", "--store", "s.h5", "--json", "s.h5", "--force"],
        setup=copy_fx("hsv", "s.h5"), check=intact("s.h5", "hsv"))
    add("eval.json-is-directory", [*ev, "--json", "d", "--force"],
        setup=steps(mkdir("d"), write("d/k", "x")),
        check=lambda wd, F, r: None if (wd / "d/k").is_file() else ("data lost", "gone"))
    add("eval.json-under-file", [*ev, "--json", "blocker/r.json"], setup=write("blocker", "x"))
    add("eval.force-then-fails", [*ev, "--json", "r.json", "--force", "--trials", "9"],
        setup=copy_fx("botjson", "r.json"), check=intact("r.json", "botjson", on_failure=True))
    add("eval.pid0-queries", ["eval", "--store", "z.h5", "--quiet", "--json", "r.json"],
        "ok", pre=[["store", "import", "--npz", "a.npz", "--out", "z.h5"]],
        setup=npz("a.npz", person0_in_test, pid_start=0), check=zero_based_queries_kept,
        note="person 0 imported from 0-based pids: its queries must not vanish without a "
        "warning, at the import or at the eval")

    # ---- plot
    add("cmc.ok", ["plot", "cmc", "{hsvjson}", "{botjson}", "--out", "c.png"], "ok")
    add("cmc.string-map", ["plot", "cmc", "r.json", "--out", "c.png"], needles=("mAP",),
        setup=result_json("r.json", set_key("mAP", "0.5")), fixtures=True)
    add("cmc.more-labels", ["plot", "cmc", "{hsvjson}", "--label", "a", "--label", "b",
                            "--out", "c.png"], needles=("--label",))
    add("cmc.max-rank-0", ["plot", "cmc", "{hsvjson}", "--max-rank", "0", "--out", "c.png"],
        needles=("--max-rank",))
    add("cmc.max-rank-negative", ["plot", "cmc", "{hsvjson}", "--max-rank", "-5", "--out",
                                  "c.png"], needles=("--max-rank",))
    add("cmc.missing", ["plot", "cmc", "nope.json", "--out", "c.png"], needles=("nope.json",))
    add("cmc.truncated", ["plot", "cmc", "t.json", "--out", "c.png"], needles=("t.json",),
        setup=lambda wd, F: truncated(F["hsvjson"], wd / "t.json"), fixtures=True)
    add("cmc.json-list", ["plot", "cmc", "l.json", "--out", "c.png"], setup=write("l.json",
                                                                                "[]"))
    add("cmc.json-null", ["plot", "cmc", "n.json", "--out", "c.png"],
        setup=write("n.json", "null"))
    add("cmc.nan-cmc", ["plot", "cmc", "r.json", "--out", "c.png"],
        setup=result_json("r.json", lambda d: d["cmc"].__setitem__(0, float("nan"))),
        fixtures=True)
    add("cmc.cmc-strings", ["plot", "cmc", "r.json", "--out", "c.png"],
        setup=result_json("r.json", lambda d: d.__setitem__("cmc", ["a"] * len(d["cmc"]))),
        fixtures=True)
    add("cmc.no-cmc-key", ["plot", "cmc", "r.json", "--out", "c.png"],
        setup=result_json("r.json", lambda d: d.pop("cmc")), fixtures=True)
    add("cmc.store-given", ["plot", "cmc", "{hsv}", "--out", "c.png"])
    add("cmc.bad-extension", ["plot", "cmc", "{hsvjson}", "--out", "c.txt"],
        needles=("c.txt",))
    add("cmc.out-exists", ["plot", "cmc", "{hsvjson}", "--out", "c.png"],
        setup=write("c.png", b"old figure"), check=lambda wd, F, r: None if (
            wd / "c.png").read_bytes() == b"old figure" else ("data lost", "c.png replaced"),
        needles=("--force",))
    add("cmc.out-is-input", ["plot", "cmc", "r.png", "--out", "r.png", "--force"],
        setup=copy_fx("hsvjson", "r.png"), check=intact("r.png", "hsvjson"))
    add("tsne.ok", ["plot", "tsne", "--store", "{imp}", "--out", "t.png", "--max-points",
                    "120"], "ok")
    add("tsne.perplexity-0", ["plot", "tsne", "--store", "{imp}", "--out", "t.png",
                              "--perplexity", "0"], needles=("--perplexity",))
    add("tsne.perplexity-nan", ["plot", "tsne", "--store", "{imp}", "--out", "t.png",
                                "--perplexity", "nan"], needles=("--perplexity",))
    add("tsne.perplexity-above-points", ["plot", "tsne", "--store", "{imp}", "--out",
                                         "t.png", "--perplexity", "500", "--max-points",
                                         "50"], "error_or_warn", needles=("--perplexity",))
    add("tsne.max-points-0", ["plot", "tsne", "--store", "{imp}", "--out", "t.png",
                              "--max-points", "0"], needles=("--max-points",))
    add("tsne.color-by-typo", ["plot", "tsne", "--store", "{imp}", "--out", "t.png",
                               "--color-by", "camera"], needles=("--color-by",))
    add("tsne.split-typo", ["plot", "tsne", "--store", "{imp}", "--out", "t.png", "--split",
                            "qeury"], needles=("qeury",))
    add("tsne.compare-other-rows", ["plot", "tsne", "--store", "{imp}", "--compare",
                                    "{botstore}", "--out", "t.png"], needles=("--compare",))
    add("ranklist.queries-0", ["plot", "ranklist", "--store", "{hsv}", "--out", "r.png",
                               "--queries", "0", "--images-root", "{data}/synthetic/tiny"],
        needles=("--queries",))
    add("ranklist.query-index-out", ["plot", "ranklist", "--store", "{hsv}", "--out",
                                     "r.png", "--query-index", "99999"],
        needles=("--query-index",))
    add("ranklist.max-rank-0", ["plot", "ranklist", "--store", "{hsv}", "--out", "r.png",
                                "--max-rank", "0"], needles=("--max-rank",))
    add("ranklist.trial-9", ["plot", "ranklist", "--store", "{hsv}", "--out", "r.png",
                             "--trial", "9"], needles=("--trial",))
    add("ranklist.no-image-paths", ["plot", "ranklist", "--store", "{imp}", "--out",
                                    "r.png"], "clean")
    add("ranklist.images-root-wrong", ["plot", "ranklist", "--store", "{hsv}", "--out",
                                       "r.png", "--images-root", "."], "clean")
    add("training.ok", ["plot", "training", "--model", "{bot}", "--out", "t.png"], "ok")
    add("training.no-metrics", ["plot", "training", "--model", "d", "--out", "t.png"],
        setup=mkdir("d"))
    add("training.metrics-garbage", ["plot", "training", "--model", "run", "--out", "t.png"],
        setup=lambda wd, F: (cp(F["bot"], wd / "run"),
                             random_file(wd / "run" / "metrics.csv", 3000)), fixtures=True)
    add("training.metrics-empty", ["plot", "training", "--model", "run", "--out", "t.png"],
        setup=lambda wd, F: (cp(F["bot"], wd / "run"),
                             (wd / "run" / "metrics.csv").write_text("")), fixtures=True)
    add("training.run-dir-is-file", ["plot", "training", "--model", "f", "--out", "t.png"],
        setup=write("f", "x"))
    add("distances.ok", ["plot", "distances", "--store", "{hsv}", "--out", "d.png"], "ok")
    add("distances.bins-0", ["plot", "distances", "--store", "{hsv}", "--out", "d.png",
                             "--bins", "0"], needles=("--bins",))
    add("distances.max-pairs-0", ["plot", "distances", "--store", "{hsv}", "--out", "d.png",
                                  "--max-pairs", "0"], needles=("--max-pairs",))
    add("distances.trial-9", ["plot", "distances", "--store", "{hsv}", "--out", "d.png",
                              "--trial", "9"], needles=("--trial",))
    add("weightmaps.ok", ["plot", "weight-maps", "--model", "{cdpcf}", "--out", "w.png"],
        "ok")
    add("weightmaps.not-cdpcf", ["plot", "weight-maps", "--model", "{xqda}", "--out",
                                 "w.png"])
    add("weightmaps.num-maps-0", ["plot", "weight-maps", "--model", "{cdpcf}", "--out",
                                  "w.png", "--num-maps", "0"], needles=("--num-maps",))
    add("weightmaps.figure-typo", ["plot", "weight-maps", "--model", "{cdpcf}", "--out",
                                   "w.png", "--figure", "mpas"], needles=("--figure",))
    add("weightmaps.layers-unknown", ["plot", "weight-maps", "--model", "{cdpcf}", "--out",
                                      "w.png", "--layers", "conv9_x"], needles=("conv9_x",))
    add("weightmaps.trial-9", ["plot", "weight-maps", "--model", "{cdpcf}", "--out",
                               "w.png", "--trial", "9"], needles=("--trial",))

    # ---- demo
    add("demo.preset-typo", ["demo", "--preset", "tinyy", "--out", "o"], needles=("--preset",))
    add("demo.seed-negative", ["demo", "--preset", "tiny", "--seed", "-1", "--out", "o"],
        needles=("--seed",))
    add("demo.out-is-file", ["demo", "--preset", "tiny", "--out", "f", "--root", "data"],
        setup=write("f", "precious"), timeout=T,
        check=lambda wd, F, r: None if (wd / "f").is_file() and (wd / "f").read_text()
        == "precious" else ("data lost", "file f replaced"))

    names = [c.name for c in C]
    assert len(names) == len(set(names)), [n for n in names if names.count(n) > 1]
    assert EXTENDED <= set(names), EXTENDED - set(names)
    for c in C:
        c.extended = c.name in EXTENDED
    return C


#: cases run only with --extended (variants of a core case: same command, same kind of input)
EXTENDED = frozenset("""
synth.seed-2**32 synth.option-abc synth.option-inf synth.option-negative-ids
synth.option-no-equals synth.option-nan check.trial-negative check.images-csv-header-only
check.split-cache-null-trial check.option-unknown check.meta-json-garbage info.random-bytes
info.json-given info.directory info.zero-byte import.random-npz import.npz-directory
import.inf-features import.features-3d import.pid-strings import.camid-base-negative
import.camid-base-abc import.camid-negative import.csv-dot-column import.csv-pid-2**63+5
import.csv-short import.csv-binary import.npy-arrays-ok import.npy-pid-short import.two-sources
import.name-empty import.name-dot import.distance-typo import.out-missing-folder
import.positional-out import.csv-empty import.zero-rows import.length-mismatch
import.camid-base-5 import.pid-minus-5 import.csv-no-split import.out-under-file
import.features-1d merge.positional-out extract.batch-size-negative
extract.batch-size-1e9 extract.workers-negative extract.maps-dtype extract.map-size-abc
extract.shard-0-of-0 extract.shard-abc extract.trials-negative extract.trials-abc
extract.model-random extract.bow-seed-2**32 extract.bow-seed-1e20 extract.codebook-from-no-bow
extract.root-missing extract.option-name-unknown extract.dist-timeout-nan extract.device-cuda
extract.max-images-0 extract.dist-timeout-negative extract.amp-fp16-cpu extract.model-empty-dir
xqda.reg-inf xqda.dim-2.5 xqda.param-no-equals xqda.solver-typo xqda.feature-unknown
xqda.ok-imported xqda.force-over-store-of-other xqda.param-unknown xqda.trials-out-of-range
kissme.dim-negative lfda.dim-0 warca.iterations-negative warca.seed-1e20 pca.ok
rpcca.iterations-0 bot.input-size-abc bot.input-size-0x128 bot.lr-negative bot.lr-inf
bot.epochs-negative bot.seed-2**32 bot.batch-size-0 bot.backbone-typo bot.init-raw-pickle
bot.init-truncated bot.resume-random-checkpoint bot.resume-checkpoint-dir
bot.resume-config-garbage bot.lr-steps-abc bot.warmup-factor-negative bot.random-erasing-2
bot.triplet-margin-nan bot.max-images-0 bot.checkpoint-every-0 bot.log-every-negative
bot.option-unknown bot.preset-typo bot.workers-negative bot.out-is-file bot.amp-fp16-cpu
bot.train-cams-9 bot.dataset-unknown bot.resume-empty-dir cdpcf.E-negative cdpcf.grid-abc
cdpcf.seed-1e20 dpcf.param-K-abc cdpcf.G-0 cdpcf.repeats-0 cdpcf.reg-nan dart3lite.steps-0
dart3lite.lr-negative dart3lite.tau-inf dart3lite.trial-negative dart3lite.seed-1e20
dart3lite.emit-typo dart3lite.order-typo dart3lite.query-cams-abc dart3lite.topk-0
dart3lite.grounding-negative dart3lite.store-truncated dart3lite.out-exists norm.ok-imported
tent.model-truncated norm.eps-negative norm.old-in-flag dart3.distance-typo
dart3lite.batch-size-0 dart3lite.seed-negative dart3lite.param-unknown dart3lite.lr-nan
dart3.full-needs-model eval.ok-imported eval.symlink-twice eval.max-rank-negative
eval.max-rank-1e9 eval.trials-abc eval.distance-typo eval.rerank-lambda-nan
eval.gallery-block-negative eval.nmi-k-0 eval.seed-1e20 eval.precision-typo eval.query-cams-abc
eval.parts-0 eval.device-cuda eval.model-truncated eval.store-directory eval.json-under-file
eval.block-size-negative eval.nmi-k-abc eval.auc-max-rank-0 eval.stream-on-rerank
eval.protocol-typo eval.rerank-k1-0 eval.model-other-dim eval.ok-model cmc.max-rank-negative
cmc.json-null cmc.cmc-strings cmc.no-cmc-key cmc.store-given cmc.bad-extension cmc.max-rank-0
cmc.missing tsne.perplexity-nan tsne.color-by-typo tsne.split-typo tsne.max-points-0
ranklist.images-root-wrong training.metrics-empty training.run-dir-is-file distances.trial-9
weightmaps.figure-typo weightmaps.layers-unknown top.bare-group data-info.ok methods.bad-stage
""".split())


def _savemat(path: Path) -> None:
    from scipy.io import savemat
    savemat(path, npz_arrays())


def _flip_records(src, dst: Path) -> None:
    """A copy of a store with one byte of its ``records/pid`` data changed."""
    import h5py
    cp(src, dst)
    with h5py.File(src, "r") as f:
        offset = f["records/pid"].id.get_offset()
    if offset is None:
        raise RuntimeError("records/pid is not contiguous: no byte to flip")
    data = bytearray(dst.read_bytes())
    data[offset] ^= 0x01
    dst.write_bytes(bytes(data))


# --------------------------------------------------------------------------- running

def run_case(case: Case, python: str, tree: Path, F: dict, base: Path, keep_dirs: bool
             ) -> dict:
    wd = base / re.sub(r"[^\w.-]", "_", case.name)
    wd.mkdir(parents=True)
    ctx = {"wd": str(wd), **(F or {})}
    record = {"name": case.name, "command": case.command, "expect": case.expect,
              "new_flag": case.new, "extended": case.extended, "note": case.note}
    try:
        if case.setup is not None:
            case.setup(wd, F)
        for pre in case.pre:
            res = run_reid(python, tree, [str(a).format_map(ctx) for a in pre], wd, 300)
            with open(wd / "pre.stderr", "a") as log:          # read by checks
                log.write(res.stderr)
            if res.rc != 0:
                raise RuntimeError(f"pre-step `reid {' '.join(map(str, pre))}` exit "
                                   f"{res.rc}: {res.stderr[-500:]}")
        argv = [str(a).format_map(ctx) for a in case.args]
    except Exception as exc:                      # the battery's own preparation
        record.update({"class": "setup error", "detail": f"{type(exc).__name__}: {exc}",
                       "argv": case.args, "rc": None, "stderr_tail": "", "stdout_tail": "",
                       "seconds": 0.0})
        return record
    res = run_reid(python, tree, argv, wd, case.timeout, case.env)
    extra = None
    if case.check is not None:
        try:
            extra = case.check(wd, F, res)
        except Exception as exc:
            extra = None
            record["check_error"] = f"{type(exc).__name__}: {exc}"
    cls, detail = classify(case, res, extra)
    record.update({"class": cls, "detail": detail,
                   "argv": ["reid", *[a.replace(str(wd) + "/", "").replace(str(base.parent), "$FX")
                                      for a in argv]],
                   "env": case.env, "rc": res.rc, "seconds": round(res.seconds, 2),
                   "stderr_tail": res.stderr[-1500:], "stdout_tail": res.stdout[-500:]})
    if not keep_dirs:
        shutil.rmtree(wd, ignore_errors=True)
    return record


def select(all_cases: list[Case], only: str | None, extended: bool = False) -> list[Case]:
    """The core cases (all with ``extended``), or those matching ``only`` (any tier)."""
    if not only:
        return [c for c in all_cases if extended or not c.extended]
    pats = [p.strip() for p in only.split(",") if p.strip()]
    return [c for c in all_cases
            if any(fnmatch.fnmatch(c.name, p) or p in c.name for p in pats)]


def run_battery(tree: Path, python: str = sys.executable, only: str | None = None,
                workers: int = 2, keep: bool = False, log=print,
                base: Path | None = None, extended: bool = False) -> dict:
    tree = Path(tree).resolve()
    chosen = select(cases(), only, extended)
    own_base = base is None
    base = Path(tempfile.mkdtemp(prefix="reid-battery-")) if own_base else Path(base)
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    t0 = time.monotonic()
    try:
        F = {}
        if any(c.needs_fixtures() for c in chosen):
            log(f"building fixtures with {tree} …")
            F = build_fixtures(python, tree, base / "fx", log)
        runs = base / "cases"
        runs.mkdir()
        results: list[dict] = []
        lock = threading.Lock()

        def one(case):
            record = run_case(case, python, tree, F, runs, keep)
            with lock:
                results.append(record)
                log(f"[{len(results):3d}/{len(chosen)}] {record['class']:<20} "
                    f"{case.name} ({record['seconds']} s)")
            return record

        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            list(pool.map(one, chosen))
    finally:
        if own_base and not keep:
            shutil.rmtree(base, ignore_errors=True)
    order = {c.name: i for i, c in enumerate(chosen)}
    results.sort(key=lambda r: order[r["name"]])
    return summarize(results, tree, started, time.monotonic() - t0)


def summarize(results: list[dict], tree, started, seconds) -> dict:
    classes = list(CLASSES) + (["setup error"] if any(r["class"] == "setup error"
                                                       for r in results) else [])
    counts = {k: sum(r["class"] == k for r in results) for k in classes}
    by_command: dict[str, dict] = {}
    for r in results:
        row = by_command.setdefault(r["command"], {k: 0 for k in classes})
        row[r["class"]] += 1
    return {"tree": str(tree), "started": started, "seconds": round(seconds, 1),
            "num_cases": len(results), "counts": counts, "by_command": by_command,
            "new_flag_cases": [r["name"] for r in results if r["new_flag"]],
            "cases": results}


SHORT = {"handled": "ok", "traceback": "tb", "accepted silently": "acc", "unclear message":
         "unclr", "data lost": "lost", "silent wrong result": "wrong", "hang": "hang",
         "wrong exit code": "exit", "setup error": "setup"}


def table(summary: dict) -> str:
    classes = list(summary["counts"])
    lines = ["| class | cases |", "|---|---:|"]
    lines += [f"| {k} | {v} |" for k, v in summary["counts"].items()]
    lines += [f"| **total** | **{summary['num_cases']}** |", ""]
    head = "| command | " + " | ".join(SHORT[k] for k in classes) + " | total |"
    lines += [head, "|---|" + "---:|" * (len(classes) + 1)]
    for cmd in sorted(summary["by_command"]):
        row = summary["by_command"][cmd]
        lines.append(f"| {cmd} | " + " | ".join(str(row[k] or "") for k in classes)
                     + f" | {sum(row.values())} |")
    return "\n".join(lines)


def markdown(summary: dict) -> str:
    out = [f"# reid fault battery — {summary['tree']}", "",
           f"{summary['num_cases']} cases, started {summary['started']}, "
           f"{summary['seconds']} s. Columns: " + ", ".join(
               f"{SHORT[k]} = {k}" for k in summary["counts"]) + ".", "",
           table(summary), "", "## Cases using a flag that the fix adds", ""]
    for r in summary["cases"]:
        if r["new_flag"]:
            out.append(f"- `{r['name']}`: {r['class']} ({r['detail'] or 'as right'})")
    out += ["", "## Cases not handled", ""]
    for r in summary["cases"]:
        if r["class"] == "handled":
            continue
        tail = [l for l in r["stderr_tail"].strip().splitlines() if l.strip()][-3:]
        out.append(f"- **{r['class']}** `{r['name']}`{' (new flag)' if r['new_flag'] else ''}"
                   f": `{' '.join(r['argv'])}`"
                   + (f" (env {r['env']})" if r.get("env") else "")
                   + f" — {r['detail']}; expect {r['expect']}"
                   + (f" ({r['note']})" if r.get("note") else ""))
        for line in tail:
            out.append(f"    - `{line[:300]}`")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.faults.battery",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", type=Path, default=REPO, help="source tree under test")
    ap.add_argument("--out", type=Path, help="results JSON")
    ap.add_argument("--md", type=Path, help="markdown summary")
    ap.add_argument("--only", help="case name patterns (fnmatch or substring), comma-separated")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--keep", action="store_true", help="keep the temporary folders")
    ap.add_argument("--extended", action="store_true",
                    help="also the variant cases (EXTENDED) beyond the core set")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--update", action="store_true", help="replace only the cases run now "
                    "in the existing --out JSON (and rewrite --md from it)")
    args = ap.parse_args(argv)
    if args.list:
        for c in select(cases(), args.only, args.extended):
            print(f"{c.name:40s} {c.expect:14s} {' '.join(map(str, c.args))}")
        return 0
    summary = run_battery(args.tree, args.python, args.only, args.workers, args.keep,
                          extended=args.extended)
    if args.update and args.out and args.out.is_file():
        old = json.loads(args.out.read_text())
        fresh = {r["name"]: r for r in summary["cases"]}
        merged = [fresh.pop(r["name"], r) for r in old["cases"]] + list(fresh.values())
        summary = summarize(merged, summary["tree"], old["started"],
                            old["seconds"] + summary["seconds"])
    print(table(summary))
    if args.out:
        args.out.write_text(json.dumps(summary, indent=1))
    if args.md:
        args.md.write_text(markdown(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
