"""One module per ``negtrain`` subcommand; the table of them is in :mod:`negtrain.cli`."""
