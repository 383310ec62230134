"""User-facing error hierarchy.

Every error a user can cause (bad option, missing file, malformed store, offline download)
is a :class:`ReidError`. The CLI prints ``error: <what> — <what to do>`` on one line and exits
with code 2; ``--debug`` shows the traceback. Anything else is a bug and keeps its traceback.
"""
from __future__ import annotations


class ReidError(Exception):
    """Base class of errors caused by the user's input or environment.

    Parameters
    ----------
    what:
        What is wrong, naming the file or option (``"store x.h5 has no conv maps"``).
    todo:
        What to do about it (``"re-run reid extract with --maps"``). Optional.
    """

    exit_code = 2

    def __init__(self, what: str, todo: str | None = None):
        self.what = what
        self.todo = todo
        super().__init__(self.message)

    @property
    def message(self) -> str:
        return f"{self.what} — {self.todo}" if self.todo else self.what


class UsageError(ReidError):
    """An option or argument value is invalid."""


class ParameterError(UsageError):
    """A method's parameter has a value outside its constraints.

    The message names the parameter (``XQDA parameter solver='qr' must be one of svd, eigh``);
    :meth:`for_flag` rewrites it with the command-line flag that set the parameter, which is
    what the CLI prints.
    """

    def __init__(self, owner: str, parameter: str, value, requirement: str,
                 todo: str | None = None):
        self.owner = owner
        self.parameter = parameter
        self.value = value
        self.requirement = requirement
        super().__init__(f"{owner} parameter {parameter}={value!r} {requirement}",
                         todo or "fix the value")

    def for_flag(self, flag: str) -> "UsageError":
        """The same error worded for the command line: ``--flag 'value' must be …``."""
        return UsageError(f"{flag} {self.value!r} {self.requirement}", self.todo)


class NotFittedError(UsageError):
    """A model was used before ``fit`` (scikit-learn's ``NotFittedError``)."""


class MethodRegistryError(ReidError):
    """A method module could not be imported or declared itself inconsistently."""


class InputFileError(ReidError):
    """An input file is missing, unreadable or malformed."""


class OutputExistsError(ReidError):
    """An output exists and ``--force`` was not given."""


class OutputError(UsageError):
    """An output cannot be written: disk full, folder not writable, a folder in the way, the
    output is one of the inputs, or another process is writing the same output."""


class StoreError(InputFileError):
    """A feature store is malformed, of the wrong format/schema, or lacks a needed group."""


class FittedModelError(InputFileError):
    """A fitted-model file is malformed or of an unknown method."""


class DatasetError(InputFileError):
    """A dataset folder does not have the documented layout."""


class OfflineError(ReidError):
    """A download was needed but the network is unavailable."""


class StoreLockedError(StoreError):
    """A feature store is locked by another process that is writing it."""


class TrialArrayMissingError(StoreError, KeyError):
    """A protocol trial of a store lacks an index array a command needs (e.g. ``train_idx``).

    Also a :class:`KeyError`, so code that probes a trial's arrays with ``try/except KeyError``
    keeps working."""

    def __str__(self) -> str:
        return self.message
