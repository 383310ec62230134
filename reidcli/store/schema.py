"""Constants of the feature-store schema (docs/formats.md, "Feature store (schema 1)").

```
/                 attrs: format="reidcli.store", schema=1, dataset, created, reidcli_version,
                         provenance (JSON) — store.writer.write_store_header
/records/<col>    one 1-D dataset per record column (strings as UTF-8 vlen)
/features/<name>  float32 [N, D]; attrs: metric, normalized
/convmaps/<layer> float16 [N, C, H, W]; chunked per sample
/protocol/        attrs: name, eval_rule, options (JSON);
                  /protocol/trial_<k>/{train_pids, test_pids, query_idx, gallery_idx, train_idx}
/adapt/<method>/  arrays learned by an adaptation (``bn/<param>`` in a subgroup); one attr
                  per setting, dicts/lists as JSON (store.writer.write_adapt_group)
/codebooks/<feature>/  optional: a fitted descriptor's arrays (bow; docs/methods/bow.md)
```
"""
from __future__ import annotations

STORE_FORMAT = "reidcli.store"
SCHEMA_VERSION = 1

RECORDS = "records"
FEATURES = "features"
CONVMAPS = "convmaps"
PROTOCOL = "protocol"
ADAPT = "adapt"
CODEBOOKS = "codebooks"

METRICS = ("euclidean", "cosine")
#: the record columns a store may hold besides ``x_<key>`` extras (docs/formats.md,
#: "/records/<col>"): the record table's, :data:`reidcli.data.records.RECORD_COLUMNS` (a test
#: keeps the two equal; the reader names them here so that opening a store loads no pandas)
RECORD_COLUMNS = ("path", "pid", "camid", "split", "modality", "dataset", "domain", "frame")
#: record columns every store holds (docs/formats.md, "/records/<col>")
REQUIRED_COLUMNS = ("path", "pid", "camid", "split")
#: datasets of one protocol trial; train_idx is an addition to the v1 list (row indices of
#: the training records), since pids alone are ambiguous across domains
TRIAL_ARRAYS = ("train_pids", "test_pids", "query_idx", "gallery_idx", "train_idx")

#: attr ``kind`` of each /records dataset: how to turn it back into a DataFrame column
KIND_STR, KIND_INT, KIND_FLOAT, KIND_BOOL, KIND_JSON = "str", "int", "float", "bool", "json"

#: name of a trial's group, in ``/protocol`` of a store and at the root of a fitted model
TRIAL_PREFIX = "trial_"


def trial_name(k: int) -> str:
    """``trial_<k>``: the group of trial ``k``."""
    return f"{TRIAL_PREFIX}{int(k)}"


def trial_index(name: str) -> int | None:
    """``k`` of a ``trial_<k>`` group name; None for any other name."""
    rest = name[len(TRIAL_PREFIX):] if name.startswith(TRIAL_PREFIX) else ""
    return int(rest) if rest.isdigit() else None


