"""The adaptation settings (issue 29): one declaration of the shared settings, each method's
own parameters from its registration, validation, defaults and labels."""
from __future__ import annotations

import pytest

from reidcli.adapt import AdaptConfig
from reidcli.adapt.config import adapt_method, method_label, read_settings
from reidcli.errors import ParameterError


def test_own_parameters_are_the_methods_and_resolve_to_its_defaults():
    cfg = AdaptConfig("temp", temp_k=5, seed=3)
    assert cfg.params == {"temp_k": 5} and cfg.seed == 3          # shared setting: a field
    done = cfg.resolved()
    assert done.params == {"temp_k": 5, "temp_gallery_sample": 30000, "temp_reg": 1e-4}
    assert (done.temp_k, done.batch_size, done.lr, done.bn_mode) == (5, 16, 3.5e-4, "running")
    record = done.as_params()
    assert record["method"] == "temp" and record["temp_k"] == 5 and "tau" not in record
    lite = AdaptConfig("dart3-lite", tau="50").resolved()
    assert (lite.method, lite.mode, lite.tau, lite.bn_mode) == ("dart3", "lite", 50.0, "batch")


@pytest.mark.parametrize("method,given,parameter,needle", [
    ("tent", {"tau": 5}, "tau", "not a setting of tent"),            # another method's
    ("norm", {"temp_k": 3}, "temp_k", "not a setting of norm"),
    ("dart3-lite", {"mode": "full"}, "mode", "contradicts dart3-lite"),
    ("temp", {"temp_reg": 1e31}, "temp_reg", "1e+30"),
    ("tent", {"tent_logits": "softmax"}, "tent_logits", "not one of classifier, features"),
])
def test_refused_values_name_the_parameter(method, given, parameter, needle):
    with pytest.raises(ParameterError) as refused:
        AdaptConfig(method, **given).resolved()
    assert refused.value.parameter == parameter and needle in str(refused.value)


def test_which_shared_settings_a_method_reads_follows_its_declaration():
    assert read_settings(adapt_method("none")) == ("feature", "trial", "query_cams")
    norm = set(read_settings(adapt_method("norm")))
    assert {"stats", "eps", "seed"} <= norm and not {"lr", "bn_mode"} & norm
    tent = set(read_settings(adapt_method("tent")))
    assert {"lr", "bn_mode", "workers"} <= tent and "stats" not in tent
    lite = set(read_settings(adapt_method("dart3-lite")))
    assert {"lr", "stats"} <= lite and not {"bn_mode", "workers"} & lite    # no model


def test_labels_come_from_the_registrations():
    assert method_label("dart3", {"mode": "full"}) == "DART3"
    assert method_label("dart3", {"mode": "lite"}) == "DART3 LITE"
    assert method_label("dart3_lite") == "DART3 LITE"                    # a spelling
    assert (method_label("norm"), method_label("none")) == ("camera Norm", "no adaptation")
    assert method_label("not-registered") == "not-registered"
