"""The HDF5 feature store (schema v1): :func:`open_store`, :class:`StoreWriter`."""
from reidcli.store.reader import FeatureStore, StoreProtocol, open_store  # noqa: F401
from reidcli.store.writer import StoreWriter, parse_shard, shard_rows  # noqa: F401
