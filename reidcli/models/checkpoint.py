"""Model files: build a model from a :class:`ModelSpec`, save it, load it back.

The architecture of each model ``kind`` (builder, store features) is declared with its
trainer (:func:`register_architecture`; PCB in :mod:`reidcli.training.pcb_trainer`, BoT in
:mod:`reidcli.training.bot_trainer`, DG-VAE in :mod:`reidcli.training.dgvae_trainer`,
foreign checkpoints here); loading ``model.pt`` finds it by the kind it records.

A trained model is one ``torch.save`` dict (``RUN_DIR/model.pt``; training checkpoints
``RUN_DIR/checkpoint.pt`` carry the same keys plus optimiser/scheduler state)::

    format="reidcli.model", spec={kind, backbone, last_stride, num_classes, parts, ...},
    model_state=<state dict>, meta={classes, train_cams, config, epoch, ...}

:func:`load_model` accepts the run directory or either file and returns a
:class:`LoadedModel`: the module in eval mode plus ``features(images)`` / ``logits(images)``
and the test transform, the interface ``reid extract`` and ``reid adapt`` use.

A foreign checkpoint (fast-reid, torchreid, reid-strong-baseline, layumi; docs/models.md) loads
through the same :func:`load_model`: its architecture is recognised from the keys and shapes
(or named with ``arch``), rebuilt as a :class:`reidcli.models.foreign.ForeignModel` of kind
``foreign`` whose ``spec.foreign`` records the architecture, the feature dimensions and the
load report (so they reach the store provenance), and saved back as a reidcli model file.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

import torch
from torch import nn

from reidcli.errors import InputFileError
from reidcli.io import atomic_output
from reidcli.models.foreign_arch import FAMILY_FEATURES
from reidcli.models.safe_load import load_torch_file
from reidcli.naming import param
from reidcli.registry import Registry

MODEL_FORMAT = "reidcli.model"
#: store features per model family (:func:`feature_family`: PCB with RPP is ``rpp``), filled
#: by :func:`register_architecture` (the trainers declare theirs)
FEATURES: dict[str, tuple[str, ...]] = {}
DEFAULT_FEATURES: dict[str, tuple[str, ...]] = {}
#: the spellings a user may give for a store feature (``pcb-g``, ``gap`` …) → its store name
FEATURE_ALIASES = {"pcb-g": "pcb_g", "pcb-h": "pcb_h", "pcbg": "pcb_g", "pcbh": "pcb_h",
                   "rpp-g": "rpp_g", "rpp-h": "rpp_h", "rppg": "rpp_g", "rpph": "rpp_h",
                   "bn": "bnneck", "bnneck": "bnneck", "pool5": "pool5", "gap": "pool5",
                   "idi": "dgvae_idi", "iai": "dgvae_iai", "dgvae-idi": "dgvae_idi",
                   "dgvae-iai": "dgvae_iai"}
#: store metric of each feature (others: euclidean; an architecture declares its own)
FEATURE_METRICS: dict[str, str] = {}


@dataclasses.dataclass
class ModelSpec:
    """Everything needed to rebuild a model's modules (not its weights)."""

    kind: str = "pcb"
    backbone: str = "resnet50"
    last_stride: int = 1
    num_classes: int = 0
    parts: int = 6
    reduced_dim: int = 256
    dropout: float = 0.5
    rpp: bool = False
    input_size: tuple[int, int] = (384, 128)
    #: DG-VAE architecture (:class:`reidcli.models.dgvae.DGVAEArch` as a dict); None otherwise
    dgvae: dict | None = None
    #: foreign architecture (:class:`reidcli.models.foreign_arch.ForeignArch` as a dict, plus
    #: ``feature_dims`` and ``load_report``); None otherwise
    foreign: dict | None = None
    #: settings of an architecture declared outside this module (a plugin trainer's); None
    #: otherwise (then not recorded)
    settings: dict | None = None

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["input_size"] = list(self.input_size)
        if d["settings"] is None:
            d.pop("settings")
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ModelSpec":
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in d.items() if k in known}
        if "input_size" in values:
            values["input_size"] = tuple(int(v) for v in values["input_size"])
        return cls(**values)


@dataclasses.dataclass(frozen=True)
class Architecture:
    """A model architecture a trainer declares (:func:`register_architecture`): how a
    :class:`ModelSpec` of ``kind`` is built, which store features it gives and how they are
    read from its forward output. ``model.pt`` records the kind; loading it finds the
    architecture here.

    * ``build(spec) -> nn.Module`` (randomly initialised; ``module.backbone`` is the trunk
      ``--init`` loads);
    * ``feature_dims(spec) -> {feature: (dim, n_parts)}``;
    * ``features(output) -> {feature: [B, d]}`` raw store features of a forward output;
    * ``families``: ``{family: (features, default features)}``; ``family(spec)`` picks one
      (default: the kind);
    * ``logits(output) -> [[B, K], …]`` (default: ``output.logits``, one or none);
    * ``forward(loaded, images, taps, modality, features)`` (default:
      ``module(images, taps)``); ``transform(spec)`` (default: the eval transform of
      ``spec.input_size``); ``metric(spec, feature)`` (default: :data:`FEATURE_METRICS` or
      euclidean); ``aliases`` and ``metrics``: user spellings and store metrics of its
      features.
    """

    kind: str
    build: Callable[[ModelSpec], nn.Module]
    feature_dims: Callable[[ModelSpec], dict[str, tuple[int, int]]]
    features: Callable[[Any], dict[str, torch.Tensor]]
    families: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]]
    family: Callable[[ModelSpec], str] | None = None
    logits: Callable[[Any], list] | None = None
    forward: Callable[..., Any] | None = None
    transform: Callable[[ModelSpec], Callable] | None = None
    metric: Callable[[ModelSpec, str], str] | None = None
    aliases: Mapping[str, str] = dataclasses.field(default_factory=dict)
    metrics: Mapping[str, str] = dataclasses.field(default_factory=dict)
    module: str = ""


#: model architectures by kind: the one registry class (docs/architecture.md), group
#: ``train-net``; the network trainers' modules declare them (index: ``ARCHITECTURES`` of
#: :mod:`reidcli.training`), plugins too (``REIDCLI_PLUGINS``)
ARCHITECTURES: Registry[Architecture] = Registry(
    "model architecture", {"train-net": ("reidcli.training",)}, index_attr="ARCHITECTURES")


def register_architecture(arch: Architecture, *, replace_families: bool = True) -> Architecture:
    """Declare ``arch`` (its kind, builder and features); ``replace_families=False`` keeps a
    family another architecture declared (foreign models' ``bot`` head is BoT's)."""
    ARCHITECTURES.add(arch.kind, arch, group="train-net", module=arch.module)
    for family, (names, defaults) in arch.families.items():
        if replace_families or family not in FEATURES:
            FEATURES[family], DEFAULT_FEATURES[family] = tuple(names), tuple(defaults)
    FEATURE_ALIASES.update(arch.aliases)
    FEATURE_METRICS.update(arch.metrics)
    return arch


def architecture(kind: str) -> Architecture:
    """The architecture of model ``kind``: its declaring module is imported (the trainers'
    index, then the plugins and every trainer module when it is not indexed);
    InputFileError when nothing declares it."""
    arch = ARCHITECTURES.find(kind)
    if arch is None:
        known = ", ".join(sorted(ARCHITECTURES.entries))
        raise InputFileError(f"the model records architecture {kind!r}, which no installed "
                             f"trainer declares (known: {known})",
                             "install or name (REIDCLI_PLUGINS) the module that declares it")
    return arch


def build_model(spec: ModelSpec) -> nn.Module:
    """A randomly initialised model of ``spec`` (its kind's :class:`Architecture`)."""
    return architecture(spec.kind).build(spec)


def feature_family(spec: ModelSpec) -> str:
    """Key of :data:`FEATURES`: ``rpp`` for a PCB with refined part pooling, a foreign
    model's head family (``bot``, ``bot-before``, ``embed``, ``pool5``), else the kind."""
    arch = architecture(spec.kind)
    return arch.family(spec) if arch.family is not None else spec.kind


def feature_dims(spec: ModelSpec) -> dict[str, tuple[int, int]]:
    """``{feature: (dim, n_parts)}`` of the model's store features."""
    return architecture(spec.kind).feature_dims(spec)


def feature_metric(spec: ModelSpec, name: str) -> str:
    """Store metric of feature ``name``: the architecture's (a foreign model's test feature
    takes its toolkit's), else :data:`FEATURE_METRICS` or euclidean."""
    arch = architecture(spec.kind)
    found = arch.metric(spec, name) if arch.metric is not None else None
    return found or FEATURE_METRICS.get(name, "euclidean")


def model_features(kind: str, output: Any) -> dict[str, torch.Tensor]:
    """Store features of a forward output (raw, un-normalised)."""
    return architecture(kind).features(output)


def model_logits(kind: str, output: Any) -> list[torch.Tensor]:
    """Classifier logits as a list (PCB: one per part; BoT and foreign models: one, or none
    without a classifier)."""
    arch = architecture(kind)
    if arch.logits is not None:
        return arch.logits(output)
    return [] if output.logits is None else [output.logits]


# -- foreign checkpoints (docs/models.md): not trained here, loaded through load_model ---------
def _build_foreign(spec: ModelSpec) -> nn.Module:
    from reidcli.models.foreign import ForeignModel
    from reidcli.models.foreign_arch import ForeignArch

    if not spec.foreign:
        raise InputFileError("the model file has no foreign architecture record",
                             "load the original foreign checkpoint instead")
    return ForeignModel(ForeignArch.from_dict(spec.foreign))


def _foreign_metric(spec: ModelSpec, name: str) -> str | None:
    if name == FEATURES[feature_family(spec)][0]:       # the toolkit's test feature
        return str((spec.foreign or {}).get("metric", "euclidean"))
    return None


def _foreign_transform(spec: ModelSpec) -> Callable:
    from reidcli.models.foreign import foreign_transform
    from reidcli.models.foreign_arch import ForeignArch

    return foreign_transform(ForeignArch.from_dict(spec.foreign or {}))


register_architecture(Architecture(
    "foreign", _build_foreign,
    lambda spec: {k: (int(v), 1) for k, v in (spec.foreign or {}).get("feature_dims",
                                                                      {}).items()},
    lambda output: dict(output.features),
    # head families (reidcli.models.foreign_arch.FAMILY_FEATURES): test feature first
    {family: (names, names[:1]) for family, names in FAMILY_FEATURES.items()},
    family=lambda spec: str((spec.foreign or {}).get("family", "pool5")),
    metric=_foreign_metric, transform=_foreign_transform, module=__name__),
    replace_families=False)


def plain(obj: Any) -> Any:
    """``obj`` with only the types ``torch.load(weights_only=True)`` rebuilds: tensors, dicts,
    lists, tuples, str, int, float, bool, None. numpy scalars/arrays, paths, sets and other
    objects are converted (numbers, lists, str), so a model file never needs pickle."""
    if obj is None or type(obj) in (str, bool, int, float) or isinstance(obj, torch.Tensor):
        return obj
    if isinstance(obj, np.generic):              # np.float64 is a float subclass
        return obj.item()
    for kind in (bool, int, float, str):         # enums and other subclasses
        if isinstance(obj, kind):
            return kind(obj)
    if isinstance(obj, Mapping):
        keys = [plain(k) for k in obj]
        return {k if type(k) in (str, int, bool) else str(k): plain(v)
                for k, v in zip(keys, obj.values())}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj] if isinstance(obj, list) else tuple(plain(v) for v in obj)
    if isinstance(obj, (set, frozenset)):
        return sorted((plain(v) for v in obj), key=repr)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    return str(obj)


def save_model(path: str | os.PathLike, model: nn.Module, spec: ModelSpec,
               meta: dict[str, Any] | None = None, extra: dict[str, Any] | None = None) -> Path:
    """Write the model file atomically (temp file + rename). ``meta`` and ``extra`` are made
    :func:`plain`, so the file loads with ``weights_only=True``. ``meta`` of a training run
    holds ``classes`` (the training identity keys ``[dataset, domain, pid_scope, pid]``,
    label order), ``dataset`` and ``options`` (with its ``trial``): what
    :mod:`reidcli.models.training_identities` reads."""
    module = model.module if hasattr(model, "module") else model
    payload = {"format": MODEL_FORMAT, "spec": plain(spec.as_dict()),
               "model_state": module.state_dict(), "meta": plain(dict(meta or {}))}
    payload.update(plain(dict(extra or {})))
    with atomic_output(path, force=True) as tmp:
        torch.save(payload, tmp)
    return Path(path)


def _run_method(run_dir: Path) -> str:
    """The ``reid train`` method of a run directory (from its config.json), else METHOD."""
    import json

    try:
        method = json.loads((run_dir / "config.json").read_text()).get("method")
    except (OSError, ValueError, AttributeError):
        method = None
    return method if isinstance(method, str) and method else "METHOD"


def _unfinished(run_dir: Path, given: Path, out: Path) -> InputFileError:
    """The error for ``given``, an unfinished run whose files are in ``run_dir``, written by
    ``reid train --out out`` (``--resume out`` continues ``out.partial``, else ``out``)."""
    where = f" (its folder {run_dir.name} has no model.pt yet)" if run_dir != given else \
        " (no model.pt: interrupted or still running)"
    return InputFileError(f"{param('model')} {given}: the training run is not finished{where}",
                          f"resume it with reid train {_run_method(run_dir)} --resume {out}, "
                          "then extract from it")


def resolve_model_file(path: str | os.PathLike) -> Path:
    """RUN_DIR → RUN_DIR/model.pt; a file → itself. A run directory without model.pt (an
    interrupted run: ``checkpoint.pt`` only, or its unfinished ``RUN_DIR.partial`` folder) is
    refused: its weights are not the trained model's."""
    path = Path(path)
    partial = path.with_name(path.name + ".partial")
    if path.is_dir():
        if (path / "model.pt").is_file():
            return path / "model.pt"
        if path.name.endswith(".partial"):                  # the unfinished run itself
            raise _unfinished(path, path, path.with_name(path.name[:-len(".partial")]))
        if (path / "checkpoint.pt").exists():
            raise _unfinished(path, path, path)
        raise InputFileError(f"{param('model')} {path}: the folder has no model.pt",
                             "train it first (reid train pcb|bot), or give the model file")
    if not path.exists():
        if partial.is_dir():
            raise _unfinished(partial, path, path)
        raise InputFileError(f"{param('model')} {path}: no such file or directory",
                             "give a run directory of reid train or its model.pt")
    return path


def _tensor_dict(payload: Any) -> dict[str, torch.Tensor] | None:
    """The state dict of a foreign checkpoint: the payload itself or its ``state_dict`` /
    ``model`` / ``model_state`` entry (torchreid, fast-reid); None without tensors."""
    from reidcli.models.weights import unwrap_state_dict

    try:
        return unwrap_state_dict(payload)
    except InputFileError:
        return None


def _foreign_payload(state: Mapping[str, torch.Tensor], file: Path, arch: str | None,
                     allow_partial: bool) -> dict[str, Any]:
    """The payload of a foreign checkpoint, as :func:`save_model` would write it for the
    rebuilt model (``_module``: that model, already loaded)."""
    from reidcli.models.foreign import load_foreign_state

    module, report = load_foreign_state(state, str(file), arch=arch,
                                        allow_partial=allow_partial)
    record = dict(module.arch.as_dict(), feature_dims=module.feature_dims(),
                  load_report=report.as_dict())
    spec = ModelSpec(kind="foreign", backbone=module.arch.backbone,
                     last_stride=module.arch.last_stride, num_classes=module.num_classes,
                     input_size=tuple(module.arch.input_size), foreign=plain(record))
    return {"format": "foreign", "spec": spec.as_dict(), "model_state": module.state_dict(),
            "meta": {"foreign_summary": report.summary(),
                     "foreign_describe": module.arch.describe()}, "_module": module}


def read_model_file(path: str | os.PathLike, arch: str | None = None,
                    allow_partial: bool = False) -> dict[str, Any]:
    """The payload dict of a reidcli model file, validated (read with ``weights_only=True``:
    a file that needs pickle is refused, :func:`reidcli.models.safe_load.load_torch_file`).

    Any other state dict is read as a foreign checkpoint (docs/models.md): its architecture
    named by ``arch`` or recognised from its keys, a mismatch refused unless
    ``allow_partial`` (:func:`reidcli.models.foreign.load_foreign_state`); the payload then
    has ``format`` ``"foreign"`` and the rebuilt model's spec and weights."""
    file = resolve_model_file(path)
    payload = load_torch_file(file, f"{param('model')} file")
    if not isinstance(payload, dict) or payload.get("format") != MODEL_FORMAT:
        state = _tensor_dict(payload)
        if state is None:
            raise InputFileError(f"{param('model')} {file} is neither a reidcli model file "
                                 "nor a state dict (no tensors in it)",
                                 "give a run directory or model.pt written by reid train, "
                                 "or a fast-reid / torchreid / reid-strong-baseline / layumi "
                                 "checkpoint")
        payload = _foreign_payload(state, file, arch, allow_partial)
        payload["_file"] = str(file)
        return payload
    for name, value in (("arch", arch), ("allow_partial", allow_partial or None)):
        if value is not None:
            raise InputFileError(f"{param(name, value)} applies to foreign checkpoints; "
                                 f"{file} is a reidcli model file, whose architecture is "
                                 "recorded", f"drop {param(name, value)}")
    if not isinstance(payload.get("spec"), Mapping) or \
            not isinstance(payload.get("model_state"), Mapping):
        raise InputFileError(f"{param('model')} {file} lacks its architecture or weights",
                             "the file is damaged; write it again with reid train")
    payload["_file"] = str(file)
    return payload


@dataclasses.dataclass
class LoadedModel:
    """A trained model ready for inference (eval mode).

    ``features(images [B, 3, H, W])`` → {name: [B, d]} raw store features (differentiable
    when grad is on); ``logits(images)`` → list of [B, K]; ``forward(images, taps)`` → the
    model output (with conv taps); ``transform`` PIL → normalised tensor [3, H, W].
    """

    module: nn.Module
    spec: ModelSpec
    meta: dict[str, Any]
    path: str
    device: torch.device

    @property
    def kind(self) -> str:
        return self.spec.kind

    @property
    def input_size(self) -> tuple[int, int]:
        return tuple(self.spec.input_size)

    @property
    def family(self) -> str:
        """``pcb``, ``rpp`` or ``bot``: which store features the model gives."""
        return feature_family(self.spec)

    @property
    def feature_names(self) -> list[str]:
        return list(FEATURES[self.family])

    @property
    def transform(self) -> Callable:
        arch = architecture(self.kind)
        if arch.transform is not None:      # e.g. a foreign toolkit's resize and normalisation
            return arch.transform(self.spec)
        from reidcli.data.transforms import eval_transform

        return eval_transform(self.spec.input_size)

    def forward(self, images: torch.Tensor, taps=(), modality: torch.Tensor | None = None,
                features: Sequence[str] | None = None) -> Any:
        """The model output: ``module(images, taps)``, or the architecture's own forward
        (DG-VAE routes each row by ``modality`` [B] and reads ``features``)."""
        arch = architecture(self.kind)
        if arch.forward is not None:
            return arch.forward(self, images, taps, modality, features)
        return self.module(images.to(self.device), taps)

    def features(self, images: torch.Tensor, modality: torch.Tensor | None = None
                 ) -> dict[str, torch.Tensor]:
        return model_features(self.kind, self.forward(images, modality=modality))

    def logits(self, images: torch.Tensor) -> list[torch.Tensor]:
        return model_logits(self.kind, self.forward(images))


def load_model(path: str | os.PathLike, device: str | torch.device = "cpu",
               arch: str | None = None, allow_partial: bool = False) -> LoadedModel:
    """Rebuild and load the model of a run directory / model file / foreign checkpoint
    (``arch``, ``allow_partial``: :func:`read_model_file`), in eval mode."""
    payload = read_model_file(path, arch=arch, allow_partial=allow_partial)
    spec = ModelSpec.from_dict(payload["spec"])
    module = payload.get("_module") or build_model(spec)
    missing, unexpected = module.load_state_dict(payload["model_state"], strict=False)
    if missing or unexpected:
        raise InputFileError(f"{param('model')} {payload['_file']}: weights do not fit the "
                             f"recorded architecture ({len(missing)} missing, "
                             f"{len(unexpected)} unexpected keys)",
                             "the file is damaged or from another version")
    device = torch.device(device)
    module.to(device).eval()
    return LoadedModel(module=module, spec=spec, meta=dict(payload.get("meta", {})),
                       path=payload["_file"], device=device)


__all__ = ["ModelSpec", "LoadedModel", "build_model", "save_model", "load_model",
           "read_model_file", "resolve_model_file", "feature_dims", "feature_family",
           "model_features", "model_logits", "feature_metric", "FEATURES", "Architecture",
           "register_architecture", "architecture",
           "DEFAULT_FEATURES", "FEATURE_METRICS", "MODEL_FORMAT", "plain"]
