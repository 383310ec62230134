"""Metric learning on stored features: one :class:`reidcli.estimator.Estimator` per method,
each registered by its own module (``reid train <method>``; docs/methods.md).

:mod:`~reidcli.metric.xqda`, :mod:`~reidcli.metric.kissme`, :mod:`~reidcli.metric.lfda`
(LFDA and kernel LFDA), :mod:`~reidcli.metric.rpcca`, :mod:`~reidcli.metric.pca` and
:mod:`~reidcli.metric.warca` (with ``warca_objective``, ``warca_trainer``, ``warca_kernel``,
``warca_model``) are the methods; :mod:`~reidcli.metric.kernels` holds the kernels, kernel
projections and pair sampling they share; :mod:`~reidcli.metric.pair_covariances` the
closed-form cross-camera pair covariances Σ_S, Σ_D (C-DPCF paper Eq. 9) of XQDA and the
C-DPCF weight maps; :mod:`~reidcli.metric.fit` fits an estimator over a store's protocol
trials into one fitted-model file.
"""

#: the methods this package registers: name → "module:attr" (:class:`reidcli.registry.Registry`
#: imports only the module of the method it looks up; tests/test_registry.py checks this table)
METHODS = {
    "kissme": "reidcli.metric.kissme:KISSME",
    "klfda": "reidcli.metric.lfda:KernelLFDA",
    "lfda": "reidcli.metric.lfda:LFDA",
    "pca": "reidcli.metric.pca:PCA",
    "rpcca": "reidcli.metric.rpcca:RPCCA",
    "warca": "reidcli.metric.warca:WARCA",
    "xqda": "reidcli.metric.xqda:XQDA",
}
