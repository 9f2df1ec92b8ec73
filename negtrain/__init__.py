"""negtrain: train and evaluate negation-robust language models."""

from negtrain import moved_modules

__version__ = "0.1.0"

# Old module paths (negtrain.moved_modules.MOVED) keep importing for users' code; this is the one
# thing importing negtrain does, and with an empty table it does nothing.
moved_modules.install()
