"""Dataset registry: names, aliases, root resolution and loading (docs/datasets.md).

The datasets are a :class:`reidcli.registry.Registry` (:data:`DATASETS`), the same class as the
methods': each loader module in :mod:`reidcli.data.datasets` calls :func:`register` with a
:class:`DatasetInfo` and a loader ``fn(root: Path | None, trial: int, **options) ->
DatasetSplit``; the loader finds its folder with :func:`resolve_dataset_dir` (the first
existing candidate sub-path of the data root).
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Callable

from reidcli.data import protocols as _protocols
from reidcli.data.records import DatasetSplit
from reidcli.errors import DatasetError, UsageError
from reidcli.naming import param
from reidcli.registry import Registry

#: package whose modules declare the datasets (each loader module calls :func:`register`; helper
#: modules that register nothing are harmless); its ``DATASETS`` dict indexes them
LOADER_PACKAGE = "reidcli.data.datasets"


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    """What the user needs to know to obtain and lay out a dataset."""

    name: str
    title: str
    aliases: tuple[str, ...] = ()
    url: str = ""
    license: str = "research use only; no redistribution"
    tree: str = ""
    #: candidate sub-paths of the data root, tried in order ("." = the root itself)
    candidates: tuple[str, ...] = (".",)
    #: expected counts per split (docs/datasets.md), e.g. {"train": (12936, 751), ...}
    counts: dict = dataclasses.field(default_factory=dict)
    #: counts under other option values: ``(options, counts)`` pairs; a pair applies when
    #: every option it names has that value, and its counts replace those of ``counts``
    #: (``None``: not documented). ``reid data check`` shows no expectation at all when an
    #: option of ``count_options`` differs from its default and no pair covers it
    count_variants: tuple = ()
    #: options that change the documented counts
    count_options: tuple[str, ...] = ()
    #: cameras/views, as docs/datasets.md states them (e.g. "6", "2 views", "pseudo")
    cameras: str = ""
    options: dict = dataclasses.field(default_factory=dict)
    protocol: str = "standard"
    #: protocol values the loader implements itself; a generic protocol name listed here
    #: (e.g. "camera_holdout") goes to the loader instead of :mod:`reidcli.data.protocols`
    protocols: tuple[str, ...] = ()
    eval_rule: str = "market"
    notes: tuple[str, ...] = ()
    #: facts docs/datasets.md marks unconfirmed; ``reid data check`` prints them as warnings
    unconfirmed: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class _Entry:
    info: DatasetInfo
    loader: Callable[..., DatasetSplit]
    #: a callable ``fn(dir) -> bool`` telling whether a candidate dir holds this dataset
    looks_valid: Callable[[Path], bool] | None = None


#: every dataset: one :class:`reidcli.registry.Registry` (the kind the methods use too), indexed
#: by the ``DATASETS`` table of :mod:`reidcli.data.datasets`, names and aliases case-insensitive
DATASETS: Registry[_Entry] = Registry("dataset", {"dataset": (LOADER_PACKAGE,)},
                                      index_attr="DATASETS", fold_case=True)
#: name → entry, and lookup key → name (the registry's own tables)
_REGISTRY = DATASETS.entries
_ALIASES = DATASETS.aliases


def register(info: DatasetInfo, loader: Callable[..., DatasetSplit],
             looks_valid: Callable[[Path], bool] | None = None) -> None:
    """Add a dataset to the registry (called by each loader module at import, or by a plugin
    module: ``REIDCLI_PLUGINS``)."""
    DATASETS.add(info.name, _Entry(info, loader, looks_valid), group="dataset",
                 module=getattr(loader, "__module__", "?"), aliases=info.aliases)


def _ensure_loaded() -> None:
    """Import every loader module and the plugin modules (``REIDCLI_PLUGINS``, entry points:
    :func:`reidcli.registry.load_plugins`)."""
    DATASETS.discover()


def available() -> list[str]:
    """Registry names, sorted (every loader module and plugin imported)."""
    return DATASETS.names()


def canonical_name(name: str) -> str:
    """Registry name for a name or alias (case-insensitive); UsageError if unknown. Imports
    only the loader module of a built-in name; an unknown one imports the plugins, then every
    loader module."""
    entry = DATASETS.find(name)
    if entry is None:
        raise UsageError(f"unknown dataset {name!r}",
                         f"choose one of {', '.join(available())} (see `reid data list`)")
    return entry.info.name


def info(name: str) -> DatasetInfo:
    """The :class:`DatasetInfo` of a dataset name or alias."""
    return _REGISTRY[canonical_name(name)].info


def data_root(root: str | os.PathLike | None = None) -> Path:
    """The data root: ``root`` if given, else ``$REIDCLI_DATA``, else ``./data``."""
    if root is not None:
        return Path(root).expanduser()
    env = os.environ.get("REIDCLI_DATA")
    return Path(env).expanduser() if env else Path("data")


def resolve_dataset_dir(name: str, root: str | os.PathLike | None = None,
                        candidates: tuple[str, ...] | None = None) -> Path:
    """First existing candidate sub-path of the data root for ``name``.

    Raises :class:`DatasetError` listing every path tried when none exists.
    """
    entry = _REGISTRY[canonical_name(name)]
    base = data_root(root)
    tried = []
    for cand in candidates or entry.info.candidates:
        path = (base / cand) if cand != "." else base
        tried.append(str(path))
        if path.is_dir() and (entry.looks_valid is None or entry.looks_valid(path)):
            return path
    raise DatasetError(
        f"no {entry.info.name} dataset under {base} (tried {', '.join(tried)})",
        f"pass {param('root')}, set REIDCLI_DATA, or see `reid data info {entry.info.name}`")


def load(dataset: str, /, root: str | os.PathLike | None = None, trial: int = 0,
         **options: Any) -> DatasetSplit:
    """Load one trial of a dataset: ``reidcli.data.load("market", "/data")``.

    Generic protocols work for every dataset (docs/datasets.md; :mod:`reidcli.data.protocols`):

    * ``protocol="camera_holdout"`` (options ``train_cams``, ``num_train_cams``,
      ``gallery_cams``) and ``protocol="domain_holdout"`` (``target_domain``,
      ``train_domains``): the dataset is loaded with its other options (its own default
      protocol) and the hold-out is applied to that split — unless the loader lists the name
      in ``DatasetInfo.protocols``;
    * ``train_ids_limit=n`` (with ``repeats``, default 5; C-DPCF's reduced training ids) —
      unless the loader declares a ``train_ids_limit`` option: trial t loads the dataset's
      trial t // repeats and keeps n random training persons (subset t % repeats).

    ``dataset`` is positional-only so that loader options may use any name (e.g. ``name``).
    """
    canon = canonical_name(dataset)
    entry = _REGISTRY[canon]
    if "train_ids_limit" in options and "train_ids_limit" not in entry.info.options:
        return _load_limited(canon, root, trial, options)
    derived = _derived_protocol(entry.info, options)
    if derived is not None:
        name, own = derived
        split = load(canon, root, trial=trial, **options)
        return _protocols.DERIVED[name](split, **own)
    unknown = sorted(set(options) - set(accepted_options(entry.info, generic=False)))
    if unknown:
        raise UsageError(f"unknown option(s) {', '.join(unknown)} for dataset {canon}",
                         f"valid options: {', '.join(accepted_options(entry.info))}")
    merged = {**{k: v for k, v in entry.info.options.items() if k != "*"}, **options}
    return entry.loader(root, trial, **merged)


def accepted_options(info: DatasetInfo, generic: bool = True) -> list[str]:
    """Every option key :func:`load` accepts for a dataset: its declared options and, for a
    loader declaring ``"*"`` (it hands other options to a protocol of
    :data:`reidcli.data.protocols.PROTOCOLS`), those protocols' keyword parameters; with
    ``generic``, also the keys :func:`load` handles itself (``protocol``,
    ``train_ids_limit``/``repeats``, the hold-out protocols' options). A key outside this list
    is an error, never silently ignored (docs/datasets.md)."""
    import inspect

    keys = [k for k in info.options if k != "*"]
    extra: list[str] = []
    if info.options.get("*") is not None:
        for fn in _protocols.PROTOCOLS.values():
            extra += [name for name, p in inspect.signature(fn).parameters.items()
                      if p.kind is p.KEYWORD_ONLY
                      and name not in ("trial", "seed", "dataset_root")]
    if generic:
        extra += ["protocol", "train_ids_limit", "repeats",
                  *(k for names in _protocols.DERIVED_OPTIONS.values() for k in names)]
    for key in extra:
        if key not in keys:
            keys.append(key)
    return keys


def _load_limited(canon: str, root, trial: int, options: dict) -> DatasetSplit:
    """``train_ids_limit`` on any dataset: subset ``trial % repeats`` of its trial
    ``trial // repeats`` (:func:`reidcli.data.protocols.limit_train_ids`)."""
    limit = options.pop("train_ids_limit")
    repeats = _protocols.check_train_ids_limit(limit, options.pop("repeats", 5))
    if trial < 0:
        raise UsageError(f"trial {trial} is negative", "pass a trial index ≥ 0")
    base = load(canon, root, trial=trial // repeats, **options)
    return _protocols.limit_train_ids(base, train_ids_limit=limit, repeats=repeats,
                                      repeat=trial % repeats)


def _derived_protocol(info: DatasetInfo, options: dict) -> tuple[str, dict] | None:
    """Pop a generic protocol (camera_holdout, domain_holdout) and its own options out of
    ``options`` (in place); None when the protocol is the dataset's own."""
    name = options.get("protocol")
    if name not in _protocols.DERIVED or name in info.protocols:
        return None
    del options["protocol"]
    own = {k: options.pop(k) for k in _protocols.DERIVED_OPTIONS[name] if k in options}
    return name, own
