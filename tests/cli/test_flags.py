"""The CLI's flag names of method parameters (reidcli.cli.flags; docs/cli.md)."""
from __future__ import annotations

from reidcli import registry
from reidcli.cli.flags import METHOD_FLAGS, parameter_flag


def test_every_renamed_flag_names_a_parameter_of_a_registered_method():
    for method, flags in METHOD_FLAGS.items():       # estimator stages only: no torch import
        info = registry.lookup(method, registry.ESTIMATOR_STAGES)
        assert info is not None, method
        names = {p.name for p in info.parameters}
        assert set(flags) <= names, (method, set(flags) - names)


def test_one_name_per_concept_and_the_rest_keep_their_own_name():
    assert parameter_flag("rpcca", "lam") == parameter_flag("klfda", "beta") == "--reg"
    assert parameter_flag("rpcca", "max_iter") == "--iterations"
    assert parameter_flag("rpcca", "beta") == "--beta"           # RPCCA's β is not a reg
    assert parameter_flag("cdpcf", "xqda_dims") == parameter_flag("xqda", "max_dims") == "--dim"
    assert parameter_flag("some-plugin", "num_maps") == "--num-maps"
