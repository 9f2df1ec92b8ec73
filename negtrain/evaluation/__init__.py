"""Evaluating a model: the report card and its plan, protocols, scoring through a served model,
scoring a predictions file, one benchmark across splits, and comparing two evaluations."""

from negtrain import package_getattr

# Old imports of negtrain.evaluation (once a module, now negtrain.evaluation.predictions) keep working.
__getattr__ = package_getattr(__name__, "negtrain.evaluation.predictions")
