"""Writing an adapted store for ``reid adapt`` (docs/formats.md, "Feature store": the adapted
store; docs/methods/dart3.md).

The output is a full copy of the input store in which

* ``/features/<feature>`` holds the adapted query embeddings in the processed query rows and
  the gallery the method is scored against in the gallery rows (G for none/tent/temp, G̃ for
  norm/dart3); other rows are copied unchanged;
* ``/protocol`` holds the adapted trial only, its ``query_idx`` restricted to the processed
  queries, so ``reid eval`` scores the store with no method-specific code;
* ``/adapt/<method>/`` holds the parameters (``cam_ids``, ``M_q``, ``S_q``, ``M_g``, ...,
  ``bn/<param>``), the processing ``order``, ``batch_id``, the ``loss`` trace and timing.

It is written to ``<out>.partial`` and renamed when complete, flushed and re-opened
(:class:`reidcli.io.AtomicOutput`); the output may not be the input store.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

import h5py
import numpy as np

from reidcli.io import AtomicOutput, output_errors, raise_if_signalled, verify_hdf5
from reidcli.store.schema import (ADAPT, CONVMAPS, FEATURES, PROTOCOL, RECORDS, STORE_FORMAT,
                                  trial_name)
from reidcli.store.writer import write_adapt_group, write_store_header


def _write_rows(ds: h5py.Dataset, rows: np.ndarray, values: np.ndarray) -> None:
    """``ds[rows] = values`` for rows in any order (h5py needs increasing indices)."""
    rows = np.asarray(rows, np.int64)
    if len(rows) == 0:
        return
    order = np.argsort(rows, kind="stable")
    rows, values = rows[order], np.asarray(values, ds.dtype)[order]
    if rows[-1] - rows[0] + 1 == len(rows):          # contiguous: one slice write
        ds[int(rows[0]):int(rows[-1]) + 1] = values
    else:
        ds[rows] = values


def write_adapted_store(src_path: str | os.PathLike, out: str | os.PathLike, *, method: str,
                        feature: str, trial: int, query_rows: np.ndarray,
                        query_values: np.ndarray, gallery_rows: np.ndarray,
                        gallery_values: np.ndarray, adapt_arrays: Mapping[str, np.ndarray],
                        adapt_attrs: Mapping[str, Any], provenance: Mapping[str, Any],
                        force: bool = False, drop_convmaps: bool = False) -> Path:
    """Copy ``src_path`` to ``out`` with the adapted rows of ``feature`` (see module doc).

    query_rows [Nq'] / gallery_rows [Ng] are store rows; query_values [Nq', d] /
    gallery_values [Ng, d] their new features.
    """
    output = AtomicOutput(out, force=force, inputs=[src_path],
                          verify=verify_hdf5(RECORDS, FEATURES, format=STORE_FORMAT))
    tmp = output.tmp
    try:
        with output_errors(output.what), h5py.File(src_path, "r") as src, \
                h5py.File(tmp, "w") as dst:
            for key, value in src.attrs.items():
                dst.attrs[key] = value
            dst.attrs["complete"] = False
            for name in src:
                if name == PROTOCOL or (name == CONVMAPS and drop_convmaps):
                    continue
                if name == ADAPT:
                    group = dst.create_group(ADAPT)
                    for m in src[ADAPT]:
                        if m != method:
                            src.copy(src[ADAPT][m], group, name=m)
                    continue
                src.copy(src[name], dst, name=name)
                raise_if_signalled()        # Ctrl-C during h5py's copy can be swallowed
            _write_protocol(src, dst, trial, query_rows, gallery_rows)
            ds = dst[FEATURES][feature]
            _write_rows(ds, query_rows, query_values)
            _write_rows(ds, gallery_rows, gallery_values)
            ds.attrs["adapted_by"] = method
            write_adapt_group(dst, method, adapt_arrays, adapt_attrs)
            write_store_header(dst.attrs, provenance)
            dst.attrs["adapted_from"] = str(src_path)
            dst.attrs["adapt_method"] = method
            dst.attrs["complete"] = True
            dst.flush()
        raise_if_signalled()
    except BaseException:
        output.abort()
        raise
    return output.commit()


def _write_protocol(src: h5py.File, dst: h5py.File, trial: int, query_rows: np.ndarray,
                    gallery_rows: np.ndarray) -> None:
    """``/protocol`` with the adapted trial only (trial 0), queries = the processed rows.

    A store without a protocol gets one built from its query/gallery split rows."""
    group = dst.create_group(PROTOCOL)
    first = trial_name(0)
    if PROTOCOL in src and trial_name(trial) in src[PROTOCOL]:
        for key, value in src[PROTOCOL].attrs.items():
            group.attrs[key] = value
        src.copy(src[PROTOCOL][trial_name(trial)], group, name=first)
        gallery = None
    else:
        group.attrs["name"] = "adapted"
        group.attrs["eval_rule"] = "market"
        group.attrs["options"] = "{}"
        group.create_group(first)
        gallery = np.sort(np.asarray(gallery_rows, np.int64))
    group.attrs["num_trials"] = 1
    group.attrs["adapted_trial"] = int(trial)
    t0 = group[first]
    if "query_idx" in t0:
        del t0["query_idx"]
    t0.create_dataset("query_idx", data=np.sort(np.asarray(query_rows, np.int64)))
    if gallery is not None:
        t0.create_dataset("gallery_idx", data=gallery)


__all__ = ["write_adapted_store"]
