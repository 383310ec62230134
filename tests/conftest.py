"""Shared fixtures: synthetic datasets generated once per test session."""
from __future__ import annotations

import os
from pathlib import Path

# One OpenMP/BLAS thread in this process and in every child it starts (`reid` subprocesses,
# recipes) unless the caller chose a number: on a busy 2-core machine spinning OpenMP threads
# made work many times slower (a 1 s fit-pooling trial took 30 s).
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Idle OpenMP workers sleep instead of spinning (as `reid` itself sets): tests that ask for 2
# threads (tests/faults/test_threads.py) stay fast on a loaded machine.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest

from reidcli.data.synthetic import generate


@pytest.fixture(scope="session")
def tiny_synthetic_root(tmp_path_factory) -> Path:
    """Data root holding ``synthetic/tiny/`` (preset ``tiny``: 1 domain, 2 cams, 6+6 ids).

    Load it with ``load_synthetic(root, name="tiny")``. Treat it as read-only: it is shared
    by every test of the session.
    """
    root = tmp_path_factory.mktemp("synthetic_tiny")
    generate(root, "tiny", progress=False)
    return root


@pytest.fixture(scope="session")
def default_synthetic_root(tmp_path_factory) -> Path:
    """Data root holding ``synthetic/default/`` (preset ``default``, ~3,000 images, a few
    seconds to generate). Read-only and shared; use only where ``tiny`` cannot do."""
    root = tmp_path_factory.mktemp("synthetic_default")
    generate(root, "default", progress=False)
    return root


@pytest.fixture(scope="session")
def vi_synthetic_root(tmp_path_factory) -> Path:
    """Data root holding ``synthetic/vi/``: the ``vi`` preset (cameras 3 and 6 infrared)
    shrunk to 8 training and 8 test identities, no distractors or junk. Read-only, shared."""
    root = tmp_path_factory.mktemp("synthetic_vi")
    generate(root, "vi", overrides={"num_train_ids": 8, "num_test_ids": 8,
                                    "num_distractors": 0, "num_junk": 0},
             progress=False, workers=1)
    return root


@pytest.fixture
def one_torch_thread():
    """Run a test with one torch thread (2 shared cores: avoids thread oversubscription)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def biased_stores(tmp_path_factory):
    """Seed → store of docs/methods/dart3.md's camera-biased embeddings (seeds 0, 1, 2)."""
    from tests.adapt.helpers import make_biased_stores
    return make_biased_stores(tmp_path_factory.mktemp("biased"))


@pytest.fixture(scope="session")
def tiny_model_store(tmp_path_factory):
    """(model path, store path, image folder) of a tiny BoT and the 3-camera store its
    ``bnneck`` features were written to (tests.adapt.helpers.make_tiny_model_store)."""
    from tests.adapt.helpers import make_tiny_model_store
    return make_tiny_model_store(tmp_path_factory.mktemp("tinymodel"))
