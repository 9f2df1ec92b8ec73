"""negtrain: train and evaluate negation-robust language models."""

from negtrain import moved_modules

__version__ = "0.1.0"

# Old module paths (negtrain.moved_modules.MOVED) keep importing for users' code: the one thing
# importing negtrain does; nothing is imported until an old path is asked for.
moved_modules.install()
