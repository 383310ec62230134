"""Builders of the adaptation tests' inputs: docs/methods/dart3.md biased stores and a tiny BN model
(the session fixtures ``biased_stores`` and ``tiny_model_store`` in tests/conftest.py)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch

from reidcli.synthetic.camera_bias import synthetic_bias

#: docs/methods/dart3.md T1: the LITE settings that beat Norm on the biased embeddings
STRONG_LITE = dict(lr=1e-2, steps=5, batch_size=16)


def make_biased_stores(root: Path) -> dict[int, Path]:
    """Seed → store of the §8.1 biased embeddings (seeds 0, 1, 2)."""
    return {s: synthetic_bias(s).write_store(root / f"bias{s}.h5") for s in (0, 1, 2)}


def write_images(folder: Path, n: int, size=(64, 32), seed: int = 0) -> list[str]:
    """``n`` random RGB PNG images [H, W] = ``size``; returns their paths."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        arr = rng.integers(0, 256, (size[0], size[1], 3), dtype=np.uint8)
        arr[: size[0] // 2] //= (1 + i % 3)               # some structure per camera
        p = folder / f"img_{i:04d}.png"
        Image.fromarray(arr).save(p)
        paths.append(str(p))
    return paths


def make_tiny_model_store(root: Path):
    """A tiny BoT (toy trunk: 5 conv + BatchNorm2d, global pooling, BNNeck BatchNorm1d,
    3-class linear head; d = 128) saved as a reidcli model, and a 3-camera store whose
    ``bnneck`` features that model wrote in eval mode. Returns (model path, store path,
    image folder)."""
    from reidcli.data.image_dataset import ImageRecordDataset
    from reidcli.models.checkpoint import ModelSpec, build_model, load_model, save_model
    from reidcli.provenance import make_provenance
    from reidcli.store.importer import build_import_records
    from reidcli.store.writer import StoreWriter

    torch.manual_seed(0)
    spec = ModelSpec(kind="bot", backbone="tiny", num_classes=3, input_size=(64, 32))
    module = build_model(spec)
    with torch.no_grad():                              # non-trivial BN state
        for m in module.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.8, 1.2)
                m.weight.uniform_(0.8, 1.2)
    model_path = save_model(root / "model.pt", module, spec, meta={"classes": [1, 2, 3]})
    paths = write_images(root / "images", 24)
    n = len(paths)
    labels = pd.DataFrame({"pid": np.arange(n) % 6 + 1, "camid": np.arange(n) % 3,
                           "split": ["query" if i < 9 else "gallery" for i in range(n)],
                           "path": [Path(p).name for p in paths]})
    records = build_import_records(labels, "tinycnn", "test")
    loaded = load_model(model_path)
    frame = records.assign(path=paths)
    data = ImageRecordDataset(frame, loaded.transform, return_index=False)
    images = torch.stack([data[i]["image"] for i in range(n)])
    with torch.no_grad():
        feats = loaded.features(images)["bnneck"].numpy()
    with StoreWriter(root / "store.h5", records, dataset="tinycnn",
                     provenance=make_provenance(command=["test"])) as w:
        w.set_feature("bnneck", feats, attrs={"n_parts": 1, "feat_norm": "global"})
    return model_path, root / "store.h5", root / "images"
