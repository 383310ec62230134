"""What a camera is, and camera lists given by the user.

A camera is the pair (domain, camid): a store with several domains (e.g. the synthetic
dataset, each domain numbering its cameras from 0) has one camera per distinct pair.
:func:`camera_codes` numbers the cameras ``0..C-1`` in sorted (domain, camid) order and is the
one place rows are grouped by camera (pooling weight maps, metric learners' cross-camera pairs,
per-camera evaluation, NMI, adaptation). :func:`parse_cameras` reads the lists a user names
cameras with (``train_cams``, ``query_cams``, a synthetic domain's ``ir_cameras``, ...): those
are ``camid`` values and apply within every domain.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

if TYPE_CHECKING:  # pragma: no cover - annotations only (evaluate_arrays needs no pandas)
    import pandas as pd

from reidcli.errors import ParameterError, UsageError


@dataclasses.dataclass
class CameraTable:
    """Camera code → (domain, camid): ``cam_ids`` [C] int64, ``domains`` [C] str (object),
    sorted by (domain, camid); code ``c`` is row ``c``."""

    cam_ids: np.ndarray
    domains: np.ndarray

    @property
    def num_cameras(self) -> int:
        return len(self.cam_ids)

    @property
    def several_domains(self) -> bool:
        return len(set(self.domains.tolist())) > 1

    def name(self, code: int) -> str:
        """``cam N`` (one domain) or ``<domain>/cam N`` (several): a per-camera report row."""
        return camera_key_name(self.key(code))

    def key(self, code: int) -> str:
        """JSON key of a camera: ``"N"`` (one domain, the camid as before) or
        ``"<domain>/N"`` (several domains)."""
        cam = int(self.cam_ids[code])
        return f"{self.domains[code]}/{cam}" if self.several_domains else str(cam)

    def label(self, code: int) -> str:
        """``camera N`` or ``camera <domain>/N`` (adaptation's progress and reports)."""
        cam = int(self.cam_ids[code])
        return f"camera {self.domains[code]}/{cam}" if self.several_domains \
            else f"camera {cam}"

    def pairs(self) -> list[tuple[str, int]]:
        """``[(domain, camid), ...]`` in code order."""
        return [(str(d), int(c)) for d, c in zip(self.domains, self.cam_ids)]

    def codes_with_camids(self, camids) -> np.ndarray:
        """Codes [k] of the cameras whose camid is in ``camids`` (in every domain)."""
        return np.flatnonzero(np.isin(self.cam_ids, np.asarray(list(camids), np.int64)))

    def lookup(self, domains, camids, what: str) -> np.ndarray:
        """Code in this table of each row's camera [N] (``domains`` None: every row's domain is
        the table's one domain). A table of one domain matches rows by camid alone (a model
        fitted on one dataset applies to another numbered alike); several domains match by
        (domain, camid). :class:`~reidcli.errors.UsageError` naming an unseen camera."""
        camids = np.asarray(camids, dtype=np.int64).reshape(-1)
        fitted = ", ".join(map(self.key, range(self.num_cameras)))
        if self.num_cameras == 0:
            raise UsageError(f"{what}: no fitted cameras", "re-fit the model")
        if not self.several_domains:
            known, wanted = self.cam_ids, camids
        elif domains is None:             # camids alone cannot tell the domains apart
            raise UsageError(f"{what}: rows without a domain cannot be matched to cameras of "
                             f"several domains ({fitted})", "pass the rows' domains")
        else:
            _, dom_codes = np.unique(np.concatenate([self.domains.astype(str),
                                                     np.asarray(domains).astype(str)]),
                                     return_inverse=True)
            dom_codes = dom_codes.reshape(-1).astype(np.int64)
            scale = int(max(self.cam_ids.max(initial=0), camids.max(initial=0))) + 1
            known = dom_codes[:self.num_cameras] * scale + self.cam_ids
            wanted = dom_codes[self.num_cameras:] * scale + camids
        idx = np.clip(np.searchsorted(known, wanted), 0, self.num_cameras - 1)
        bad = known[idx] != wanted
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            unseen = f"{np.asarray(domains)[first]}/{int(camids[first])}" \
                if self.several_domains else str(int(camids[first]))
            raise UsageError(f"{what}: camera {unseen} was not seen in training (fitted "
                             f"cameras: {fitted})",
                             "camera-specific pooling needs every test camera among the "
                             "training cameras")
        return idx.astype(np.int64)

    @classmethod
    def from_lists(cls, camids, domains=None) -> "CameraTable":
        """A table from stored lists (a fitted file's ``camids`` and ``camera_domains``;
        no domains = cameras of one unnamed domain). Sorted as :func:`camera_codes` sorts."""
        camids = np.asarray(list(camids), dtype=np.int64)
        doms = [""] * len(camids) if domains is None else [str(d) for d in domains]
        if len(doms) != len(camids):
            raise ValueError(f"{len(camids)} camids but {len(doms)} camera domains")
        return camera_codes(np.asarray(doms, dtype=object), camids)[1]


def camera_codes(domains, camids) -> tuple[np.ndarray, CameraTable]:
    """Camera code of every row and the table of cameras.

    ``domains`` [N] (any values, compared as strings; None = one domain) and ``camids`` [N]
    int → ``codes`` int64 [N] in ``0..C-1`` and a :class:`CameraTable` of the C distinct
    (domain, camid) pairs sorted by domain, then camid. With one domain the codes are the
    ranks of the camids (``np.unique(camids, return_inverse=True)``).
    """
    camids = np.asarray(camids, dtype=np.int64).reshape(-1)
    if domains is None:
        doms = np.full(len(camids), "")
    else:
        doms = np.asarray(domains).astype(str).reshape(-1)     # fixed-width: sorted in C
        if len(doms) != len(camids):
            raise ValueError(f"{len(doms)} domains but {len(camids)} camids")
    names, dom_codes = np.unique(doms, return_inverse=True)
    cam_values, cam_codes = np.unique(camids, return_inverse=True)
    # one int64 key per (domain, camid) that sorts as the pair: both are ranks below N
    span = max(len(cam_values), 1)
    keys, codes = np.unique(dom_codes.reshape(-1) * span + cam_codes.reshape(-1),
                            return_inverse=True)
    table = CameraTable(cam_ids=cam_values[keys % span].astype(np.int64),
                        domains=names.astype(object)[keys // span])
    return codes.reshape(-1).astype(np.int64), table


def camera_index(cameras) -> tuple[np.ndarray, int]:
    """Codes ``0..C-1`` [N] and C of per-row camera labels [N] — camera codes of
    :func:`camera_codes` (what callers pass for stores of several domains), or camids of one
    domain; any sortable values, grouped as ``np.unique`` groups them."""
    uniq, codes = np.unique(np.asarray(cameras).reshape(-1), return_inverse=True)
    return codes.reshape(-1).astype(np.int64), len(uniq)


def split_camera_key(key: str) -> tuple[str, int]:
    """(domain, camid) of a :meth:`CameraTable.key` (``"3"`` → ``("", 3)``,
    ``"a/3"`` → ``("a", 3)``): the sort order of per-camera report rows."""
    domain, _, cam = str(key).rpartition("/")
    return domain, int(cam)


def camera_key_name(key: str) -> str:
    """The report row name of a :meth:`CameraTable.key`: ``cam 3`` or ``<domain>/cam 3``."""
    domain, cam = split_camera_key(key)
    return f"{domain}/cam {cam}" if domain else f"cam {cam}"


def record_cameras(records: pd.DataFrame | Mapping[str, np.ndarray], rows=None
                   ) -> tuple[np.ndarray, CameraTable]:
    """:func:`camera_codes` of a record table's ``domain`` and ``camid`` columns (of ``rows``
    [n] only when given; a table without ``domain`` is one domain). ``records``: a DataFrame
    or its columns as arrays (a store's ``record_columns``, no pandas)."""
    domains, camids = record_camera_columns(records, rows)
    return camera_codes(domains, camids)


def record_camera_columns(records: pd.DataFrame | Mapping[str, np.ndarray], rows=None
                          ) -> tuple[np.ndarray | None, np.ndarray]:
    """(``domain`` [n] str or None, ``camid`` [n] int64) of ``rows`` (all when None) of a
    DataFrame or a mapping of column arrays."""
    camids = np.asarray(records["camid"], dtype=np.int64)
    domains = np.asarray(records["domain"], dtype=object).astype(str) \
        if "domain" in records else None
    if rows is not None:
        rows = np.asarray(rows, dtype=np.int64)
        camids = camids[rows]
        domains = None if domains is None else domains[rows]
    return domains, camids


def parse_cameras(value: Any, parameter: str, *, owner: str = "camera selection",
                  first: int = 0, repeats: bool = True) -> list[int] | None:
    """Sorted camera numbers from ``"0,6,7"``, ``"0-4"``, a list, or one number; None for
    None or ``""`` (no selection).

    ``first`` is the lowest valid number: 0 for store ``camid`` values (file camera c1 → 0),
    1 for file camera numbers (then a ``c`` prefix is accepted: ``"c3,c6"``). A camera given
    twice counts once unless ``repeats=False`` makes that an error. A list must name at least
    one camera.

    :class:`~reidcli.errors.ParameterError` naming ``parameter`` (and ``owner``) otherwise.
    """
    kind = "0-based camera ids" if first == 0 else f"{first}-based camera numbers"

    def fail(requirement: str, todo: str | None = None) -> ParameterError:
        example = ",".join(str(first + c) for c in (0, 2, 3))
        return ParameterError(owner, parameter, value, requirement,
                              todo or f"give {kind} separated by commas, e.g. {example}")

    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    items = _camera_items(value)
    cams = [_camera_number(item, first) for item in items]
    if any(c is None for c in cams):
        bad = next(i for i, c in zip(items, cams) if c is None)
        raise fail(f"is not a list of camera ids ({bad!r} is not a whole number)")
    if not cams:
        raise fail("names no camera")
    if min(cams) < first:
        raise fail(f"holds camera {min(cams)}, but camera ids are {first}-based",
                   "use the store's camid values (file camera c1 → 0)" if first == 0 else None)
    if not repeats and len(set(cams)) != len(cams):
        raise fail("names a camera twice", "list each camera once")
    return sorted(set(cams))


def _camera_items(value: Any) -> list[Any]:
    """The items of a camera selection: ``"0,2-4"`` → [``"0"``, 2, 3, 4]; a list's items;
    one value."""
    if isinstance(value, str):
        items: list[Any] = []
        for part in value.replace(" ", "").split(","):
            lo, sep, hi = part.partition("-")
            if sep and lo.isdigit() and hi.isdigit():
                items.extend(range(int(lo), int(hi) + 1))
            elif part:
                items.append(part)
        return items
    if isinstance(value, (list, tuple, set, frozenset, range, np.ndarray)):
        return list(value)
    return [value]


def _camera_number(item: Any, first: int) -> int | None:
    """``item`` as a whole number (``"c3"`` → 3 when numbering starts at 1); None if not one."""
    if isinstance(item, (bool, np.bool_)):
        return None
    if isinstance(item, (int, np.integer)):
        return int(item)
    if isinstance(item, (float, np.floating)):
        return int(item) if float(item).is_integer() else None
    text = str(item).strip().lower()
    if first > 0:
        text = text.removeprefix("c")
    try:
        return int(text)
    except ValueError:
        return None


__all__ = ["CameraTable", "camera_codes", "camera_index", "camera_key_name", "parse_cameras",
           "record_camera_columns", "record_cameras", "split_camera_key"]
