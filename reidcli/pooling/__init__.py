"""Pooling of stored conv maps: C-DPCF, DPCF and the average-pooling baselines
(docs/methods/cdpcf.md). ``reid fit-pooling`` is a thin wrapper over :mod:`reidcli.pooling.fit`."""
