"""Datasets: the record table, loaders, protocols and the synthetic generator."""
from reidcli.data.records import DatasetSplit, ReidRecord, records_to_frame  # noqa: F401
from reidcli.data.registry import available, info, load  # noqa: F401
