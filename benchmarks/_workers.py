"""Run one measurement of a benchmark in a fresh Python process (its own wall time and peak
RSS): ``python -m benchmarks.<module> --worker JSON`` prints the worker's JSON result last."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def run_worker(module: str, task: dict) -> dict:
    """``task`` (with its ``kind``) run by ``benchmarks.<module>`` in a child process; its
    JSON result. RuntimeError with the child's stderr tail when it fails."""
    cmd = [sys.executable, "-m", f"benchmarks.{module}", "--worker", json.dumps(task)]
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"worker {task['kind']} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def answer_worker(task_json: str, workers: dict) -> int:
    """The child side of :func:`run_worker`: run ``workers[task["kind"]](**rest)`` and print
    its JSON result. Returns the exit code (0)."""
    task = json.loads(task_json)
    kind = task.pop("kind")
    print(json.dumps(workers[kind](**task)))
    return 0
