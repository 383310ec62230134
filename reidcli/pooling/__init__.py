"""Pooling of stored conv maps: C-DPCF, DPCF and the average-pooling baselines
(docs/methods/cdpcf.md). ``reid fit-pooling`` is a thin wrapper over :mod:`reidcli.pooling.fit`."""

#: the methods this package registers: name → "module:attr" (:class:`reidcli.registry.Registry`;
#: tests/test_registry.py checks this table)
METHODS = {
    "avgp": "reidcli.pooling.cdpcf:AvgP",
    "avgp-pad": "reidcli.pooling.cdpcf:AvgPPad",
    "cdpcf": "reidcli.pooling.cdpcf:CDPCF",
    "dpcf": "reidcli.pooling.cdpcf:DPCF",
}
