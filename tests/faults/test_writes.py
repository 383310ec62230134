"""Output writing faults: full disk, a folder at a file path, concurrent writers, output ==
input, read-only folders. Each failure is one line and leaves nothing behind."""
from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from reidcli.errors import OutputError, UsageError
from reidcli.io import check_output, write_json_atomic
from tests.faults.helpers import _env, assert_one_line_error, files, reid


def _npz(path, n=5000, d=256):
    np.savez(path, features=np.random.default_rng(0).random((n, d), dtype=np.float32),
             pid=np.arange(n) % 100, camid=np.arange(n) % 4,
             split=np.array(["gallery", "query"] * (n // 2)))
    return path


class _Result:
    def __init__(self, code, out, err):
        self.returncode, self.stdout, self.stderr = code, out, err


def _main(capsys, *args):
    from reidcli.cli.main import main
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return _Result(code, out, err)


@pytest.mark.parametrize("where", ["fsync", "h5flush"])
def test_disk_full_injected_is_one_line_and_leaves_nothing(tmp_path, monkeypatch, capsys, where):
    npz = _npz(tmp_path / "in.npz", n=200, d=16)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    if where == "fsync":
        def full(fd):
            raise OSError(errno.ENOSPC, "No space left on device")
        monkeypatch.setattr(os, "fsync", full)
    else:
        import h5py
        def full(self):
            raise OSError(errno.ENOSPC, "No space left on device")
        monkeypatch.setattr(h5py.File, "flush", full)
    res = _main(capsys, "store", "import", "--out", out_dir / "s.h5", "--npz", npz)
    assert_one_line_error(res, "disk full")
    assert "wrote" not in res.stdout
    assert files(out_dir) == set()


def test_disk_full_json_report(tmp_path, monkeypatch):
    def full(fd):
        raise OSError(errno.EDQUOT, "Disk quota exceeded")
    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OutputError, match="disk full"):
        write_json_atomic(tmp_path / "r.json", {"a": 1})
    assert files(tmp_path) == set()


@pytest.fixture
def tiny_tmpfs(tmp_path):
    mnt = tmp_path / "tfs"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)],
                      capture_output=True).returncode != 0:
        pytest.skip("mounting a tmpfs is not allowed here")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_disk_full_real_tmpfs_store_import(tmp_path, tiny_tmpfs):
    """5,000×256 rows (5 MB) into a 2 MB file system: before, "wrote" + a complete-looking
    store of zeros; now one line and nothing at the path."""
    npz = _npz(tmp_path / "in.npz")
    res = reid("store", "import", "--out", tiny_tmpfs / "s.h5", "--npz", npz, timeout=120)
    assert_one_line_error(res, "disk full")
    assert "wrote" not in res.stdout
    assert files(tiny_tmpfs) == set()


def test_force_never_deletes_a_folder(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    (results / "draft.tex").write_text("paper")
    with pytest.raises(UsageError, match="is a folder"):
        write_json_atomic(results, {"mAP": 1.0}, force=True)
    npz = _npz(tmp_path / "in.npz", n=20, d=4)
    res = reid("store", "import", "--out", results, "--npz", npz, "--force")
    assert_one_line_error(res, "is a folder")
    assert (results / "draft.tex").read_text() == "paper"


def test_second_concurrent_writer_is_refused(tmp_path):
    out = tmp_path / "s.h5"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from reidcli.io import atomic_output
        with atomic_output({str(out)!r}, force=True) as tmp:
            tmp.write_text("first")
            print("writing", flush=True)
            sys.stdin.readline()
        """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=_env(None))
    try:
        assert holder.stdout.readline().strip() == "writing"
        npz = _npz(tmp_path / "in.npz", n=20, d=4)
        res = reid("store", "import", "--out", out, "--npz", npz, "--force")
        assert_one_line_error(res, "being written by another process")
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.wait(timeout=120) == 0
    finally:
        if holder.poll() is None:
            holder.kill()
    assert out.read_text() == "first"
    assert files(tmp_path) == {"s.h5", "in.npz"}          # no .partial, no .lock


def test_output_that_is_an_input_is_refused_even_with_force(tmp_path):
    src = tmp_path / "in.h5"
    src.write_bytes(b"store")
    link = tmp_path / "link.h5"
    link.symlink_to(src)
    hard = tmp_path / "hard.h5"
    os.link(src, hard)
    for out in (src, link, hard, tmp_path / "." / "in.h5"):
        with pytest.raises(UsageError, match="is the input"):
            check_output(out, force=True, inputs=[src])
    assert src.read_bytes() == b"store"


def test_adapted_store_over_its_input_is_refused(tmp_path):
    from reidcli.store.adapted import write_adapted_store
    src = tmp_path / "in.h5"
    src.write_bytes(b"store")
    with pytest.raises(UsageError, match="is the input"):
        write_adapted_store(src, src, method="none", feature="f", trial=0,
                            query_rows=np.arange(1), query_values=np.zeros((1, 1)),
                            gallery_rows=np.arange(1), gallery_values=np.zeros((1, 1)),
                            adapt_arrays={}, adapt_attrs={}, provenance={}, force=True)
    assert src.read_bytes() == b"store"


def test_read_only_folder_is_refused_up_front(tmp_path, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **k: False if str(p) == str(ro)
                        else real(p, mode, **k))
    with pytest.raises(OutputError, match="not writable"):
        check_output(ro / "r.json")


def test_read_only_mount_is_refused_up_front(tmp_path):
    npz = _npz(tmp_path / "in.npz", n=20, d=4)
    ro = tmp_path / "ro"
    ro.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(ro)],
                      capture_output=True).returncode != 0:
        pytest.skip("mounting a tmpfs is not allowed here")
    try:
        res = reid("store", "import", "--out", ro / "s.h5", "--npz", npz)
        assert_one_line_error(res, "not writable")
    finally:
        subprocess.run(["umount", "-l", str(ro)], capture_output=True)


def test_synth_under_a_file_is_one_line(capsys, tmp_path):
    """A data root whose path runs through a file: one line naming --out, nothing written."""
    (tmp_path / "afile").write_text("not a folder")
    res = _main(capsys, "data", "synth", "--preset", "tiny", "--out", tmp_path / "afile" / "d")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    line, = [l for l in res.stderr.splitlines() if l.startswith("error: ")]
    assert "a file is in its path" in line and "--out" in line
    assert (tmp_path / "afile").read_text() == "not a folder"
