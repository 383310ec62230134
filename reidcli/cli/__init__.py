"""The ``reid`` command: one thin module per pipeline stage."""
