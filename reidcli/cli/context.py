"""What the running ``reid`` invocation was called with: its arguments (for provenance
records) and the flags that set library parameters (for error messages)."""
from __future__ import annotations

import sys

_ARGV: list[str] | None = None
_FLAGS: dict[str, str] = {}


def set_invocation(argv: list[str]) -> None:
    global _ARGV
    _ARGV = list(argv)


def invoked_command() -> list[str]:
    """``["reid", *args]`` of the current invocation (``sys.argv`` outside :func:`main`)."""
    args = _ARGV if _ARGV is not None else sys.argv[1:]
    return ["reid", *args]


def set_flag_names(flags: dict[str, str]) -> None:
    """Record which flag sets which library parameter in the running command (needed where
    the flag is not ``--`` + the parameter's name with ``-`` for ``_``). A generated method
    command records all its parameters, those without an option of their own as
    ``--param name`` (:func:`reidcli.naming.param` then writes ``--param name=value``)."""
    _FLAGS.update(flags)


def reset_flag_names() -> None:
    """Forget the previous invocation's flags (called at the start of each invocation)."""
    _FLAGS.clear()


def flag_for(parameter: str) -> str:
    """The flag of the running command that sets ``parameter`` (``--reg`` for XQDA's
    ``lam``; ``--param normalize`` where the command sets it only through ``--param``).

    A name that already is a flag or an argument (``--out``, ``OUT``), or a phrase rather than
    a parameter name, is returned as is; one-letter parameters (the papers' ``K``, ``E``,
    ``G``) are flags like any other."""
    if parameter in _FLAGS:
        return _FLAGS[parameter]
    if parameter.startswith("-") or " " in parameter or (parameter.isupper()
                                                          and len(parameter) > 1):
        return parameter
    return "--" + parameter.replace("_", "-")


def required_option(value, *, metavar: str, flag: str, example: str = ""):
    """``value`` of a required input/output option, else a UsageError naming ``flag``
    (typer's own message would not say what to give)."""
    from reidcli.errors import UsageError

    if value is None:
        raise UsageError(f"missing option {flag}", f"give {flag} {metavar}"
                         + (f", e.g. {example}" if example else ""))
    return value
