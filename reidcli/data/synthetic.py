"""The built-in procedural ``synthetic`` dataset: planning and writing (docs/datasets.md).

:func:`generate` writes ``<root>/synthetic/<name>/`` — ``meta.json``, ``identities.csv``,
``images.csv`` and one Market-1501 tree per domain (``d0/``, ``d1/``, …) — atomically, and
returns the existing folder untouched when it was made with the same parameters.

:func:`plan_domain` decides every image of a domain (identity, camera, frame, split) without
rendering; :func:`render_job` renders one of them. Each image depends only on the parameters
and its own key (docs/datasets.md), so the folder is identical whatever the number of worker
processes or the order of rendering.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import numpy as np
import pandas as pd

from reidcli.data.synthetic_params import (GENERATOR_VERSION, OPTIONAL_FIELDS, PRESETS,
                                           DomainParams, SyntheticParams, make_params)
from reidcli.data.synthetic_render import (CameraParams, DomainLook, DomainStyle,
                                           IdentityAttributes, ImageState, RenderedImage,
                                           identity_rng, image_rng, image_style_rng,
                                           layout_rng, render_image, sample_camera,
                                           sample_camera_subset, sample_domain_look,
                                           sample_domain_style, sample_identity,
                                           sample_image_state, write_jpeg)
from reidcli.errors import OutputError, OutputExistsError, UsageError
from reidcli.io import atomic_folder, output_error
from reidcli.naming import param
from reidcli.progress import track

#: record split → Market folder
SPLIT_FOLDERS: dict[str, str] = {
    "train": "bounding_box_train", "query": "query", "gallery": "bounding_box_test"}
META_FILE, IDENTITIES_FILE, IMAGES_FILE = "meta.json", "identities.csv", "images.csv"
IMAGE_COLUMNS = ("relpath", "domain", "pid", "camid", "split", "modality", "frame", "view",
                 "mirror", "dy", "dx", "scale")
IDENTITY_COLUMNS = ("domain", "pid", "split", "height", "build", "upper_rgb", "lower_rgb",
                    "upper_texture", "stripe_period", "stripe_rgb", "lower_texture", "bag",
                    "bag_rgb", "emis_upper", "emis_lower", "emis_bag")
DISTRACTOR_PID, JUNK_PID = 0, -1
#: below this many images, rendering stays in the calling process
MIN_IMAGES_FOR_POOL = 400
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


def market_file_name(pid: int, cam: int, frame: int) -> str:
    """``0001_c1s1_000000_01.jpg`` (junk: ``-1_c1s1_000000_01.jpg``); ``cam`` 1-based."""
    pid_text = "-1" if pid == JUNK_PID else f"{pid:04d}"
    return f"{pid_text}_c{cam}s1_{frame:06d}_01.jpg"


@dataclasses.dataclass(frozen=True)
class ImageJob:
    """One image to render: its key (domain, pid, 1-based cam, frame) and its split."""

    domain: int
    pid: int
    cam: int
    frame: int
    split: str

    @property
    def relpath(self) -> str:
        """Path relative to the dataset folder, e.g. ``d0/query/0041_c2s1_000000_01.jpg``."""
        return (f"d{self.domain}/{SPLIT_FOLDERS[self.split]}/"
                f"{market_file_name(self.pid, self.cam, self.frame)}")


@dataclasses.dataclass
class DomainPlan:
    """Everything decided about one domain before rendering."""

    params: DomainParams
    look: DomainLook
    cameras: dict[int, CameraParams]                  # 1-based cam → parameters
    identities: dict[int, IdentityAttributes]         # pid → attributes
    identity_cameras: dict[int, tuple[int, ...]]      # pid → sorted 1-based cameras
    identity_splits: dict[int, str]                   # pid → "train" | "test"
    jobs: list[ImageJob]
    style: DomainStyle | None = None                  # domain_style_strength > 0 only


def plan_domain(params: SyntheticParams, index: int) -> DomainPlan:
    """Identities, cameras and the image list of domain ``index`` (no rendering).

    Query/gallery rule (docs/datasets.md): per test id and camera, the first image is the
    query; with ``imgs_per_id_cam == 1`` only the image of the id's lowest camera is; with
    the VI split, every test image of an infrared camera is a query and every visible one a
    gallery image. Distractors (pid 0) and junk (pid -1) are gallery images, taken by
    visible cameras when the VI split is on.
    """
    dom = params.domain(index)
    look = sample_domain_look(params.seed, dom, params.num_domains)
    cameras = {cam: sample_camera(params.seed, dom, cam, params.height, params.width)
               for cam in range(1, dom.num_cameras + 1)}
    identities, identity_cameras, identity_splits = {}, {}, {}
    jobs: list[ImageJob] = []
    for pid in range(1, dom.num_train_ids + dom.num_test_ids + 1):
        rng = identity_rng(params.seed, index, pid)
        identities[pid] = sample_identity(rng, look)
        cams = sample_camera_subset(rng, dom)
        identity_cameras[pid] = cams
        split = "train" if pid <= dom.num_train_ids else "test"
        identity_splits[pid] = split
        for cam in cams:
            for frame in range(dom.imgs_per_id_cam):
                jobs.append(ImageJob(index, pid, cam, frame,
                                     _image_split(dom, split, cam, frame, cams)))
    jobs.extend(_gallery_extras(params, dom))
    return DomainPlan(dom, look, cameras, identities, identity_cameras, identity_splits, jobs,
                      sample_domain_style(params.seed, dom))


def _image_split(dom: DomainParams, id_split: str, cam: int, frame: int,
                 cams: tuple[int, ...]) -> str:
    if id_split == "train":
        return "train"
    if dom.uses_vi_split:
        return "query" if dom.modality(cam) == "infrared" else "gallery"
    if dom.imgs_per_id_cam == 1:
        return "query" if cam == cams[0] else "gallery"
    return "query" if frame == 0 else "gallery"


def _gallery_extras(params: SyntheticParams, dom: DomainParams) -> list[ImageJob]:
    """Distractor and junk images: random cameras, frames counted per (pid, camera)."""
    rng = layout_rng(params.seed, dom.index)
    cams = np.array(dom.visible_cameras() if dom.uses_vi_split
                    else list(range(1, dom.num_cameras + 1)))
    jobs = []
    for pid, count in ((DISTRACTOR_PID, dom.num_distractors), (JUNK_PID, dom.num_junk)):
        chosen = cams[rng.integers(len(cams), size=count)]
        frames = np.zeros(dom.num_cameras + 1, int)
        for cam in chosen:
            jobs.append(ImageJob(dom.index, pid, int(cam), int(frames[cam]), "gallery"))
            frames[cam] += 1
    return jobs


def plan(params: SyntheticParams) -> list[DomainPlan]:
    """:func:`plan_domain` for every domain."""
    return [plan_domain(params, d) for d in range(params.num_domains)]


def render_job(domain_plan: DomainPlan, job: ImageJob, height: int, width: int,
               seed: int) -> tuple[RenderedImage, ImageState]:
    """Render one planned image; distractors and junk draw their person from the image RNG."""
    rng = image_rng(seed, job.domain, job.pid, job.cam, job.frame)
    camera = domain_plan.cameras[job.cam]
    person = (domain_plan.identities[job.pid] if job.pid > 0
              else sample_identity(rng, domain_plan.look))
    state = sample_image_state(rng, camera, domain_plan.params, height, width,
                               junk=job.pid == JUNK_PID)
    style = domain_plan.style
    style_rng_ = (None if style is None
                  else image_style_rng(seed, job.domain, job.pid, job.cam, job.frame))
    rendered = render_image(rng, person, state, camera, domain_plan.look, domain_plan.params,
                            height, width, style=style, style_rng_=style_rng_)
    return rendered, state


def render_synthetic_image(params: SyntheticParams, domain: int, pid: int, cam: int,
                           frame: int) -> tuple[RenderedImage, ImageState]:
    """Render one image by its key without writing anything (for tests and inspection).

    ``cam`` is 1-based. Plans the domain first, so render many images through
    :func:`plan_domain` + :func:`render_job` instead.
    """
    domain_plan = plan_domain(params, domain)
    job = next((j for j in domain_plan.jobs if (j.pid, j.cam, j.frame) == (pid, cam, frame)),
               None)
    if job is None:
        raise UsageError(f"image pid={pid} cam={cam} frame={frame} is not part of domain "
                         f"{domain}", "pick a key listed in images.csv")
    return render_job(domain_plan, job, params.height, params.width, params.seed)


def image_row(job: ImageJob, state: ImageState, modality: str) -> dict[str, Any]:
    """The ``images.csv`` row of a rendered image."""
    return {"relpath": job.relpath, "domain": job.domain, "pid": job.pid,
            "camid": job.cam - 1, "split": job.split, "modality": modality,
            "frame": job.frame, "view": state.view, "mirror": int(state.mirror),
            "dy": state.dy, "dx": state.dx, "scale": state.scale}


# --- parallel rendering ----------------------------------------------------------------------
_WORKER: dict[str, Any] = {}


def _init_worker(params: SyntheticParams, plans: list[DomainPlan], out_dir: str) -> None:
    _WORKER.update(params=params, plans=plans, out_dir=Path(out_dir))


def _init_pool_worker(params: SyntheticParams, plans: list[DomainPlan], out_dir: str) -> None:
    """Worker start-up: die with the parent, leave Ctrl-C to the parent (which terminates the
    pool), and undo the parent's SIGTERM handler inherited through fork."""
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _init_worker(params, plans, out_dir)


def _die_with_parent() -> None:
    """Linux: SIGKILL this process when its parent dies (prctl PR_SET_PDEATHSIG), so a killed
    ``reid data synth`` never leaves renderers behind. No-op elsewhere."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:                 # the parent died before prctl took effect
        os._exit(1)


def _render_chunk(chunk: list[tuple[int, int]]) -> list[dict[str, Any]]:
    """Render and write the jobs ``(domain, job index)`` of one chunk; their CSV rows."""
    params, plans, out_dir = _WORKER["params"], _WORKER["plans"], _WORKER["out_dir"]
    rows = []
    for domain, index in chunk:
        domain_plan = plans[domain]
        job = domain_plan.jobs[index]
        rendered, state = render_job(domain_plan, job, params.height, params.width,
                                     params.seed)
        write_jpeg(rendered.image, out_dir / job.relpath)
        rows.append(image_row(job, state, domain_plan.cameras[job.cam].modality))
    return rows


def _chunks(plans: list[DomainPlan], size: int) -> list[list[tuple[int, int]]]:
    keys = [(p.params.index, i) for p in plans for i in range(len(p.jobs))]
    return [keys[i:i + size] for i in range(0, len(keys), size)]


def _render_all(params: SyntheticParams, plans: list[DomainPlan], out_dir: Path,
                workers: int, progress: bool) -> list[dict[str, Any]]:
    total = sum(len(p.jobs) for p in plans)
    enabled = None if progress else False          # None: follow reidcli.progress.ENABLED
    chunks = _chunks(plans, size=32)
    init_args = (params, plans, str(out_dir))

    def rows_of(results: Iterable[list[dict[str, Any]]]) -> Iterator[dict[str, Any]]:
        for rows in results:
            yield from rows

    if workers <= 1 or total < MIN_IMAGES_FOR_POOL:
        _init_worker(*init_args)
        try:
            return list(track(rows_of(map(_render_chunk, chunks)), total=total,
                              description="rendering synthetic images", enabled=enabled,
                              unit="images"))
        finally:
            _WORKER.clear()
    import multiprocessing

    # multiprocessing.Pool, not ProcessPoolExecutor: on an error or Ctrl-C/SIGTERM the
    # workers are terminated at once (an executor's shutdown waits for every queued chunk)
    pool = multiprocessing.get_context().Pool(processes=workers, initializer=_init_pool_worker,
                                              initargs=init_args)
    try:
        rows = list(track(rows_of(pool.imap(_render_chunk, chunks)), total=total,
                          description="rendering synthetic images", enabled=enabled,
                          unit="images"))
    except BaseException:
        pool.terminate()
        pool.join()
        raise
    pool.close()
    pool.join()
    return rows


def default_workers() -> int:
    """Worker processes used by :func:`generate` by default (the usable CPU cores, ≤ 8)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return max(1, min(8, cores))


# --- tables and meta -------------------------------------------------------------------------
def _hex(rgb: Iterable[float]) -> str:
    return "#" + "".join(f"{int(np.clip(round(c), 0, 255)):02x}" for c in rgb)


def identities_table(plans: list[DomainPlan]) -> pd.DataFrame:
    """``identities.csv``: one row per identity (not distractors/junk), columns of §8.1."""
    rows = []
    for p in plans:
        for pid, person in p.identities.items():
            rows.append({
                "domain": p.params.index, "pid": pid, "split": p.identity_splits[pid],
                "height": person.height, "build": person.build,
                "upper_rgb": _hex(person.upper_rgb), "lower_rgb": _hex(person.lower_rgb),
                "upper_texture": person.upper_texture, "stripe_period": person.stripe_period,
                "stripe_rgb": _hex(person.stripe_rgb), "lower_texture": person.lower_texture,
                "bag": person.bag, "bag_rgb": _hex(person.bag_rgb),
                "emis_upper": person.emis_upper, "emis_lower": person.emis_lower,
                "emis_bag": person.emis_bag})
    return pd.DataFrame(rows, columns=list(IDENTITY_COLUMNS))


def images_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """``images.csv``: one row per image, sorted by relpath (byte order)."""
    table = pd.DataFrame(rows, columns=list(IMAGE_COLUMNS))
    order = sorted(range(len(table)), key=lambda i: table["relpath"].iat[i].encode())
    return table.iloc[order].reset_index(drop=True)


def _write_csv(table: pd.DataFrame, path: Path) -> None:
    table.to_csv(path, index=False, float_format="%.4f", lineterminator="\n")


def build_meta(params: SyntheticParams, plans: list[DomainPlan], name: str,
               preset: str | None, images: pd.DataFrame) -> dict[str, Any]:
    """``meta.json`` content: version, seed, parameters, sampled biases, modality table."""
    domains = []
    for p in plans:
        dom = p.params
        part = images[images["domain"] == dom.index]
        counts = {split: {"images": int((part["split"] == split).sum()),
                          "ids": int(part.loc[(part["split"] == split) & (part["pid"] > 0),
                                              "pid"].nunique())}
                  for split in SPLIT_FOLDERS}
        counts["gallery"]["distractors"] = int((part["pid"] == DISTRACTOR_PID).sum())
        counts["gallery"]["junk"] = int((part["pid"] == JUNK_PID).sum())
        settings = {k: v for k, v in dataclasses.asdict(dom).items()
                    if k not in OPTIONAL_FIELDS or v}       # version-1 meta when unset
        settings["ir_cameras"] = list(dom.ir_cameras)
        settings["vi_split"] = dom.uses_vi_split
        entry = {
            "index": dom.index, "label": dom.label, "folder": dom.folder,
            "settings": settings, "look": dataclasses.asdict(p.look),
            "cameras": [{"camid": c.cam - 1, **dataclasses.asdict(c)}
                        for c in p.cameras.values()],
            "counts": counts}
        if p.style is not None:
            entry["style"] = dataclasses.asdict(p.style)
        domains.append(entry)
    return {
        "format": "reidcli.synthetic", "generator_version": GENERATOR_VERSION,
        "name": name, "preset": preset, "seed": params.seed, "params": params.to_dict(),
        "camera_modality": {p.params.folder: {str(c.cam - 1): c.modality
                                              for c in p.cameras.values()} for p in plans},
        "domains": domains}


def read_meta(dataset_dir: str | os.PathLike) -> dict[str, Any] | None:
    """``meta.json`` of a synthetic dataset folder, or None when absent, unreadable or not a
    JSON object (binary junk, ``[]``, ``null``, a folder in its place)."""
    path = Path(dataset_dir) / META_FILE
    try:
        meta = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    return meta if isinstance(meta, dict) else None


def camera_modalities(meta: Mapping[str, Any] | None, domain: int) -> dict[int, str]:
    """0-based camid → modality for a domain from ``meta.json`` (empty → all visible)."""
    if not meta:
        return {}
    table = meta.get("camera_modality", {}).get(f"d{domain}", {})
    return {int(camid): modality for camid, modality in table.items()}


# --- the entry point -------------------------------------------------------------------------
def dataset_dir(root: str | os.PathLike, name: str) -> Path:
    """``<root>/synthetic/<name>``."""
    return Path(root).expanduser() / "synthetic" / name


def same_parameters(meta: Mapping[str, Any] | None, params: SyntheticParams) -> bool:
    """Whether ``meta.json`` content describes a folder made from ``params`` by this version."""
    return (meta is not None and meta.get("generator_version") == GENERATOR_VERSION
            and meta.get("params") == params.to_dict())


def generate(root: str | os.PathLike, preset: str = "default", *, name: str | None = None,
             seed: int | None = None, overrides: Mapping[str, Any] | None = None,
             force: bool = False, progress: bool = True, workers: int | None = None) -> Path:
    """Write the synthetic dataset ``<root>/synthetic/<name>/`` and return its path.

    ``name`` defaults to the preset name. When the folder exists with the same parameters it
    is returned as is; with other parameters :class:`OutputExistsError` is raised unless
    ``force``. The folder is built as ``<name>.partial`` and renamed when complete.
    ``workers`` = processes rendering images (default: usable cores); the output does not
    depend on it.
    """
    params = make_params(preset, seed=seed, **dict(overrides or {}))
    name = preset if name is None else name
    if not _NAME.match(name):
        raise UsageError(f"synthetic dataset name {name!r} is not a plain folder name",
                         "use letters, digits, '-' and '_' only")
    target = dataset_dir(root, name)
    meta = read_meta(target)
    if target.exists() and not force:
        if same_parameters(meta, params):
            return target
        raise OutputExistsError(
            f"synthetic dataset {target} exists with other parameters"
            + ("" if meta else " (no readable meta.json)"),
            f"allow regenerating it ({param('force')}), or choose another {param('name')}")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except (NotADirectoryError, FileExistsError):
        raise UsageError(f"cannot create the folder {target.parent}: a file is in its path",
                         f"choose another {param('root')}") from None
    except OSError as exc:               # read-only mount, no permission, disk full, ...
        err = output_error(exc, f"{param('root')} {target.parent}")
        raise (err or OutputError(f"cannot create the folder {target.parent}: "
                                  f"{exc.strerror or exc}",
                                  f"choose another {param('root')}")) from None
    plans = plan(params)
    with atomic_folder(target, force=True, option="root") as tmp:
        for p in plans:
            for folder in SPLIT_FOLDERS.values():
                (tmp / p.params.folder / folder).mkdir(parents=True, exist_ok=True)
        rows = _render_all(params, plans, tmp, workers or default_workers(), progress)
        images = images_table(rows)
        _write_csv(images, tmp / IMAGES_FILE)
        _write_csv(identities_table(plans), tmp / IDENTITIES_FILE)
        meta = build_meta(params, plans, name, preset if preset in PRESETS else None, images)
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2) + "\n")
    return target


__all__ = ["generate", "plan", "plan_domain", "render_job", "render_synthetic_image",
           "dataset_dir", "read_meta", "same_parameters", "camera_modalities",
           "market_file_name", "ImageJob",
           "DomainPlan", "SyntheticParams", "make_params", "PRESETS", "SPLIT_FOLDERS",
           "IMAGE_COLUMNS", "IDENTITY_COLUMNS"]
