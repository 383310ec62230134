"""The online adaptation loop shared by DART3, TENT and TEMP (docs/methods/dart3.md).

Queries are processed in a seeded random permutation (``order="shuffle"``), in store
order (``"stored"``) or in an explicit order (library API), cut into consecutive batches
(a final batch of one is merged into the previous one when batch-statistics BN needs two
rows). With ``split_by_query_camera`` each query camera is an independent stream: the
learnable state and the optimiser are re-initialised when the stream changes. Per batch:
optional episodic reset → T steps (forward, loss, backward, optimiser step, projection) →
the batch's embeddings are emitted from the last forward (``emit="pre"``, Alg 2) or
recomputed after the last update (``"post"``).
"""
from __future__ import annotations

import dataclasses
import time
from typing import Callable, Sequence

import numpy as np
import torch

from reidcli.adapt.base import Adapter, Batch, make_optimizer
from reidcli.adapt.config import OWNER
from reidcli.errors import ParameterError, UsageError
from reidcli.models.fixed_order import fixed_order_convolutions
from reidcli.naming import param
from reidcli.progress import StepBar, track


@dataclasses.dataclass
class BatchPlan:
    """Batches of one run: per batch the query positions, grounding positions and stream."""

    query_pos: list[np.ndarray]
    ground_pos: list[np.ndarray]
    stream: list[int]                # stream index of each batch
    stream_cameras: list[int | None] # camera code of each stream (None: all cameras)

    def __len__(self) -> int:
        return len(self.query_pos)


@dataclasses.dataclass
class LoopResult:
    """``embeddings`` [Ns, d] per selected query (selection order); ``order`` [Ns] positions
    into the selection in processing order; ``batch_id`` [Ns]; ``losses`` [n_batches, T];
    ``stream_states`` the adapter's arrays at the end of each stream; ``seconds`` wall time."""

    embeddings: np.ndarray
    order: np.ndarray
    batch_id: np.ndarray
    losses: np.ndarray
    stream_states: list[dict[str, np.ndarray]]
    stream_cameras: list[int | None]
    seconds: float


def processing_order(n: int, order, seed: int) -> np.ndarray:
    """Positions ``0..n-1`` in processing order: ``shuffle`` (seeded), ``stored`` or an
    explicit permutation."""
    if isinstance(order, str):
        if order == "stored":
            return np.arange(n)
        return np.random.default_rng([int(seed), 3]).permutation(n)
    perm = np.asarray(order, np.int64).reshape(-1)
    if len(perm) != n or not np.array_equal(np.sort(perm), np.arange(n)):
        raise UsageError(f"an explicit order must be a permutation of 0..{n - 1}",
                         "pass every selected query position exactly once")
    return perm


def cut_batches(sequence: np.ndarray, batch_size: int, merge_single: bool) -> list[np.ndarray]:
    """Consecutive slices of ``batch_size``; with ``merge_single`` a final batch of one row
    joins the previous batch (docs/methods/dart3.md)."""
    batches = [sequence[i:i + batch_size] for i in range(0, len(sequence), batch_size)]
    if merge_single and len(batches) > 1 and len(batches[-1]) == 1:
        last = batches.pop()
        batches[-1] = np.concatenate([batches[-1], last])
    return batches


def plan_batches(selected_codes: np.ndarray, *, batch_size: int, order, seed: int,
                 split_by_camera: bool, merge_single: bool, grounding: int = 0,
                 pool_size: int = 0, min_rows: int = 1,
                 camera_label: Callable[[int], str] = str) -> BatchPlan:
    """The batches of a run over the selected queries (camera codes ``selected_codes`` [Ns]).

    ``grounding`` rows per batch are drawn without replacement from ``pool_size`` (seeded).
    ``min_rows`` rows per batch are required (2 with batch-statistics BN).
    """
    perm = processing_order(len(selected_codes), order, seed)
    if split_by_camera:
        cams = sorted(np.unique(selected_codes).tolist())
        streams = [(c, perm[selected_codes[perm] == c]) for c in cams]
    else:
        streams = [(None, perm)]
    rng = np.random.default_rng([int(seed), 17])
    plan = BatchPlan([], [], [], [c for c, _ in streams])
    for s, (cam, seq) in enumerate(streams):
        for batch in cut_batches(seq, batch_size, merge_single):
            ground = rng.choice(pool_size, size=min(grounding, pool_size), replace=False) \
                if grounding > 0 else np.array([], np.int64)
            if len(batch) + len(ground) < min_rows:
                where = "" if cam is None else f" ({camera_label(cam)} has a single query)"
                raise UsageError(f"a batch of {len(batch) + len(ground)} row(s){where}: "
                                 "batch-statistics BN needs at least 2 rows",
                                 f"use {param('bn_mode', 'running')}, "
                                 f"{param('grounding', 'N')}, or no "
                                 f"{param('split_by_query_camera')}")
            plan.query_pos.append(np.asarray(batch, np.int64))
            plan.ground_pos.append(np.asarray(ground, np.int64))
            plan.stream.append(s)
    return plan


def run_loop(adapter: Adapter, plan: BatchPlan, *, selected: np.ndarray,
             query_codes: np.ndarray, grounding_codes: np.ndarray, dim: int, steps: int,
             optimizer: str, lr: float, episodic: bool, emit: str,
             images: Sequence[torch.Tensor] | None = None,
             device: torch.device | str = "cpu", progress: bool = True) -> LoopResult:
    """Run ``plan`` through ``adapter`` (see module doc).

    ``selected`` [Ns] positions of the adapted queries among the trial's queries (plan
    positions index ``selected``); ``query_codes`` / ``grounding_codes`` the camera codes of
    all queries / grounding rows; ``images`` yields the batches' images in plan order (for
    model-based adapters).
    """
    device = torch.device(device)
    n_sel = len(selected)
    out = np.zeros((n_sel, dim), np.float32)
    batch_id = np.full(n_sel, -1, np.int64)
    order = np.concatenate(plan.query_pos) if len(plan) else np.array([], np.int64)
    losses = np.zeros((len(plan), steps), np.float32)
    states: list[dict[str, np.ndarray]] = []
    image_iter = iter(images) if images is not None else None
    started = time.perf_counter()
    opt = None
    with StepBar(len(plan), "adapting", enabled=progress) as bar:
        for b in track(range(len(plan)), total=len(plan), description="adapting",
                       unit="batches", enabled=progress and not bar.on):
            q_pos = selected[plan.query_pos[b]]
            g_pos = plan.ground_pos[b]
            first_of_stream = b == 0 or plan.stream[b] != plan.stream[b - 1]
            if first_of_stream or episodic:
                adapter.reset()
                opt = make_optimizer(adapter.parameters(), optimizer, lr)
            codes = torch.as_tensor(np.concatenate([query_codes[q_pos], grounding_codes[g_pos]]),
                                    device=device)
            batch = Batch(q_pos, g_pos, codes,
                          next(image_iter) if image_iter is not None else None)
            for t in range(steps):
                loss, emitted = adapter.loss_and_embeddings(batch)
                _check_finite(loss, emitted, b, t, lr)
                if t == steps - 1 and emit == "pre":
                    out[plan.query_pos[b]] = emitted.float().cpu().numpy()
                opt.zero_grad(set_to_none=True)
                with fixed_order_convolutions(device):     # a model's convolution gradients:
                    loss.backward()                         # the same on any CPU thread count
                opt.step()
                adapter.after_step()
                losses[b, t] = float(loss.detach())
            if emit == "post":
                emitted = adapter.embeddings(batch)
                _check_finite(None, emitted, b, steps, lr)
                out[plan.query_pos[b]] = emitted.float().cpu().numpy()
            batch_id[plan.query_pos[b]] = b
            bar.update(1, loss=float(losses[b, -1]))
            last_of_stream = b == len(plan) - 1 or plan.stream[b + 1] != plan.stream[b]
            if last_of_stream:
                if episodic:                      # an episodic run leaves no state (§3.6)
                    adapter.reset()
                states.append(adapter.arrays())
    seconds = time.perf_counter() - started
    return LoopResult(embeddings=out, order=order, batch_id=batch_id, losses=losses,
                      stream_states=states, stream_cameras=list(plan.stream_cameras),
                      seconds=seconds)


def _check_finite(loss, emitted, batch: int, step: int, lr: float) -> None:
    """A one-line user error when the loss or the emitted embeddings stopped being finite
    (the optimiser diverged: almost always a learning rate far too large), instead of
    writing NaN features that evaluate to a meaningless score."""
    bad = None
    if loss is not None and not bool(torch.isfinite(loss.detach()).all()):
        bad = f"the loss became {float(loss.detach())}"
    elif emitted is not None and not bool(torch.isfinite(emitted.detach()).all()):
        bad = "the adapted features hold NaN or Inf values"
    if bad is None:
        return
    where = f"{bad} at batch {batch + 1}, step {step + 1}"
    if lr > 0:
        raise ParameterError(OWNER, "lr", lr, f"made the adaptation diverge ({where})",
                             "use a smaller learning rate (dart3 1e-4, tent/temp 3.5e-4)")
    raise UsageError(f"adaptation diverged ({where})",
                     "check the input features for extreme values")


__all__ = ["BatchPlan", "LoopResult", "processing_order", "cut_batches", "plan_batches",
           "run_loop"]
