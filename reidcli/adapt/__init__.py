"""Test-time adaptation of stored features (``reid adapt``; docs/methods/dart3.md).

Methods: ``none`` (No-adapt), ``norm`` (camera normalisation, Alg 1), ``dart3`` in ``lite``
(stored embeddings) or ``full`` mode (plus the backbone's BN γ/β), ``tent`` and ``temp``.
Library entry points: :func:`adapt_store` (store → adapted store) and
:func:`adapt_features` (in memory; :func:`inputs_from_arrays` wraps plain arrays).
"""
#: the methods this package registers: name → "module[:attr]" (:class:`reidcli.registry.Registry`
#: imports only the module of the method it looks up; tests/test_registry.py checks this table)
METHODS = {
    "dart3": "reidcli.adapt.dart3:build",
    "dart3-lite": "reidcli.adapt.dart3",
    "none": "reidcli.adapt.norm",
    "norm": "reidcli.adapt.norm",
    "temp": "reidcli.adapt.temp:build",
    "tent": "reidcli.adapt.tent:build",
}

from reidcli.adapt.config import AdaptConfig, method_defaults, method_names  # noqa: E402
from reidcli.adapt.run import (Adaptation, AdaptStoreResult,  # noqa: E402
                               adapt_features, adapt_store, inputs_from_arrays)

__all__ = ["AdaptConfig", "method_defaults", "method_names", "Adaptation", "AdaptStoreResult",
           "adapt_features", "adapt_store", "inputs_from_arrays"]
