"""negtrain: train and evaluate negation-robust language models.

Every name has one import path: the module that defines it (ARCHITECTURE.md has the table of
floors and packages). Importing the package imports nothing else.
"""

__version__ = "0.1.0"
