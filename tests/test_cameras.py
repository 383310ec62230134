"""A camera is (domain, camid): the shared numbering and its lookups (reidcli.cameras)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from reidcli.cameras import (CameraTable, camera_codes, camera_index, camera_key_name,
                             record_cameras, split_camera_key)
from reidcli.errors import UsageError


def test_one_domain_codes_are_the_ranks_of_the_camids():
    camids = np.array([7, 2, 11, 2, 7, 0])
    codes, table = camera_codes(None, camids)
    expected_cams, expected_codes = np.unique(camids, return_inverse=True)
    np.testing.assert_array_equal(codes, expected_codes)
    np.testing.assert_array_equal(table.cam_ids, expected_cams)
    assert not table.several_domains
    assert [table.key(c) for c in range(3)] == ["0", "2", "7"]
    assert table.name(3) == "cam 11"


def test_pairs_are_sorted_by_domain_then_camid():
    domains = np.array(["syn_b", "syn_a", "syn_b", "syn_a", "syn_a", "syn_b"], dtype=object)
    camids = np.array([0, 10, 0, 2, 0, 3])
    codes, table = camera_codes(domains, camids)
    assert table.pairs() == [("syn_a", 0), ("syn_a", 2), ("syn_a", 10), ("syn_b", 0),
                             ("syn_b", 3)]
    assert table.pairs()[codes[0]] == ("syn_b", 0)
    assert table.pairs()[codes[1]] == ("syn_a", 10)      # numeric camid order, not text
    assert codes[0] == codes[2] and codes[0] != codes[4]  # camid 0 of two domains: 2 cameras
    assert table.several_domains and table.key(2) == "syn_a/10"
    assert table.name(3) == "syn_b/cam 0" and table.label(3) == "camera syn_b/0"
    np.testing.assert_array_equal(table.codes_with_camids([0]), [0, 3])


def test_record_cameras_reads_domain_and_camid_of_chosen_rows():
    records = pd.DataFrame({"camid": [0, 1, 0, 1], "domain": ["a", "a", "b", "b"]})
    codes, table = record_cameras(records)
    assert table.num_cameras == 4 and len(set(codes.tolist())) == 4
    codes, table = record_cameras(records, np.array([2, 0]))
    assert table.pairs() == [("a", 0), ("b", 0)] and codes.tolist() == [1, 0]
    codes, table = record_cameras(records.drop(columns="domain"))
    assert table.num_cameras == 2 and codes.tolist() == [0, 1, 0, 1]


def test_lookup_by_pair_with_several_domains_and_by_camid_with_one():
    several = CameraTable.from_lists([1, 0, 0], ["b", "a", "b"])
    assert several.pairs() == [("a", 0), ("b", 0), ("b", 1)]
    np.testing.assert_array_equal(several.lookup(["b", "a", "b"], [1, 0, 0], "eval"), [2, 0, 1])
    with pytest.raises(UsageError, match=r"camera a/1 was not seen in training "
                                         r"\(fitted cameras: a/0, b/0, b/1\)"):
        several.lookup(["a"], [1], "eval")
    with pytest.raises(UsageError, match="without a domain"):
        several.lookup(None, [0], "eval")
    one = CameraTable.from_lists([3, 5], ["market", "market"])
    np.testing.assert_array_equal(one.lookup(["duke", "duke"], [5, 3], "eval"), [1, 0])
    with pytest.raises(UsageError, match="camera 4 was not seen"):
        one.lookup(None, [4], "eval")


def test_a_table_without_domains_is_one_domain():
    legacy = CameraTable.from_lists([2, 0])
    assert legacy.pairs() == [("", 0), ("", 2)] and not legacy.several_domains


def test_camera_index_and_report_keys():
    codes, count = camera_index(np.array([5, 5, 1, 9]))
    assert codes.tolist() == [1, 1, 0, 2] and count == 3
    assert split_camera_key("syn_a/12") == ("syn_a", 12) and split_camera_key("3") == ("", 3)
    assert camera_key_name("3") == "cam 3" and camera_key_name("syn_a/12") == "syn_a/cam 12"
    assert sorted(["b/0", "a/10", "a/2"], key=split_camera_key) == ["a/2", "a/10", "b/0"]
