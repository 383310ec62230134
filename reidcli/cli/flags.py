"""The flags of the generated method commands (docs/cli.md: one name per concept).

A parameter's flag is ``--`` + its name with ``-`` for ``_``, except where a concept has one
name across methods: every regulariser is ``--reg``, every output dimension ``--dim``. The
library knows only parameter names; this table is the CLI's (a new method with such a
parameter adds its line here, or keeps ``--<name>``)."""
from __future__ import annotations

#: method → {parameter: flag} where the flag is not ``--<parameter>``
METHOD_FLAGS: dict[str, dict[str, str]] = {
    "xqda": {"lam": "--reg", "max_dims": "--dim"},
    "warca": {"lam": "--reg"},
    "rpcca": {"lam": "--reg", "max_iter": "--iterations"},
    "lfda": {"beta": "--reg"},
    "klfda": {"beta": "--reg"},
    **{pooling: {"xqda_lambda": "--reg", "xqda_dims": "--dim"}
       for pooling in ("cdpcf", "dpcf", "avgp", "avgp-pad")},
}


def parameter_flag(method: str, parameter: str) -> str:
    """The flag that sets ``parameter`` on ``method``'s command (``lam`` of xqda → ``--reg``)."""
    return METHOD_FLAGS.get(method, {}).get(parameter) or "--" + parameter.replace("_", "-")


__all__ = ["METHOD_FLAGS", "parameter_flag"]
