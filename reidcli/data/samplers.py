"""Batch samplers for re-id training (yield lists of dataset indices).

* :class:`PKSampler` — P identities × K images (BoT/PCB triplet batches), DDP-aware.
* :class:`CrossModalitySampler` — P identities × (K visible + K infrared) (DG-VAE, dgvae.md §3.1).
* :class:`CameraSplitSampler` — DMG-Net's per-epoch camera split into support/query cameras
  and paired batches of the same P identities (dmgnet.md §3.2–3.3).

All randomness comes from ``Generator(PCG64([seed, epoch, ...]))``: the same seed and epoch
give the same batches; call ``set_epoch`` once per epoch.
"""
from __future__ import annotations

import numpy as np

from reidcli.errors import UsageError


def _distributed(num_replicas: int | None, rank: int | None) -> tuple[int, int]:
    if num_replicas is None or rank is None:
        try:
            import torch.distributed as dist
            if dist.is_available() and dist.is_initialized():
                return (num_replicas or dist.get_world_size(),
                        rank if rank is not None else dist.get_rank())
        except ImportError:  # pragma: no cover
            pass
    return (num_replicas or 1, rank or 0)


def _groups(labels: np.ndarray) -> dict[int, np.ndarray]:
    labels = np.asarray(labels, dtype=np.int64)
    order = np.argsort(labels, kind="stable")
    uniq, starts = np.unique(labels[order], return_index=True)
    return {int(u): order[s:e] for u, s, e in zip(uniq, starts, list(starts[1:]) + [len(order)])}


def _draw(rng: np.random.Generator, pool: np.ndarray, k: int) -> np.ndarray:
    """k items of ``pool``: without replacement when it has ≥ k, else with replacement."""
    return rng.choice(pool, size=k, replace=len(pool) < k)


class PKSampler:
    """Batches of ``p`` identities × ``k`` images (ids with < k images are sampled with
    replacement, as BoT does). An epoch walks the shuffled identity list once, P at a time.
    With DDP the epoch's batches are dealt round-robin to the ``num_replicas`` ranks, each
    getting the same number.
    """

    def __init__(self, labels, p: int = 16, k: int = 4, seed: int = 0,
                 num_replicas: int | None = None, rank: int | None = None):
        self.groups = _groups(labels)
        if p < 1 or k < 1:
            raise UsageError(f"P={p}, K={k} must be ≥ 1", "e.g. P=16, K=4")
        if len(self.groups) < p:
            raise UsageError(f"{len(self.groups)} identities cannot fill batches of P={p}",
                             "lower --batch-ids or use more training identities")
        self.p, self.k, self.seed, self.epoch = p, k, int(seed), 0
        self.num_replicas, self.rank = _distributed(num_replicas, rank)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def _all_batches(self) -> list[list[int]]:
        rng = np.random.Generator(np.random.PCG64([self.seed, self.epoch]))
        ids = np.array(sorted(self.groups))
        order = rng.permutation(ids)
        batches = []
        for start in range(0, len(order) - self.p + 1, self.p):
            batch = np.concatenate([_draw(rng, self.groups[int(i)], self.k)
                                    for i in order[start:start + self.p]])
            batches.append(batch.tolist())
        return batches

    def __iter__(self):
        batches = self._all_batches()
        usable = len(batches) - len(batches) % self.num_replicas
        return iter(batches[self.rank:usable:self.num_replicas])

    def __len__(self) -> int:
        return (len(self.groups) // self.p) // self.num_replicas


class CrossModalitySampler:
    """Batches of ``p`` identities × (``k`` visible + ``k`` infrared) images; only identities
    with images in both modalities are drawn (dgvae.md §3.1: P = 4, K = 4)."""

    def __init__(self, labels, modality, p: int = 4, k: int = 4, seed: int = 0):
        labels = np.asarray(labels, dtype=np.int64)
        infrared = np.asarray(modality).astype(bool)
        vis, ir = _groups(np.where(infrared, -1, labels)), _groups(np.where(infrared, labels,
                                                                              -1))
        self.ids = sorted(set(vis) & set(ir) - {-1})
        if len(self.ids) < p:
            raise UsageError(f"{len(self.ids)} identities have both visible and infrared "
                             f"images; P={p} needs more", "lower P or check the modalities")
        self.vis, self.ir = vis, ir
        self.p, self.k, self.seed, self.epoch = p, k, int(seed), 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __iter__(self):
        rng = np.random.Generator(np.random.PCG64([self.seed, self.epoch, 1]))
        order = rng.permutation(np.array(self.ids))
        for start in range(0, len(order) - self.p + 1, self.p):
            chosen = order[start:start + self.p]
            yield np.concatenate([np.concatenate([_draw(rng, self.vis[int(i)], self.k),
                                                  _draw(rng, self.ir[int(i)], self.k)])
                                  for i in chosen]).tolist()

    def __len__(self) -> int:
        return len(self.ids) // self.p


class CameraSplitSampler:
    """DMG-Net's paired support/query batches (dmgnet.md §3.2–3.3).

    Each epoch, every domain's cameras are shuffled and cut into halves ⌈C/2⌉ and ⌊C/2⌋; for
    even domain index the larger half is the support set S, for odd the query set Q. Eligible
    identities have images in S and in Q. Iterating yields ``(support_indices,
    query_indices)``: the same ``p`` identities, ``k`` images each from S and from Q.
    """

    def __init__(self, labels, camids, domains=None, p: int = 16, k: int = 4, seed: int = 0,
                 iterations: int | None = None):
        self.labels = np.asarray(labels, dtype=np.int64)
        self.camids = np.asarray(camids, dtype=np.int64)
        self.domains = np.zeros(len(self.labels), np.int64) if domains is None else \
            np.unique(np.asarray(domains), return_inverse=True)[1]
        self.p, self.k, self.seed, self.epoch = p, k, int(seed), 0
        self.iterations = iterations or max(1, len(self.labels) // (2 * p * k))
        self.support_cams: set = set()
        self.query_cams: set = set()

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def split_cameras(self, rng: np.random.Generator) -> tuple[set, set]:
        """(support, query) sets of (domain, camera) keys for this epoch."""
        support, query = set(), set()
        for d in np.unique(self.domains):
            cams = rng.permutation(np.unique(self.camids[self.domains == d]))
            big = (len(cams) + 1) // 2
            first, second = cams[:big], cams[big:]
            s, q = (first, second) if d % 2 == 0 else (second, first)
            support |= {(int(d), int(c)) for c in s}
            query |= {(int(d), int(c)) for c in q}
        return support, query

    def __iter__(self):
        rng = np.random.Generator(np.random.PCG64([self.seed, self.epoch, 2]))
        self.support_cams, self.query_cams = self.split_cameras(rng)
        keys = list(zip(self.domains.tolist(), self.camids.tolist()))
        in_s = np.array([key in self.support_cams for key in keys])
        in_q = np.array([key in self.query_cams for key in keys])
        s_groups, q_groups = _groups(np.where(in_s, self.labels, -1)), _groups(
            np.where(in_q, self.labels, -1))
        eligible = np.array(sorted(set(s_groups) & set(q_groups) - {-1}))
        if len(eligible) < self.p:
            raise UsageError(f"only {len(eligible)} identities have images in both the support "
                             f"and the query cameras this epoch; P={self.p} needs more",
                             "lower P or train on more cameras")
        order = rng.permutation(eligible)
        pos = 0
        for _ in range(self.iterations):
            if pos + self.p > len(order):
                order, pos = rng.permutation(eligible), 0
            chosen = order[pos:pos + self.p]
            pos += self.p
            yield (np.concatenate([_draw(rng, s_groups[int(i)], self.k) for i in chosen]).tolist(),
                   np.concatenate([_draw(rng, q_groups[int(i)], self.k) for i in chosen]).tolist())

    def __len__(self) -> int:
        return self.iterations
