"""`reid demo` runs every available stage on synthetic data as printed `reid` commands and
reports real numbers; the printed commands, pasted in order, redo it."""
from __future__ import annotations

import json
import shlex
from pathlib import Path

import numpy as np
import pytest

from reidcli.store import open_store
from tests.cli.helpers import run_cli, spy
from tests.plotting.conftest import one_native_thread  # noqa: F401


def printed_commands(out: str) -> tuple[dict[str, str], list[list[str]]]:
    """The environment the demo exports and the argv of every ``reid`` command it printed."""
    env, commands = {}, []
    for line in out.splitlines():
        if line.startswith("export "):
            env.update(w.split("=", 1) for w in shlex.split(line)[1:])
        elif line.startswith("reid "):
            commands.append(shlex.split(line))
    return env, commands


def scores(folder: Path) -> dict[str, tuple[list[float], float]]:
    """{report name: (CMC, mAP)} of every evaluation report in ``folder``."""
    return {p.name: (json.loads(p.read_text())["cmc"], json.loads(p.read_text())["mAP"])
            for p in sorted(folder.glob("*.json"))}


@pytest.mark.usefixtures("one_torch_thread", "one_native_thread")
def test_demo_tiny_end_to_end(capsys, tmp_path, monkeypatch):
    import reidcli.demo
    import reidcli.plotting.cmc
    import reidcli.plotting.tsne

    (tmp_path / "demo").mkdir()
    monkeypatch.chdir(tmp_path / "demo")
    demos = spy(monkeypatch, reidcli.demo, "run_demo")
    cmc_plots = spy(monkeypatch, reidcli.plotting.cmc, "plot_cmc")
    tsne_plots = spy(monkeypatch, reidcli.plotting.tsne, "plot_tsne")
    code, out, err = run_cli(capsys, "demo", "--preset", "tiny", "--root", "data",
                             "--out", "out")
    assert code == 0, err
    demo, = demos
    env, argvs = printed_commands(out)
    # printed == ran: one printed line per stage, the line the stage recorded
    assert [shlex.join(argv) for argv in argvs] == [s.command for s in demo.steps]
    assert env == reidcli.demo.ONE_THREAD
    stages = [s.stage for s in demo.steps]
    assert set(stages) == {"data", "extract", "train", "fit-pooling", "adapt", "eval", "plot"}
    # the stages name the dataset, root and options they read: the demo's preset, and the
    # cdpcf preset's target domain under half/half trials for the C-DPCF rows
    cdpcf_data = ["--dataset", "synthetic", "--root", "data", "--option", "name=cdpcf-target",
                  "--option", "protocol=single_shot_half", "--option", "domain=synthetic/d1",
                  "--option", "num_trials=1"]
    for argv in argvs:
        if argv[1] == "extract" or argv[1:3] == ["train", "bot"]:
            data = argv[argv.index("--dataset"):]
            assert data[:12] == cdpcf_data if \
                "name=cdpcf-target" in argv else \
                data[:6] == ["--dataset", "synthetic", "--root", "data", "--option", "name=tiny"]
    synth, = [argv for argv in argvs if argv[1:3] == ["data", "synth"] and "cdpcf" in argv]
    assert synth[synth.index("--preset") + 1] == "cdpcf"
    # one CMC figure per data set; legends name the method alone (no store suffix), from the
    # result JSONs in the order evaluated
    assert [plot.names for plot in cmc_plots] == [
        ["hsv-stripes (euclidean)", "hsv-stripes + XQDA", "BoT tiny bnneck (euclidean)",
         "BoT tiny bnneck + camera Norm (euclidean)", "BoT tiny bnneck + DART3 LITE (euclidean)"],
        ["hsv-stripes (euclidean)", "color-grid + AvgP+XQDA", "color-grid + AvgP+pad.+XQDA",
         "color-grid + DPCF", "color-grid + C-DPCF"]]
    # t-SNE: test rows only, BoT before / after DART3 LITE side by side
    tsne, = tsne_plots
    assert len(tsne.points) == 2 and tsne.titles[0].startswith("before")
    with open_store("out/synthetic_tiny_bot_tiny.h5") as st:
        assert set(st.records["split"].to_numpy()[tsne.rows]) == {"query", "gallery"}

    # issue 33: C-DPCF runs as its paper does (2 cameras sharing identities, half/half
    # trials; tiny: the first only) and beats its baselines there, which the notes say; each
    # row names its data; a pasted eval prints its scores (no --quiet); `source …/activate`
    # comes first, so a pasting shell finds `reid`
    by_name = {(row["method"], row["data"]): row for row in demo.results}
    assert [row["data"] for row in demo.results] == ["tiny"] * 5 + ["cdpcf d1"] * 5
    cdpcf = by_name["colour-grid maps + C-DPCF", "cdpcf d1"]["rank-1"]
    for baseline in ("HSV stripes, Euclidean", "colour-grid maps + AvgP+XQDA",
                     "colour-grid maps + AvgP+pad.+XQDA", "colour-grid maps + DPCF"):
        assert cdpcf > by_name[baseline, "cdpcf d1"]["rank-1"]
    note, = [line for line in out.splitlines() if line.startswith("note: on its data C-DPCF")]
    assert f"rank-1 {100 * cdpcf:.1f} %, above its baselines" in note
    assert "note: data 'cdpcf d1': the target domain d1 of synthetic preset 'cdpcf'" in out
    assert "note: data 'tiny': synthetic preset 'tiny'" in out
    assert all("--quiet" not in argv for argv in argvs if argv[1] == "eval")
    assert out.splitlines()[1].startswith(("source ", "# "))
    assert "1 junk images (pid -1)" in out

    # the results table: every method, scores as in its report, no wrapped rows in a pipe
    lines = out.splitlines()
    assert all(f"  {row['method']}" in out and row["shows"] in out for row in demo.results)
    for row in demo.results:
        line, = [l for l in lines if f" {row['method']} " in l and f" {row['data']} " in l
                 and l.startswith("│")]
        assert f" {100 * row['mAP']:.1f} " in line and f" {100 * row['rank-1']:.1f} " in line
    cnn = json.loads(Path("out/synthetic_tiny_bot_tiny.json").read_text())
    assert cnn["feature"] == "bnneck" and cnn["num_valid_queries"] > 0
    lite = json.loads(Path("out/synthetic_tiny_bot_tiny_dart3-lite.json").read_text())
    adapt = lite["store_provenance"]["adapt"]
    assert (adapt["method"], adapt["lr"], adapt["steps"], adapt["episodic"]) == \
        ("dart3", *(reidcli.demo.DART3_LITE[k] for k in ("lr", "steps", "episodic")))
    note, = [l for l in lines if l.startswith("note: DART3 LITE ran with --lr")]
    assert "not the paper's --lr 0.0001" in note and "vs camera Norm" in note
    report = json.loads(Path("out/synthetic_tiny_hsv.json").read_text())
    assert report["protocol"] == "market" and report["num_valid_queries"] > 0
    cmc = np.asarray(report["cmc"])
    assert np.all(np.diff(cmc) >= 0) and 0 <= cmc[0] <= cmc[-1] <= 1
    with open_store("out/synthetic_tiny_hsv.h5") as st:
        assert st.feature_info("hsv-stripes")["dim"] == 144
        assert st.provenance["command"] == shlex.join(argvs[1])      # the printed command
        assert st.provenance["inputs"][0]["listing_sha256"]           # the images it read
    with open_store("out/synthetic_cdpcf-target_hsv.h5") as st:
        assert st.convmap_layers == ["color-grid"] and st.protocol.num_trials == 1
        assert sorted(set(st.records["camid"])) == [0, 1]
        assert set(st.records["domain"]) == {"synthetic/d1"}

    # the outputs list names every file the demo wrote, each with a description
    listed = {Path(l.strip().split(" — ")[0]) for l in
              lines[lines.index("outputs:") + 1:] if " — " in l}
    written = {p for p in Path("out").rglob("*") if p.is_file()}
    assert written <= listed and all(p.exists() for p in listed)
    for figure in ("tiny_cmc", "cdpcf-target_cmc", "tiny_tsne"):
        assert Path(f"out/synthetic_{figure}.png").stat().st_size > 10_000

    # pasted in order, the printed commands redo the demo: over the demo's own outputs (as a
    # second run: `reid data synth` finds its data, every output is replaced) and with the
    # same scores
    first = scores(Path("out"))
    assert len(first) == 10
    before = {p: p.stat().st_mtime_ns for p in Path("out").glob("*.json")}
    mkdir, = [shlex.split(l) for l in out.splitlines() if l.startswith("mkdir -p ")]
    assert mkdir == ["mkdir", "-p", "out"]
    with reidcli.demo.thread_limit(env):
        for argv in argvs:
            code, _, err = run_cli(capsys, *argv[1:])
            assert code == 0, (shlex.join(argv), err)
    assert all(p.stat().st_mtime_ns > t for p, t in before.items())     # rewritten
    assert scores(Path("out")).keys() == first.keys()
    for name, (curve, m_ap) in scores(Path("out")).items():
        np.testing.assert_allclose(curve, first[name][0], atol=1e-6, err_msg=name)
        np.testing.assert_allclose(m_ap, first[name][1], atol=1e-6, err_msg=name)


def test_demo_stage_failure_names_the_command(capsys, tmp_path):
    """A stage that fails stops the demo: its own error, then one line naming the command."""
    (tmp_path / "data" / "synthetic" / "tiny").mkdir(parents=True)    # not the demo's data
    code, out, err = run_cli(capsys, "demo", "--preset", "tiny", "--root", tmp_path / "data",
                             "--out", tmp_path / "out")
    assert code == 2
    lines = err.strip().splitlines()
    assert lines[-1].startswith("error: demo stage 'data' failed (exit 2): reid data synth")
    assert lines[-2].startswith("error:")
    assert out.splitlines()[-1] in lines[-1]            # the printed command, as it ran


def test_an_interrupted_stage_prints_one_line(capsys, tmp_path, monkeypatch):
    """Ctrl-C inside a stage (a nested `reid` run) ends the demo with exit 130 and one
    `error: interrupted` line, not one per level."""
    import reidcli.data.synthetic

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt()

    monkeypatch.setattr(reidcli.data.synthetic, "generate", interrupted)
    code, _, err = run_cli(capsys, "demo", "--preset", "tiny", "--root", tmp_path / "data",
                           "--out", tmp_path / "out")
    assert code == 130
    assert [l for l in err.splitlines() if l.startswith("error: ")] == \
        ["error: interrupted (SIGINT) — outputs in progress were removed; run the command again"]
