"""`reid adapt METHOD` — test-time adaptation (later release)."""
from reidcli.cli._stub import stub_group

app = stub_group("adapt", ("dart3", "dart3-lite", "norm", "tent", "temp"))
