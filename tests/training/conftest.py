"""Fixtures of the training tests: a small multi-domain synthetic dataset for DG training."""
from __future__ import annotations

from pathlib import Path

import pytest

from reidcli.data.synthetic import generate

#: name of the folder ``<root>/synthetic/<name>/`` that :func:`dg_synthetic_root` holds
DG_SYNTHETIC_NAME = "dg_small"
#: the ``dg`` preset shrunk for tests: 4 domains × 4 cameras, 12 + 12 ids, 2 images per
#: identity and camera, ids in 2+ cameras, no distractor or junk, 32×16 images
DG_SYNTHETIC_OVERRIDES = dict(num_domains=4, num_cameras=4, num_train_ids=12, num_test_ids=12,
                              cams_per_id_min=2, imgs_per_id_cam=2, num_distractors=0,
                              num_junk=0, height=32, width=16)


@pytest.fixture(scope="session")
def dg_synthetic_root(tmp_path_factory) -> Path:
    """Data root holding ``synthetic/dg_small/`` (:data:`DG_SYNTHETIC_OVERRIDES` on the
    ``dg`` preset; domains ``synthetic/d0`` … ``synthetic/d3``).

    Load it with ``reidcli.data.load("synthetic", root, name=DG_SYNTHETIC_NAME)`` or as a DG
    source with ``source_options={"synthetic": {"name": DG_SYNTHETIC_NAME}}``. Read-only:
    shared by every test of the session.
    """
    root = tmp_path_factory.mktemp("synthetic_dg")
    generate(root, "dg", name=DG_SYNTHETIC_NAME, overrides=DG_SYNTHETIC_OVERRIDES,
             progress=False, workers=1)
    return root


@pytest.fixture(scope="session")
def dg_synthetic(dg_synthetic_root) -> tuple[Path, str]:
    """``(data root, synthetic dataset name)`` of :func:`dg_synthetic_root`."""
    return dg_synthetic_root, DG_SYNTHETIC_NAME
