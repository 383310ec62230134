"""``reid extract --model``: embeddings and pooled conv maps into a store (docs/methods/pcb.md P8, P9)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from reidcli.errors import UsageError
from reidcli.features import model_extract
from reidcli.features.layout import dataset_layout
from reidcli.features.model_extract import (embed_batch, extract_model_store,
                                            parse_feature_names, parse_map_names)
from reidcli.models.backbones import TAP_CHANNELS
from reidcli.models.checkpoint import ModelSpec, build_model, load_model, save_model
from reidcli.store.merge import merge_shards
from reidcli.store.reader import open_store

ALL_MAPS = ["conv2_x", "conv3_x", "conv4_x", "conv5_x"]


@pytest.fixture(scope="module")
def resnet18_model(tmp_path_factory):
    torch.manual_seed(0)
    spec = ModelSpec(kind="pcb", backbone="resnet18", num_classes=4, input_size=(384, 128))
    path = tmp_path_factory.mktemp("m") / "model.pt"
    save_model(path, build_model(spec), spec, {"classes": [1, 2, 3, 4]})
    return path


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    torch.manual_seed(1)
    spec = ModelSpec(kind="pcb", backbone="tiny", num_classes=4, input_size=(96, 32))
    path = tmp_path_factory.mktemp("t") / "model.pt"
    save_model(path, build_model(spec), spec)
    return path


def test_pooled_maps_equal_manual_pooling_of_the_stage_outputs(resnet18_model):
    model = load_model(resnet18_model)
    hooked = {}
    handles = [getattr(model.module.backbone, m).register_forward_hook(
        lambda mod, inp, out, m=m: hooked.__setitem__(m, out.detach().clone()))
        for m in ("layer1", "layer2", "layer3", "layer4")]
    images = torch.rand(2, 3, 384, 128)
    feats, maps = embed_batch(model, images, ALL_MAPS, (24, 8), False, None, False)
    for h in handles:
        h.remove()
    np.testing.assert_allclose(maps["conv2_x"], F.avg_pool2d(hooked["layer1"], 4).numpy(),
                               rtol=1e-5, atol=1e-6)                      # P9: 4×4
    np.testing.assert_allclose(maps["conv3_x"], F.avg_pool2d(hooked["layer2"], 2).numpy(),
                               rtol=1e-5, atol=1e-6)                      # 2×2
    np.testing.assert_allclose(maps["conv4_x"], hooked["layer3"].numpy(), rtol=1e-6)
    np.testing.assert_allclose(maps["conv5_x"], hooked["layer4"].numpy(), rtol=1e-6)
    assert [m.shape[1:] for m in maps.values()] == [(64, 24, 8), (128, 24, 8), (256, 24, 8),
                                                    (512, 24, 8)]
    again, _ = embed_batch(model, images, [], (24, 8), False, None, False)
    assert all(np.array_equal(feats[k], again[k]) for k in feats)        # P8


def test_flip_averages_with_the_mirrored_image(tiny_model):
    model = load_model(tiny_model)
    images = torch.rand(3, 3, 96, 32)
    plain, _ = embed_batch(model, images, [], (6, 2), False, None, False)
    mirrored, _ = embed_batch(model, torch.flip(images, dims=[3]), [], (6, 2), False, None, False)
    both, _ = embed_batch(model, images, [], (6, 2), True, None, False)
    np.testing.assert_allclose(both["pcb_h"], (plain["pcb_h"] + mirrored["pcb_h"]) / 2,
                               rtol=1e-5, atol=1e-6)
    assert not np.allclose(both["pcb_h"], plain["pcb_h"])


def test_store_contents_protocol_and_float16_round_trip(tiny_synthetic_root, tiny_model,
                                                        tmp_path):
    layout = dataset_layout("synthetic", tiny_synthetic_root, progress=False, name="tiny")
    out32 = extract_model_store(layout, tmp_path / "a.h5", tiny_model, maps=ALL_MAPS,
                                map_size=(6, 2), maps_dtype="float32", progress=False)
    out16 = extract_model_store(layout, tmp_path / "b.h5", tiny_model, maps=["conv5_x"],
                                map_size=(6, 2), maps_dtype="float16", progress=False,
                                features=["pcb-h"])
    with open_store(out32) as a, open_store(out16) as b:
        assert a.feature_names == ["pcb_g", "pcb_h"] and b.feature_names == ["pcb_h"]
        assert a.convmap_layers == ALL_MAPS and a.num_rows == len(layout.records)
        assert a.default_feature() == "pcb_g"
        attrs = a.h5["features/pcb_g"].attrs
        assert (int(attrs["n_parts"]), int(attrs["part_dim"]), attrs["feat_norm"]) == \
            (6, 128, "parts")                                             # P10
        mattrs = a.h5["convmaps/conv2_x"].attrs
        assert mattrs["layer"] == "layer1" and mattrs["pooled_size"] == "6x2"
        assert mattrs["input_size"] == "96x32" and mattrs["pooling"] == "avg"
        assert a.protocol.num_trials == 1
        np.testing.assert_array_equal(a.records["path"], layout.records["path"])
        full, half = a.convmaps("conv5_x"), b.convmaps("conv5_x").astype(np.float32)
        np.testing.assert_allclose(half, full, rtol=1e-3, atol=1e-3 * np.abs(full).max())
        np.testing.assert_array_equal(a.features("pcb_h"), b.features("pcb_h"))


def test_shards_merge_into_the_unsharded_store(tiny_synthetic_root, tiny_model, tmp_path):
    layout = dataset_layout("synthetic", tiny_synthetic_root, progress=False, name="tiny")
    whole = extract_model_store(layout, tmp_path / "whole.h5", tiny_model, maps=["conv4_x"],
                                map_size=(6, 2), progress=False)
    shards = [extract_model_store(layout, tmp_path / f"s{i}.h5", tiny_model, maps=["conv4_x"],
                                  map_size=(6, 2), shard=(i, 3), progress=False)
              for i in range(3)]
    merged = merge_shards(tmp_path / "merged.h5", shards[::-1])
    with open_store(whole) as a, open_store(merged) as b:
        np.testing.assert_array_equal(a.features("pcb_g"), b.features("pcb_g"))
        np.testing.assert_array_equal(a.convmaps("conv4_x"), b.convmaps("conv4_x"))
        np.testing.assert_array_equal(a.protocol.trials[0]["query_idx"],
                                      b.protocol.trials[0]["query_idx"])
        assert b.default_feature() == "pcb_g"
        assert int(b.h5["features/pcb_g"].attrs["n_parts"]) == 6


def test_large_map_guard_counts_the_whole_dataset_so_a_shard_is_refused_too(
        tiny_synthetic_root, tiny_model, tmp_path, monkeypatch):
    layout = dataset_layout("synthetic", tiny_synthetic_root, progress=False, name="tiny")
    n = len(layout.records)
    one_image = model_extract.maps_bytes(1, [TAP_CHANNELS["tiny"][3]], (6, 2), "float16")
    # the bytes limit: a third of the dataset fits, the whole dataset does not
    monkeypatch.setattr(model_extract, "LARGE_MAPS_BYTES", one_image * (n // 2))
    for out, shard in (("x.h5", None), ("s.h5", (0, 3))):
        with pytest.raises(UsageError, match="allow_large") as err:
            extract_model_store(layout, tmp_path / out, tiny_model, maps=["conv5_x"],
                                map_size=(6, 2), shard=shard, progress=False)
        assert f"for {n} images" in str(err.value) and "--shard" not in str(err.value)
        assert not (tmp_path / out).exists()
    # the image-count limit (MSMT17-scale), independent of the bytes
    monkeypatch.setattr(model_extract, "LARGE_MAPS_BYTES", 2**40)
    monkeypatch.setattr(model_extract, "LARGE_MAPS_IMAGES", n - 1)
    with pytest.raises(UsageError, match="MSMT17-scale.*allow_large"):
        extract_model_store(layout, tmp_path / "c.h5", tiny_model, maps=["conv5_x"],
                            map_size=(6, 2), shard=(2, 3), progress=False)
    extract_model_store(layout, tmp_path / "f.h5", tiny_model, features=["pcb_h"],
                        progress=False)                                  # no maps: no limit
    path = extract_model_store(layout, tmp_path / "y.h5", tiny_model, maps=["conv5_x"],
                               map_size=(6, 2), shard=(1, 3), progress=False, allow_large=True)
    with open_store(path) as st:
        assert st.convmaps("conv5_x").shape[1:] == (TAP_CHANNELS["tiny"][3], 6, 2)


def test_an_rpp_model_stores_rpp_g_and_rpp_h(tiny_synthetic_root, tmp_path):
    torch.manual_seed(2)
    spec = ModelSpec(kind="pcb", backbone="tiny", num_classes=4, input_size=(96, 32), rpp=True)
    model_path = save_model(tmp_path / "rpp.pt", build_model(spec), spec)
    loaded = load_model(model_path)
    assert loaded.family == "rpp" and loaded.feature_names == ["rpp_g", "rpp_h"]
    layout = dataset_layout("synthetic", tiny_synthetic_root, progress=False, name="tiny")
    path = extract_model_store(layout, tmp_path / "rpp.h5", model_path, progress=False)
    with open_store(path) as st:
        assert st.feature_names == ["rpp_g", "rpp_h"] and st.default_feature() == "rpp_g"
        assert int(st.h5["features/rpp_h"].attrs["n_parts"]) == 6
        images = torch.rand(2, 3, 96, 32)
        feats, _ = embed_batch(loaded, images, [], (6, 2), False, None, False)
        assert st.features("rpp_g").shape[1] == feats["rpp_g"].shape[1] == 6 * 128
    with pytest.raises(UsageError, match="rpp_g, rpp_h"):
        extract_model_store(layout, tmp_path / "x.h5", model_path, features=["pcb_g"],
                            progress=False)
    assert parse_feature_names(["rpp-h"], "rpp") == ["rpp_h"]


def test_map_and_feature_name_checks():
    assert parse_map_names(["layer4", "conv2", "conv3_x"]) == ["conv2_x", "conv3_x", "conv5_x"]
    with pytest.raises(UsageError, match="parameter maps='conv7_x' is not a network stage"):
        parse_map_names(["conv7_x"])
    with pytest.raises(UsageError, match="bnneck"):
        parse_feature_names(["bnneck"], "pcb")
    assert parse_feature_names([], "bot") == ["bnneck"]


def test_bf16_autocast_on_cpu_stays_close_to_fp32(tiny_synthetic_root, tiny_model, tmp_path):
    layout = dataset_layout("synthetic", tiny_synthetic_root, progress=False, name="tiny")
    runs = {amp: extract_model_store(layout, tmp_path / f"{amp}.h5", tiny_model, maps=[],
                                     features=["pcb-h"], amp=amp, progress=False)
            for amp in ("off", "auto", "bf16")}
    with open_store(runs["off"]) as a, open_store(runs["auto"]) as b, \
            open_store(runs["bf16"]) as c:
        fp32, auto, bf16 = a.features("pcb_h"), b.features("pcb_h"), c.features("pcb_h")
    np.testing.assert_array_equal(auto, fp32)                 # auto = fp32 on CPU
    assert not np.array_equal(bf16, fp32)                     # bf16 autocast really ran
    cos = (bf16 * fp32).sum(1) / (np.linalg.norm(bf16, axis=1) * np.linalg.norm(fp32, axis=1))
    assert cos.min() > 0.99
