"""Backend row operations: ``count_below`` by kept entries and by sorted rows agree with a
brute-force count, ties, signed zeros and padding included."""
from __future__ import annotations

import numpy as np
import pytest

from reidcli.evaluation import backend as backend_module
from reidcli.evaluation.backend import NumpyBackend, TorchBackend, order_keys


def brute_counts(d: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    below = (d[:, :, None] < values[:, None, :]).sum(axis=1)
    upto = (d[:, :, None] <= values[:, None, :]).sum(axis=1)
    return below, upto


def block_with_specials(seed: int, rows: int, cols: int, k: int, near: bool):
    """Integer-valued distances (ties everywhere) with negatives and signed zeros; each row's
    k values are entries of the row (the ranking's specials), the last one padded with inf.
    ``near``: values from the row's smallest entries (the kept path), else from anywhere."""
    rng = np.random.default_rng(seed)
    d = rng.integers(-3, 40, (rows, cols)).astype(np.float32)
    d[d == 0] = np.where(rng.random(int((d == 0).sum())) < 0.5, -0.0, 0.0)
    source = np.sort(d, axis=1)[:, :max(k, cols // 20)] if near else d
    values = np.take_along_axis(source, rng.integers(0, source.shape[1], (rows, k)), axis=1)
    values[:, -1] = np.inf                                  # an absent special
    return d, values


@pytest.mark.parametrize("near", [True, False])
@pytest.mark.parametrize("threads", [1, 3])
def test_count_below_matches_brute_force(near, threads):
    d, values = block_with_specials(0, 64, 5000, 6, near)
    be = NumpyBackend(threads=threads)
    below, upto = be.count_below(d, values)
    want_below, want_upto = brute_counts(d, values)
    finite = np.isfinite(values)
    np.testing.assert_array_equal(below[finite], want_below[finite])
    np.testing.assert_array_equal(upto[finite], want_upto[finite])
    be.close()


def test_both_paths_agree_on_one_block(monkeypatch):
    d, values = block_with_specials(1, 40, 3000, 5, near=True)
    kept = NumpyBackend(threads=2).count_below(d, values)
    monkeypatch.setattr(backend_module, "SELECTED_SHARE_MAX", -1.0)    # force sorted rows
    by_sort = NumpyBackend(threads=2).count_below(d, values)
    finite = np.isfinite(values)
    for a, b in zip(kept, by_sort):
        np.testing.assert_array_equal(a[finite], b[finite])


def test_kept_path_sorts_only_the_kept_entries(monkeypatch):
    """Values near each row's start keep a few per cent of the block: no row is sorted."""
    d, values = block_with_specials(2, 30, 4000, 4, near=True)
    be = NumpyBackend(threads=2)
    monkeypatch.setattr(be, "sort_rows", lambda *_: pytest.fail("sorted whole rows"))
    below, _ = be.count_below(d, values)
    finite = np.isfinite(values)
    np.testing.assert_array_equal(below[finite], brute_counts(d, values)[0][finite])


def test_rows_without_finite_values_and_float64_blocks():
    be = NumpyBackend()
    d = np.arange(12, dtype=np.float32).reshape(3, 4)
    values = np.array([[np.inf], [2.5], [np.inf]], dtype=np.float32)
    below, upto = be.count_below(d, values)
    assert below[1, 0] == 0 and upto[1, 0] == 0           # row 1 is 4..7: nothing below 2.5
    d64 = d.astype(np.float64) * 1e-9
    values64 = np.array([[5e-9], [4e-9], [11e-9]])
    np.testing.assert_array_equal(be.count_below(d64, values64)[0], [[4], [0], [3]])


def test_torch_backend_counts_alike():
    torch = pytest.importorskip("torch")
    d, values = block_with_specials(3, 20, 700, 4, near=False)
    got = TorchBackend("cpu").count_below(torch.from_numpy(d), values)
    want = brute_counts(d, values)
    finite = np.isfinite(values)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a[finite], b[finite])


def test_order_keys_order_as_the_floats():
    x = np.array([-np.inf, -3.5, -1e-30, -0.0, 0.0, 1e-30, 2.0, np.inf], dtype=np.float32)
    keys = order_keys(x)
    assert np.all(np.diff(keys[[0, 1, 2, 3, 5, 6, 7]]) > 0)
    assert keys[3] == keys[4]                                # −0.0 == +0.0
    assert keys.min() >= 0 and keys.max() < 1 << 32


def test_signed_zeros_tie_on_the_kept_path():
    d = np.tile(np.arange(100, dtype=np.float32), (2, 1))
    d[:, :3] = [[-0.0, 0.0, -1.0], [0.0, -0.0, -0.0]]
    values = np.array([[0.0], [-0.0]], dtype=np.float32)
    below, upto = NumpyBackend().count_below(d, values)
    np.testing.assert_array_equal(below[:, 0], [1, 0])      # only −1.0 is below zero
    np.testing.assert_array_equal(upto[:, 0], [3, 3])


def test_a_thread_whose_rows_keep_too_much_sends_the_block_to_sorting():
    near_d, near_values = block_with_specials(4, 32, 5000, 5, near=True)
    far_d, far_values = block_with_specials(5, 32, 5000, 5, near=False)
    d, values = np.concatenate([near_d, far_d]), np.concatenate([near_values, far_values])
    be = NumpyBackend(threads=2)                     # rows 0–31 on one thread, 32–63 on the other
    sorted_blocks = []
    real_sort = be.sort_rows
    be.sort_rows = lambda block: sorted_blocks.append(block.shape) or real_sort(block)
    below, upto = be.count_below(d, values)
    assert sorted_blocks == [d.shape]
    want_below, want_upto = brute_counts(d, values)
    finite = np.isfinite(values)
    np.testing.assert_array_equal(below[finite], want_below[finite])
    np.testing.assert_array_equal(upto[finite], want_upto[finite])
    be.close()
