"""Evaluating a model: the report card and its plan, protocols, scoring through a served model,
scoring a predictions file, one benchmark across splits, and comparing two evaluations."""
