"""`reid demo`: synthetic datasets through every pipeline stage that exists.

Stages, on the ``--preset`` data: synthesise it → describe images (hand-crafted HSV stripe
histograms) → feature store → XQDA metric learning → a tiny BoT network trained on CPU and its
BNNeck embeddings → test-time adaptation of those embeddings (camera Norm, DART3 LITE); then,
on the data and protocol of the C-DPCF paper's synthetic recipe (the ``cdpcf`` preset's
two-camera target domain, half/half trials: recipes/cdpcf_synthetic.sh with
``CDPCF_MAPS=color-grid``), colour-grid maps → C-DPCF camera-specific pooling beside its
baselines; each evaluated → one CMC plot per data set and a t-SNE of the test embeddings
before/after DART3 LITE.

Every stage is a ``reid`` command line, built here as an argument list, printed and then run
in this process through the CLI itself (:func:`run_in_process`), so what is printed is what
ran: pasted into a shell in the printed order (the first line, ``source …/bin/activate``,
puts this ``reid`` on the shell's PATH), the commands redo the demo. The demo runs
with one OpenMP/BLAS/torch thread and prints ``export OMP_NUM_THREADS=1`` first: on a busy
2-core machine, spinning OpenMP threads make its tiny workloads (a 16–128-channel CNN on
64×32 images, C-DPCF on colour-grid maps, t-SNE) several times slower. Everything lands in one
work folder; the demo replaces its own previous outputs there (``--force``).
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from reidcli.data.registry import data_root
from reidcli.errors import ReidError

#: environment the demo runs in and prints first (``export``): one OpenMP/BLAS/torch thread
#: (module docstring)
ONE_THREAD = {"OMP_NUM_THREADS": "1"}

#: training schedule of the demo's BoT per synthetic preset: epochs of ``reid train bot
#: --preset tiny`` (64×32 input) and, for a preset with fewer identities than the preset's 8
#: per batch, a batch size (P×K, K = 4 kept)
BOT_SCHEDULE = {"tiny": {"epochs": 2, "batch_size": 16}, "default": {"epochs": 6}}

#: DART3 LITE settings of the demo (flags of ``reid adapt dart3-lite``; True = a bare flag).
#: The paper's lr (1e-4, one step per batch) hardly moves the camera statistics of these
#: tiny-CNN embeddings: on the default demo store it scores exactly as camera Norm (the demo
#: prints the measured scales, :func:`dart3_scale_note`). Chosen there among lr 1e-2…1e-1 ×
#: 1…20 steps: steps this large drift over the query stream and lose rank-1 unless
#: ``--episodic`` restarts each batch from the camera statistics; with it, rank-1 and mAP
#: rise by a few points over camera Norm
DART3_LITE = {"lr": 3e-2, "steps": 10, "emit": "post", "episodic": True}

#: the C-DPCF rows' data (docs/methods/cdpcf.md): the ``cdpcf`` synthetic preset's target
#: domain d1 — 2 cameras, 200 persons with one image per camera, a strong camera-specific
#: spatial bias — under the paper's protocol (10 seeded half/half trials, probe camera 0,
#: gallery camera 1), as recipes/cdpcf_synthetic.sh runs it with ``CDPCF_MAPS=color-grid``.
#: The preset's source domain d0 only trains that recipe's PCB, which colour-grid maps do not
#: need, so the demo renders it with one identity (``synth``): d1's images and trials are the
#: full preset's, byte for byte.
CDPCF_DATA = {"preset": "cdpcf", "name": "cdpcf-target",
              "synth": ("num_train_ids=1", "num_test_ids=0"),
              "loader": ("protocol=single_shot_half", "domain=synthetic/d1")}

#: the half/half trials of the C-DPCF rows per demo preset (loader option ``num_trials``;
#: None: the protocol's 10, as the paper): ``tiny`` (tests, seconds) keeps the first one, the
#: same draw as trial 0 of the 10
CDPCF_TRIALS = {"tiny": 1, "default": None}

#: one-line descriptions of the files ``reid train`` writes into its run folder
RUN_FILES = {"model.pt": "trained network (weights + config) read by reid extract --model",
             "checkpoint.pt": "last checkpoint (reid train bot --resume)",
             "config.json": "training configuration as resolved",
             "metrics.csv": "loss / lr / accuracy per logged iteration (reid plot training)",
             "train_records.csv": "training images and labels used"}


class DemoStageError(ReidError):
    """A demo command exited with an error (its own message is printed above)."""

    def __init__(self, stage: str, command: str, code: int):
        super().__init__(f"demo stage '{stage}' failed (exit {code}): {command}",
                         "the error above says why; fix it and run `reid demo` again")
        self.exit_code = code


@dataclasses.dataclass
class DemoCommand:
    """One stage as a command: ``argv`` (``["reid", …]``) and the files it writes, with a
    one-line description each."""

    stage: str
    argv: list[str]
    writes: list[tuple[Path, str]]

    @property
    def shell(self) -> str:
        """The line to paste into a POSIX shell."""
        return shlex.join(self.argv)


@dataclasses.dataclass
class DemoStep:
    """One stage of the demo: the command that ran, what it wrote, how long it took."""

    stage: str
    command: str
    output: str
    seconds: float
    summary: str = ""


@dataclasses.dataclass
class DemoResult:
    steps: list[DemoStep]
    results: list[dict[str, Any]]            # one row per evaluated store/method
    outputs: list[tuple[Path, str]]          # every file/folder written, with a description
    notes: list[str]                         # what the reader needs to read the numbers
    workdir: Path = Path(".")


@contextlib.contextmanager
def thread_limit(env: dict[str, str]) -> Iterator[None]:
    """In-process equivalent of ``export OMP_NUM_THREADS=N`` for one command: N torch
    threads, N threads in every OpenMP/BLAS library loaded so far (threadpoolctl) and the
    variable itself for libraries loaded while the command runs; all restored after."""
    threads = env.get("OMP_NUM_THREADS")
    if threads is None:
        yield
        return
    import os

    import torch
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")
    torch.set_num_threads(int(threads))
    os.environ["OMP_NUM_THREADS"] = threads
    try:
        with threadpool_limits(int(threads)):
            yield
    finally:
        torch.set_num_threads(before[0])
        if before[1] is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = before[1]


def run_in_process(command: DemoCommand) -> None:
    """Run ``command`` through the ``reid`` CLI in this process (same parsing, same code,
    provenance records this command line); raises :class:`DemoStageError` when it fails."""
    from reidcli.cli.main import main

    try:
        main(command.argv[1:])
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        if code in (130, 143):                            # interrupted: already cleaned up
            raise
        if code:
            raise DemoStageError(command.stage, command.shell, code) from None


def _demo_name(preset: str, seed: int) -> str:
    """Folder name of the demo's dataset: the preset, suffixed by a non-default seed."""
    return preset if seed == 0 else f"{preset}-seed{seed}"


class _Runner:
    """Prints each command, runs it, times it and keeps what it wrote."""

    def __init__(self, run: Callable[[DemoCommand], None], echo: Callable[[str], None]):
        self.run, self.echo = run, echo
        self.steps: list[DemoStep] = []
        self.outputs: list[tuple[Path, str]] = []

    def __call__(self, command: DemoCommand, summary: Callable[[], str] = lambda: ""
                 ) -> None:
        self.echo(f"# [{len(self.steps) + 1}] {command.stage}")
        self.echo(command.shell)
        start = time.perf_counter()
        # per command: covers libraries loaded since; the command's own stdout (eval's
        # table, the scores of the summary line below) is not shown: the demo's stdout
        # stays its log, stderr the commands' messages
        with thread_limit(ONE_THREAD), contextlib.redirect_stdout(io.StringIO()):
            self.run(command)
        seconds = time.perf_counter() - start
        note = summary()
        self.echo(f"#   {seconds:.1f} s" + (f" — {note}" if note else ""))
        self.steps.append(DemoStep(command.stage, command.shell,
                                   ", ".join(str(p) for p, _ in command.writes), seconds, note))
        for path, what in command.writes:
            if path not in [p for p, _ in self.outputs]:
                self.outputs.append((path, what))


def run_demo(root: str | Path | None = None, workdir: str | Path = "reid-demo",
             preset: str = "default", seed: int = 0, progress: bool = True,
             run: Callable[[DemoCommand], None] = run_in_process,
             echo: Callable[[str], None] = lambda line: None) -> DemoResult:
    """Run the demo; returns the steps, a results table (rank-1, mAP, … per method), the
    files written and notes. ``echo`` receives each command line before it runs and its
    time after; ``progress=False`` adds ``--quiet`` where a command has it."""
    from reidcli.errors import OutputError
    from reidcli.naming import param
    from reidcli.params import Options, check_param, check_seed

    # checked before anything runs, so a bad value is one line, not a failed stage
    preset = check_param("demo", "preset", preset, Options(tuple(BOT_SCHEDULE)))
    seed = check_seed("demo", seed)
    if Path(workdir).exists() and not Path(workdir).is_dir():
        raise OutputError(f"{param('workdir')} {workdir} is a file, not a folder",
                          "give a folder for the demo's outputs")
    demo = _Demo(_Runner(run, echo), data_root(root), Path(workdir), preset,
                 _demo_name(preset, seed), [] if progress else ["--quiet"])
    try:
        demo.workdir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create {param('workdir')} {workdir}: "
                          f"{exc.strerror or exc}", "give a writable folder") from None
    echo(activate_line())                              # `reid` on a pasting shell's PATH
    echo(shlex.join(["mkdir", "-p", str(demo.workdir)]))     # done; the commands need it
    echo("export " + " ".join(f"{k}={v}" for k, v in ONE_THREAD.items()))
    lite, note = _stages(demo, seed)
    return DemoResult(demo.step.steps, demo.results, demo.step.outputs,
                      [*data_notes(demo), pooling_note(demo.results), note], demo.workdir)


def data_notes(demo: "_Demo") -> list[str]:
    """One line per data set of the table (its ``data`` column): what it is and the split,
    trials and evaluation rule its rows are scored under."""
    from reidcli.data.synthetic_params import PRESET_PURPOSES

    trials = CDPCF_TRIALS[demo.preset]
    which = ("the first of the seeded" if trials == 1 else
             f"mean of {trials or 10} seeded")
    return [f"data '{demo.data_label}': synthetic preset '{demo.preset}' "
            f"({PRESET_PURPOSES[demo.preset]}), its test split (query vs gallery of every "
            "domain) under the Market-1501 rule E1 (gallery images of the query's person "
            "taken by the query's camera are not counted)",
            f"data '{demo.cdpcf_label}': the target domain d1 of synthetic preset 'cdpcf' "
            "(2 cameras, 200 persons with one image per camera, strong camera-specific "
            f"spatial bias), {which} half/half trials (each: 100 persons to train on, the "
            "other 100 to test, one probe image each from camera 0 against the gallery of "
            "camera 1, rule E3), as the C-DPCF paper and "
            "recipes/cdpcf_synthetic.sh (CDPCF_MAPS=color-grid) do; the preset's source "
            "domain d0, which trains that recipe's PCB, is rendered with one person "
            f"({' '.join('--option ' + o for o in CDPCF_DATA['synth'])}): colour-grid maps "
            "need no training, and d1's images are the full preset's"]


def pooling_note(results: list[dict[str, Any]]) -> str:
    """Where C-DPCF ranks among its baselines on its own data and which of the paper's
    orderings (Fig. 3: ``reid paper compare cdpcf``'s claims) hold, with the rank-1 figures —
    whichever way they come out."""
    from reidcli.paper.compare import CDPCF_CLAIMS

    rank1 = {POOLING_LABELS[r["method"]]: 100 * r["rank-1"] for r in results
             if r["method"] in POOLING_LABELS}
    cdpcf = rank1["C-DPCF"]
    others = ", ".join(f"{m} {v:.1f}" for m, v in rank1.items() if m != "C-DPCF")
    above = all(cdpcf > v for m, v in rank1.items() if m != "C-DPCF")
    text = (f"on its data C-DPCF (camera-specific maps) reaches rank-1 {cdpcf:.1f} %, "
            + ("above" if above else "NOT above all of")
            + f" its baselines ({others}); the paper's orderings (Fig. 3):")
    for claim, better, worse, ties in CDPCF_CLAIMS:
        if better in rank1 and worse in rank1:
            holds = rank1[better] >= rank1[worse] if ties else rank1[better] > rank1[worse]
            text += f" {claim} {'holds' if holds else 'does NOT hold'};"
    return text.rstrip(";")


def activate_line() -> str:
    """The line that puts this ``reid`` on a shell's PATH: ``source VENV/bin/activate`` when
    it runs from a virtual environment (recipes/quickstart.sh installs into ./.venv), else a
    comment."""
    import os

    if sys.prefix != sys.base_prefix:
        venv = Path(sys.prefix)
        try:
            venv = venv.relative_to(Path.cwd())
        except ValueError:
            pass
        return shlex.join(["source", os.fspath(venv / "bin" / "activate")])
    return "# (reid is installed outside a virtual environment: it is on PATH as installed)"


def _stages(demo: _Demo, seed: int) -> tuple[Path, str]:
    """Every stage in order, the rows of one data set together; returns the DART3 LITE store
    and the note on its settings."""
    demo.step(_synth(demo.root, demo.preset, demo.name, seed))
    _handcrafted_stages(demo)
    cnn = _network_stages(demo)
    lite, note = _adaptation_stages(demo, cnn)
    _pooling_stages(demo, seed)
    _figure_stages(demo, cnn, lite)
    return lite, note


def _synth(root: Path, preset: str, name: str, seed: int,
           options: tuple[str, ...] = ()) -> DemoCommand:
    """``reid data synth`` of one data set (reused by the command when already there)."""
    return DemoCommand(
        "data", ["reid", "data", "synth", "--out", str(root), "--preset", preset, "--seed",
                 str(seed)] + (["--name", name] if name != preset else [])
        + [a for o in options for a in ("--option", o)],
        [(root / "synthetic" / name, "synthetic dataset: images, images.csv, "
          "identities.csv, meta.json (reused when already there)")])


@dataclasses.dataclass
class _Demo:
    """What the stages share: the runner, where things go, the evaluations so far."""

    step: _Runner
    root: Path
    workdir: Path
    preset: str
    name: str                                   # the synthetic dataset's folder name
    quiet: list[str]                            # ["--quiet"] without progress output
    cdpcf_name: str = CDPCF_DATA["name"]        # the C-DPCF rows' dataset folder name
    results: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    reports: dict[str, list[Path]] = dataclasses.field(default_factory=dict)

    def out(self, suffix: str, dataset: str | None = None) -> Path:
        return self.workdir / f"synthetic_{dataset or self.preset}_{suffix}"

    @property
    def data(self) -> list[str]:
        """The options that name the demo's dataset."""
        return ["--dataset", "synthetic", "--root", str(self.root), "--option",
                f"name={self.name}"]

    @property
    def data_label(self) -> str:
        """The ``data`` column of the rows on the demo's own preset."""
        return self.preset

    @property
    def cdpcf_label(self) -> str:
        """The ``data`` column of the C-DPCF rows (:data:`CDPCF_DATA`)."""
        return "cdpcf d1"

    def evaluate(self, store: Path, method: str, shows: str, model: Path | None = None,
                 report: Path | None = None, data: str | None = None) -> Path:
        """``reid eval`` of ``store`` (through ``model``) into the JSON ``report`` (default:
        the store's name, ``.json``); adds a row named ``method`` on ``data`` (default: the
        demo's preset) and the line ``shows`` (what the row shows). Without ``--quiet``
        (unless the demo is quiet), so a pasted command prints its scores; run here, its
        table is replaced by the step's one-line summary (:class:`_Runner`)."""
        json_out = report or store.with_suffix(".json")
        argv = ["reid", "eval", "--store", str(store)] + (["--model", str(model)] if model
                                                          else [])
        self.step(DemoCommand("eval", argv + ["--json", str(json_out), "--force",
                                              *self.quiet],
                              [(json_out, f"evaluation report (CMC, mAP, mINP): {method}")]),
                  summary=lambda: _score(json_out))
        data = data or self.data_label
        self.reports.setdefault(data, []).append(json_out)
        self.results.append({"method": method, "data": data, "shows": shows,
                             "store": str(store), **_headline(json.loads(json_out.read_text()))})
        return json_out


#: what the hand-crafted baseline row shows (on either data set)
HANDCRAFTED_SHOWS = "hand-crafted baseline: colour histograms, Euclidean distance, no learning"


def _handcrafted_stages(demo: _Demo) -> None:
    """HSV stripes of every domain → Euclidean baseline, XQDA."""
    store = demo.out("hsv.h5")
    demo.step(DemoCommand("extract", ["reid", "extract", *demo.data, "--features",
                                      "hsv-stripes", "--out", str(store), "--force"],
                          [(store, "feature store: HSV stripe histograms")]),
              summary=lambda: _junk_note(demo))
    demo.evaluate(store, "HSV stripes, Euclidean", HANDCRAFTED_SHOWS)
    xqda = demo.out("xqda.h5")
    demo.step(DemoCommand("train", ["reid", "train", "xqda", "--store", str(store),
                                    "--feature", "hsv-stripes", "--out", str(xqda), "--force",
                                    *demo.quiet], [(xqda, "fitted XQDA metric (per trial)")]))
    demo.evaluate(store, "HSV stripes + XQDA",
                  "the same histograms with a metric learnt on the training identities",
                  xqda, demo.out("xqda.json"))


def _pooling_stages(demo: _Demo, seed: int) -> None:
    """The C-DPCF paper's set-up (:data:`CDPCF_DATA`): HSV stripes + colour-grid maps of the
    ``cdpcf`` preset's target domain over its half/half trials → Euclidean, then the paper's
    baselines, its ablation and C-DPCF (K=10, E=64, G=6, the paper's values)."""
    name = _demo_name(CDPCF_DATA["name"], seed)
    demo.cdpcf_name = name
    demo.step(_synth(demo.root, CDPCF_DATA["preset"], name, seed, CDPCF_DATA["synth"]))
    trials = CDPCF_TRIALS[demo.preset]
    loader = CDPCF_DATA["loader"] + ((f"num_trials={trials}",) if trials else ())
    store = demo.out("hsv.h5", name)
    demo.step(DemoCommand("extract", [
        "reid", "extract", "--dataset", "synthetic", "--root", str(demo.root), "--option",
        f"name={name}", *(a for o in loader for a in ("--option", o)),
        "--features", "hsv-stripes", "--maps", "color-grid", "--out", str(store), "--force"],
        [(store, "feature store of the C-DPCF rows: HSV stripe histograms + colour-grid maps "
          "of cdpcf's domain d1, with its half/half trials")]))
    label = demo.cdpcf_label
    demo.evaluate(store, "HSV stripes, Euclidean", HANDCRAFTED_SHOWS, data=label)
    for method, row, shows in POOLING_ROWS:
        fitted = demo.out(f"{method}.h5", name)
        demo.step(DemoCommand("fit-pooling", ["reid", "fit-pooling", method, "--store",
                                              str(store), "--K", "10", "--E",
                                              "64", "--G", "6", "--out", str(fitted),
                                              "--force", *demo.quiet],
                              [(fitted, f"fitted {row} pooling, per trial")]))
        demo.evaluate(store, f"colour-grid maps + {row}", shows, fitted,
                      demo.out(f"{method}.json", name), data=label)


#: the C-DPCF paper's pooling methods as the demo runs them (reid fit-pooling METHOD, row
#: label, what the row shows): its baselines (§IV-C), its ablation, the method
POOLING_ROWS = (
    ("avgp", "AvgP+XQDA", "the paper's baseline: stripe means of the maps, one XQDA"),
    ("avgp-pad", "AvgP+pad.+XQDA", "the paper's baseline: stripe means zero-padded per camera"),
    ("dpcf", "DPCF", "the paper's ablation: learnt pooling maps shared by all cameras"),
    ("cdpcf", "C-DPCF", "the C-DPCF paper's method: learnt pooling maps per camera"))
#: the row labels of :data:`POOLING_ROWS` as the table prints them
POOLING_LABELS = {f"colour-grid maps + {row}": row for _, row, _ in POOLING_ROWS}


def _junk_note(demo: _Demo) -> str:
    """Why ``reid extract`` stores fewer images than ``reid data synth`` rendered: the junk
    gallery images (pid -1), which the Market-1501 layout's loader leaves out."""
    meta = json.loads((demo.root / "synthetic" / demo.name / "meta.json").read_text())
    junk = sum(d["counts"]["gallery"]["junk"] for d in meta["domains"])
    return (f"the {junk} junk images (pid -1) that data synth rendered are left out, as "
            "Market-1501's loader does" if junk else "")


def _network_stages(demo: _Demo) -> Path:
    """Train the tiny BoT, extract its BNNeck embeddings, evaluate; returns the store."""
    run_dir = demo.out("bot_tiny")
    schedule = BOT_SCHEDULE[demo.preset]
    train = ["reid", "train", "bot", "--preset", "tiny", *demo.data, "--epochs",
             str(schedule["epochs"])]
    train += ["--batch-size", str(schedule["batch_size"])] if "batch_size" in schedule else []
    demo.step(DemoCommand("train", train + ["--device", "cpu", "--out", str(run_dir),
                                            "--force", *demo.quiet],
                          [(run_dir, "BoT run folder")]),
              summary=lambda: _training_note(run_dir))
    demo.step.outputs[-1:] = [(run_dir / f.name,
                               RUN_FILES.get(f.name, "written by reid train bot"))
                              for f in sorted(run_dir.iterdir()) if f.is_file()]
    cnn = demo.out("bot_tiny.h5")
    demo.step(DemoCommand("extract", ["reid", "extract", *demo.data, "--model", str(run_dir),
                                      "--device", "cpu", "--out", str(cnn), "--force"],
                          [(cnn, "feature store: the tiny BoT's BNNeck embeddings")]))
    demo.evaluate(cnn, "tiny BoT, BNNeck",
                  "a small CNN trained by reid train bot --preset tiny on the training ids")
    return cnn


def _adaptation_stages(demo: _Demo, cnn: Path) -> tuple[Path, str]:
    """Camera Norm and DART3 LITE of the BoT store, each evaluated; returns the LITE store
    and the note on its settings (:func:`dart3_scale_note`)."""
    norm = demo.out("bot_tiny_norm.h5")
    demo.step(DemoCommand("adapt", ["reid", "adapt", "norm", "--store", str(cnn), "--out",
                                    str(norm), "--force", *demo.quiet],
                          [(norm, "BoT store, queries and gallery normalised per camera")]))
    norm_report = demo.evaluate(norm, "tiny BoT + camera Norm",
                                "the BoT embeddings z-scored per camera at test time")
    lite = demo.out("bot_tiny_dart3-lite.h5")
    settings = [a for k, v in DART3_LITE.items()
                for a in ([f"--{k}"] if v is True else [f"--{k}", str(v)])]
    demo.step(DemoCommand("adapt", ["reid", "adapt", "dart3-lite", "--store", str(cnn),
                                    *settings, "--out", str(lite), "--force", *demo.quiet],
                          [(lite, "BoT store, queries adapted by DART3 LITE")]))
    lite_report = demo.evaluate(lite, "tiny BoT + DART3 LITE",
                                "the BoT embeddings adapted per camera at test time ("
                                + " ".join(settings) + ")")
    return lite, dart3_scale_note(lite, lite_report, norm_report)


def _figure_stages(demo: _Demo, cnn: Path, lite: Path) -> None:
    """CMC curves of every evaluation, one figure per data set (curves of one figure share
    their data and protocol); t-SNE of the test rows, BoT before/after LITE."""
    for data, reports in demo.reports.items():     # legend names come from the reports
        cdpcf = data == demo.cdpcf_label
        cmc = demo.out("cmc.png", demo.cdpcf_name if cdpcf else None)
        title = (f"CMC — synthetic '{CDPCF_DATA['preset']}', domain d1, half/half trials"
                 if cdpcf else f"CMC — synthetic '{demo.preset}', test split (E1)")
        demo.step(DemoCommand("plot", ["reid", "plot", "cmc", *map(str, reports), "--title",
                                       title, "--out", str(cmc), "--force"],
                              [(cmc, f"CMC curves of the rows on data '{data}'")]))
    tsne = demo.out("tsne.png")
    demo.step(DemoCommand("plot", ["reid", "plot", "tsne", "--store", str(cnn), "--compare",
                                   str(lite), "--split", "query,gallery", "--color-by",
                                   "camid", "--marker-by", "domain", "--max-points", "600",
                                   "--out", str(tsne), "--force"],
                          [(tsne, "t-SNE of the test rows (query+gallery), BoT before/after "
                            "DART3 LITE")]))


def _score(json_out: Path) -> str:
    report = json.loads(json_out.read_text())
    return f"rank-1 {100 * report['cmc'][0]:.1f} %, mAP {100 * report['mAP']:.1f} %"


def _training_note(run_dir: Path) -> str:
    """``N iterations`` and the loss of the first and last logged windows (means over
    ``log_every`` iterations, metrics.csv), at the precision of ``reid train``'s own line
    (whose ``loss a → b`` is the first and last single iteration's)."""
    import pandas as pd

    metrics = pd.read_csv(run_dir / "metrics.csv")
    if metrics.empty:
        return ""
    return (f"{int(metrics['iteration'].iloc[-1])} iterations; metrics.csv: mean loss of the "
            f"first and last logged window {metrics['loss'].iloc[0]:.4f} → "
            f"{metrics['loss'].iloc[-1]:.4f}")


def dart3_scale_note(adapted: Path, adapted_report: Path, norm_report: Path) -> str:
    """Why the paper's DART3 lr barely moves these embeddings, measured on ``adapted`` (a
    DART3 LITE store) — Adam's update is lr·m̂/√v̂ with |m̂/√v̂| ≲ 1, so a coordinate of
    M_q, Σ_q moves by about lr per step and the paper's lr, one step per batch, allows at
    most lr × batches over the whole query stream; compared with Σ, the per-dimension spread
    of the embeddings (the camera statistics of Alg 1, RMS over cameras and dimensions).
    Ends with the rank-1/mAP change from camera Norm's report to the adapted one's."""
    import numpy as np

    from reidcli.adapt.config import method_defaults
    from reidcli.store import open_store

    with open_store(adapted) as st:
        arrays = st.adapt_arrays("dart3")
        config = st.provenance.get("adapt") or {}
        dim = st.feature_info(st.default_feature())["dim"]
    paper_lr = method_defaults("dart3")["lr"]
    batches = np.asarray(arrays["loss"]).shape[0]
    spread = float(np.sqrt(np.mean(np.square(arrays["S_q_init"]))))
    bound = paper_lr * batches
    flags = (f"--lr {config.get('lr'):g} --steps {config.get('steps')} --emit "
             f"{config.get('emit')}" + (" --episodic" if config.get("episodic") else ""))
    text = (f"DART3 LITE ran with {flags}, not the paper's --lr {paper_lr:g} with one step "
            f"per batch: Adam moves each coordinate of M_q, Σ_q by about lr per step, so over "
            f"this stream's {batches} batches the paper's lr allows at most {batches} × "
            f"{paper_lr:g} = {bound:.4f}, against a per-dimension spread Σ = {spread:.2f} of "
            f"these {dim}-d tiny-CNN embeddings (RMS camera std), i.e. "
            f"{100 * bound / max(spread, 1e-12):.2g} % of it.")
    reach = float(config.get("lr") or 0) * int(config.get("steps") or 1)
    text += (f" The demo's settings let M_q, Σ_q move up to {reach:.2g} per batch "
             f"({100 * reach / max(spread, 1e-12):.2g} % of Σ).")
    scores = [_headline(json.loads(Path(p).read_text())) for p in (norm_report, adapted_report)]
    d_r1, d_map = (100 * (scores[1][k] - scores[0][k]) for k in ("rank-1", "mAP"))
    return text + f" Result: rank-1 {d_r1:+.1f}, mAP {d_map:+.1f} points vs camera Norm."


def evaluate_to_json(store: Path, json_out: Path, progress: bool = True,
                     model: Path | None = None) -> dict[str, Any]:
    """``reid eval --store STORE [--model M] --json OUT`` from Python; returns the report."""
    from reidcli.evaluation.engine import EvalOptions
    from reidcli.evaluation.report import build_report, write_json
    from reidcli.evaluation.run import StoreEvalRequest, evaluate_store
    from reidcli.provenance import make_provenance

    evaluation = evaluate_store(StoreEvalRequest(store=Path(store), model=model,
                                                 options=EvalOptions(progress=progress)))
    report = build_report(evaluation.protocol, evaluation.trials, evaluation.meta,
                          make_provenance(command=["reid", "demo"],
                                          inputs=[store] + ([model] if model else [])))
    write_json(json_out, report, force=True)
    return report


def _headline(report: dict[str, Any]) -> dict[str, Any]:
    cmc = report["cmc"]
    return {"rank-1": cmc[0], "rank-5": cmc[min(4, len(cmc) - 1)],
            "rank-10": cmc[min(9, len(cmc) - 1)], "mAP": report["mAP"],
            "mINP": report["mINP"], "queries": report["num_valid_queries"]}
