"""`reid demo`: the synthetic dataset through every pipeline stage that exists.

Stages: synthesise data → describe images (hand-crafted HSV stripe histograms and colour-grid
maps) → feature store → XQDA metric learning → on domain d0 alone (one camera network, the
C-DPCF paper's set-up) C-DPCF camera-specific pooling beside its baselines → a tiny BoT
network trained on CPU and its BNNeck embeddings → test-time adaptation of those embeddings
(camera Norm, DART3 LITE) → evaluation of each → a CMC plot of every method and a t-SNE of
the test embeddings before/after DART3 LITE.

Every stage is a ``reid`` command line, built here as an argument list, printed and then run
in this process through the CLI itself (:func:`run_in_process`), so what is printed is what
ran: pasted into a shell in the printed order (the first line, ``source …/bin/activate``,
puts this ``reid`` on the shell's PATH), the commands redo the demo. The demo runs
with one OpenMP/BLAS/torch thread and prints ``export OMP_NUM_THREADS=1`` first: on a busy
2-core machine, spinning OpenMP threads make its tiny workloads (a 16–128-channel CNN on
64×32 images, C-DPCF on colour-grid maps, t-SNE) several times slower. Everything lands in one work folder; the demo replaces its own previous
outputs there (``--force``).
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
    cdpcf = ("rows marked (d0): fitted and evaluated on domain d0's cameras alone, as the "
             "C-DPCF paper does (one camera network whose cameras share identities); rows "
             "marked (all domains): every domain of the dataset")
    rank1 = {r["method"]: r["rank-1"] for r in demo.results}
    if rank1["colour-grid maps + DPCF (d0)"] > rank1["colour-grid maps + C-DPCF (d0)"]:
        cdpcf += ("; DPCF's shared maps score above C-DPCF's camera-specific ones on this "
                  "data, unlike the paper's results (its own set-up, 2 cameras and half/half "
                  "trials: recipes/cdpcf_synthetic.sh)")
    return DemoResult(demo.step.steps, demo.results, demo.step.outputs, [cdpcf, note],
                      demo.workdir)


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
    """Every stage in order; returns the DART3 LITE store and the note on its settings."""
    demo.step(DemoCommand(
        "data", ["reid", "data", "synth", "--out", str(demo.root), "--preset", demo.preset,
                 "--seed", str(seed)]
        + (["--name", demo.name] if demo.name != demo.preset else []),
        [(demo.root / "synthetic" / demo.name, "synthetic dataset: images, images.csv, "
          "identities.csv, meta.json (reused when already there)")]))
    _handcrafted_stages(demo)
    cnn = _network_stages(demo)
    lite, note = _adaptation_stages(demo, cnn)
    _figure_stages(demo, cnn, lite)
    return lite, note


@dataclasses.dataclass
class _Demo:
    """What the stages share: the runner, where things go, the evaluations so far."""

    step: _Runner
    root: Path
    workdir: Path
    preset: str
    name: str                                   # the synthetic dataset's folder name
    quiet: list[str]                            # ["--quiet"] without progress output
    results: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    reports: list[Path] = dataclasses.field(default_factory=list)

    def out(self, suffix: str) -> Path:
        return self.workdir / f"synthetic_{self.preset}_{suffix}"

    @property
    def data(self) -> list[str]:
        """The options that name the demo's dataset."""
        return ["--dataset", "synthetic", "--root", str(self.root), "--option",
                f"name={self.name}"]

    def evaluate(self, store: Path, method: str, shows: str, model: Path | None = None,
                 suffix: str | None = None) -> Path:
        """``reid eval`` of ``store`` (through ``model``) into a JSON report; adds a row
        named ``method`` and the line ``shows`` (what the row shows). Without ``--quiet``
        (unless the demo is quiet), so a pasted command prints its scores; run here, its
        table is replaced by the step's one-line summary (:class:`_Runner`)."""
        json_out = self.out(f"{suffix}.json") if suffix else store.with_suffix(".json")
        argv = ["reid", "eval", "--store", str(store)] + (["--model", str(model)] if model
                                                          else [])
        self.step(DemoCommand("eval", argv + ["--json", str(json_out), "--force", *self.quiet],
                              [(json_out, f"evaluation report (CMC, mAP, mINP): {method}")]),
                  summary=lambda: _score(json_out))
        self.reports.append(json_out)
        self.results.append({"method": method, "shows": shows, "store": str(store),
                             **_headline(json.loads(json_out.read_text()))})
        return json_out


def _handcrafted_stages(demo: _Demo) -> None:
    """HSV stripes + colour-grid maps of every domain → Euclidean baseline, XQDA; then the
    C-DPCF paper's set-up on one camera network (domain d0's cameras; docs/methods/cdpcf.md,
    "Several domains") → Euclidean, AvgP+XQDA, AvgP+pad.+XQDA, DPCF, C-DPCF."""
    store = demo.out("hsv.h5")
    demo.step(DemoCommand("extract", ["reid", "extract", *demo.data, "--features",
                                      "hsv-stripes", "--maps", "color-grid", "--out",
                                      str(store), "--force"],
                          [(store, "feature store: HSV stripe histograms + colour-grid maps")]),
              summary=lambda: _junk_note(demo))
    demo.evaluate(store, "HSV stripes, Euclidean (all domains)",
                  "hand-crafted baseline: colour histograms, no learning")
    xqda = demo.out("xqda.h5")
    demo.step(DemoCommand("train", ["reid", "train", "xqda", "--store", str(store),
                                    "--feature", "hsv-stripes", "--out", str(xqda), "--force",
                                    *demo.quiet], [(xqda, "fitted XQDA metric (per trial)")]))
    demo.evaluate(store, "HSV stripes + XQDA (all domains)",
                  "the same histograms with a metric learnt on the training identities",
                  xqda, "xqda")
    # C-DPCF learns maps per camera of one camera network whose camera pairs share
    # identities; the demo's domains share none, so it runs on domain d0's cameras alone
    d0 = demo.out("d0.h5")
    demo.step(DemoCommand("extract", ["reid", "extract", *demo.data, "--option", "domains=d0",
                                      "--features", "hsv-stripes", "--maps", "color-grid",
                                      "--out", str(d0), "--force"],
                          [(d0, "feature store of domain d0 alone (C-DPCF's set-up: one camera "
                            "network)")]))
    demo.evaluate(d0, "HSV stripes, Euclidean (d0)",
                  "the hand-crafted baseline on the C-DPCF rows' data (domain d0 only)")
    for method, label, shows in POOLING_ROWS:
        fitted = demo.out(f"d0_{method}.h5")
        demo.step(DemoCommand("fit-pooling", ["reid", "fit-pooling", method, "--store",
                                              str(d0), "--out", str(fitted), "--force",
                                              *demo.quiet],
                              [(fitted, f"fitted {label} pooling on d0 (K=10, E=64, G=6 "
                                "defaults)")]))
        demo.evaluate(d0, f"colour-grid maps + {label} (d0)", shows, fitted, f"d0_{method}")


#: the C-DPCF paper's pooling methods as the demo runs them on domain d0 (reid fit-pooling
#: METHOD, row label, what the row shows): its baselines (§IV-C), its ablation, the method
POOLING_ROWS = (
    ("avgp", "AvgP+XQDA", "the paper's baseline: stripe means of the maps, one XQDA"),
    ("avgp-pad", "AvgP+pad.+XQDA", "the paper's baseline: stripe means zero-padded per camera"),
    ("dpcf", "DPCF", "the paper's ablation: learnt pooling maps shared by all cameras"),
    ("cdpcf", "C-DPCF", "the C-DPCF paper's method: learnt pooling maps per camera"))


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
    demo.evaluate(cnn, "tiny BoT, BNNeck (all domains)",
                  "a small CNN trained by reid train bot --preset tiny on the training ids")
    return cnn


def _adaptation_stages(demo: _Demo, cnn: Path) -> tuple[Path, str]:
    """Camera Norm and DART3 LITE of the BoT store, each evaluated; returns the LITE store
    and the note on its settings (:func:`dart3_scale_note`)."""
    norm = demo.out("bot_tiny_norm.h5")
    demo.step(DemoCommand("adapt", ["reid", "adapt", "norm", "--store", str(cnn), "--out",
                                    str(norm), "--force", *demo.quiet],
                          [(norm, "BoT store, queries and gallery normalised per camera")]))
    norm_report = demo.evaluate(norm, "tiny BoT + camera Norm (all domains)",
                                "the BoT embeddings z-scored per camera at test time")
    lite = demo.out("bot_tiny_dart3-lite.h5")
    settings = [a for k, v in DART3_LITE.items()
                for a in ([f"--{k}"] if v is True else [f"--{k}", str(v)])]
    demo.step(DemoCommand("adapt", ["reid", "adapt", "dart3-lite", "--store", str(cnn),
                                    *settings, "--out", str(lite), "--force", *demo.quiet],
                          [(lite, "BoT store, queries adapted by DART3 LITE")]))
    lite_report = demo.evaluate(lite, "tiny BoT + DART3 LITE (all domains)",
                                "the BoT embeddings adapted per camera at test time ("
                                + " ".join(settings) + ")")
    return lite, dart3_scale_note(lite, lite_report, norm_report)


def _figure_stages(demo: _Demo, cnn: Path, lite: Path) -> None:
    """CMC curves of every evaluation; t-SNE of the test rows, BoT before/after LITE."""
    cmc = demo.out("cmc.png")                 # legend names come from the reports
    demo.step(DemoCommand("plot", ["reid", "plot", "cmc", *map(str, demo.reports),
                                   "--out", str(cmc), "--force"],
                          [(cmc, "CMC curves of every method above")]))
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
