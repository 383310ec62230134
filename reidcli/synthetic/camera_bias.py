"""Camera-biased synthetic embeddings: the CPU sanity scenario of docs/methods/dart3.md.

Each identity p has a centre μ_p ~ N(0, I_d); an image's unbiased embedding is
z* = μ_p + σ_w·N(0, I_d); camera c scales and shifts it, z = α_c ⊙ z* + β_c with
α_c ~ U(0.5, 2)^d and β_c ~ N(0, 1.5² I_d) (the bias model of DART3 Eq 3/12). Every identity
is seen by 2 distinct random cameras: 1 query image in the first, 2 gallery images in each
(so same-camera true matches exist and must be removed by the evaluation rule).
Defaults give Nq = 80, Ng = 320, d = 32, 4 cameras.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import torch


@dataclasses.dataclass
class BiasedEmbeddings:
    """Query/gallery embeddings with their labels, unbiased versions and the camera bias.

    ``query`` [Nq, d], ``gallery`` [Ng, d] (float32, biased); ``query_true`` /
    ``gallery_true`` the unbiased z*; ``alpha``, ``beta`` [n_cams, d]."""

    query: np.ndarray
    query_pid: np.ndarray
    query_cam: np.ndarray
    gallery: np.ndarray
    gallery_pid: np.ndarray
    gallery_cam: np.ndarray
    query_true: np.ndarray
    gallery_true: np.ndarray
    alpha: np.ndarray
    beta: np.ndarray

    def write_store(self, path: str | os.PathLike, *, unbiased: bool = False,
                    force: bool = True, feature: str = "emb") -> Path:
        """A reidcli store (split query/gallery, pids ≥ 1, dataset ``synthetic_bias``)."""
        import pandas as pd

        from reidcli.provenance import make_provenance
        from reidcli.store.importer import build_import_records
        from reidcli.store.writer import StoreWriter

        nq, ng = len(self.query), len(self.gallery)
        labels = pd.DataFrame({
            "pid": np.concatenate([self.query_pid, self.gallery_pid]),
            "camid": np.concatenate([self.query_cam, self.gallery_cam]),
            "split": ["query"] * nq + ["gallery"] * ng})
        records = build_import_records(labels, "synthetic_bias", "synthetic_bias")
        feats = np.concatenate([self.query_true, self.gallery_true] if unbiased
                               else [self.query, self.gallery]).astype(np.float32)
        prov = make_provenance(command=["synthetic_bias"], generator="docs/methods/dart3.md")
        with StoreWriter(path, records, dataset="synthetic_bias", provenance=prov,
                         force=force) as writer:
            writer.set_feature(feature, feats, metric="euclidean")
        return Path(path)


def synthetic_bias(seed: int = 0, *, d: int = 32, n_ids: int = 80, n_cams: int = 4,
                   sigma_w: float = 0.8, alpha_range: tuple[float, float] = (0.5, 2.0),
                   beta_std: float = 1.5) -> BiasedEmbeddings:
    """Draw the §8.1 scenario with a seeded ``torch.Generator`` (see module doc)."""
    if n_cams < 2:
        raise ValueError("synthetic_bias needs at least 2 cameras")
    gen = torch.Generator().manual_seed(int(seed))
    f64 = torch.float64
    centres = torch.randn(n_ids, d, generator=gen, dtype=f64)
    alpha = alpha_range[0] + (alpha_range[1] - alpha_range[0]) * \
        torch.rand(n_cams, d, generator=gen, dtype=f64)
    beta = beta_std * torch.randn(n_cams, d, generator=gen, dtype=f64)
    # two distinct cameras per identity: a random permutation's first two entries
    cams = torch.argsort(torch.rand(n_ids, n_cams, generator=gen), dim=1)[:, :2]
    q_pid, q_cam, g_pid, g_cam = [], [], [], []
    for p in range(n_ids):
        first, second = int(cams[p, 0]), int(cams[p, 1])
        q_pid.append(p + 1)
        q_cam.append(first)
        for c in (first, second):
            g_pid += [p + 1, p + 1]
            g_cam += [c, c]
    q_pid, q_cam = np.array(q_pid), np.array(q_cam)
    g_pid, g_cam = np.array(g_pid), np.array(g_cam)

    def draw(pids: np.ndarray, cams_: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        noise = torch.randn(len(pids), d, generator=gen, dtype=f64)
        z_true = centres[torch.as_tensor(pids - 1)] + sigma_w * noise
        idx = torch.as_tensor(cams_)
        return (alpha[idx] * z_true + beta[idx]).float().numpy(), z_true.float().numpy()

    q, q_true = draw(q_pid, q_cam)
    g, g_true = draw(g_pid, g_cam)
    return BiasedEmbeddings(query=q, query_pid=q_pid.astype(np.int64),
                            query_cam=q_cam.astype(np.int64), gallery=g,
                            gallery_pid=g_pid.astype(np.int64),
                            gallery_cam=g_cam.astype(np.int64), query_true=q_true,
                            gallery_true=g_true, alpha=alpha.float().numpy(),
                            beta=beta.float().numpy())


__all__ = ["BiasedEmbeddings", "synthetic_bias"]
