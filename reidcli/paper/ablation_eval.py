"""Extraction and evaluation of the ablation's runs, as the CLI chain does them
(recipes/_dgvae_chain.sh, recipes/_dmgnet_chain.sh):

* :func:`extract_run` — what ``reid extract --model RUN --dataset D --root R --option K=V
  --out STORE --force`` writes: the model's default features over the layout of its trials
  (every trial unless some test on its training identities, then the clean ones);
* :func:`evaluate_seeds` — what ``reid eval --store S0 [--store S1 …] --json OUT --force
  --quiet`` writes: the one-store report, or the report of several stores with their mean ±
  std (one store per seed); the JSON is written atomically with its provenance.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

#: ``reid extract``'s default images per batch (the library's is 64)
EXTRACT_BATCH = 256


def extract_run(run: Path, store: Path, dataset: str, root: str | None,
                options: Mapping[str, Any], *, device: str, force: bool,
                command: list[str] | None, workers: int | None = None) -> Path:
    """Extract the model of run directory ``run`` on ``dataset`` into ``store`` (``workers``:
    image loader processes, None: the loader's default); returns the store's path."""
    from reidcli.features.layout import dataset_layout
    from reidcli.features.model_extract import extract_model_store, model_layout
    from reidcli.models.checkpoint import load_model
    from reidcli.models.training_identities import training_identities

    loaded = load_model(run, "cpu")

    def make_layout(chosen):
        return dataset_layout(dataset, root, trials=chosen, progress=False, **dict(options))

    layout, _ = model_layout(make_layout, training_identities(loaded.meta, loaded.path),
                             loader_options=options)
    return extract_model_store(layout, store, loaded, batch_size=EXTRACT_BATCH, device=device,
                               workers=workers, force=force, progress=False, command=command,
                               inputs=[f for f in [layout.image_folder()] if f])


def evaluate_seeds(stores: Sequence[Path], json_out: Path, *, device: str, force: bool,
                   command: list[str] | None) -> dict:
    """Evaluate ``stores`` with ``reid eval``'s defaults and write the report to
    ``json_out``; returns the report."""
    from reidcli.evaluation.engine import EvalOptions
    from reidcli.evaluation.labelled import check_labelled
    from reidcli.evaluation.multi import evaluate_requests, evaluation_report
    from reidcli.evaluation.report import write_json
    from reidcli.evaluation.run import StoreEvalRequest
    from reidcli.provenance import InputDigests, make_provenance

    stores = [Path(s) for s in stores]
    digests = InputDigests(stores)
    if len(stores) > 1:
        for path in stores:
            check_labelled(path, "all")
    options = EvalOptions(progress=False)
    evaluation = evaluate_requests([StoreEvalRequest(store=path, device=device, options=options)
                                    for path in stores])
    report = evaluation_report(evaluation, make_provenance(command=command, seed=0,
                                                           inputs=digests))
    write_json(json_out, report, force=force, inputs=stores)
    return report


__all__ = ["extract_run", "evaluate_seeds", "EXTRACT_BATCH"]
