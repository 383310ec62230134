"""Backbone initialisation: ``--init imagenet | PATH | scratch``.

* ``imagenet`` — torchvision's weights API (``ResNet50_Weights.IMAGENET1K_V1``, the 2017-era
  weights the PCB code used; docs/methods/pcb.md). The file is looked up in the torch hub cache
  (``$TORCH_HOME/hub/checkpoints``) and downloaded there when missing and online (socket
  timeout :data:`DOWNLOAD_TIMEOUT_S`; the sha256 must start with the hex suffix of the file
  name, as torch hub's ``check_hash``); offline without a cached file raises
  :class:`~reidcli.errors.OfflineError` naming the three choices.
* ``PATH`` — a local state dict: a torchvision ResNet (``conv1.weight``, ``layer1.0…``,
  ``fc.*``), a torchreid checkpoint (``{"state_dict": …}``, ``module.`` prefixes,
  ``classifier.*``), a fast-reid / BoT one (``backbone.`` / ``base.`` prefixes), or a
  reidcli ``model.pt``. Keys are matched to the trunk after stripping those prefixes;
  missing and unexpected keys are reported (:class:`InitReport`). The heads of re-id
  checkpoints (:data:`HEAD_PREFIXES`) are not used; a trunk tensor missing from the file, or
  a tensor of the file that fits no trunk tensor beyond those heads, makes the load partial,
  which warns (one ``warning:`` line naming the counts; docs/models.md).
* ``scratch`` — keep the random initialisation.
"""
from __future__ import annotations

import dataclasses
import hashlib
import http.client
import os
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Mapping

import torch
from torch import nn

from reidcli.errors import InputFileError, OfflineError, UsageError
from reidcli.io import atomic_output
from reidcli.models.safe_load import load_torch_file
from reidcli.naming import param



def init_choices() -> str:
    """The values of ``init`` (what to do after a failed initialisation)."""
    return (f"{param('init', 'imagenet')} (needs the torchvision weights cached or a "
            f"network), {param('init', 'PATH')} (a local ResNet state dict) or "
            f"{param('init', 'scratch')}")


_PREFIXES = ("module.", "backbone.", "base.", "model.", "encoder.", "trunk.")
#: re-id / ImageNet heads that a trunk initialisation drops without warning (after prefix
#: stripping): fast-reid ``heads.*`` and ``pixel_mean``/``pixel_std``, torchreid and
#: reid-strong-baseline ``classifier.*`` / ``bottleneck.*`` / ``fc.*``, torchvision ``fc.*``
#: (docs/models.md)
HEAD_PREFIXES = ("heads.", "classifier.", "bottleneck.", "fc.", "pixel_mean", "pixel_std")
#: seconds a download may wait on the network (connect or read) before it counts as offline
DOWNLOAD_TIMEOUT_S = 20.0


@dataclasses.dataclass
class InitReport:
    """What an initialisation loaded: ``source``, matched/missing/unexpected key names."""

    source: str
    loaded: list[str] = dataclasses.field(default_factory=list)
    missing: list[str] = dataclasses.field(default_factory=list)
    unexpected: list[str] = dataclasses.field(default_factory=list)
    mismatched: list[str] = dataclasses.field(default_factory=list)

    def summary(self) -> str:
        if self.source == "scratch":
            return "init: scratch (random weights)"
        text = f"init: {self.source}: {len(self.loaded)} tensors loaded"
        for label, keys in (("missing", self.missing), ("unexpected", self.unexpected),
                            ("shape-mismatched", self.mismatched)):
            if keys:
                shown = ", ".join(keys[:5]) + (" …" if len(keys) > 5 else "")
                text += f"; {len(keys)} {label} ({shown})"
        return text

    def as_dict(self) -> dict[str, Any]:
        return {"source": self.source, "loaded": len(self.loaded), "missing": self.missing,
                "unexpected": self.unexpected, "mismatched": self.mismatched}

    @property
    def trunk_unexpected(self) -> list[str]:
        """Unexpected keys beyond the known heads (:data:`HEAD_PREFIXES`)."""
        return [k for k in self.unexpected if not k.startswith(HEAD_PREFIXES)]

    @property
    def partial(self) -> bool:
        """Trunk tensors missing (BN step counters aside), unexpected beyond the heads, or
        shape-mismatched."""
        missing = [k for k in self.missing if not k.endswith("num_batches_tracked")]
        return bool(missing or self.trunk_unexpected or self.mismatched)


def imagenet_weights_url(arch: str) -> str:
    """URL of torchvision's ``IMAGENET1K_V1`` weights for ``arch`` (resnet50 / resnet18)."""
    import torchvision.models as tvm

    enums = {"resnet50": tvm.ResNet50_Weights, "resnet18": tvm.ResNet18_Weights}
    if arch not in enums:
        raise UsageError(f"{param('init', 'imagenet')}: no ImageNet weights for backbone "
                         f"{arch!r}", f"use {param('backbone', 'resnet50')}/resnet18, or "
                         f"{param('init', 'scratch')}")
    return enums[arch].IMAGENET1K_V1.url


def hub_cache_file(url: str, cache_dir: str | os.PathLike | None = None) -> Path:
    """Where torch hub keeps (or will keep) the file of ``url``."""
    base = Path(cache_dir) if cache_dir else Path(torch.hub.get_dir()) / "checkpoints"
    return base / os.path.basename(url.split("?")[0])


def expected_sha256_prefix(url: str) -> str | None:
    """The hex digits that torchvision / torch hub file names end with (``resnet50-0676ba61.pth``
    → ``0676ba61``, the start of the file's sha256); None when the name carries none."""
    match = torch.hub.HASH_REGEX.search(os.path.basename(urllib.parse.urlparse(url).path))
    return match.group(1) if match and match.group(1) else None


def download_verified(url: str, path: Path, timeout: float | None = None) -> None:
    """Download ``url`` to ``path`` (atomically, via ``path.partial``) with a socket timeout;
    the sha256 must start with :func:`expected_sha256_prefix` when the name gives one.

    Network failures raise the ``urllib``/``OSError`` exceptions; a hash mismatch raises
    :class:`InputFileError` and leaves nothing behind.
    """
    prefix = expected_sha256_prefix(url)
    digest = hashlib.sha256()
    request = urllib.request.Request(url, headers={"User-Agent": "reidcli"})
    with atomic_output(path, force=True) as tmp:
        with urllib.request.urlopen(request, timeout=timeout or DOWNLOAD_TIMEOUT_S) as response, \
                open(tmp, "wb") as f:
            for chunk in iter(lambda: response.read(1 << 20), b""):
                f.write(chunk)
                digest.update(chunk)
        if prefix and not digest.hexdigest().startswith(prefix):
            raise InputFileError(f"{param('init', 'imagenet')}: the download of {url} has "
                                 f"sha256 {digest.hexdigest()[:16]}…, not {prefix}… as its "
                                 "name says", "retry (a proxy or a broken transfer may have "
                                 f"changed it), or use {param('init', 'PATH')} with a verified "
                                 "copy")


def fetch_imagenet_state(arch: str, *, url: str | None = None,
                         cache_dir: str | os.PathLike | None = None,
                         offline: bool | None = None) -> tuple[dict, str]:
    """(state dict, file path) of the ImageNet weights, from the cache or downloaded into it.

    ``offline`` (default: env ``REIDCLI_OFFLINE`` set, and not 0/false/no/off) never touches
    the network; a download waits at most :data:`DOWNLOAD_TIMEOUT_S` on the network and is checked
    against the sha256 prefix in the file name (:func:`download_verified`).
    """
    url = url or imagenet_weights_url(arch)
    path = hub_cache_file(url, cache_dir)
    if offline is None:
        offline = os.environ.get("REIDCLI_OFFLINE", "").strip().lower() not in (
            "", "0", "false", "no", "off")
    if not path.exists():
        if offline:
            raise OfflineError(f"{param('init', 'imagenet')}: {path.name} is not in the torch "
                               f"cache ({path.parent}) and downloads are off", init_choices())
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            download_verified(url, path)
        except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
            raise OfflineError(f"{param('init', 'imagenet')}: cannot download {url} "
                               f"({exc.__class__.__name__}) and {path} is not cached",
                               init_choices()) from None
    return _read_state(path, param("init", "imagenet")), str(path)


def _read_state(path: Path, option: str) -> dict:
    """The tensors of the weights file ``path``, read without unpickling code
    (:func:`reidcli.models.safe_load.load_torch_file`, ``weights_only=True``)."""
    obj = load_torch_file(path, f"{option} weights")
    return unwrap_state_dict(obj, path, option)


def unwrap_state_dict(obj: Any, path: Path | str = "", option: str | None = None) -> dict:
    """The tensor dict inside ``obj``: a plain state dict, or one nested under ``state_dict``
    / ``model`` / ``model_state`` (torchreid, fast-reid, reidcli checkpoints). ``option``
    names the file's source in errors (default: the ``init`` parameter)."""
    option = param("init") if option is None else option
    for key in ("state_dict", "model_state", "model"):
        if isinstance(obj, Mapping) and isinstance(obj.get(key), Mapping):
            obj = obj[key]
            break
    if not isinstance(obj, Mapping) or not any(torch.is_tensor(v) for v in obj.values()):
        raise InputFileError(f"{option} {path}: no tensors found in the file",
                             "give a ResNet state dict (torchvision or torchreid style)")
    return {str(k): v for k, v in obj.items() if torch.is_tensor(v)}


def _strip(key: str) -> str:
    changed = True
    while changed:
        changed = False
        for prefix in _PREFIXES:
            if key.startswith(prefix):
                key, changed = key[len(prefix):], True
    return key


def load_trunk_state(trunk: nn.Module, state: Mapping[str, torch.Tensor],
                     source: str) -> InitReport:
    """Copy the matching tensors of ``state`` into ``trunk`` (names after prefix stripping)."""
    own = trunk.state_dict()
    report = InitReport(source=source)
    renamed = {}
    for key, value in state.items():
        renamed.setdefault(_strip(key), value)
    for key, value in renamed.items():
        if key not in own:
            report.unexpected.append(key)
        elif tuple(own[key].shape) != tuple(value.shape):
            report.mismatched.append(key)
        else:
            own[key] = value.to(own[key].dtype)
            report.loaded.append(key)
    report.missing = [k for k in own if k not in renamed]
    if not any(own[k].ndim > 0 for k in report.loaded):      # not just BN step counters
        raise InputFileError(f"{param('init', source)}: none of its {len(state)} tensors "
                             f"match the {trunk.name} backbone", "give a state dict of the "
                             f"same ResNet (e.g. {param('backbone', 'resnet50')} for a "
                             "ResNet-50 file)")
    trunk.load_state_dict(own)
    if report.partial:
        _warn_partial(trunk, state, report)
    return report


def _warn_partial(trunk: nn.Module, state: Mapping[str, torch.Tensor],
                  report: InitReport) -> None:
    """One warning line for a partial trunk load, naming the backbone the file looks like
    (:func:`reidcli.models.foreign_arch.recognise`) when it differs."""
    import warnings

    from reidcli.models.foreign_arch import RECIPES, recognise, strip_module

    parts = []
    for label, keys in (("missing from the file", report.missing),
                        ("of the file fit no trunk tensor", report.trunk_unexpected),
                        ("have another shape", report.mismatched)):
        if keys:
            parts.append(f"{len(keys)} {label} ({', '.join(keys[:3])}"
                         f"{', …' if len(keys) > 3 else ''})")
    arch = recognise(strip_module(state))
    other = RECIPES[arch].get("backbone", "resnet50") if arch else None
    hint = (f"it looks like a {RECIPES[arch]['title']}: use {param('backbone', other)}"
            if other and other != getattr(trunk, "name", other) else
            f"give a state dict of the {getattr(trunk, 'name', 'same')} backbone")
    warnings.warn(f"{param('init', report.source)} loads only part of the "
                  f"{getattr(trunk, 'name', '')} backbone: {len(report.loaded)} tensors "
                  f"loaded; {'; '.join(parts)}; the rest keeps its random initialisation — "
                  f"{hint}", stacklevel=3)


def initialize_trunk(trunk: nn.Module, init: str, **kwargs: Any) -> InitReport:
    """Apply ``init`` = ``imagenet | scratch | PATH`` to ``trunk`` (see the module docstring)."""
    if init == "scratch":
        return InitReport(source="scratch")
    if init == "imagenet":
        if trunk.name == "tiny":
            raise UsageError(f"{param('init', 'imagenet')}: the tiny backbone has no "
                             f"ImageNet weights", f"use {param('init', 'scratch')} with "
                             f"{param('backbone', 'tiny')}")
        if trunk.name not in ("resnet50", "resnet18"):   # only these are in torchvision's API
            raise UsageError(f"{param('init', 'imagenet')}: torchvision has no ImageNet "
                             f"weights for the {trunk.name} backbone",
                             f"use {param('init', 'scratch')}, or {param('init', 'PATH')} "
                             f"with a local {trunk.name} state dict")
        state, path = fetch_imagenet_state(trunk.name, **kwargs)
        return load_trunk_state(trunk, state, f"imagenet ({path})")
    path = Path(init)
    if not path.exists():
        raise InputFileError(f"{param('init', init)}: no such file", init_choices())
    return load_trunk_state(trunk, _read_state(path, param("init")), str(path))


__all__ = ["InitReport", "initialize_trunk", "load_trunk_state", "fetch_imagenet_state",
           "imagenet_weights_url", "hub_cache_file", "unwrap_state_dict", "download_verified",
           "expected_sha256_prefix", "DOWNLOAD_TIMEOUT_S", "init_choices"]
