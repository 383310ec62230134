"""The procedural synthetic dataset (docs/datasets.md): parameters, tree, loader and the
acceptance checks of §8.8 (1)–(6)."""
from __future__ import annotations

import json
import re
import shutil
import sys
import types

import numpy as np
import pandas as pd
import pytest
from PIL import Image

import reidcli.data.synthetic as synthetic
from reidcli.data import registry
from reidcli.data.datasets.market_folder import parse_market_folder
from reidcli.data.datasets.synthetic import load_synthetic
from reidcli.data.records import DatasetSplit
from reidcli.data.synthetic import (IDENTITY_COLUMNS, IMAGE_COLUMNS, ImageJob, generate,
                                    plan_domain, render_job)
from reidcli.data.synthetic_params import (DOMAIN_FIELDS, OPTIONAL_FIELDS, PRESETS,
                                           SyntheticParams, make_params)
from reidcli.data.synthetic_render import BODY_TOP, UPPER, encode_jpeg, nir_reflectance
from reidcli.errors import DatasetError, OutputExistsError, UsageError
from reidcli.features.color_histograms import (hsv_stripe_histograms, load_images,
                                               rgb_to_hsv)

FILE_NAME = re.compile(r"^(-1|\d{4})_c([1-9])s1_(\d{6})_01\.jpg$")
BIASES = ("camera_bias_strength", "spatial_bias_strength", "view_bias_strength",
          "domain_shift_strength")
NO_BIAS = {**{k: 0 for k in BIASES}, "background_nuisance": 0}


def _tree(root, name):
    return root / "synthetic" / name


def _small(**changes):
    """A 1-domain tree of the default look with few ids, for tests that write files."""
    return {"num_domains": 1, "num_train_ids": 3, "num_test_ids": 4, "num_distractors": 2,
            "num_junk": 2, **changes}


# --- parameters and presets ------------------------------------------------------------------
def test_default_params_follow_the_spec_table():
    params = make_params()
    assert params == SyntheticParams()
    assert (params.seed, params.height, params.width, params.num_domains) == (0, 128, 64, 3)
    assert (params.num_cameras, params.num_train_ids, params.num_test_ids) == (6, 40, 40)
    assert (params.cams_per_id_min, params.imgs_per_id_cam) == (2, 3)
    assert (params.num_distractors, params.num_junk, params.ir_cameras) == (20, 10, ())
    assert params.vi_split is None and not params.domain(0).uses_vi_split
    assert params.noise_std == 3.0


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_preset_builds_valid_params(preset):
    params = make_params(preset)
    assert SyntheticParams.from_dict(json.loads(json.dumps(params.to_dict()))) == params
    for dom in params.domains():
        assert 1 <= dom.num_cameras <= 9 and dom.num_train_ids + dom.num_test_ids >= 1


def test_preset_settings():
    cdpcf = make_params("cdpcf")
    source, target = cdpcf.domain(0), cdpcf.domain(1)
    assert (source.num_cameras, source.num_train_ids) == (6, 300)
    assert (target.num_cameras, target.num_train_ids, target.num_test_ids,
            target.imgs_per_id_cam) == (2, 0, 200, 1)
    assert source.spatial_bias_strength == target.spatial_bias_strength == 1.5
    vi = make_params("vi").domain(0)
    assert vi.ir_cameras == (3, 6) and vi.uses_vi_split
    assert [vi.modality(c) for c in range(1, 7)] == ["visible", "visible", "infrared",
                                                      "visible", "visible", "infrared"]
    assert (make_params("dg").num_domains, make_params("dart3").num_cameras) == (4, 8)
    warca = make_params("warca")
    assert (warca.num_train_ids, warca.num_test_ids, warca.background_nuisance) == (316, 316, 1.5)
    tiny = make_params("tiny")
    assert (tiny.num_domains, tiny.num_cameras, tiny.num_train_ids, tiny.imgs_per_id_cam,
            tiny.num_distractors, tiny.num_junk) == (1, 2, 6, 2, 2, 1)


def test_overrides_seed_and_domain_overrides():
    params = make_params("cdpcf", seed=7, **{"num-cameras": 4, "noise_std": None},
                         domain_overrides={"d1": {"num_test_ids": 50}})
    assert params.seed == 7 and params.num_cameras == 4 and params.noise_std == 3.0
    assert params.domain(0).num_cameras == 4
    assert make_params(ir_cameras="c2, 1").ir_cameras == (1, 2)
    target = params.domain(1)
    assert (target.num_cameras, target.num_test_ids, target.imgs_per_id_cam) == (2, 50, 1)


@pytest.mark.parametrize("overrides, message", [
    ({"num_cameras": 12}, "num_cameras=12 is above 9 — use at most 9 cameras per domain"),
    ({"height": 10}, "height=10 is below 32"),
    ({"seed": -1}, "seed=-1 is below 0"),
    ({"num_train_ids": 2.5}, "num_train_ids=2.5 is not a whole number"),
    ({"noise_std": "loud"}, "noise_std='loud' is not a number"),
    ({"camera_bias_strength": -0.1}, "camera_bias_strength=-0.1 is below 0"),
    ({"view_bias_strength": 2}, "view_bias_strength=2 is above 1.25"),
    ({"cams_per_id_min": 7}, "cams_per_id_min=7 is above num_cameras=6"),
    ({"ir_cameras": "3,7"}, "ir_cameras names camera 7 but the domain has 6 cameras"),
    ({"ir_cameras": "3,x"}, "ir_cameras='3,x' is not a list of camera ids \\('x'"),
    ({"ir_cameras": "1,2,3,4,5,6"}, "every camera is infrared"),
    ({"vi_split": True}, "vi_split=True needs infrared cameras"),
    ({"vi_split": "maybe"}, "vi_split='maybe' is not true, false or auto"),
    ({"num_train_ids": 0, "num_test_ids": 0}, "num_train_ids \\+ num_test_ids is 0"),
    ({"num_train_ids": 9000, "num_test_ids": 1000}, "is above 9999"),
    ({"colour": 1}, "unknown synthetic parameter\\(s\\) colour"),
    ({"domain_overrides": {5: {"num_cameras": 2}}}, "names domain 5 but num_domains=3"),
    ({"domain_overrides": {1: {"height": 64}}}, "d1: height cannot differ per domain"),
    ({"domain_overrides": {1: {"num_cameras": 10}}}, "d1: num_cameras=10 is above 9"),
])
def test_invalid_parameters_name_the_parameter(overrides, message):
    with pytest.raises(UsageError, match=message):
        make_params("default", **overrides)


def test_unknown_preset():
    with pytest.raises(UsageError, match="unknown synthetic preset 'huge' — choose one of tiny"):
        make_params("huge")


def test_domain_fields_exclude_global_ones():
    assert {"seed", "height", "width", "num_domains"}.isdisjoint(DOMAIN_FIELDS)
    with pytest.raises(UsageError, match="domain 3 does not exist"):
        make_params().domain(3)


# --- planning rules (no rendering) -----------------------------------------------------------
def test_query_gallery_rule_first_image_per_camera():
    params = make_params("default")
    domain_plan = plan_domain(params, 0)
    jobs = pd.DataFrame([vars(j) for j in domain_plan.jobs])
    ids = jobs[jobs["pid"] > 0]
    assert set(ids.loc[ids["pid"] <= 40, "split"]) == {"train"}
    test = ids[ids["pid"] > 40]
    assert (test["split"] == np.where(test["frame"] == 0, "query", "gallery")).all()
    per_id = test.groupby("pid")["cam"].nunique()
    assert per_id.min() >= params.cams_per_id_min and len(per_id) == 40
    # every (id, camera) has imgs_per_id_cam frames 0..n-1
    assert (test.groupby(["pid", "cam"])["frame"].apply(sorted).map(tuple)
            == (0, 1, 2)).all()
    extras = jobs[jobs["pid"] <= 0]
    assert (extras["split"] == "gallery").all()
    assert ((extras["pid"] == 0).sum(), (extras["pid"] == -1).sum()) == (20, 10)
    # frames of distractors run per camera from 0
    for _, group in extras.groupby(["pid", "cam"]):
        assert sorted(group["frame"]) == list(range(len(group)))


def test_single_image_per_camera_rule():
    target = plan_domain(make_params("cdpcf"), 1)
    jobs = pd.DataFrame([vars(j) for j in target.jobs if j.pid > 0])
    assert set(jobs["pid"]) == set(range(1, 201))              # 0 train + 200 test ids
    assert (jobs["frame"] == 0).all() and set(jobs["cam"]) == {1, 2}
    for pid, group in jobs.groupby("pid"):
        lowest = group["cam"].min()
        assert group.loc[group["cam"] == lowest, "split"].tolist() == ["query"]
        assert (group.loc[group["cam"] != lowest, "split"] == "gallery").all()
        assert len(group) == 2


def test_vi_split_rule():
    domain_plan = plan_domain(make_params("vi"), 0)
    dom = domain_plan.params
    for pid, cams in domain_plan.identity_cameras.items():
        modalities = {dom.modality(c) for c in cams}
        assert modalities == {"infrared", "visible"}, pid
    for job in domain_plan.jobs:
        infrared = dom.modality(job.cam) == "infrared"
        if job.pid <= 0:
            assert not infrared and job.split == "gallery"
        elif job.pid > dom.num_train_ids:
            assert job.split == ("query" if infrared else "gallery")


# --- the written tree ------------------------------------------------------------------------
def test_tiny_tree_layout_tables_and_meta(tiny_synthetic_root):
    folder = _tree(tiny_synthetic_root, "tiny")
    images = pd.read_csv(folder / "images.csv")
    identities = pd.read_csv(folder / "identities.csv")
    assert tuple(images.columns) == IMAGE_COLUMNS
    assert tuple(identities.columns) == IDENTITY_COLUMNS
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*.jpg"))
    assert sorted(images["relpath"]) == files
    for rel in files:
        domain, sub, name = rel.split("/")
        assert domain == "d0" and sub in ("bounding_box_train", "query", "bounding_box_test")
        assert FILE_NAME.match(name), name
    train = images[images["split"] == "train"]
    assert set(train["pid"]) == set(range(1, 7))
    assert set(images.loc[images["split"] == "query", "pid"]) == set(range(7, 13))
    gallery = images[images["split"] == "gallery"]
    assert set(gallery["pid"]) == set(range(7, 13)) | {0, -1}
    assert identities["pid"].tolist() == list(range(1, 13))
    assert identities["split"].tolist() == ["train"] * 6 + ["test"] * 6
    assert identities["upper_rgb"].str.match(r"^#[0-9a-f]{6}$").all()
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["generator_version"] == synthetic.GENERATOR_VERSION
    assert meta["seed"] == 0 and meta["params"] == make_params("tiny").to_dict()
    assert meta["camera_modality"] == {"d0": {"0": "visible", "1": "visible"}}
    cameras = meta["domains"][0]["cameras"]
    assert [c["cam"] for c in cameras] == [1, 2]
    assert {"gains", "offset", "contrast", "blur_sigma", "dy", "dx", "scale"} <= set(cameras[0])
    assert meta["domains"][0]["counts"]["gallery"]["distractors"] == 2
    with Image.open(folder / files[0]) as img:
        assert img.size == (64, 128) and img.mode == "RGB"


def test_check1_market_parser_reproduces_images_csv(tiny_synthetic_root):
    folder = _tree(tiny_synthetic_root, "tiny")
    images = pd.read_csv(folder / "images.csv")
    parsed = pd.concat([
        parse_market_folder(folder / "d0" / sub, split, dataset="synthetic",
                            domain="synthetic/d0", cam_range=(1, 9), keep_junk=True)
        for split, sub in synthetic.SPLIT_FOLDERS.items()], ignore_index=True)
    parsed["relpath"] = [p[len(str(folder)) + 1:] for p in parsed["path"]]
    parsed = parsed.sort_values("relpath", key=lambda s: s.map(str.encode)).reset_index(drop=True)
    for col in ("relpath", "pid", "camid", "split", "modality", "frame"):
        assert parsed[col].astype(str).tolist() == images[col].astype(str).tolist(), col
    # the loader gives the same records without junk
    split = load_synthetic(tiny_synthetic_root, name="tiny", generate=False)
    loaded = split.all_records()
    assert len(loaded) == (images["pid"] != -1).sum()
    assert set(loaded["domain"]) == {"synthetic/d0"} and set(loaded["dataset"]) == {"synthetic"}


def test_check1_determinism_independent_of_workers_and_order(tmp_path, tiny_synthetic_root,
                                                             monkeypatch):
    monkeypatch.setattr(synthetic, "MIN_IMAGES_FOR_POOL", 0)     # force the process pool
    again = generate(tmp_path, "tiny", progress=False, workers=2)
    first = _tree(tiny_synthetic_root, "tiny")
    for table in ("images.csv", "identities.csv"):
        assert (again / table).read_bytes() == (first / table).read_bytes()
    images = pd.read_csv(first / "images.csv")
    paths = images["relpath"].tolist()
    a = load_images([first / p for p in paths])
    b = load_images([again / p for p in paths])
    assert np.array_equal(a, b)
    # render a subset directly, in reverse order: identical JPEG bytes
    params = make_params("tiny")
    domain_plan = plan_domain(params, 0)
    jobs = {j.relpath: j for j in domain_plan.jobs}
    for rel in paths[::-3]:
        rendered, state = render_job(domain_plan, jobs[rel], 128, 64, params.seed)
        assert encode_jpeg(rendered.image) == (first / rel).read_bytes(), rel
        row = images.set_index("relpath").loc[rel]
        assert (row["view"], bool(row["mirror"])) == (state.view, state.mirror)
        assert row["dy"] == pytest.approx(state.dy, abs=1e-4)


def test_existing_tree_is_reused_refused_or_forced(tmp_path, monkeypatch):
    path = generate(tmp_path, "tiny", progress=False)
    stamp = (path / "meta.json").stat().st_mtime_ns

    def fail(*args, **kwargs):
        raise AssertionError("regenerated an existing tree")

    monkeypatch.setattr(synthetic, "_render_all", fail)
    assert generate(tmp_path, "tiny", progress=False) == path
    assert (path / "meta.json").stat().st_mtime_ns == stamp
    with pytest.raises(OutputExistsError, match=r"exists with other parameters — allow regenerating it \(force\)"):
        generate(tmp_path, "tiny", seed=1, progress=False)
    monkeypatch.undo()
    forced = generate(tmp_path, "tiny", seed=1, force=True, progress=False)
    assert json.loads((forced / "meta.json").read_text())["seed"] == 1
    assert not (tmp_path / "synthetic" / "tiny.partial").exists()
    with pytest.raises(UsageError, match="not a plain folder name"):
        generate(tmp_path, "tiny", name="../x", progress=False)


def test_failed_generation_leaves_no_tree(tmp_path, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(synthetic, "identities_table", boom)
    with pytest.raises(RuntimeError):
        generate(tmp_path, "tiny", progress=False)
    assert not (tmp_path / "synthetic" / "tiny").exists()
    assert not (tmp_path / "synthetic" / "tiny.partial").exists()


# --- loader ----------------------------------------------------------------------------------
def test_registry_entry_and_root_resolution(tiny_synthetic_root):
    info = registry.info("synth")
    assert info.name == "synthetic" and "*" in info.options
    assert {"name", "preset", "seed", "generate", "domains", "protocol"} <= set(info.options)
    direct = registry.load("synthetic", _tree(tiny_synthetic_root, "tiny"))    # root = tree
    assert isinstance(direct, DatasetSplit) and direct.eval_rule == "market"
    assert (len(direct.train), len(direct.query)) == (24, 12)
    assert set(direct.gallery["pid"]) == set(range(7, 13)) | {0}                # junk dropped
    by_name = registry.load("synthetic", tiny_synthetic_root, name="tiny", generate=False)
    assert by_name.all_records()["path"].tolist() == direct.all_records()["path"].tolist()
    nested = load_synthetic(tiny_synthetic_root / "synthetic", name="tiny", generate=False)
    assert nested.all_records()["path"].tolist() == direct.all_records()["path"].tolist()
    named = load_synthetic(_tree(tiny_synthetic_root, "tiny"), name="tiny", generate=False)
    assert len(named.train) == len(direct.train)
    with pytest.raises(DatasetError, match="no synthetic dataset 'vi'"):    # not the tiny tree
        load_synthetic(_tree(tiny_synthetic_root, "tiny"), name="vi", generate=False)


def test_loader_generates_when_missing_and_checks_parameters(tmp_path):
    with pytest.raises(DatasetError, match="no synthetic dataset 'tiny'"):
        load_synthetic(tmp_path, name="tiny", generate=False)
    split = load_synthetic(tmp_path, name="tiny")
    assert (tmp_path / "synthetic" / "tiny" / "meta.json").is_file() and len(split.train) == 24
    assert len(load_synthetic(tmp_path, name="tiny", preset="tiny", seed=0).train) == 24
    with pytest.raises(OutputExistsError, match="other parameters"):
        load_synthetic(tmp_path, name="tiny", seed=5)


def test_pids_restart_per_domain_and_domain_selection(tmp_path):
    generate(tmp_path, "tiny", name="two", overrides={"num_domains": 2}, progress=False)
    split = load_synthetic(tmp_path, name="two", generate=False)
    train = split.train
    for domain in ("synthetic/d0", "synthetic/d1"):
        assert set(train.loc[train["domain"] == domain, "pid"]) == set(range(1, 7))
    assert set(split.query["domain"]) == {"synthetic/d0", "synthetic/d1"}
    only = load_synthetic(tmp_path, name="two", domains="d1")
    assert set(only.all_records()["domain"]) == {"synthetic/d1"}
    assert only.options["domains"] == [1]
    with pytest.raises(UsageError, match="domain 4 is not in the synthetic dataset"):
        load_synthetic(tmp_path, name="two", domains=[4])


def test_vi_tree_modalities_from_meta(tmp_path):
    generate(tmp_path, "vi", name="vi_small", progress=False,
             overrides={"num_train_ids": 3, "num_test_ids": 4})
    split = load_synthetic(tmp_path, name="vi_small", generate=False)
    assert set(split.query["modality"]) == {"infrared"}
    assert set(split.query["camid"]) <= {2, 5}
    assert set(split.gallery["modality"]) == {"visible"}
    assert set(split.train["modality"]) == {"infrared", "visible"}
    infrared = load_images(split.query["path"].tolist())
    assert np.array_equal(infrared[..., 0], infrared[..., 1])
    assert np.array_equal(infrared[..., 1], infrared[..., 2])
    copy = tmp_path / "bare"
    shutil.copytree(tmp_path / "synthetic" / "vi_small", copy)
    (copy / "meta.json").unlink()
    bare = load_synthetic(copy, generate=False)
    assert set(bare.all_records()["modality"]) == {"visible"}


def test_other_protocols_are_delegated(tiny_synthetic_root, monkeypatch):
    calls = {}

    def apply_protocol(frame, protocol, *, trial, seed, dataset_root, **options):
        calls.update(frame=frame, protocol=protocol, trial=trial, seed=seed,
                     root=dataset_root, options=options)
        return DatasetSplit("synthetic", frame.iloc[:0], frame.iloc[:0], frame.iloc[:0],
                            protocol=protocol)

    fake = types.ModuleType("reidcli.data.protocols")
    fake.apply_protocol = apply_protocol
    fake.DERIVED, fake.DERIVED_OPTIONS = {}, {}
    monkeypatch.setitem(sys.modules, "reidcli.data.protocols", fake)
    out = registry.load("synth", _tree(tiny_synthetic_root, "tiny"), trial=3,
                        protocol="single_shot_half", num_trials=10)
    assert out.protocol == "single_shot_half"
    assert calls["trial"] == 3 and calls["seed"] == 0 and calls["options"] == {"num_trials": 10}
    assert calls["root"] == _tree(tiny_synthetic_root, "tiny")
    assert set(calls["frame"]["split"]) == {"train", "query", "gallery"}


# --- acceptance checks (2)-(6) ---------------------------------------------------------------
def _render_all_jobs(params, domain=0):
    domain_plan = plan_domain(params, domain)
    return domain_plan, [(job, *render_job(domain_plan, job, params.height, params.width,
                                           params.seed)) for job in domain_plan.jobs]


@pytest.mark.parametrize("strength", [1.0, 0.0])
def test_check2_spatial_bias(strength):
    params = make_params("default", num_domains=1, num_train_ids=10, num_test_ids=10,
                         spatial_bias_strength=strength)
    _, rendered = _render_all_jobs(params)
    height = params.height
    tops: dict[int, list[int]] = {}
    for job, image, state in rendered:
        rows = np.flatnonzero(image.body_mask.any(axis=1))
        if job.pid == -1:            # junk = a crop that misses most of the person
            continue
        # a negative top means the camera crops the head: the mask then starts at row 0
        expected = max(0, round(BODY_TOP * height + state.dy))
        assert abs(rows[0] - expected) <= 1, (job, rows[0], expected)
        tops.setdefault(job.cam, []).append(rows[0])
    means = {cam: np.mean(values) for cam, values in tops.items()}
    if strength:
        assert abs(means[1] - means[2]) >= 0.1 * height
    else:
        assert max(means.values()) - min(means.values()) <= 1


@pytest.mark.parametrize("strength", [1.0, 0.0])
def test_check3_photometric_bias(strength):
    params = make_params("default", num_domains=1, camera_bias_strength=strength)
    domain_plan = plan_domain(params, 0)
    cam_means = []
    for cam in range(1, params.num_cameras + 1):           # the same people in every camera
        pixels = [image.image[image.body_mask].mean(axis=0) for image, _ in (
            render_job(domain_plan, ImageJob(0, pid, cam, 0, "train"), 128, 64, params.seed)
            for pid in range(1, 61))]
        cam_means.append(np.mean(pixels, axis=0))
    cam_means = np.array(cam_means)                           # [cams, 3]
    largest = np.abs(cam_means[:, None] - cam_means[None]).max()
    assert largest >= 10 if strength else largest < 3


@pytest.mark.parametrize("cues", [0.0, 1.0])
def test_check4_infrared_follows_emissivity_or_nir_reflectance(cues):
    """cues 0 (version 1): the torso level follows the random emissivity, not the colour;
    cues 1 (preset vi): it follows the NIR reflectance of the garment colour instead."""
    params = make_params("vi", num_train_ids=120, num_test_ids=0, ir_identity_cues=cues)
    assert make_params("vi").ir_identity_cues == 1.0
    domain_plan = plan_domain(params, 0)
    torso, emissivity, luminance, nir = [], [], [], []
    for pid in range(1, 121):
        cam = params.ir_cameras[pid % 2]
        image, _ = render_job(domain_plan, ImageJob(0, pid, cam, 0, "train"), 128, 64,
                              params.seed)
        pixels = image.image
        assert np.array_equal(pixels[..., 0], pixels[..., 1])
        assert np.array_equal(pixels[..., 1], pixels[..., 2])
        torso.append(pixels[..., 0][image.parts == UPPER].mean())
        person = domain_plan.identities[pid]
        emissivity.append(person.emis_upper)
        luminance.append(np.dot(person.upper_rgb, [0.299, 0.587, 0.114]))
        stripes = person.stripe_rgb if person.upper_texture != "plain" else person.upper_rgb
        nir.append((nir_reflectance(person.upper_rgb) + nir_reflectance(stripes)) / 2)
    follows, ignores = (emissivity, nir) if cues == 0 else (nir, emissivity)
    assert np.corrcoef(torso, follows)[0, 1] > 0.9
    assert abs(np.corrcoef(torso, ignores)[0, 1]) < 0.3
    if cues == 0:
        assert abs(np.corrcoef(torso, luminance)[0, 1]) < 0.3
    else:                          # a channel mix unlike luminance: related, not the same
        assert 0.3 < np.corrcoef(torso, luminance)[0, 1] < 0.95


def test_new_parameters_stay_out_of_version_1_meta():
    """ir_identity_cues / domain_style_strength at 0 leave meta.json as version 1 wrote it."""
    for preset in sorted(PRESETS):
        listed = set(make_params(preset).to_dict()) & set(OPTIONAL_FIELDS)
        assert listed == {"vi": {"ir_identity_cues"}, "dg": {"domain_style_strength"}}.get(
            preset, set()), preset
    assert plan_domain(make_params("default"), 0).style is None
    with pytest.raises(UsageError, match="ir_identity_cues"):
        make_params("vi", ir_identity_cues=1.5)
    with pytest.raises(UsageError, match="domain_style_strength"):
        make_params("dg", domain_style_strength=-1)


def test_dg_domains_differ_in_style():
    """Preset dg: each domain draws its own colour matrix, gamma, blur, resolution and
    background grating; with the strength at 0 the same key renders without them."""
    params = make_params("dg", num_train_ids=2, num_test_ids=1, num_distractors=0,
                         num_junk=0)
    styles = [plan_domain(params, d).style for d in range(4)]
    assert len({s.mix for s in styles}) == 4 and len({s.gamma for s in styles}) == 4
    assert all(1.0 <= s.downsample <= 2.5 and s.blur_sigma <= 1.6 for s in styles)
    plain = make_params("dg", num_train_ids=2, num_test_ids=1, num_distractors=0,
                        num_junk=0, domain_style_strength=0)
    for d in (0, 3):
        job = plan_domain(params, d).jobs[0]
        styled, _ = render_job(plan_domain(params, d), job, 128, 64, params.seed)
        bare, _ = render_job(plan_domain(plain, d), job, 128, 64, params.seed)
        assert np.array_equal(styled.parts, bare.parts)
        assert np.abs(styled.image.astype(float) - bare.image).mean() > 10


def test_check5_domain_palettes_differ():
    params = make_params("default")

    def mean_hue(domain):
        people = plan_domain(params, domain).identities.values()
        rgb = np.array([c for p in people for c in (p.upper_rgb, p.lower_rgb)])
        hue = rgb_to_hsv(np.rint(rgb).astype(np.uint8))[:, 0] * 2 * np.pi
        return np.angle(np.exp(1j * hue).mean())

    gap = np.degrees(np.abs(np.angle(np.exp(1j * (mean_hue(1) - mean_hue(0))))))
    assert gap > 60


def _rank1_hsv_stripes(split: DatasetSplit) -> float:
    """Rank-1 of 6-stripe HSV histograms under rule E1 with L2 distance."""
    query, gallery = split.query, split.gallery
    features_q = hsv_stripe_histograms(load_images(query["path"].tolist()))
    features_g = hsv_stripe_histograms(load_images(gallery["path"].tolist()))
    distances = (np.sum(features_q**2, 1)[:, None] + np.sum(features_g**2, 1)[None]
                 - 2.0 * features_q @ features_g.T)
    same_pid = query["pid"].to_numpy()[:, None] == gallery["pid"].to_numpy()[None]
    same_cam = query["camid"].to_numpy()[:, None] == gallery["camid"].to_numpy()[None]
    distances[same_pid & same_cam] = np.inf
    valid = (same_pid & ~same_cam).any(axis=1)
    first = np.argmin(distances, axis=1)
    hits = gallery["pid"].to_numpy()[first] == query["pid"].to_numpy()
    assert valid.sum() >= 100
    return float(hits[valid].mean())


def test_check6_difficulty_window(default_synthetic_root, tmp_path):
    default = load_synthetic(default_synthetic_root, name="default", domains=[0],
                             generate=False)
    rank1 = _rank1_hsv_stripes(default)
    assert 0.15 <= rank1 <= 0.85, rank1
    # d0 does not depend on the other domains, so one domain is enough for the easy variant
    generate(tmp_path, "default", name="easy", overrides={"num_domains": 1, **NO_BIAS},
             progress=False)
    easy = _rank1_hsv_stripes(load_synthetic(tmp_path, name="easy", generate=False))
    assert easy >= 0.9, easy
    assert easy > rank1
