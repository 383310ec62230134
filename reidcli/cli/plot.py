"""`reid plot KIND` — figures (later release)."""
from reidcli.cli._stub import stub_group

app = stub_group("plot", ("cmc", "tsne", "weight-maps", "ranklist", "training", "distances"))
