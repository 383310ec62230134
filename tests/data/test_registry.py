"""The dataset registry is a reidcli.registry.Registry: its index (reidcli.data.datasets.DATASETS)
names every built-in dataset and alias, and a lookup imports one loader module."""
from __future__ import annotations

import importlib

import pytest

from reidcli.data import registry


def test_index_names_every_dataset_and_alias_of_its_loader_module():
    from reidcli.data.datasets import DATASETS

    registry.available()                                 # every loader module imported
    built_in = {name: entry for name, entry in registry._REGISTRY.items()
                if entry.loader.__module__.startswith("reidcli.")}
    keys = {key: name for name, entry in built_in.items()
            for key in (name.lower(), *(a.lower() for a in entry.info.aliases))}
    assert sorted(DATASETS) == sorted(keys)
    for key, target in DATASETS.items():
        module, _, attr = target.partition(":")
        assert getattr(importlib.import_module(module), attr) is built_in[keys[key]].loader, key


def test_names_and_aliases_resolve_case_insensitively():
    assert registry.canonical_name(" Market ") == "market1501"
    assert registry.info("DUKE").name == "dukemtmc"
    with pytest.raises(Exception, match="unknown dataset 'nope'.*market1501"):
        registry.canonical_name("nope")


def test_one_loader_module_per_dataset_name():
    with pytest.raises(Exception, match="dataset 'market1501' is registered by both"):
        registry.register(registry.DatasetInfo(name="market1501", title="x"),
                          lambda root=None, trial=0: None)
