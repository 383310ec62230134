"""Constants of the feature-store schema (ARCHITECTURE.md, "The feature store", version 1).

```
/                 attrs: format="reidcli.store", schema=1, dataset, created, reidcli_version,
                         provenance (JSON)
/records/<col>    one 1-D dataset per record column (strings as UTF-8 vlen)
/features/<name>  float32 [N, D]; attrs: metric, normalized
/convmaps/<layer> float16 [N, C, H, W]; chunked per sample
/protocol/        attrs: name, eval_rule, options (JSON);
                  /protocol/trial_<k>/{train_pids, test_pids, query_idx, gallery_idx, train_idx}
/adapt/<method>/  arrays learned by an adaptation; attrs: hyperparameters (JSON)
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

METRICS = ("euclidean", "cosine")
#: datasets of one protocol trial; train_idx is an addition to the v1 list (row indices of
#: the training records), since pids alone are ambiguous across domains
TRIAL_ARRAYS = ("train_pids", "test_pids", "query_idx", "gallery_idx", "train_idx")

#: attr ``kind`` of each /records dataset: how to turn it back into a DataFrame column
KIND_STR, KIND_INT, KIND_FLOAT, KIND_BOOL, KIND_JSON = "str", "int", "float", "bool", "json"

#: target bytes per chunk of a feature dataset
FEATURE_CHUNK_BYTES = 1 << 20


def trial_group(k: int) -> str:
    return f"{PROTOCOL}/trial_{k}"
