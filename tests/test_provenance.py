"""Input digests of the provenance record: hashed on a background thread
(:class:`reidcli.provenance.InputDigests`), the same record as hashed in line."""
from __future__ import annotations

import pytest

from reidcli.provenance import InputDigests, describe_input, make_provenance


def test_background_digests_equal_the_inline_ones_and_raise_the_same_errors(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"x" * 3_000_000)           # several hash chunks
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "f.txt").write_text("y")
    paths = [tmp_path / "a.bin", tmp_path / "folder"]
    digests = InputDigests(paths)
    assert digests.result() == [describe_input(p) for p in paths]
    record = make_provenance(command="reid eval", inputs=InputDigests(paths))
    assert record["inputs"] == make_provenance(command="reid eval", inputs=paths)["inputs"]
    missing = InputDigests([tmp_path / "gone.h5"])
    with pytest.raises(FileNotFoundError):
        missing.result()


def test_versions_are_what_importlib_metadata_and_platform_report():
    import importlib.metadata as md
    import platform

    from reidcli.provenance import VERSIONED_PACKAGES, versions

    got = versions()
    assert got["platform"] == platform.platform()
    for pkg in VERSIONED_PACKAGES:
        try:
            want = md.version(pkg)
        except md.PackageNotFoundError:
            assert pkg not in got
            continue
        assert got[pkg] == want, pkg
