"""Placeholders for stages that later releases fill in: a clear error, exit 2."""
from __future__ import annotations

from reidcli.errors import NotImplementedYetError

PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}


def not_yet(stage: str) -> None:
    raise NotImplementedYetError(f"`reid {stage}` is not implemented yet in this release",
                                 "see CHANGELOG.md for the stages available now")

