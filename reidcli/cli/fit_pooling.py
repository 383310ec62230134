"""`reid fit-pooling METHOD` — C-DPCF and pooling baselines (later release)."""
from reidcli.cli._stub import stub_group

app = stub_group("fit-pooling", ("cdpcf", "dpcf", "avgp", "avgp-pad"))
