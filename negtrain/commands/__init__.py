"""One module per ``negtrain`` subcommand; the table of them is in :mod:`negtrain.cli`."""

from __future__ import annotations

import argparse

from negtrain.core.card_settings import MAX_BOOTSTRAP, MAX_SEED
from negtrain.core.errors import NegtrainError


def check_bootstrap(args: argparse.Namespace) -> None:
    """``--bootstrap`` and ``--bootstrap-seed`` (``evaluate`` and ``compare``) within the bounds a
    recipe's ``evaluation:`` section has: a billion resamples would run for hours, not fail."""
    bootstrap, seed = (0 if v is None else v for v in (args.bootstrap, args.bootstrap_seed))  # None: a default
    if not 0 <= bootstrap <= MAX_BOOTSTRAP or not 0 <= seed <= MAX_SEED:
        raise NegtrainError(f"--bootstrap must be between 0 and {MAX_BOOTSTRAP} and --bootstrap-seed between 0 and 2**32-1")
