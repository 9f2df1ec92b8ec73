"""negtrain: train and evaluate negation-robust language models."""

__version__ = "0.1.0"
