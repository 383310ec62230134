"""One module per dataset loader; each registers itself with :mod:`reidcli.data.registry`."""
