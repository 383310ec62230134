"""Training rows: MSMT17 trains on list_train + list_val unless --option says otherwise
(docs/methods/pcb.md; docs/methods/dart3.md); every drawn copy of an image gets its own
seeded augmentation."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image

from reidcli.data.image_dataset import make_loader
from reidcli.data.samplers import (CameraSplitSampler, CrossModalitySampler, Draw,
                                   EpochTaggedSampler, PKSampler, UniformBatchSampler)
from reidcli.data.transforms import eval_transform, train_transform
from reidcli.training.config import make_config
from reidcli.training.data import SeededAugmentDataset, training_options, training_records
from reidcli.training.engine import train_model
from tests.data.fake_trees import msmt17

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_msmt17_training_rows_include_val_unless_the_option_is_given(tmp_path):
    msmt17.build(tmp_path)                 # list_train: 3 images / 2 ids; list_val: 2 / 2
    both = training_records("msmt17", tmp_path)
    assert len(both) == 5 and both["pid"].nunique() == 3
    assert set(both["split"]) == {"train"}
    only_train = training_records("msmt17", tmp_path, {"train_includes_val": False})
    assert len(only_train) == 3 and only_train["pid"].nunique() == 2
    assert training_options("MSMT17", {"version": "v1"}) == {"train_includes_val": True,
                                                             "version": "v1"}
    assert training_options("synthetic", {"name": "tiny"}) == {"name": "tiny"}


def test_train_model_on_msmt17_records_the_effective_option(tmp_path):
    msmt17.build(tmp_path)
    cfg = make_config("pcb", preset="tiny", dataset="msmt17", root=str(tmp_path),
                      batch_size=4, max_iters=1)
    train_model(cfg, tmp_path / "run", progress=False)
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (config["num_images"], config["num_classes"]) == (5, 3)
    assert config["dataset_options"] == {"train_includes_val": True}


# -- fresh augmentation per drawn copy (issue 30) -------------------------------------------

class _InMemory(torch.utils.data.Dataset):
    """``n`` random 32×16 RGB images under ``transform`` (no disk)."""

    def __init__(self, n: int, transform, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.images = [Image.fromarray(rng.integers(0, 256, (32, 16, 3), dtype=np.uint8))
                       for _ in range(n)]
        self.transform = transform

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> dict:
        return {"image": self.transform(self.images[int(i)]), "label": int(i)}


def _samplers():
    """Each trainer's batch sampler on identities with fewer images than K = 4 (so copies are
    drawn): 2 images per identity, P = 4."""
    labels = np.repeat(np.arange(12), 2)
    return {"bot": PKSampler(labels, p=4, k=4, seed=3),
            "dgvae": CrossModalitySampler(np.repeat(np.arange(6), 4), np.tile([0, 0, 1, 1], 6),
                                          p=4, k=4, seed=3, iterations=4),
            "dmgnet": CameraSplitSampler(np.repeat(np.arange(6), 4), np.tile([0, 1, 2, 3], 6),
                                         p=4, k=4, seed=3, iterations=4, flat=True),
            "pcb": UniformBatchSampler(24, 8, seed=3)}


def _batches(dataset, sampler, epochs=(0, 1)):
    out = []
    for epoch in epochs:
        sampler.set_epoch(epoch)
        out += [(batch, torch.stack([dataset[d]["image"] for d in batch])) for batch in sampler]
    return out


def _identical_pairs(images: torch.Tensor) -> int:
    flat = images.flatten(1)
    same = (flat[:, None, :] == flat[None, :, :]).all(-1)
    return int((same.sum() - len(flat)) // 2)


@pytest.mark.parametrize("method", ["bot", "dgvae", "dmgnet", "pcb"])
def test_no_batch_holds_two_identical_tensors_unless_augmentation_is_off(method):
    preset = "pcb" if method in ("pcb", "dgvae") else "bot"     # flip + erasing / pad-crop
    sampler = EpochTaggedSampler(_samplers()[method], 24)
    on = SeededAugmentDataset(_InMemory(24, train_transform(preset, (32, 16), erasing=0.5)), 5)
    copies = 0
    for batch, images in _batches(on, sampler):
        copies += sum(d.copy > 0 for d in batch)
        assert _identical_pairs(images) == 0
    assert copies > 0 or method == "pcb"             # copies were drawn (PCB: a permutation)
    off = SeededAugmentDataset(_InMemory(24, eval_transform((32, 16))), 5)
    pairs = sum(_identical_pairs(images) for _, images in _batches(off, sampler, (0,)))
    assert (pairs > 0) == (method != "pcb")           # augmentation off: copies stay equal


def test_augmentation_of_a_draw_is_the_same_in_any_order_and_any_worker():
    """Seeded by (seed, draw position): a fresh dataset fetching the batches backwards, from
    an epoch on (a resumed run), or through two loader workers gives the same tensors."""
    base = _InMemory(24, train_transform("bot", (32, 16), erasing=0.5))
    sampler = EpochTaggedSampler(PKSampler(np.repeat(np.arange(12), 2), p=4, k=4, seed=3), 24)
    first = _batches(SeededAugmentDataset(base, 5), sampler)
    fresh = SeededAugmentDataset(base, 5)
    backwards = [(b, torch.stack([fresh[d]["image"] for d in reversed(b)]).flip(0))
                 for b, _ in reversed(first)]
    for (b1, x1), (b2, x2) in zip(first, reversed(backwards)):
        assert b1 == b2 and torch.equal(x1, x2)
    resumed = _batches(SeededAugmentDataset(base, 5), sampler, epochs=(1,))
    assert all(torch.equal(x1, x2) for (_, x1), (_, x2) in zip(first[-len(resumed):], resumed))
    sampler.set_epoch(1)
    loader = make_loader(SeededAugmentDataset(base, 5), batch_sampler=sampler, workers=2, seed=5)
    for (_, x1), batch in zip(first[-len(resumed):], loader):
        assert torch.equal(x1, batch["image"])
    other = _batches(SeededAugmentDataset(base, 6), sampler, epochs=(1,))
    assert not torch.equal(other[0][1], resumed[0][1])          # another seed, other draws
    # a bare row index still works (epoch 0, first draw)
    assert torch.equal(fresh[7]["image"], fresh[Draw(0, 0, 0, 0, 7)]["image"])
