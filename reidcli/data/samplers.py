"""Batch samplers for re-id training: each yields lists of dataset indices (pass them to a
DataLoader as ``batch_sampler``, e.g. through :func:`reidcli.data.image_dataset.make_loader`).

* :class:`PKSampler` — P identities × K images (BoT triplet batches; docs/methods/bot.md).
* :class:`CrossModalitySampler` — P identities × (K visible + K infrared) (DG-VAE paper §4.2).
* :class:`CameraSplitSampler` — DMG-Net's support/query camera split and paired batches of
  the same P identities (DMG-Net paper Alg. 1).

Randomness: one ``numpy.random.Generator(PCG64(SeedSequence([seed, epoch, tag])))`` per
epoch, so the same (seed, epoch) always gives the same batches, whatever happened before;
call ``set_epoch(e)`` at the start of every epoch (as with torch's DistributedSampler).

Distributed training: every rank builds the same list of the epoch's batches and takes every
``num_replicas``-th one starting at ``rank``, after trimming the list to a multiple of
``num_replicas`` — ranks get disjoint batches and the same number of them.
``num_replicas``/``rank`` default to ``torch.distributed``'s when it is initialised, else 1/0.

``labels`` are training labels (one int per dataset row, e.g. ``ImageRecordDataset.labels``
from ``labels="encode"``): a bare pid is not a global identity across datasets/domains.
"""
from __future__ import annotations

import sys
import warnings
from typing import Iterator, NamedTuple

import numpy as np

from reidcli.errors import ParameterError, UsageError
from reidcli.naming import param

_TAG_PK, _TAG_CROSS, _TAG_CAMERA = 11, 12, 13
#: CameraSplitSampler's split units (docs/methods/dmgnet.md D9)
SPLITS = ("per-domain", "global")
#: further camera splits drawn when one leaves fewer than P eligible identities (D34)
SPLIT_REDRAWS = 100


def _distributed(num_replicas: int | None, rank: int | None) -> tuple[int, int]:
    dist = sys.modules.get("torch.distributed")     # not imported → not initialised
    if (num_replicas is None or rank is None) and dist is not None:
        if dist.is_available() and dist.is_initialized():
            num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
            rank = dist.get_rank() if rank is None else rank
    num_replicas = 1 if num_replicas is None else int(num_replicas)
    rank = 0 if rank is None else int(rank)
    if num_replicas < 1 or not 0 <= rank < num_replicas:
        raise UsageError(f"rank {rank} of {num_replicas} replicas is impossible",
                         "give 0 <= rank < num_replicas")
    return num_replicas, rank


def _check_pk(p: int, k: int) -> tuple[int, int]:
    if int(p) < 1 or int(k) < 1:
        raise UsageError(f"P={p}, K={k}: both must be >= 1", "e.g. P=16, K=4")
    return int(p), int(k)


def _groups(labels: np.ndarray, keep: np.ndarray | None = None) -> tuple[np.ndarray, list]:
    """(sorted unique labels, [row indices of each label, ascending]) over rows in ``keep``."""
    rows = np.arange(len(labels)) if keep is None else np.flatnonzero(keep)
    lab = labels[rows]
    order = np.argsort(lab, kind="stable")
    uniq, starts = np.unique(lab[order], return_index=True)
    return uniq, np.split(rows[order], starts[1:]) if len(uniq) else []


def _draw(rng: np.random.Generator, pool: np.ndarray, k: int) -> np.ndarray:
    """``k`` items of ``pool``: without replacement when it has >= k, else with replacement."""
    return rng.choice(pool, size=k, replace=len(pool) < k)


class _EpochBatchSampler:
    """Shared epoch/seed/rank handling; subclasses build ``_epoch_batches(rng)``."""

    _tag = 0

    def __init__(self, seed: int, num_replicas: int | None, rank: int | None):
        self.seed, self.epoch = int(seed), 0
        self.num_replicas, self.rank = _distributed(num_replicas, rank)
        self._cache: tuple[int, list] | None = None

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def rng(self, epoch: int | None = None, *extra: int) -> np.random.Generator:
        """The generator of ``epoch`` (default: the current one)."""
        epoch = self.epoch if epoch is None else int(epoch)
        return np.random.Generator(np.random.PCG64(
            np.random.SeedSequence([self.seed, epoch, self._tag, *extra])))

    def _epoch_batches(self, rng: np.random.Generator) -> list:
        raise NotImplementedError

    def all_batches(self) -> list:
        """Every batch of the current epoch, before the split among ranks."""
        if self._cache is None or self._cache[0] != self.epoch:
            self._cache = (self.epoch, self._epoch_batches(self.rng()))
        return self._cache[1]

    def _share(self) -> list:
        batches = self.all_batches()
        usable = len(batches) - len(batches) % self.num_replicas
        return batches[self.rank:usable:self.num_replicas]

    def __iter__(self) -> Iterator:
        return iter(self._share())

    def __len__(self) -> int:
        return len(self.all_batches()) // self.num_replicas


class PKSampler(_EpochBatchSampler):
    """Batches of ``p`` distinct identities × ``k`` images each (BoT's identity sampler).

    Epoch (BoT's definition, about one pass over the images): each identity's images are
    shuffled and cut into ⌊n/k⌋ chunks of ``k`` (the < k left-over images sit out this
    epoch); an identity with fewer than ``k`` images gives one chunk drawn with replacement.
    While at least ``p`` identities still hold chunks, ``p`` of them are chosen uniformly at
    random and one chunk of each forms the next batch (identity after identity, k indices
    each); the chunks of fewer than ``p`` remaining identities are dropped. The number of
    batches may therefore differ slightly between epochs; ``len()`` is exact for the current
    epoch. ``iterations`` (default None: that pass) fixes the epoch's length instead: the
    passes above are drawn one after another (the j-th with its own generator, ``(seed, epoch,
    tag, j)``; j = 0 is the default epoch) and cut after ``iterations`` batches.
    """

    _tag = _TAG_PK

    def __init__(self, labels, p: int = 16, k: int = 4, seed: int = 0,
                 num_replicas: int | None = None, rank: int | None = None,
                 iterations: int | None = None):
        super().__init__(seed, num_replicas, rank)
        self.p, self.k = _check_pk(p, k)
        self.iterations = None if iterations is None else int(iterations)
        self.labels = np.asarray(labels, dtype=np.int64).reshape(-1)
        self.ids, self.groups = _groups(self.labels)
        if len(self.ids) < self.p:
            raise UsageError(f"{len(self.ids)} identities cannot fill batches of P={self.p}",
                             f"lower {param('p')} or use more training identities")

    def _epoch_batches(self, rng: np.random.Generator) -> list:
        if self.iterations is None:
            return self._pass(rng)
        batches, j = [], 0
        while len(batches) < self.iterations:              # loop per pass
            batches += self._pass(rng if j == 0 else self.rng(None, j))
            j += 1
        return batches[:self.iterations]

    def _pass(self, rng: np.random.Generator) -> list:
        """One pass over the identities' chunks (the class docstring's epoch)."""
        p, k = self.p, self.k
        chunks = []                                        # per identity: [n_chunks, k]
        for pool in self.groups:                           # loop per identity
            if len(pool) < k:
                chunks.append(rng.choice(pool, size=(1, k), replace=True))
            else:
                n = len(pool) // k
                chunks.append(rng.permutation(pool)[:n * k].reshape(n, k))
        left = np.array([len(c) for c in chunks])           # chunks not yet used
        table = np.concatenate(chunks)                       # all chunks, id after id
        nxt = np.cumsum(left) - left                         # next chunk row of each id
        avail = np.arange(len(chunks))                       # ids with chunks: avail[:m]
        where = np.arange(len(chunks))                       # position of each id in avail
        m = len(chunks)
        batches = []
        while m >= p:                                        # loop per batch
            chosen = avail[rng.choice(m, size=p, replace=False)]
            batches.append(table[nxt[chosen]].reshape(-1).tolist())
            nxt[chosen] += 1
            left[chosen] -= 1
            for i in chosen[left[chosen] == 0]:              # swap-remove exhausted ids
                j, last = where[i], avail[m - 1]
                avail[j], where[last] = last, j
                m -= 1
        return batches


class CrossModalitySampler(_EpochBatchSampler):
    """Batches of ``p`` identities × (``k`` visible + ``k`` infrared) images (DG-VAE paper
    §4.2, AGW's identity sampler; DG-VAE uses P = 4, K = 4 → 32 images).

    Only identities with images in both modalities are drawn. Each batch picks ``p``
    distinct identities uniformly (independently of the other batches), then ``k`` visible
    and ``k`` infrared images of each, without replacement when the identity has >= k in
    that modality and with replacement otherwise (the two modalities are independent draws,
    DG-VAE paper §4.2). Layout of a batch: the ``p·k`` visible indices first (identity after
    identity, ``k`` each), then the ``p·k`` infrared ones in the same identity order, so
    ``x[:p*k]`` is the visible half and ``x[p*k:]`` the infrared half.

    Epoch length: ``iterations`` batches, default ⌈max(N_visible, N_infrared) / (p·k)⌉ over
    all rows (AGW's definition, which the DG-VAE paper does not state; 1,392 on SYSU-MM01,
    129 on RegDB).
    ``modality``: per row 0/1, bool, or "visible"/"infrared".
    """

    _tag = _TAG_CROSS

    def __init__(self, labels, modality, p: int = 4, k: int = 4, seed: int = 0,
                 iterations: int | None = None, num_replicas: int | None = None,
                 rank: int | None = None):
        super().__init__(seed, num_replicas, rank)
        self.p, self.k = _check_pk(p, k)
        self.labels = np.asarray(labels, dtype=np.int64).reshape(-1)
        modality = np.asarray(modality).reshape(-1)
        if len(modality) != len(self.labels):
            raise UsageError(f"{len(modality)} modality values for {len(self.labels)} labels",
                             "give one modality per row")
        self.infrared = (modality == "infrared") if modality.dtype.kind in "UOS" else \
            modality.astype(bool)
        vis_ids, vis = _groups(self.labels, ~self.infrared)
        ir_ids, ir = _groups(self.labels, self.infrared)
        self.ids = np.intersect1d(vis_ids, ir_ids)
        if len(self.ids) < self.p:
            raise UsageError(f"{len(self.ids)} identities have both visible and infrared "
                             f"images; P={self.p} needs more", "lower P or check the modalities")
        self.vis = [vis[i] for i in np.searchsorted(vis_ids, self.ids)]
        self.ir = [ir[i] for i in np.searchsorted(ir_ids, self.ids)]
        n_ir = int(self.infrared.sum())
        n_vis = len(self.labels) - n_ir
        self.iterations = int(iterations) if iterations else \
            -(-max(n_vis, n_ir) // (self.p * self.k))

    def _epoch_batches(self, rng: np.random.Generator) -> list:
        batches = []
        for _ in range(self.iterations):
            chosen = rng.choice(len(self.ids), size=self.p, replace=False)
            vis = [_draw(rng, self.vis[i], self.k) for i in chosen]
            ir = [_draw(rng, self.ir[i], self.k) for i in chosen]
            batches.append(np.concatenate(vis + ir).tolist())
        return batches


class CameraSplitSampler(_EpochBatchSampler):
    """DMG-Net's paired support/query batches (DMG-Net paper Alg. 1: camera split, sampler).

    **Camera split** (once per epoch by default [D10]; ``resplit="iter"`` redraws it before
    every batch). The cameras are cut in *split groups*, indexed g = 0, 1, … in sorted order:
    each group's cameras are shuffled and cut into a first half of ⌈n_g/2⌉ and a second of
    ⌊n_g/2⌋; for even g the larger (first) half is the support set S, for odd g it is the
    query set Q; a group of a single camera goes wholly to S. ``split="per-domain"`` (this
    class's default, [D9]): one group per domain (domains indexed over their sorted names);
    a domain with a single camera goes wholly to S (and a warning says it gives no eligible
    identity). ``split="global"`` (DMG-Net paper §4.1: D_s holds C/2 of the C cameras, Alg. 1
    l. 2): one group of every camera of every domain. ``camera_groups`` (one key per row,
    e.g. CUHK02's camera pair; None/−1 = none) takes the cameras of each key out of their
    domain's or the global group into a group of their own (sorted after the others), so
    that cameras whose identities never leave them (CUHK02's pairs) are split between S and
    Q in both modes [D33]. S ∩ Q = ∅, S ∪ Q = all cameras.

    **Pairs**: eligible identities have ≥ 1 image in S and ≥ 1 in Q; a split that leaves
    fewer than ``p`` is redrawn (up to :data:`SPLIT_REDRAWS` times, seeded; [D34]), then
    :class:`UsageError`. The eligible ids are shuffled and taken ``p`` at a time
    (reshuffled when fewer than ``p`` remain), pooled over all domains (not balanced per
    domain, [D28]). For each chosen id, ``k`` support images are drawn from its S images and
    ``k`` query images from its Q images, without replacement when it has >= k there, else
    with replacement [D29]. Each step yields ``(support_indices, query_indices)``, each
    ``p·k`` long with the same identities in the same order (``k`` per id); with
    ``flat=True`` it yields ``support + query`` as one list (usable as a DataLoader
    ``batch_sampler``: the first ``p·k`` items are the support set).

    Steps per epoch: ``iterations``, default ⌊N_images / (2·p·k)⌋ (at least 1) [D11].
    ``camids`` are per-dataset camera indices; ``domains`` (one name or int per row,
    default: one domain) make them global as (domain, camid).
    """

    _tag = _TAG_CAMERA

    def __init__(self, labels, camids, domains=None, p: int = 16, k: int = 4, seed: int = 0,
                 iterations: int | None = None, resplit: str = "epoch", flat: bool = False,
                 num_replicas: int | None = None, rank: int | None = None,
                 split: str = "per-domain", camera_groups=None):
        super().__init__(seed, num_replicas, rank)
        self.p, self.k = _check_pk(p, k)
        if resplit not in ("epoch", "iter"):
            raise UsageError(f"resplit={resplit!r} is unknown", "use epoch or iter")
        if split not in SPLITS:
            raise UsageError(f"split={split!r} is unknown", "use per-domain or global")
        self.split = split
        self.resplit, self.flat = resplit, bool(flat)
        self.labels = np.asarray(labels, dtype=np.int64).reshape(-1)
        camids = np.asarray(camids, dtype=np.int64).reshape(-1)
        n = len(self.labels)
        if len(camids) != n or (domains is not None and len(domains) != n):
            raise UsageError("labels, camids and domains differ in length",
                             "give one value per dataset row")
        if domains is None:
            self.domain_names = np.array([0])
            dom = np.zeros(n, np.int64)
        else:
            self.domain_names, dom = np.unique(np.asarray(domains), return_inverse=True)
        # global camera index over sorted unique (domain, camid) pairs (DMG-Net paper Alg. 1 ``cam``)
        pairs, self.cam = np.unique(np.stack([dom, camids], axis=1), axis=0,
                                    return_inverse=True)
        self.cam = self.cam.reshape(-1)
        self.cam_domain, self.cam_camid = pairs[:, 0], pairs[:, 1]
        self.cam_group = self._camera_groups(camera_groups, n)
        self.iterations = int(iterations) if iterations else max(1, n // (2 * self.p * self.k))
        lonely = [str(self.domain_names[d]) for d in np.unique(self.cam_domain)
                  if (self.cam_domain == d).sum() == 1]
        if lonely and split == "per-domain":
            warnings.warn(f"domain(s) {', '.join(lonely)} have a single camera, so it goes to "
                          "the support set and gives no eligible identity — train on two or more "
                          f"cameras of each domain ({param('train_cams')}) or leave those "
                          "domains out", stacklevel=2)

    def _camera_groups(self, camera_groups, n: int) -> np.ndarray:
        """Per global camera: its split group 0..G−1 (see the class docstring)."""
        unit = self.cam_domain.copy() if self.split == "per-domain" else \
            np.zeros(len(self.cam_domain), np.int64)
        if camera_groups is None:
            return unit
        keys = np.asarray(camera_groups).reshape(-1)
        if len(keys) != n:
            raise UsageError("labels and camera_groups differ in length",
                             "give one camera group per dataset row")
        own = np.full(len(self.cam_domain), -1, np.int64)
        for c in range(len(own)):                          # loop per camera
            values = set(keys[self.cam == c].tolist()) - {-1}
            if len(values) > 1:
                raise UsageError(f"camera {self.cam_camid[c]} of domain "
                                 f"{self.domain_names[self.cam_domain[c]]} lies in the camera "
                                 f"groups {sorted(map(str, values))}",
                                 "give every camera one camera group")
            if values:
                own[c] = 0
        grouped = np.flatnonzero(own == 0)
        if not len(grouped):
            return unit
        names = sorted({(int(self.cam_domain[c]), str(keys[self.cam == c][0]))
                        for c in grouped})
        index = {key: i for i, key in enumerate(names)}
        base = int(unit.max()) + 1
        out = unit.copy()
        for c in grouped:
            out[c] = base + index[(int(self.cam_domain[c]), str(keys[self.cam == c][0]))]
        return out

    def _split_sides(self, rng: np.random.Generator) -> np.ndarray:
        """Per global camera: True = support (S), False = query (Q)."""
        support = np.zeros(len(self.cam_domain), dtype=bool)
        for g in np.unique(self.cam_group):                 # loop per split group
            cams = rng.permutation(np.flatnonzero(self.cam_group == g))
            if not len(cams):
                continue
            big = (len(cams) + 1) // 2
            if len(cams) == 1 or g % 2 == 0:
                support[cams[:big]] = True
            else:
                support[cams[big:]] = True
        return support

    def _sides(self, epoch: int | None, step: int) -> np.ndarray:
        """The split of ``epoch``/``step`` (per global camera, True = S): the first draw, or,
        when it leaves fewer than ``p`` identities with images on both sides, the first of up
        to :data:`SPLIT_REDRAWS` further draws that leaves ``p`` [D34]; the first draw if none
        does (the batches then stop with a UsageError)."""
        first = self._split_sides(self._split_rng(epoch, step))
        if self._eligible_count(first) >= self.p:
            return first
        for attempt in range(1, SPLIT_REDRAWS + 1):
            side = self._split_sides(self._split_rng(epoch, step, attempt))
            if self._eligible_count(side) >= self.p:
                return side
        return first

    def _eligible_count(self, support_cams: np.ndarray) -> int:
        in_s = support_cams[self.cam]
        return len(np.intersect1d(self.labels[in_s], self.labels[~in_s]))

    def camera_split(self, epoch: int | None = None, step: int = 0
                     ) -> tuple[list[tuple], list[tuple]]:
        """(support, query) cameras of ``epoch`` (default: current; ``step`` matters only
        with ``resplit="iter"``) as sorted lists of (domain name, camid)."""
        support = self._sides(epoch, step)
        keys = [(self.domain_names[d].item(), int(c))
                for d, c in zip(self.cam_domain, self.cam_camid)]
        return ([keys[i] for i in np.flatnonzero(support)],
                [keys[i] for i in np.flatnonzero(~support)])

    def _split_rng(self, epoch: int | None, step: int, attempt: int = 0
                   ) -> np.random.Generator:
        step = step if self.resplit == "iter" else 0
        return self.rng(epoch, 1, step) if attempt == 0 else self.rng(epoch, 1, step, attempt)

    def _eligible(self, support_cams: np.ndarray):
        in_s = support_cams[self.cam]
        s_ids, s_groups = _groups(self.labels, in_s)
        q_ids, q_groups = _groups(self.labels, ~in_s)
        ids = np.intersect1d(s_ids, q_ids)
        if len(ids) < self.p:
            raise UsageError(f"only {len(ids)} identities have images in both the support "
                             f"and the query cameras (epoch {self.epoch}); P={self.p} needs "
                             "more", "lower P or train on more cameras/identities")
        return (ids, [s_groups[i] for i in np.searchsorted(s_ids, ids)],
                [q_groups[i] for i in np.searchsorted(q_ids, ids)])

    def _epoch_batches(self, rng: np.random.Generator) -> list:
        batches = []
        eligible = None
        order, pos = np.empty(0, np.int64), 0
        for step in range(self.iterations):
            if eligible is None or self.resplit == "iter":
                eligible = self._eligible(self._sides(None, step))
                order, pos = np.empty(0, np.int64), 0
            ids, s_groups, q_groups = eligible
            if pos + self.p > len(order):
                order, pos = rng.permutation(len(ids)), 0
            chosen = order[pos:pos + self.p]
            pos += self.p
            support = np.concatenate([_draw(rng, s_groups[i], self.k) for i in chosen]).tolist()
            query = np.concatenate([_draw(rng, q_groups[i], self.k) for i in chosen]).tolist()
            batches.append(support + query if self.flat else (support, query))
        return batches


class UniformBatchSampler(_EpochBatchSampler):
    """PCB's sampler: a seeded shuffle of all ``n`` rows cut into batches of ``batch_size``
    (docs/methods/pcb.md: uniform shuffle, drop the last incomplete batch unless ``drop_last=False``)."""

    _tag = 14

    def __init__(self, n: int, batch_size: int = 64, seed: int = 0, drop_last: bool = True,
                 num_replicas: int | None = None, rank: int | None = None):
        super().__init__(seed, num_replicas, rank)
        if int(batch_size) < 1:
            raise ParameterError("sampler", "batch_size", batch_size, "must be >= 1",
                                 f"e.g. {param('batch_size', 64)}")
        self.n, self.batch_size, self.drop_last = int(n), int(batch_size), bool(drop_last)
        if self.drop_last and self.n < self.batch_size:
            raise UsageError(f"{self.n} training images cannot fill one batch of "
                             f"{self.batch_size}",
                             f"lower {param('batch_size')} or use more images")

    def _epoch_batches(self, rng: np.random.Generator) -> list:
        order = rng.permutation(self.n)
        stop = self.n - self.n % self.batch_size if self.drop_last else self.n
        return [order[i:i + self.batch_size].tolist() for i in range(0, stop, self.batch_size)]


class Draw(NamedTuple):
    """One drawn item: the ``copy``-th draw (0 = first) of dataset row ``index`` in this
    rank's batch number ``step`` of ``epoch`` (``rank``: the wrapped sampler's rank)."""

    epoch: int
    rank: int
    step: int
    copy: int
    index: int


class EpochTaggedSampler:
    """Wraps a batch sampler so every drawn item carries its draw position: it yields lists
    of :class:`Draw` (epoch, rank, step, copy, index) instead of bare row indices.

    With :class:`reidcli.training.data.SeededAugmentDataset` the random augmentation of an
    item then depends only on (seed, draw) — not on loader workers, threads or what ran
    before, which makes ``--resume`` reproduce an uninterrupted run — and an image drawn
    twice in a batch (a P×K identity with fewer than K images, drawn with replacement) gets
    a fresh augmentation for every copy. ``n`` is the dataset length.
    """

    def __init__(self, batch_sampler, n: int):
        self.batch_sampler, self.n = batch_sampler, int(n)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)
        self.batch_sampler.set_epoch(epoch)

    def __iter__(self) -> Iterator:
        epoch, rank = self.epoch, int(getattr(self.batch_sampler, "rank", 0))
        for step, batch in enumerate(self.batch_sampler):
            seen: dict[int, int] = {}
            draws = []
            for i in batch:
                i = int(i)
                draws.append(Draw(epoch, rank, step, seen.get(i, 0), i))
                seen[i] = seen.get(i, 0) + 1
            yield draws

    def __len__(self) -> int:
        return len(self.batch_sampler)
