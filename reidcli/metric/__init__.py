"""Metric learning on stored features.

:mod:`reidcli.metric.pair_covariances` — closed-form cross-camera pair covariances Σ_S, Σ_D
(cdpcf.md §3.3), shared by C-DPCF/DPCF weight maps and XQDA; :mod:`reidcli.metric.xqda` —
XQDA (cdpcf.md §4) and its fitted model for ``reid train xqda`` / ``reid eval``;
:mod:`reidcli.metric.fit` — fitting a metric over a store's protocol trials.
"""
