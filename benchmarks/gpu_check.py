"""One prepared GPU check: every CUDA path of reidcli run once, measured, and compared with
the CPU (docs/performance.md, "GPU check").

    python benchmarks/gpu_check.py [--out DIR] [--tiny] [--only CHECK,...] [--keep-work]

Checks, in order (each in its own process with a time limit; a failing check is recorded with
its error line and the others go on; DIR/gpu_check.json and DIR/gpu_check.md are rewritten
after every check, so a run cut short keeps what it measured):

* ``env``       torch / CUDA / device facts.
* ``data``      render the synthetic datasets the other checks read (``reid data synth``).
* ``train_pcb``, ``train_bot``, ``train_dgvae``, ``train_dmgnet``
                ``reid train NET`` with ResNet-50 from scratch at the paper's input size and
                batch composition, a few dozen iterations per precision variant (fp32,
                fp32 + channels_last, AMP bf16 / fp16 + channels_last): images/s and
                iterations/s of the logged steady state (loader included), peak GPU memory,
                finite losses.
* ``agree_train`` the first BoT iterations on CPU and on CUDA from the same seed in fp32 (TF32
                off): the logged losses must agree to ``TRAIN_RTOL``.
* ``extract``   ``reid extract`` of the BoT run on CUDA (fp32, bf16) and on the CPU: images/s;
                features must agree (cosine ≥ ``EXTRACT_MIN_COS``) and mAP to ``MAP_ATOL``.
* ``eval``      ``reid eval`` (whole command) at Market-1501 and MSMT17 sizes on CUDA (fp32,
                bf16), on the CPU at Market size; metrics must agree (fp32 to ``MAP_ATOL``).
* ``rerank``    ``reid eval --rerank`` on CUDA and CPU (Market-sized, and a small store for the
                agreement check).
* ``adapt``     ``reid adapt dart3`` LITE and full on CUDA and on the CPU (agreement of the
                adapted features and mAP), plus ``benchmarks/adapt_speed.py`` at MSMT17 size.
* ``nccl``      ``torchrun --nproc_per_node 1 reid extract`` (an NCCL process group) — its
                features must equal the single-process CUDA extraction.

``--tiny`` runs the same checks on the CPU at toy sizes in one process (no GPU, no NCCL: that
check is skipped) so that the default tests keep the script working. The machine it targets
reaches no package registry: install the project with
``python3 -m pip install --no-deps --no-build-isolation -e .`` first.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

#: agreement tolerances (stated in the report)
TRAIN_RTOL = 2e-3          # relative difference of the first logged BoT losses, fp32, TF32 off
EXTRACT_MIN_COS = 0.999    # fp32 CUDA vs CPU features, per row
EXTRACT_MIN_COS_BF16 = 0.95  # bf16 autocast, per row (the worst row of a barely trained model)
ADAPT_MIN_COS = 0.999        # full DART3 adapted features, CUDA (TF32 convolutions) vs CPU
MAP_ATOL = 1e-3            # fp32 metrics (fractions) CUDA vs CPU
MAP_ATOL_BF16 = 1e-2

CHECKS = ("env", "data", "train_bot", "extract", "eval", "adapt", "nccl", "train_pcb",
          "train_dmgnet", "train_dgvae", "rerank", "agree_train")
#: seconds each check may take on the GPU machine (the whole run stays under 8 minutes)
LIMITS = {"env": 60, "data": 60, "train_pcb": 70, "train_bot": 70, "train_dgvae": 50,
          "train_dmgnet": 60, "agree_train": 45, "extract": 60, "eval": 90, "rerank": 50,
          "adapt": 80, "nccl": 45}
TOTAL_BUDGET_S = 450
#: checks whose outputs another check reads (added by --only)
NEEDS = {"extract": ("train_bot",), "adapt": ("train_bot", "extract"),
         "nccl": ("train_bot", "extract")}


# -- context -----------------------------------------------------------------------------------
class Context:
    def __init__(self, work: Path, tiny: bool):
        self.work = work
        self.tiny = tiny
        self.device = "cpu" if tiny else "cuda"
        self.data = work / "data"

    def data_args(self, name: str) -> list[str]:
        return ["--dataset", "synthetic", "--root", str(self.data), "--option", f"name={name}"]

    @property
    def default_name(self) -> str:
        return "tiny" if self.tiny else "default"


def reid(*args, capture: bool = True) -> tuple[int, str, float]:
    """``reid ARGS`` in this process: (exit code, stderr tail, seconds)."""
    import io

    from reidcli.cli.main import main
    err = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stderr(err) if capture else contextlib.nullcontext():
        try:
            code = main([str(a) for a in args])
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    seconds = time.perf_counter() - start
    return int(code or 0), err.getvalue()[-1500:], seconds


def reid_ok(*args) -> float:
    code, err, seconds = reid(*args)
    if code != 0:
        raise RuntimeError(f"reid {' '.join(map(str, args[:3]))} … exited {code}: "
                           f"{err.strip().splitlines()[-1] if err.strip() else ''}")
    return seconds


def reid_process(*args, env=None, timeout=300) -> tuple[float, subprocess.CompletedProcess]:
    """``reid ARGS`` as its own process (whole-command wall time)."""
    cmd = [sys.executable, "-c", "import sys; from reidcli.cli.main import main; "
           "sys.exit(main())", *map(str, args)]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"reid {' '.join(map(str, args[:2]))} exited {done.returncode}: "
                           f"{done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ''}")
    return seconds, done


def peak_memory_reset() -> None:
    import torch
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def peak_memory_mib() -> float | None:
    import torch
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() / 2**20
    return None


# -- checks ------------------------------------------------------------------------------------
def check_env(ctx: Context) -> dict:
    import torch
    out = {"python": platform.python_version(), "torch": torch.__version__,
           "cuda_available": torch.cuda.is_available(), "cpu_threads": torch.get_num_threads()}
    try:
        import torchvision
        out["torchvision"] = torchvision.__version__
    except ImportError:
        out["torchvision"] = None
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        out.update(device=torch.cuda.get_device_name(0), capability=list(props.major_minor)
                   if hasattr(props, "major_minor") else [props.major, props.minor],
                   memory_gib=round(props.total_memory / 2**30, 1),
                   cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(),
                   bf16=torch.cuda.is_bf16_supported(),
                   nccl=".".join(map(str, torch.cuda.nccl.version()))
                   if hasattr(torch.cuda, "nccl") else None)
    elif not ctx.tiny:
        raise RuntimeError("no CUDA device: run with --tiny on a machine without a GPU")
    return out


def check_data(ctx: Context) -> dict:
    seconds = {}
    if ctx.tiny:
        small = ["--option", "imgs_per_id_cam=2", "--option", "num_distractors=0", "--option",
                 "num_junk=0"]
        plans = {"tiny": [], "vi": ["--option", "num_train_ids=8", "--option", "num_test_ids=6",
                                    *small],
                 "dg": ["--option", "num_train_ids=8", "--option", "num_test_ids=4",
                        "--option", "num_cameras=3", *small]}
    else:
        plans = {"default": [], "vi": ["--option", "num_train_ids=32", "--option",
                                       "num_test_ids=16"],
                 "dg": ["--option", "num_train_ids=64", "--option", "num_test_ids=24"]}
    for name, extra in plans.items():
        if (ctx.data / "synthetic" / name).is_dir():
            seconds[name] = 0.0
            continue
        seconds[name] = round(reid_ok("data", "synth", "--out", ctx.data, "--preset", name,
                                      *extra), 2)
    return {"synth_seconds": seconds}


#: per network: data arguments and the precision variants timed (label, --amp, --channels-last)
def _train_plan(ctx: Context, net: str) -> tuple[list[str], list[tuple[str, str, str, tuple]]]:
    if net == "dmgnet":
        data = ["--sources", "synthetic", "--source-option", "synthetic.name=dg", "--root",
                str(ctx.data), "--domains", "synthetic/d0,synthetic/d1,synthetic/d2",
                "--targets", "synthetic/d3"]
    elif net == "dgvae":
        data = ctx.data_args("vi")
    else:
        data = ctx.data_args(ctx.default_name)
    if ctx.tiny:
        return data, [("fp32", "off", "off", ())]
    variants = [("fp32", "off", "off", ()), ("fp32 + channels_last", "off", "on", ()),
                ("bf16 + channels_last", "bf16", "on", ()),
                ("fp16 + channels_last", "fp16", "on", ())]
    if net == "dgvae":
        variants = [variants[1], variants[2]]
    elif net == "dmgnet":      # AMP is refused with the second-order meta-gradient (D30)
        variants = [("order 2, fp32 + channels_last", "off", "on", ()),
                    ("order 1, fp32 + channels_last", "off", "on", ("--meta-order", "1")),
                    ("order 1, bf16 + channels_last", "bf16", "on", ("--meta-order", "1"))]
    return data, variants


def _steady_rates(metrics: Path) -> tuple[float | None, float | None, bool, int]:
    """images/s and iterations/s of the logged rows after the first (warm-up), whether every
    logged loss is finite, and the rows read."""
    with open(metrics, newline="") as fh:
        rows = list(csv.DictReader(fh))
    finite = all(math.isfinite(float(r["loss"])) for r in rows if r.get("loss") not in ("", None))
    steady = rows[1:] or rows
    if not steady:
        return None, None, finite, 0
    images = sum(float(r["images_per_s"]) for r in steady) / len(steady)
    iters = None
    if len(steady) >= 2:
        di = float(steady[-1]["iteration"]) - float(steady[0]["iteration"])
        dt = float(steady[-1]["seconds"]) - float(steady[0]["seconds"])
        iters = di / dt if dt > 0 else None
    return images, iters, finite, len(rows)


def check_train(ctx: Context, net: str) -> dict:
    data, variants = _train_plan(ctx, net)
    if ctx.tiny:
        common = ["--preset", "tiny", "--device", "cpu", "--max-iters", "3", "--log-every", "1",
                  "--workers", "0"]
    else:
        common = ["--backbone", "resnet50", "--init", "scratch", "--device", "cuda",
                  "--max-iters", "30" if net in ("pcb", "bot") else "20", "--log-every", "5",
                  "--workers", "8"]
    rows = []
    for label, amp, channels_last, extra in variants:
        out = ctx.work / f"train_{net}_{amp}_{channels_last}{'_'.join(('',) + extra)}"
        peak_memory_reset()
        row = {"variant": label}
        try:
            row["wall_s"] = round(reid_ok("train", net, *data, *common, "--amp", amp,
                                          "--channels-last", channels_last, *extra, "--out", out,
                                          "--force", "--quiet"), 2)
            images, iters, finite, logged = _steady_rates(out / "metrics.csv")
            row.update(images_per_s=images, iterations_per_s=iters, losses_finite=finite,
                       logged_rows=logged, peak_mib=peak_memory_mib())
            if not finite:
                row["error"] = "a logged loss is not finite"
        except Exception as exc:                     # recorded; the next variant still runs
            row["error"] = str(exc)[:400]
        rows.append(row)
    failed = [r for r in rows if "error" in r]
    return {"network": net, "rows": rows, "ok": not failed}


def _first_losses(metrics: Path, n: int) -> list[float]:
    with open(metrics, newline="") as fh:
        return [float(r["loss"]) for r in list(csv.DictReader(fh))[:n]]


def check_agree_train(ctx: Context) -> dict:
    """BoT, fp32, same seed, 3 logged iterations on the CPU and on CUDA (TF32 off)."""
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    data = ctx.data_args(ctx.default_name)
    common = (["--preset", "tiny"] if ctx.tiny else
              ["--backbone", "resnet18", "--init", "scratch", "--batch-size", "32"])
    common += ["--max-iters", "3", "--log-every", "1", "--workers", "0", "--amp", "off",
               "--channels-last", "off", "--seed", "0", "--quiet", "--force"]
    losses = {}
    for device in ("cpu", ctx.device if not ctx.tiny else "cpu"):
        out = ctx.work / f"agree_bot_{device}_{len(losses)}"
        reid_ok("train", "bot", *data, *common, "--device", device, "--out", out)
        losses[f"{device}#{len(losses)}"] = _first_losses(out / "metrics.csv", 3)
    (a, b) = losses.values()
    rel = max(abs(x - y) / max(abs(x), 1e-12) for x, y in zip(a, b))
    return {"losses": losses, "max_rel_diff": rel, "tolerance": TRAIN_RTOL,
            "ok": rel <= TRAIN_RTOL, "note": "ResNet-18 (CPU time), batch 32, TF32 off"}


def _features(store: Path) -> "tuple":
    import numpy as np

    from reidcli.store import open_store
    with open_store(store) as st:
        name = st.default_feature()
        return np.asarray(st.features(name), dtype=np.float64), name


def _row_cosines(a, b):
    import numpy as np
    num = (a * b).sum(1)
    den = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return num / np.maximum(den, 1e-12)


def _eval_metrics(store: Path, *extra, device: str) -> dict:
    out = store.with_suffix(f".{device}.{abs(hash(extra)) % 10**6}.json")
    reid_ok("eval", "--store", store, "--device", device, "--json", out, "--force", "--quiet",
            *extra)
    report = json.loads(out.read_text())
    return _headline(report)


def _headline(report: dict) -> dict:
    """mAP and rank-1 of an eval JSON report (its mean over trials)."""
    def find(obj, key):
        if isinstance(obj, dict):
            if key in obj and isinstance(obj[key], (int, float)):
                return float(obj[key])
            for value in obj.values():
                got = find(value, key)
                if got is not None:
                    return got
        elif isinstance(obj, list):
            for value in obj:
                got = find(value, key)
                if got is not None:
                    return got
        return None
    cmc = report.get("cmc") or [None]
    return {"mAP": find(report, "mAP"), "rank1": cmc[0]}


def _bot_run(ctx: Context) -> Path:
    for name in ("train_bot_off_off", "train_bot_off_on"):
        run = ctx.work / name
        if (run / "model.pt").is_file():
            return run
    run = ctx.work / "extract_bot_run"
    if not (run / "model.pt").is_file():
        common = (["--preset", "tiny", "--device", "cpu", "--workers", "0"] if ctx.tiny else
                  ["--backbone", "resnet50", "--init", "scratch", "--device", "cuda",
                   "--workers", "8"])
        reid_ok("train", "bot", *ctx.data_args(ctx.default_name), *common, "--max-iters", "3",
                "--out", run, "--force", "--quiet")
    return run


def check_extract(ctx: Context) -> dict:
    import numpy as np
    run = _bot_run(ctx)
    data = ctx.data_args(ctx.default_name)
    rows, stores = [], {}
    plan = [("cpu", "off")] if ctx.tiny else [("cuda", "off"), ("cuda", "bf16"), ("cpu", "off")]
    if not ctx.tiny:       # CUDA context, cuDNN autotuning: paid once per process, not timed
        warm = time.perf_counter()
        reid_ok("extract", "--model", run, *data, "--out", ctx.work / "extract_warmup.h5",
                "--force", "--device", "cuda", "--workers", "8")
        first_call_s = time.perf_counter() - warm
    for device, amp in plan:
        store = ctx.work / f"extract_{device}_{amp}.h5"
        seconds = reid_ok("extract", "--model", run, *data, "--out", store, "--force",
                          "--device", device, "--amp", amp, "--workers",
                          "0" if ctx.tiny else "8")
        feats, name = _features(store)
        stores[(device, amp)] = (store, feats)
        rows.append({"device": device, "amp": amp, "images": int(len(feats)),
                     "seconds": round(seconds, 2),
                     "images_per_s": round(len(feats) / seconds, 1),
                     "metrics": _eval_metrics(store, device="cpu")})
    out = {"feature": name, "rows": rows, "ok": True,
           "note": "images/s of the whole command (model load and image decoding included), "
                   "after an untimed first CUDA extraction in the same process"}
    if not ctx.tiny:
        out["first_cuda_call_s"] = round(first_call_s, 2)
    if not ctx.tiny:
        ref = stores[("cpu", "off")][1]
        for (device, amp), (_, feats) in stores.items():
            if device == "cpu":
                continue
            cosines = _row_cosines(feats, ref)
            cos = float(np.min(cosines))
            out[f"mean_cosine_{device}_{amp}_vs_cpu"] = float(np.mean(cosines))
            limit = EXTRACT_MIN_COS if amp == "off" else EXTRACT_MIN_COS_BF16
            out[f"min_cosine_{device}_{amp}_vs_cpu"] = cos
            out["ok"] &= cos >= limit
        cpu_map = rows[-1]["metrics"]["mAP"]
        gpu_map = rows[0]["metrics"]["mAP"]
        out["map_diff_fp32"] = abs(cpu_map - gpu_map)
        out["ok"] &= out["map_diff_fp32"] <= MAP_ATOL
    return out


def _synthetic_store(ctx: Context, size: str) -> Path:
    from benchmarks import eval_speed
    if ctx.tiny or size == "small":
        eval_speed.SIZES.setdefault("gpu_check_tiny", dict(queries=60, gallery=400,
                                                          distractors=20, ids=40, cams=6))
        eval_speed.SIZES.setdefault("gpu_check_small", dict(queries=1000, gallery=5000,
                                                           distractors=200, ids=300, cams=6))
        size = "gpu_check_tiny" if ctx.tiny else "gpu_check_small"
    path = ctx.work / f"store_{size}.h5"
    eval_speed.work_write_store(size, 64 if ctx.tiny else 2048, 0, str(path))
    return path


def check_eval(ctx: Context) -> dict:
    sizes = ["tiny"] if ctx.tiny else ["market", "msmt17"]
    rows, ok = [], True
    for size in sizes:
        store = _synthetic_store(ctx, size)
        plan = [("cpu", "float32")] if ctx.tiny else [("cuda", "float32"), ("cuda", "bf16")]
        if not ctx.tiny and size == "market":       # the CPU reference (and agreement) once
            plan.append(("cpu", "float32"))
        metrics = {}
        for device, precision in plan:
            out = ctx.work / f"eval_{size}_{device}_{precision}.json"
            if ctx.tiny:
                seconds = reid_ok("eval", "--store", store, "--device", device, "--precision",
                                  precision, "--json", out, "--force", "--quiet")
            else:
                seconds, _ = reid_process("eval", "--store", store, "--device", device,
                                          "--precision", precision, "--json", out, "--force",
                                          "--quiet", timeout=LIMITS["eval"])
            metrics[(device, precision)] = _headline(json.loads(out.read_text()))
            rows.append({"size": size, "device": device, "precision": precision,
                         "seconds": round(seconds, 2), **metrics[(device, precision)]})
        if ("cpu", "float32") in metrics and not ctx.tiny:
            cpu = metrics[("cpu", "float32")]["mAP"]
            for (device, precision), m in metrics.items():
                if device == "cuda":
                    tol = MAP_ATOL if precision == "float32" else MAP_ATOL_BF16
                    ok &= abs(m["mAP"] - cpu) <= tol
    return {"rows": rows, "ok": ok,
            "note": "whole `reid eval --store S --json` process (CUDA start-up included); "
                    "2048-d synthetic stores"}


def check_rerank(ctx: Context) -> dict:
    rows, ok = [], True
    plan = [("small", "cpu")] if ctx.tiny else [("small", "cuda"), ("small", "cpu"),
                                                 ("market", "cuda")]
    metrics = {}
    for size, device in plan:
        store = _synthetic_store(ctx, size)
        out = ctx.work / f"rerank_{size}_{device}.json"
        start = time.perf_counter()
        reid_ok("eval", "--store", store, "--rerank", "--device", device, "--json", out,
                "--force", "--quiet")
        seconds = time.perf_counter() - start
        metrics[(size, device)] = _headline(json.loads(out.read_text()))
        rows.append({"size": size, "device": device, "seconds": round(seconds, 2),
                     **metrics[(size, device)]})
    if not ctx.tiny:
        ok = abs(metrics[("small", "cuda")]["mAP"] - metrics[("small", "cpu")]["mAP"]) <= MAP_ATOL
    return {"rows": rows, "ok": ok, "note": "in-process `reid eval --rerank` (k1=20, k2=6, λ=0.3)"}


def check_adapt(ctx: Context) -> dict:
    import numpy as np
    run = _bot_run(ctx)
    store = ctx.work / "extract_cpu_off.h5"
    if not store.is_file():
        reid_ok("extract", "--model", run, *ctx.data_args(ctx.default_name), "--out", store,
                "--force", "--device", "cpu", "--workers", "0")
    rows, feats, ok = [], {}, True
    devices = ["cpu"] if ctx.tiny else ["cuda", "cpu"]
    for mode in ("lite", "full"):
        for device in devices:
            out = ctx.work / f"adapt_{mode}_{device}.h5"
            extra = ["--model", run] if mode == "full" else []
            try:
                seconds = reid_ok("adapt", "dart3", "--store", store, "--out", out, "--force",
                                  "--mode", mode, "--device", device, "--quiet", *extra)
                feats[(mode, device)] = _features(out)[0]
                rows.append({"mode": mode, "device": device, "seconds": round(seconds, 2),
                             **_eval_metrics(out, device="cpu")})
            except Exception as exc:
                rows.append({"mode": mode, "device": device, "error": str(exc)[:400]})
                ok = False
    out = {"rows": rows}
    if not ctx.tiny:
        for mode in ("lite", "full"):
            if (mode, "cuda") in feats and (mode, "cpu") in feats:
                a, b = feats[(mode, "cuda")], feats[(mode, "cpu")]
                out[f"max_rel_diff_{mode}"] = float(np.max(np.abs(a - b)) / np.max(np.abs(b)))
                out[f"min_cosine_{mode}"] = float(np.min(_row_cosines(a, b)))
                ok &= out[f"min_cosine_{mode}"] >= ADAPT_MIN_COS
        speed = ctx.work / "adapt_speed.txt"
        try:
            done = subprocess.run([sys.executable, str(HERE / "adapt_speed.py"), "--device",
                                   "cuda", "--batches", "64", "--ref-batches", "64",
                                   "--methods", "norm,dart3-lite,dart3-lite/bf16,dart3"],
                                  capture_output=True, text=True, timeout=60)
            speed.write_text(done.stdout + done.stderr)
            out["adapt_speed"] = done.stdout[-3000:]
            if done.returncode != 0:
                out["adapt_speed_error"] = done.stderr.strip().splitlines()[-1:]
        except subprocess.TimeoutExpired:
            out["adapt_speed_error"] = "timed out after 60 s"
    out["ok"] = ok
    return out


def check_nccl(ctx: Context) -> dict:
    import numpy as np
    if ctx.tiny:
        return {"skipped": "no GPU: NCCL needs CUDA (the gloo path runs in the default tests)",
                "ok": True}
    run = _bot_run(ctx)
    ref = ctx.work / "extract_cuda_off.h5"
    out = ctx.work / "extract_nccl.h5"
    torchrun = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
           "1", "-m", "reidcli.cli.main", "extract", "--model", str(run),
           *ctx.data_args(ctx.default_name), "--out", str(out), "--force", "--device", "cuda",
           "--workers", "8"]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=LIMITS["nccl"] - 5)
    seconds = time.perf_counter() - start
    result = {"seconds": round(seconds, 2), "returncode": done.returncode, "torchrun": torchrun,
              "stderr_tail": done.stderr[-800:]}
    if done.returncode != 0:
        result["ok"] = False
        return result
    a, _ = _features(out)
    if ref.is_file():
        b, _ = _features(ref)
        result["max_abs_diff_vs_single_process"] = float(np.max(np.abs(a - b)))
        result["ok"] = result["max_abs_diff_vs_single_process"] <= 1e-4
    else:
        result["ok"] = True
    return result


RUNNERS = {"env": check_env, "data": check_data,
           "train_pcb": lambda c: check_train(c, "pcb"),
           "train_bot": lambda c: check_train(c, "bot"),
           "train_dgvae": lambda c: check_train(c, "dgvae"),
           "train_dmgnet": lambda c: check_train(c, "dmgnet"),
           "agree_train": check_agree_train, "extract": check_extract, "eval": check_eval,
           "rerank": check_rerank, "adapt": check_adapt, "nccl": check_nccl}


# -- driver ------------------------------------------------------------------------------------
def run_here(name: str, ctx: Context) -> dict:
    start = time.perf_counter()
    try:
        result = RUNNERS[name](ctx)
        result.setdefault("ok", "error" not in result)
    except Exception as exc:
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:600],
                  "traceback": traceback.format_exc()[-2000:]}
    result["seconds"] = round(time.perf_counter() - start, 2)
    return result


def run_isolated(name: str, ctx: Context, limit: float) -> dict:
    part = ctx.work / "parts" / f"{name}.json"
    part.parent.mkdir(parents=True, exist_ok=True)
    part.unlink(missing_ok=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", name, "--work",
           str(ctx.work)]
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
        tail = done.stderr[-1500:]
    except subprocess.TimeoutExpired as exc:
        return {"ok": False, "error": f"timed out after {limit:.0f} s",
                "stderr_tail": (exc.stderr or b"")[-1500:].decode(errors="replace")
                if isinstance(exc.stderr, bytes) else str(exc.stderr)[-1500:],
                "seconds": round(time.perf_counter() - start, 2)}
    if part.is_file():
        return json.loads(part.read_text())
    return {"ok": False, "error": f"the check's process exited {done.returncode}",
            "stderr_tail": tail, "seconds": round(time.perf_counter() - start, 2)}


def markdown(report: dict) -> str:
    env = report["checks"].get("env", {})
    lines = [f"# GPU check — {env.get('device', 'CPU (--tiny)')}", "",
             f"torch {env.get('torch')}, CUDA {env.get('cuda')}, cuDNN {env.get('cudnn')}, "
             f"mode {'tiny (CPU)' if report['tiny'] else 'full'}; "
             f"{report['wall_s']:.0f} s in all.", "",
             "| check | ok | seconds | result |", "|---|---|---:|---|"]
    for name, res in report["checks"].items():
        summary = res.get("error") or res.get("skipped") or ""
        if not summary:
            summary = _summary(name, res)
        lines.append(f"| {name} | {'yes' if res.get('ok') else 'NO'} | "
                     f"{res.get('seconds', '')} | {summary} |")
    for name, res in report["checks"].items():
        if name.startswith("train_") and res.get("rows"):
            lines += ["", f"## {name}", "", "| variant | images/s | it/s | peak MiB | finite |",
                      "|---|---:|---:|---:|---|"]
            for row in res["rows"]:
                if "error" in row:
                    lines.append(f"| {row['variant']} | error: {row['error'][:120]} | | | |")
                    continue
                lines.append(f"| {row['variant']} | {_num(row.get('images_per_s'))} | "
                             f"{_num(row.get('iterations_per_s'), 2)} | "
                             f"{_num(row.get('peak_mib'))} | {row.get('losses_finite')} |")
        elif name in ("extract", "eval", "rerank", "adapt") and res.get("rows"):
            keys = [k for k in res["rows"][0] if k not in ("metrics",)]
            lines += ["", f"## {name}", "", "| " + " | ".join(keys) + " |",
                      "|" + "---|" * len(keys)]
            for row in res["rows"]:
                lines.append("| " + " | ".join(_num(row.get(k), 4) for k in keys) + " |")
    return "\n".join(lines) + "\n"


def _num(value, digits: int = 1) -> str:
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return "" if value is None else str(value)


def _summary(name: str, res: dict) -> str:
    keys = [k for k in res if k.startswith(("max_", "min_", "map_diff")) and
            isinstance(res[k], float)]
    return ", ".join(f"{k} {res[k]:.2e}" for k in keys)


def write_report(report: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, text in (("gpu_check.json", json.dumps(report, indent=2, default=str)),
                       ("gpu_check.md", markdown(report))):
        tmp = out / (name + ".partial")
        tmp.write_text(text)
        os.replace(tmp, out / name)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="gpu_check_out", help="folder of the JSON/markdown")
    parser.add_argument("--tiny", action="store_true", help="CPU, toy sizes, one process")
    parser.add_argument("--only", default="", help="comma list of checks (default: all)")
    parser.add_argument("--work", default=None, help="scratch folder (default: a temp folder)")
    parser.add_argument("--keep-work", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.environ.setdefault("REIDCLI_OFFLINE", "1")
    if args.child:
        ctx = Context(Path(args.work), tiny=False)
        result = run_here(args.child, ctx)
        part = ctx.work / "parts" / f"{args.child}.json"
        part.write_text(json.dumps(result, default=str))
        return 0
    names = [n for n in (args.only.split(",") if args.only else CHECKS) if n]
    unknown = sorted(set(names) - set(CHECKS))
    if unknown:
        parser.error(f"--only: unknown check(s) {', '.join(unknown)}; known: {', '.join(CHECKS)}")
    wanted = set(names) | {"env"} | ({"data"} if set(names) - {"env"} else set())
    wanted |= {need for n in names for need in NEEDS.get(n, ())}
    names = [n for n in CHECKS if n in wanted]
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="gpu_check_"))
    work.mkdir(parents=True, exist_ok=True)
    ctx = Context(work, tiny=args.tiny)
    out = Path(args.out)
    report = {"tiny": args.tiny, "checks": {}, "wall_s": 0.0,
              "tolerances": {"train_rtol": TRAIN_RTOL, "extract_min_cos": EXTRACT_MIN_COS,
                             "extract_min_cos_bf16": EXTRACT_MIN_COS_BF16, "map_atol": MAP_ATOL,
                             "map_atol_bf16": MAP_ATOL_BF16},
              "command": " ".join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])])}
    start = time.perf_counter()
    try:
        for name in names:
            left = TOTAL_BUDGET_S - (time.perf_counter() - start)
            if not args.tiny and left < 15:
                report["checks"][name] = {"ok": False, "error": "skipped: time budget spent"}
                continue
            print(f"[gpu_check] {name} …", file=sys.stderr, flush=True)
            result = (run_here(name, ctx) if args.tiny else
                      run_isolated(name, ctx, min(LIMITS[name], left)))
            report["checks"][name] = result
            report["wall_s"] = time.perf_counter() - start
            write_report(report, out)
            print(f"[gpu_check] {name}: {'ok' if result.get('ok') else 'FAILED'} "
                  f"({result.get('seconds', '?')} s) {result.get('error', '')}",
                  file=sys.stderr, flush=True)
    finally:
        if not args.keep_work and not args.work:
            shutil.rmtree(work, ignore_errors=True)
    print(markdown(report))
    return 0 if all(r.get("ok") for r in report["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
