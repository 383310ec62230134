"""Image dataset, transforms and samplers (reidcli.data.image_dataset / transforms / samplers)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import reidcli.data as data
from reidcli.data.image_dataset import ImageRecordDataset, make_loader
from reidcli.data.samplers import CameraSplitSampler, CrossModalitySampler, PKSampler
from reidcli.data.transforms import eval_transform, parse_size, train_transform
from reidcli.errors import DatasetError, UsageError


@pytest.fixture(scope="module")
def tiny(tiny_synthetic_root):
    return data.load("synthetic", tiny_synthetic_root, name="tiny")


def test_dataset_items_and_labels(tiny):
    ds = ImageRecordDataset(tiny.train, eval_transform((64, 32)), labels="encode")
    item = ds[3]
    assert item["image"].shape == (3, 64, 32) and item["image"].dtype == torch.float32
    assert item["pid"] == tiny.train["pid"].iloc[3] and item["index"] == 3
    assert sorted(set(ds.labels)) == list(range(len(ds.classes)))
    batch = next(iter(make_loader(ds, batch_size=4, workers=0)))
    assert batch["image"].shape == (4, 3, 64, 32) and batch["label"].shape == (4,)


def test_missing_and_corrupt_images(tiny, tmp_path):
    records = tiny.train.iloc[:2].copy()
    records.loc[records.index[0], "path"] = str(tmp_path / "gone.jpg")
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"not an image")
    records.loc[records.index[1], "path"] = str(bad)
    ds = ImageRecordDataset(records)
    with pytest.raises(DatasetError, match="gone.jpg does not exist"):
        ds[0]
    with pytest.raises(DatasetError, match="bad.jpg cannot be decoded"):
        ds[1]


def test_transforms_shapes_normalisation_and_determinism(tiny):
    image = ImageRecordDataset(tiny.train).load_image(0)
    for preset, size in (("pcb", (384, 128)), ("bot", (256, 128)), ("plain", (256, 128))):
        torch.manual_seed(0)
        a = train_transform(preset)(image)
        torch.manual_seed(0)
        b = train_transform(preset)(image)
        assert a.shape == (3, *size) and torch.equal(a, b)
    plain = eval_transform((256, 128))(image)
    assert plain.min() >= (0 - 0.485) / 0.229 - 1e-5 and plain.max() <= (1 - 0.406) / 0.225
    assert parse_size("384x128") == (384, 128)
    with pytest.raises(UsageError, match="HxW"):
        parse_size("384by128")
    with pytest.raises(UsageError, match="preset"):
        train_transform("fancy")


def test_pk_sampler_batches_ranks_and_determinism():
    labels = np.repeat(np.arange(10), [5, 2, 4, 4, 1, 6, 4, 4, 3, 4])
    sampler = PKSampler(labels, p=3, k=4, seed=1)
    batches = list(sampler)
    assert len(batches) == len(sampler) == 3
    for batch in batches:
        ids = labels[batch]
        assert len(batch) == 12 and len(set(ids)) == 3
        assert all((ids == i).sum() == 4 for i in set(ids))
    assert list(PKSampler(labels, p=3, k=4, seed=1)) == batches
    sampler.set_epoch(1)
    assert list(sampler) != batches
    ranks = [list(PKSampler(labels, p=2, k=2, seed=0, num_replicas=2, rank=r)) for r in (0, 1)]
    assert len(ranks[0]) == len(ranks[1]) == 2 and ranks[0] != ranks[1]
    with pytest.raises(UsageError, match="cannot fill batches"):
        PKSampler(labels, p=11, k=2)


def test_cross_modality_sampler_balance():
    labels = np.repeat(np.arange(6), 6)
    modality = np.tile([0, 0, 0, 1, 1, 1], 6)
    modality[labels == 5] = 0                                 # id 5: visible only
    batches = list(CrossModalitySampler(labels, modality, p=2, k=2, seed=0))
    assert len(batches) == 2
    for batch in batches:
        assert (modality[batch] == 1).sum() == (modality[batch] == 0).sum() == 4
        assert 5 not in set(labels[batch])


def test_camera_split_sampler_disjoint_cameras():
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(30), 8)
    camids = rng.integers(0, 6, len(labels))
    sampler = CameraSplitSampler(labels, camids, p=4, k=2, seed=0, iterations=5)
    pairs = list(sampler)
    assert len(pairs) == 5
    s_cams = {c for _, c in sampler.support_cams}
    q_cams = {c for _, c in sampler.query_cams}
    assert not s_cams & q_cams and s_cams | q_cams == set(range(6)) and len(s_cams) == 3
    for support, query in pairs:
        assert sorted(labels[support]) == sorted(labels[query]) and len(support) == 8
        assert set(camids[support]) <= s_cams and set(camids[query]) <= q_cams
