"""The HDF5 feature store (schema v1): :func:`open_store`, :class:`StoreWriter`.

The writer (which needs pandas) is imported on first use, so that reading a store loads no
pandas."""
from reidcli.store.reader import FeatureStore, StoreProtocol, open_store  # noqa: F401

_WRITER_NAMES = ("StoreWriter", "parse_shard", "shard_rows")


def __getattr__(name: str):
    """``StoreWriter``, ``parse_shard``, ``shard_rows`` from :mod:`reidcli.store.writer`."""
    if name in _WRITER_NAMES:
        from reidcli.store import writer

        return getattr(writer, name)
    raise AttributeError(f"module 'reidcli.store' has no attribute {name!r}")


__all__ = ["FeatureStore", "StoreProtocol", "open_store", *_WRITER_NAMES]
