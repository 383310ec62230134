"""Parameters and presets of the procedural ``synthetic`` dataset (docs/datasets.md).

:class:`SyntheticParams` holds every generator parameter. Most parameters describe one domain
(its cameras, identities, biases); a preset can give single domains other values through
``domain_overrides`` (``{1: {"num_cameras": 2, ...}}``), and :meth:`SyntheticParams.domain`
resolves the values that hold in domain ``d``. :func:`make_params` builds validated parameters
from a preset plus overrides; every invalid value raises :class:`~reidcli.errors.UsageError`
naming the parameter.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from reidcli.cameras import parse_cameras
from reidcli.errors import ParameterError, UsageError

#: Bumped whenever the same parameters would render different pixels or files.
GENERATOR_VERSION = 1

#: Upper bound of cameras per domain: file names carry one camera digit (``c1``..``c9``).
MAX_CAMERAS = 9
#: Identity pids are written with four digits.
MAX_PIDS_PER_DOMAIN = 9999

#: Parameters whose default 0 renders exactly what version 1 rendered; ``meta.json`` lists
#: them only when they are set (docs/datasets.md, "vi and dg").
OPTIONAL_FIELDS: tuple[str, ...] = ("ir_identity_cues", "domain_style_strength")

#: Parameters that hold for the whole dataset; all others may differ per domain.
GLOBAL_FIELDS: tuple[str, ...] = ("seed", "height", "width", "num_domains")


@dataclasses.dataclass(frozen=True)
class DomainParams:
    """The parameter values in force in one domain (global values merged with overrides)."""

    index: int
    num_cameras: int
    num_train_ids: int
    num_test_ids: int
    cams_per_id_min: int
    imgs_per_id_cam: int
    num_distractors: int
    num_junk: int
    ir_cameras: tuple[int, ...]
    vi_split: bool | None
    camera_bias_strength: float
    spatial_bias_strength: float
    view_bias_strength: float
    domain_shift_strength: float
    background_nuisance: float
    noise_std: float
    ir_identity_cues: float = 0.0
    domain_style_strength: float = 0.0

    @property
    def label(self) -> str:
        """Record ``domain`` value, e.g. ``synthetic/d0``."""
        return f"synthetic/d{self.index}"

    @property
    def folder(self) -> str:
        """Folder of the domain's Market tree inside the dataset, e.g. ``d0``."""
        return f"d{self.index}"

    @property
    def uses_vi_split(self) -> bool:
        """Query = infrared test images, gallery = visible ones (vi_split auto = has IR)."""
        return bool(self.ir_cameras) if self.vi_split is None else self.vi_split

    def modality(self, cam: int) -> str:
        """``infrared`` or ``visible`` for a 1-based camera number."""
        return "infrared" if cam in self.ir_cameras else "visible"

    def visible_cameras(self) -> list[int]:
        """1-based numbers of the visible cameras."""
        return [c for c in range(1, self.num_cameras + 1) if c not in self.ir_cameras]


DOMAIN_FIELDS: tuple[str, ...] = tuple(
    f.name for f in dataclasses.fields(DomainParams) if f.name != "index")


@dataclasses.dataclass(frozen=True, eq=True)
class SyntheticParams:
    """Every parameter of the generator; defaults = preset ``default`` (docs/datasets.md).

    ``domain_overrides`` maps a domain index to ``{parameter: value}`` for parameters that
    differ in that domain (any parameter except ``seed``, ``height``, ``width``,
    ``num_domains``).
    """

    seed: int = 0
    height: int = 128
    width: int = 64
    num_domains: int = 3
    num_cameras: int = 6
    num_train_ids: int = 40
    num_test_ids: int = 40
    cams_per_id_min: int = 2
    imgs_per_id_cam: int = 3
    num_distractors: int = 20
    num_junk: int = 10
    ir_cameras: tuple[int, ...] = ()
    vi_split: bool | None = None
    camera_bias_strength: float = 1.0
    spatial_bias_strength: float = 1.0
    view_bias_strength: float = 1.0
    domain_shift_strength: float = 1.0
    background_nuisance: float = 1.0
    noise_std: float = 3.0
    ir_identity_cues: float = 0.0
    domain_style_strength: float = 0.0
    domain_overrides: Mapping[int, Mapping[str, Any]] = dataclasses.field(default_factory=dict)

    def domain(self, index: int) -> DomainParams:
        """Resolved parameters of domain ``index`` (0-based)."""
        if not 0 <= index < self.num_domains:
            raise UsageError(f"domain {index} does not exist",
                             f"domains are 0..{self.num_domains - 1}")
        values = {name: getattr(self, name) for name in DOMAIN_FIELDS}
        values.update(self.domain_overrides.get(index, {}))
        return DomainParams(index=index, **values)

    def domains(self) -> list[DomainParams]:
        """Resolved parameters of every domain, in order."""
        return [self.domain(d) for d in range(self.num_domains)]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (tuples as lists, domain keys as strings), inverse of from_dict.

        Parameters added after generator version 1 (:data:`OPTIONAL_FIELDS`) are left out
        while they hold their default 0, so folders made before them keep their ``meta.json``.
        """
        out: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name in OPTIONAL_FIELDS and not value:
                continue
            if field.name == "domain_overrides":
                value = {str(d): {k: _jsonable(v) for k, v in sorted(over.items())}
                         for d, over in sorted(value.items())}
            out[field.name] = _jsonable(value)
        return out

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "SyntheticParams":
        """Parameters from :meth:`to_dict` output (e.g. ``meta.json``), validated."""
        values = dict(values)
        overrides = values.pop("domain_overrides", {}) or {}
        return _validated({**values, "domain_overrides": overrides})


def _jsonable(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


#: Preset name → parameter values that differ from the defaults (docs/datasets.md).
PRESETS: dict[str, dict[str, Any]] = {
    "tiny": dict(num_domains=1, num_cameras=2, num_train_ids=6, num_test_ids=6,
                 imgs_per_id_cam=2, num_distractors=2, num_junk=1),
    "default": {},
    "cdpcf": dict(num_domains=2, num_cameras=6, num_train_ids=300,
                  spatial_bias_strength=1.5, view_bias_strength=1.0,
                  domain_overrides={1: dict(num_cameras=2, num_train_ids=0, num_test_ids=200,
                                            imgs_per_id_cam=1)}),
    "dart3": dict(num_domains=1, num_cameras=8, num_train_ids=300, num_test_ids=100,
                  camera_bias_strength=1.5),
    "vi": dict(num_domains=1, num_cameras=6, ir_cameras=(3, 6), num_train_ids=200,
               num_test_ids=100, ir_identity_cues=1.0),
    "dg": dict(num_domains=4, domain_shift_strength=1.0, num_train_ids=150, num_test_ids=100,
               domain_style_strength=1.0),
    "warca": dict(num_domains=1, num_cameras=2, imgs_per_id_cam=2, num_train_ids=316,
                  num_test_ids=316, background_nuisance=1.5),
}

#: One line per preset, for ``reid data synth --help`` and docs.
PRESET_PURPOSES: dict[str, str] = {
    "tiny": "unit tests: 1 domain, 2 cameras, 6+6 ids",
    "default": "demo and all loaders/metrics: 3 domains × 6 cameras, 40+40 ids",
    "cdpcf": "C-DPCF: source d0 (6 cams, 300 train ids) → target d1 (2 cams, 200 test ids)",
    "dart3": "DART3 unseen cameras: 8 cameras, 300+100 ids, strong camera bias",
    "vi": "DG-VAE visible↔infrared: 6 cameras, cameras 3 and 6 infrared (NIR cues)",
    "dg": "DMG-Net domain generalisation: 4 domains, 150+100 ids, strong domain styles",
    "warca": "WARCA metric learning: 2 cameras, 316+316 ids, strong background nuisance",
}


def make_params(preset: str = "default", seed: int | None = None,
                **overrides: Any) -> SyntheticParams:
    """Validated parameters of ``preset`` with ``overrides`` applied.

    Override names are parameter names (``-`` may stand for ``_``); ``None`` values are
    ignored, so CLI options left unset keep the preset's value. ``domain_overrides`` is
    merged per domain into the preset's. ``ir_cameras`` may be a comma string (``"3,6"``).
    """
    if preset not in PRESETS:
        raise UsageError(f"unknown synthetic preset {preset!r}",
                         f"choose one of {', '.join(PRESETS)}")
    values: dict[str, Any] = {k: v for k, v in PRESETS[preset].items()}
    values["domain_overrides"] = {d: dict(o) for d, o in
                                  values.get("domain_overrides", {}).items()}
    for key, value in overrides.items():
        name = key.replace("-", "_")
        if value is None:
            continue
        if name == "domain_overrides":
            for d, over in dict(value).items():
                values["domain_overrides"].setdefault(_domain_key(d), {}).update(
                    {k.replace("-", "_"): v for k, v in dict(over).items()})
            continue
        values[name] = value
    if seed is not None:
        values["seed"] = seed
    return _validated(values)


def _domain_key(key: Any) -> int:
    text = str(key).lstrip("d")
    if not text.isdigit():
        raise UsageError(f"domain_overrides key {key!r} is not a domain index",
                         "use 0, 1, ... (or d0, d1, ...)")
    return int(text)


def _validated(values: Mapping[str, Any]) -> SyntheticParams:
    names = {f.name for f in dataclasses.fields(SyntheticParams)}
    unknown = sorted(set(values) - names)
    if unknown:
        raise UsageError(f"unknown synthetic parameter(s) {', '.join(unknown)}",
                         f"valid parameters: {', '.join(sorted(names))}")
    clean: dict[str, Any] = {}
    for name in GLOBAL_FIELDS:
        if name in values:
            clean[name] = _check(name, values[name])
    base = {name: _check(name, values[name]) for name in DOMAIN_FIELDS if name in values}
    clean.update(base)
    num_domains = clean.get("num_domains", SyntheticParams.num_domains)
    overrides: dict[int, dict[str, Any]] = {}
    for key, over in dict(values.get("domain_overrides") or {}).items():
        d = _domain_key(key)
        if d >= num_domains:
            raise UsageError(f"domain_overrides names domain {d} but num_domains={num_domains}",
                             f"override only domains 0..{num_domains - 1}")
        bad = sorted(set(over) - set(DOMAIN_FIELDS))
        if bad:
            raise UsageError(f"domain_overrides for d{d}: {', '.join(bad)} cannot differ "
                             "per domain", f"per-domain parameters: {', '.join(DOMAIN_FIELDS)}")
        if over:
            overrides[d] = {k: _check(k, v, f"d{d}: ") for k, v in sorted(over.items())}
    params = SyntheticParams(**clean, domain_overrides=overrides)
    for dom in params.domains():
        _check_domain(dom, f"d{dom.index}: " if dom.index in overrides else "")
    return params


# --- single values --------------------------------------------------------------------------

#: name → (kind, low, high, what to do when out of range)
_LIMITS: dict[str, tuple[str, float, float, str]] = {
    "seed": ("int", 0, 2**32 - 1, "use an integer seed in [0, 2**32)"),
    "height": ("int", 32, 1024, "use an image height between 32 and 1024 pixels"),
    "width": ("int", 16, 512, "use an image width between 16 and 512 pixels"),
    "num_domains": ("int", 1, 99, "use between 1 and 99 domains"),
    "num_cameras": ("int", 1, MAX_CAMERAS, f"use at most {MAX_CAMERAS} cameras per domain"),
    "num_train_ids": ("int", 0, MAX_PIDS_PER_DOMAIN, "use 0..9999 training identities"),
    "num_test_ids": ("int", 0, MAX_PIDS_PER_DOMAIN, "use 0..9999 test identities"),
    "cams_per_id_min": ("int", 1, MAX_CAMERAS, "use 1..num_cameras"),
    "imgs_per_id_cam": ("int", 1, 1000, "use 1..1000 images per identity and camera"),
    "num_distractors": ("int", 0, 100_000, "use 0..100000 distractors per domain"),
    "num_junk": ("int", 0, 100_000, "use 0..100000 junk images per domain"),
    "camera_bias_strength": ("float", 0.0, 3.0, "use a strength between 0 and 3"),
    "spatial_bias_strength": ("float", 0.0, 3.0, "use a strength between 0 and 3"),
    "view_bias_strength": ("float", 0.0, 1.25,
                           "use 0..1.25 (P(dominant view) = 0.5 + 0.4·strength ≤ 1)"),
    "domain_shift_strength": ("float", 0.0, 3.0, "use a strength between 0 and 3"),
    "background_nuisance": ("float", 0.0, 3.0, "use an amplitude between 0 and 3"),
    "noise_std": ("float", 0.0, 50.0, "use a noise level between 0 and 50 grey levels"),
    "ir_identity_cues": ("float", 0.0, 1.0,
                         "use 0..1 (0 = random emissivity, 1 = NIR reflectance of the colours)"),
    "domain_style_strength": ("float", 0.0, 3.0, "use a strength between 0 and 3"),
}


def _value_error(where: str, name: str, value: Any, requirement: str,
                 todo: str) -> UsageError:
    """A top-level parameter's error is a ParameterError (the CLI names the flag that set
    it); a ``domain_overrides`` entry's (``where`` names the domain) a plain UsageError."""
    if not where:
        return ParameterError("synthetic dataset", name, value, requirement, todo)
    return UsageError(f"{where}{name}={value!r} {requirement}", todo)


def _check(name: str, value: Any, where: str = "") -> Any:
    """One value coerced to its type and range-checked; UsageError naming the parameter."""
    if name == "ir_cameras":
        return _parse_ir_cameras(value, where)
    if name == "vi_split":
        return _parse_vi_split(value, where)
    kind, low, high, todo = _LIMITS[name]
    number = _coerce(name, value, kind, where)
    if number < low:
        raise _value_error(where, name, value, f"is below {_fmt(low)}", todo)
    if number > high:
        raise _value_error(where, name, value, f"is above {_fmt(high)}", todo)
    return number


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _coerce(name: str, value: Any, kind: str, where: str) -> int | float:
    if isinstance(value, bool):
        raise _value_error(where, name, value, "is not a number", f"give {name} as a number")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise _value_error(where, name, value, "is not a number",
                         f"give {name} as a {'whole ' if kind == 'int' else ''}number") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise _value_error(where, name, value, "is not finite", f"give {name} as a number")
    if kind == "int":
        if not number.is_integer():
            raise _value_error(where, name, value, "is not a whole number",
                             f"give {name} as an integer")
        return int(number)
    return number


def _parse_ir_cameras(value: Any, where: str) -> tuple[int, ...]:
    if isinstance(value, (list, tuple)) and not value:
        return ()                                       # no infrared camera
    owner = f"synthetic domain {where.rstrip(': ')}" if where else "synthetic dataset"
    return tuple(parse_cameras(value, "ir_cameras", owner=owner, first=1, repeats=False) or ())


def _parse_vi_split(value: Any, where: str) -> bool | None:
    if value is None or (isinstance(value, str) and value.strip().lower() == "auto"):
        return None
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise UsageError(f"{where}vi_split={value!r} is not true, false or auto",
                     "give vi_split as true, false or auto")


def _check_domain(dom: DomainParams, where: str) -> None:
    """Checks that involve several parameters of one domain."""
    if dom.num_train_ids + dom.num_test_ids < 1:
        raise UsageError(f"{where}num_train_ids + num_test_ids is 0",
                         "give the domain at least one identity")
    if dom.num_train_ids + dom.num_test_ids > MAX_PIDS_PER_DOMAIN:
        raise UsageError(
            f"{where}num_train_ids + num_test_ids = {dom.num_train_ids + dom.num_test_ids} "
            f"is above {MAX_PIDS_PER_DOMAIN}", "pids are written with four digits; use fewer")
    if dom.cams_per_id_min > dom.num_cameras:
        raise UsageError(f"{where}cams_per_id_min={dom.cams_per_id_min} is above "
                         f"num_cameras={dom.num_cameras}",
                         "lower cams_per_id_min or add cameras")
    for cam in dom.ir_cameras:
        if not 1 <= cam <= dom.num_cameras:
            raise UsageError(f"{where}ir_cameras names camera {cam} but the domain has "
                             f"{dom.num_cameras} cameras",
                             f"name cameras between 1 and {dom.num_cameras}")
    if dom.vi_split and not dom.ir_cameras:
        raise UsageError(f"{where}vi_split=True needs infrared cameras",
                         "name them with ir_cameras, e.g. ir_cameras=3,6")
    if dom.uses_vi_split and len(dom.ir_cameras) == dom.num_cameras:
        raise UsageError(f"{where}every camera is infrared but vi_split needs a visible "
                         "gallery", "leave at least one camera out of ir_cameras")


__all__ = ["SyntheticParams", "DomainParams", "PRESETS", "PRESET_PURPOSES", "make_params",
           "GENERATOR_VERSION", "MAX_CAMERAS", "DOMAIN_FIELDS", "GLOBAL_FIELDS",
           "OPTIONAL_FIELDS"]
