"""Evaluation: block-wise distances, ranking metrics, protocols E1–E5, scores, re-ranking.

Entry points: :func:`reidcli.evaluation.engine.evaluate_trial` (one trial from any distance
source), :func:`reidcli.evaluation.run.evaluate_store` (a feature store, optionally through a
fitted model, every trial of a protocol), :func:`reidcli.evaluation.multi.evaluate_stores`
(several stores, mean ± std over stores) and :func:`reidcli.evaluation.arrays.evaluate_arrays`
(features or a distance matrix plus labels, no store).
"""
