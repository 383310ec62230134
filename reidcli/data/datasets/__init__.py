"""One module per dataset loader; each registers itself with :mod:`reidcli.data.registry`."""

#: the datasets these modules register: every name and alias (lower-cased) → "module:attr" (the
#: loader), so a lookup imports one loader module (:class:`reidcli.registry.Registry`;
#: tests/data/test_registry.py checks this table)
DATASETS = {
    "3dpes": "reidcli.data.datasets.threedpes:load_3dpes",
    "threedpes": "reidcli.data.datasets.threedpes:load_3dpes",
    "caviar": "reidcli.data.datasets.caviar4reid:load_caviar4reid",
    "caviar4reid": "reidcli.data.datasets.caviar4reid:load_caviar4reid",
    "cuhk01": "reidcli.data.datasets.cuhk01:load_cuhk01",
    "cuhk02": "reidcli.data.datasets.cuhk02:load_cuhk02",
    "cuhk03": "reidcli.data.datasets.cuhk03:load_cuhk03",
    "cuhk-sysu": "reidcli.data.datasets.cuhk_sysu:load_cuhk_sysu",
    "cuhk_sysu": "reidcli.data.datasets.cuhk_sysu:load_cuhk_sysu",
    "cuhksysu": "reidcli.data.datasets.cuhk_sysu:load_cuhk_sysu",
    "duke": "reidcli.data.datasets.dukemtmc:load_dukemtmc",
    "dukemtmc": "reidcli.data.datasets.dukemtmc:load_dukemtmc",
    "dukemtmc-reid": "reidcli.data.datasets.dukemtmc:load_dukemtmc",
    "dukemtmcreid": "reidcli.data.datasets.dukemtmc:load_dukemtmc",
    "grid": "reidcli.data.datasets.grid:load_grid",
    "ilids": "reidcli.data.datasets.ilids:load_ilids",
    "qmul_ilids": "reidcli.data.datasets.ilids:load_ilids",
    "market": "reidcli.data.datasets.market1501:load_market1501",
    "market1501": "reidcli.data.datasets.market1501:load_market1501",
    "msmt17": "reidcli.data.datasets.msmt17:load_msmt17",
    "opereid": "reidcli.data.datasets.opereid:load_opereid",
    "operid": "reidcli.data.datasets.opereid:load_opereid",
    "person30k": "reidcli.data.datasets.person30k:load_person30k",
    "prid": "reidcli.data.datasets.prid2011:load_prid2011",
    "prid2011": "reidcli.data.datasets.prid2011:load_prid2011",
    "prid450s": "reidcli.data.datasets.prid450s:load_prid450s",
    "regdb": "reidcli.data.datasets.regdb:load_regdb",
    "synth": "reidcli.data.datasets.synthetic:load_synthetic",
    "synthetic": "reidcli.data.datasets.synthetic:load_synthetic",
    "sysu": "reidcli.data.datasets.sysu_mm01:load_sysu_mm01",
    "sysu_mm01": "reidcli.data.datasets.sysu_mm01:load_sysu_mm01",
    "viper": "reidcli.data.datasets.viper:load_viper",
}
