"""ImageRecordDataset and make_loader (reidcli.data.image_dataset) on the tiny synthetic set."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

import reidcli.data as data
from reidcli.data.image_dataset import (ImageReadError, ImageRecordDataset, default_workers,
                                        load_rgb, make_loader)
from reidcli.data.records import encode_identities
from reidcli.data.samplers import PKSampler
from reidcli.data.transforms import eval_transform
from reidcli.errors import DatasetError, UsageError


@pytest.fixture(scope="module")
def tiny(tiny_synthetic_root):
    return data.load("synthetic", tiny_synthetic_root, name="tiny")


def test_items_fields_shapes_and_labels(tiny):
    train = tiny.train
    ds = ImageRecordDataset(train, eval_transform((64, 32)), labels="encode")
    assert len(ds) == len(train)
    expected_labels, classes = encode_identities(train)
    assert ds.num_classes == len(classes) == train["pid"].nunique()
    for i in (0, 5, len(ds) - 1):
        item = ds[i]
        assert set(item) == {"image", "pid", "camid", "label", "modality", "index"}
        assert item["image"].shape == (3, 64, 32) and item["image"].dtype == torch.float32
        assert item["pid"] == train["pid"].iloc[i] and item["camid"] == train["camid"].iloc[i]
        assert item["label"] == expected_labels[i] and item["index"] == i
        assert item["modality"] == 0
    assert sorted(set(ds.labels.tolist())) == list(range(ds.num_classes))
    # same pid ⇔ same label within one domain
    assert len(set(zip(ds.pids.tolist(), ds.labels.tolist()))) == ds.num_classes
    # the image is the decoded file, resized and normalised
    raw = load_rgb(train["path"].iloc[5])
    assert torch.equal(ds[5]["image"], eval_transform((64, 32))(raw))


def test_label_options_index_and_modality(tiny, tmp_path):
    records = tiny.query.iloc[:3].copy()
    ds = ImageRecordDataset(records)
    assert [ds[i]["label"] for i in range(3)] == [-1, -1, -1]
    assert isinstance(ds[0]["image"], Image.Image) and ds[0]["image"].mode == "RGB"
    ds = ImageRecordDataset(records, labels=[7, 8, 9], return_index=False)
    assert ds[2]["label"] == 9 and "index" not in ds[2]
    with pytest.raises(UsageError, match="2 labels for 3 records"):
        ImageRecordDataset(records, labels=[1, 2])
    with pytest.raises(UsageError, match="labels='pid'"):
        ImageRecordDataset(records, labels="pid")
    # a single-channel infrared image becomes 3 equal channels (docs/datasets.md)
    gray = tmp_path / "ir.png"
    Image.fromarray(np.arange(32 * 16, dtype=np.uint8).reshape(32, 16), "L").save(gray)
    records.loc[records.index[1], ["path", "modality"]] = [str(gray), "infrared"]
    ds = ImageRecordDataset(records, eval_transform((32, 16)))
    assert [ds[i]["modality"] for i in range(3)] == [0, 1, 0]
    rgb = np.asarray(ds.load_image(1))
    assert rgb.shape == (32, 16, 3) and (rgb[..., 0] == rgb[..., 2]).all()


def test_missing_and_corrupt_images_name_the_file(tiny, tmp_path):
    records = tiny.train.iloc[:3].copy()
    records.loc[records.index[0], "path"] = str(tmp_path / "gone.jpg")
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"not an image")
    records.loc[records.index[1], "path"] = str(bad)
    truncated = tmp_path / "cut.jpg"
    truncated.write_bytes(open(records["path"].iloc[2], "rb").read()[:200])
    records.loc[records.index[2], "path"] = str(truncated)
    ds = ImageRecordDataset(records)
    with pytest.raises(DatasetError, match=r"gone\.jpg does not exist"):
        ds[0]
    with pytest.raises(DatasetError, match=r"bad\.jpg cannot be decoded"):
        ds[1]
    with pytest.raises(DatasetError, match=r"cut\.jpg cannot be decoded"):
        ds[2]
    # through a worker process: still a DatasetError with the one-line message
    batches = iter(make_loader(ImageRecordDataset(records.iloc[:1]), batch_size=1, workers=1))
    try:
        next(batches)
        pytest.fail("no error from the worker")
    except DatasetError as exc:
        error = exc.with_traceback(None)      # drop the frames that keep the worker alive
    del batches                               # shut the worker down now
    assert isinstance(error, ImageReadError)
    assert "\n" not in error.message and "gone.jpg does not exist" in error.message


def test_loader_batches_and_settings(tiny):
    ds = ImageRecordDataset(tiny.train, eval_transform((32, 16)), labels="encode")
    loader = make_loader(ds, batch_size=5, shuffle=True, drop_last=True, workers=0, seed=3)
    batches = list(loader)
    assert len(batches) == len(ds) // 5
    assert batches[0]["image"].shape == (5, 3, 32, 16) and batches[0]["label"].dtype == torch.int64
    again = list(make_loader(ds, batch_size=5, shuffle=True, drop_last=True, workers=0, seed=3))
    assert all(torch.equal(a["index"], b["index"]) for a, b in zip(batches, again))
    sampler = PKSampler(ds.labels, p=2, k=2, seed=0)
    pk = list(make_loader(ds, batch_sampler=sampler, workers=0))
    assert len(pk) == len(sampler)
    for batch in pk:
        assert batch["image"].shape == (4, 3, 32, 16)
        assert batch["label"].unique().numel() == 2
    settings = make_loader(ds, batch_size=4, workers=2, device="cpu")
    assert settings.num_workers == 2 and settings.persistent_workers and not settings.pin_memory
    assert not make_loader(ds, workers=0).persistent_workers
    assert 0 <= default_workers("cpu") <= 4 and 0 <= default_workers("cuda") <= 8
    with pytest.raises(UsageError, match="negative"):
        make_loader(ds, workers=-1)
