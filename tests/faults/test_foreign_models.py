"""Issue 31: a model you already have can be used. Foreign checkpoints (fast-reid,
torchreid, reid-strong-baseline, layumi; docs/models.md) load with ``reid extract --model``,
their test feature and normalisation; mismatches are one-line errors unless
``--allow-partial``; a partial ``--init`` warns."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from reidcli.models.backbones import build_backbone
from tests.faults.helpers import assert_one_line_error_in_process, reid_in_process
from tests.models.test_foreign import (_bn, _stem_and_stages, fastreid_state, randomise,
                                       reference_resnet, shapes, torchreid_state)


@pytest.fixture(scope="module")
def trunks():
    return {name: randomise(shapes(name), i)
            for i, name in enumerate(("resnet50_ibn_a", "osnet_x0_25"))}


@pytest.fixture(scope="module")
def micro_root(tmp_path_factory):
    """A 2-image synthetic dataset (``--option name=micro``)."""
    from reidcli.data.synthetic import generate

    root = tmp_path_factory.mktemp("micro")
    generate(root, "tiny", name="micro", progress=False, workers=1,
             overrides=dict(num_train_ids=0, num_test_ids=1, imgs_per_id_cam=1,
                            num_distractors=0, num_junk=0))
    return root


def _data(root):
    return ["--dataset", "synthetic", "--root", root, "--option", "name=micro",
            "--device", "cpu"]


def _images(paths, size, interpolation):
    """Images as the toolkit reads them: PIL RGB, resized (W, H) with its interpolation, as
    0–255 floats [N, 3, H, W]."""
    arrays = [np.asarray(Image.open(p).convert("RGB").resize((size[1], size[0]),
                                                              interpolation), np.float32)
              for p in paths]
    return torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2).contiguous()


def _store(path):
    from reidcli.store.reader import open_store

    with open_store(path) as st:
        return st.records["path"].tolist(), {n: st.features(n) for n in st.feature_names}, \
            st.provenance, {n: st.feature_info(n) for n in st.feature_names}


def _close(got, want):
    want = want.numpy()
    assert np.isfinite(want).all() and np.abs(want).max() > 1e-3
    assert np.abs(got - want).max() <= 1e-5 * max(1.0, np.abs(want).max())


# Case: `reid extract --model fastreid_bot.pth` exited 2 ('not a reidcli model file');
# now a fast-reid BoT R50-ibn checkpoint writes the features of the model built by hand.
def test_fastreid_bot_r50_ibn_extracts_its_bnneck_features(trunks, micro_root, tmp_path,
                                                            capsys):
    sd = fastreid_state(trunks, ibn=True)
    path = tmp_path / "fastreid_bot.pth"
    torch.save({"model": sd, "optimizer": {}, "scheduler": {}, "iteration": 9}, path)
    out = tmp_path / "fr.h5"
    code, _, err = reid_in_process("extract", "--model", path, *_data(micro_root), "--out",
                                   out, "--features", "bnneck,pool5", capsys=capsys)
    assert code == 0, err
    assert "fast-reid BoT R50-ibn (recognised from its keys): 350 tensors loaded" in err
    assert "test feature bnneck" in err and "warning" not in err
    paths, feats, prov, info = _store(out)
    # fast-reid: bicubic resize to 256×128, 0–255 input, (x − PIXEL_MEAN) / PIXEL_STD
    x = _images(paths, (256, 128), Image.BICUBIC)
    x = (x - torch.tensor([123.675, 116.28, 103.53]).view(1, 3, 1, 1)) / \
        torch.tensor([58.395, 57.12, 57.375]).view(1, 3, 1, 1)
    ref = _stem_and_stages("resnet50_ibn_a", sd, "backbone.", 1, True)
    with torch.no_grad():
        pool = reference_resnet(x, ref, sd).mean((2, 3))
        _close(feats["bnneck"], _bn(pool, sd, "heads.bottleneck.0."))
        _close(feats["pool5"], pool)
    record = prov["model"]["foreign"]
    assert record["name"] == "fastreid-bot-r50-ibn" and record["interpolation"] == "bicubic"
    assert record["load_report"]["loaded"] == 350
    assert record["load_report"]["missing"]["count"] == 0
    # the same from any image folder (issue 31's done-when): `--images DIR`
    folder = Path(paths[0]).parent
    code, _, err = reid_in_process("extract", "--model", path, "--images", folder, "--device",
                                   "cpu", "--out", tmp_path / "folder.h5", "--features",
                                   "bnneck", capsys=capsys)
    assert code == 0, err
    folder_paths, folder_feats, _, _ = _store(tmp_path / "folder.h5")
    assert folder_paths and all(Path(p).parent == folder for p in folder_paths)
    x = _images(folder_paths, (256, 128), Image.BICUBIC)
    x = (x - torch.tensor([123.675, 116.28, 103.53]).view(1, 3, 1, 1)) / \
        torch.tensor([58.395, 57.12, 57.375]).view(1, 3, 1, 1)
    with torch.no_grad():
        pool = reference_resnet(x, ref, sd).mean((2, 3))
        _close(folder_feats["bnneck"], _bn(pool, sd, "heads.bottleneck.0."))


# Case: a torchreid OSNet checkpoint ({"state_dict": module.* keys}) gives its fc feature,
# from --dataset and from --images DIR.
def test_torchreid_osnet_extracts_its_fc_feature(trunks, micro_root, tmp_path, capsys):
    sd = torchreid_state(trunks, "osnet_x0_25", fc=512)
    path = tmp_path / "osnet_x0_25.pth.tar"
    torch.save({"state_dict": sd, "epoch": 150, "rank1": 0.9}, path)
    s = {k[len("module."):]: v for k, v in sd.items()}
    with torch.device("meta"):
        trunk = build_backbone("osnet_x0_25").eval()
    trunk.load_state_dict({k: v for k, v in s.items()
                           if not k.startswith(("fc.", "classifier."))}, assign=True)

    def reference(paths):
        # torchreid: bilinear resize, /255, ImageNet mean/std
        x = _images(paths, (256, 128), Image.BILINEAR) / 255
        x = (x - torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)) / \
            torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
        with torch.no_grad():
            pool = trunk(x)[0].mean((2, 3))
            return F.relu(_bn(F.linear(pool, s["fc.0.weight"], s["fc.0.bias"]), s, "fc.1."))

    out = tmp_path / "osnet.h5"
    code, _, err = reid_in_process("extract", "--model", path, *_data(micro_root), "--out",
                                   out, capsys=capsys)
    assert code == 0, err
    assert "torchreid osnet_x0_25 (recognised from its keys)" in err
    paths, feats, prov, info = _store(out)
    assert list(feats) == ["embed"] and info["embed"]["metric"] == "euclidean"
    _close(feats["embed"], reference(paths))
    folder = Path(paths[0]).parent
    code, _, err = reid_in_process("extract", "--model", path, "--images", folder,
                                   "--device", "cpu", "--out", tmp_path / "folder.h5",
                                   capsys=capsys)
    assert code == 0, err
    paths, feats, _, _ = _store(tmp_path / "folder.h5")
    assert paths and all(Path(p).parent == folder for p in paths)
    _close(feats["embed"], reference(paths))


# Case: a mismatch beyond the known heads (a trunk tensor missing, one unexpected) is a
# one-line error with the counts; --allow-partial turns it into a warning line.
def test_mismatch_is_an_error_unless_allow_partial(trunks, micro_root, tmp_path, capsys):
    sd = torchreid_state(trunks, "osnet_x0_25", fc=512)
    del sd["module.conv5.bn.running_var"]
    sd["module.extra.weight"] = torch.zeros(3)
    path = tmp_path / "broken.pth"
    torch.save({"state_dict": sd}, path)
    line = assert_one_line_error_in_process(
        reid_in_process("extract", "--model", path, *_data(micro_root), "--out",
                        tmp_path / "b.h5", capsys=capsys),
        "do not fit a torchreid osnet_x0_25", "1 missing (conv5.bn.running_var)",
        "1 unexpected (extra.weight)", "--allow-partial", "--arch")
    assert "tensors loaded" not in line
    code, _, err = reid_in_process("extract", "--model", path, *_data(micro_root), "--out",
                                   tmp_path / "b.h5", "--allow-partial", capsys=capsys)
    assert code == 0, err
    warned = [ln for ln in err.splitlines() if ln.startswith("warning:")]
    assert len(warned) == 1 and "allowed by --allow-partial" in warned[0]


# Case: files that are no recognised model, bad --arch values and misplaced flags.
@pytest.mark.parametrize("case", ["unrecognised", "imagenet", "unknown-arch", "wrong-arch",
                                  "arch-on-reidcli-model", "arch-without-model"])
def test_refusals_are_one_line_errors(case, tmp_path, capsys, micro_root):
    path = tmp_path / "model.pth"
    args = ["extract", "--model", path]
    if case == "unrecognised":
        torch.save({"encoder.weight": torch.zeros(2, 2)}, path)
        needles = ("neither a reidcli model file nor a recognised", "--arch NAME")
    elif case == "imagenet":
        torch.save({"conv1.weight": torch.zeros(4, 3, 1, 1), "fc.weight": torch.zeros(1000, 4)},
                   path)
        needles = ("ImageNet classifier", "--init")
    elif case == "unknown-arch":
        torch.save({"conv1.weight": torch.zeros(1)}, path)
        args += ["--arch", "fastreid-bogus"]
        needles = ("--arch 'fastreid-bogus' is not a known architecture",
                   "torchreid-osnet_x0_25")
    elif case == "wrong-arch":
        torch.save({"encoder.weight": torch.zeros(2, 2)}, path)
        args += ["--arch", "torchreid-osnet_x0_25"]
        needles = ("none of its 1 tensors fit a torchreid osnet_x0_25",)
    elif case == "arch-on-reidcli-model":
        from reidcli.models.checkpoint import ModelSpec, build_model, save_model

        spec = ModelSpec(kind="bot", backbone="tiny", num_classes=2, input_size=(32, 16))
        save_model(path, build_model(spec), spec)
        args += ["--arch", "rsb-r50"]
        needles = ("--arch rsb-r50 applies to foreign checkpoints", "drop --arch")
    else:
        args = ["extract", "--arch", "rsb-r50"]
        needles = ("--arch applies to --model only",)
    assert_one_line_error_in_process(
        reid_in_process(*args, *_data(micro_root), "--out", tmp_path / "o.h5",
                        capsys=capsys), *needles)


# Case: a fast-reid R50-ibn file given to --init of a ResNet-50 loaded 253 tensors with 65
# missing and said so only in an `init:` info line; now it is a warning naming the backbone.
def test_partial_init_warns_and_full_init_does_not(trunks, tmp_path):
    from reidcli.models.weights import initialize_trunk

    path = tmp_path / "fastreid_ibn.pth"
    torch.save({"model": fastreid_state(trunks, ibn=True)}, path)
    with pytest.warns(UserWarning, match=r"loads only part of the resnet50 backbone.*91 of "
                                         r"the file fit no trunk tensor.*resnet50_ibn_a"):
        report = initialize_trunk(build_backbone("resnet50"), str(path))
    assert len(report.missing) == 13 * 5 and len(report.loaded) == 318 - 13 * 5
    with warnings.catch_warnings():
        warnings.simplefilter("error")                  # the heads alone do not warn
        report = initialize_trunk(build_backbone("resnet50_ibn_a"), str(path))
    assert len(report.loaded) == 344 and report.unexpected
