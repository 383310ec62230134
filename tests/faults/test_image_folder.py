"""Fault cases of issue 31: `reid extract --images/--query-images/--images-list/--pattern`,
`reid eval` on unlabelled stores and `--search`, and datasets registered by a
`REIDCLI_PLUGINS` module. Each case is one clear line (exit 2) or now works; one test (or
parametrized case) per reported case."""
from __future__ import annotations

import sys

import pytest

from tests.faults.helpers import assert_one_line_error_in_process, reid_in_process
from tests.features.test_image_folder import (_jpeg, make_market_folder,
                                              make_unlabelled_folder)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """(market folder, unlabelled gallery, unlabelled queries, hand-crafted unlabelled
    store); read-only."""
    root = tmp_path_factory.mktemp("image_folder_faults")
    market = make_market_folder(root)
    gallery, query = make_unlabelled_folder(root)
    return market, gallery, query, root


def _extract_unlabelled(folders, tmp_path, capsys):
    _, gallery, query, _ = folders
    store = tmp_path / "u.h5"
    code, _, err = reid_in_process("extract", "--images", gallery, "--query-images", query,
                                   "--out", store, capsys=capsys)
    assert code == 0, err
    return store


# (case, arguments after `reid extract --out OUT`, words the one-line error must hold)
EXTRACT_CASES = [
    # no --dataset and no images: was typer's "Missing option '--dataset'"
    ("nothing", [], ["no images to extract", "--images"]),
    # --dataset and --images together: which one is read?
    ("both", ["--dataset", "market", "--images", "{market}"], ["--dataset", "--images"]),
    # --images that does not exist
    ("missing dir", ["--images", "{root}/nope"], ["--images", "does not exist"]),
    # an empty folder
    ("empty", ["--images", "{root}/empty"], ["no images"]),
    # Market names parsed with a pattern that misses a file: names the file
    ("unmatched", ["--images", "{gallery}", "--pattern", "market"],
     ["does not match", "--skip-unmatched"]),
    # a pattern that is no regex / has no pid group
    ("bad regex", ["--images", "{market}", "--pattern", "(?P<pid>"], ["--pattern",
                                                                       "regular expression"]),
    ("no pid group", ["--images", "{market}", "--pattern", r"(\d+)_c"], ["'pid'"]),
    # --query-images alone, or on top of a Market folder that has query/
    ("query alone", ["--query-images", "{query}"], ["--query-images needs --images"]),
    ("query twice", ["--images", "{market}", "--query-images", "{query}"],
     ["query/", "--query-images"]),
    # a query folder inside the gallery folder: the same file in both roles
    ("query in gallery", ["--images", "{gallery}", "--query-images", "{gallery}/camA"],
     ["both under", "--query-images"]),
    # dataset-only flags with --images were silently ignored
    ("root with images", ["--images", "{gallery}", "--root", "{root}"],
     ["--root applies to --dataset only"]),
    ("pattern with dataset", ["--dataset", "market", "--pattern", "market"],
     ["--pattern applies to --images"]),
    ("skip without pattern", ["--images", "{gallery}", "--skip-unmatched"],
     ["--skip-unmatched", "--pattern"]),
    # --images-list: missing file, unknown column, bad pid, missing image, twice listed
    ("list missing", ["--images-list", "{root}/none.csv"], ["--images-list", "does not exist"]),
    ("list column", ["--images-list", "{root}/badcol.csv"], ["unknown column", "person"]),
    ("list pid", ["--images-list", "{root}/badpid.csv"], ["line 2", "pid 'x'"]),
    ("list image", ["--images-list", "{root}/gone.csv"], ["line 2", "does not exist"]),
    ("list twice", ["--images-list", "{root}/twice.csv"], ["listed twice", "line 2"]),
]


@pytest.mark.parametrize("case,args,needles", EXTRACT_CASES, ids=[c[0] for c in EXTRACT_CASES])
def test_extract_images_faults_are_one_line(case, args, needles, folders, tmp_path, capsys):
    market, gallery, query, root = folders
    (root / "empty").mkdir(exist_ok=True)
    first = next(gallery.rglob("*.png"))
    for name, text in (("badcol.csv", "path,person\nx.jpg,1\n"),
                       ("badpid.csv", f"path,pid\n{first},x\n"),
                       ("gone.csv", "path\nnowhere.jpg\n"),
                       ("twice.csv", f"path\n{first}\n{first}\n")):
        (root / name).write_text(text)
    names = {"market": market, "gallery": gallery, "query": query, "root": root}
    args = [a.format(**names) for a in args]
    if case == "unmatched":
        _jpeg(tmp_path / "g" / "holiday.jpg", (1, 2, 3), 0)
        args[1] = str(tmp_path / "g")
    out = tmp_path / "out.h5"
    result = reid_in_process("extract", "--out", out, *args, capsys=capsys)
    assert_one_line_error_in_process(result, *needles)
    assert not out.exists()


def test_skip_unmatched_extracts_the_matching_files(folders, tmp_path, capsys):
    # --skip-unmatched: files the pattern misses are left out and counted, not an error
    market = folders[0]
    _jpeg(tmp_path / "m" / "query" / "holiday.jpg", (1, 2, 3), 0)
    for sub in ("query", "bounding_box_test"):
        for f in (market / sub).iterdir():
            (tmp_path / "m" / sub).mkdir(parents=True, exist_ok=True)
            (tmp_path / "m" / sub / f.name).write_bytes(f.read_bytes())
    code, _, err = reid_in_process("extract", "--images", tmp_path / "m", "--pattern",
                                   "market", "--skip-unmatched", "--out", tmp_path / "s.h5",
                                   capsys=capsys)
    assert code == 0, err
    assert "1 file(s) not matching the pattern skipped" in err and "3 query" in err


def test_plain_eval_on_unlabelled_store_points_to_search(folders, tmp_path, capsys):
    # was: "none of its 2 queries has a match in the gallery — check the protocol"
    store = _extract_unlabelled(folders, tmp_path, capsys)
    result = reid_in_process("eval", "--store", store, capsys=capsys)
    assert_one_line_error_in_process(result, "unlabelled (pid -1)", "--search 10")


@pytest.mark.parametrize("extra,needles", [
    (["--rerank"], ["--rerank does not apply to --search"]),        # silently ignored else
    (["--protocol", "market"], ["--protocol does not apply"]),
    (["--search", "0"], ["--search", "0"]),                          # K must be ≥ 1
])
def test_search_option_faults(extra, needles, folders, tmp_path, capsys):
    store = _extract_unlabelled(folders, tmp_path, capsys)
    args = ["eval", "--store", store, *(["--search", "3"] if "--search" not in extra else []),
            *extra]
    assert_one_line_error_in_process(reid_in_process(*args, capsys=capsys), *needles)


def test_search_json_is_written_atomically_and_never_over_an_existing_file(folders, tmp_path,
                                                                          capsys):
    # --json without --force over an existing file: refused, file untouched
    store = _extract_unlabelled(folders, tmp_path, capsys)
    out = tmp_path / "top.json"
    out.write_text("mine")
    result = reid_in_process("eval", "--store", store, "--search", "2", "--json", out,
                             capsys=capsys)
    assert_one_line_error_in_process(result, "--json", "--force")
    assert out.read_text() == "mine"
    code, _, err = reid_in_process("eval", "--store", store, "--search", "2", "--json", out,
                                   "--force", capsys=capsys)
    assert code == 0, err
    import json
    assert len(json.loads(out.read_text())["queries"]) == 2


PLUGIN = '''
from reidcli.data.records import DatasetSplit, normalize_frame
from reidcli.data.registry import DatasetInfo, register
from reidcli.features.image_folder import image_records

def load(root=None, trial=0):
    frame, _ = image_records({folder!r}, pattern="market")
    frame["dataset"] = "plugset"
    frame["domain"] = "plugset"
    parts = {{s: normalize_frame(frame[frame["split"] == s]) for s in ("query", "gallery")}}
    return DatasetSplit(name="plugset", train=normalize_frame(frame.iloc[:0]),
                        query=parts["query"], gallery=parts["gallery"])

register(DatasetInfo(name="plugset", title="A plugin's dataset", aliases=("PlugAlias",)), load)
'''


@pytest.fixture
def plugin(folders, tmp_path, monkeypatch):
    """A REIDCLI_PLUGINS module (in tmp_path) registering the dataset ``plugset``; removed
    from the registries afterwards."""
    from reidcli import registry
    from reidcli.data import registry as data_registry

    (tmp_path / "h12_plugin_ds.py").write_text(PLUGIN.format(folder=str(folders[0])))
    (tmp_path / "h12_plugin_broken.py").write_text("raise RuntimeError('plugin bug')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "h12_plugin_ds"
    for name in ("h12_plugin_ds", "h12_plugin_broken"):
        sys.modules.pop(name, None)
        registry._DISCOVERED.discard(name)
    data_registry._REGISTRY.pop("plugset", None)
    for alias in ("plugset", "plugalias"):
        data_registry._ALIASES.pop(alias, None)
    data_registry._plugins_seen = None


def test_plugin_dataset_is_known_to_extract_and_data_list(plugin, monkeypatch, tmp_path,
                                                          capsys):
    # was: "unknown dataset 'plugset'" although REIDCLI_PLUGINS named the module
    monkeypatch.setenv("REIDCLI_PLUGINS", plugin)
    code, out, err = reid_in_process("data", "list", capsys=capsys)
    assert code == 0, err
    assert "plugset" in out
    code, _, err = reid_in_process("extract", "--dataset", "plugalias", "--out",
                                   tmp_path / "p.h5", capsys=capsys)    # alias, any case
    assert code == 0, err
    from reidcli.store.reader import open_store
    with open_store(tmp_path / "p.h5") as st:
        assert st.dataset == "plugset" and st.num_rows == 11


def test_plugin_that_fails_to_import_is_one_line(plugin, monkeypatch, tmp_path, capsys):
    # a broken plugin module: one line naming it, not a traceback
    monkeypatch.setenv("REIDCLI_PLUGINS", "h12_plugin_broken")
    result = reid_in_process("extract", "--dataset", "market", "--out", tmp_path / "p.h5",
                             capsys=capsys)
    assert_one_line_error_in_process(result, "module h12_plugin_broken failed to import",
                                     "RuntimeError")
