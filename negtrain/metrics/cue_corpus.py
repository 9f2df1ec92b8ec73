"""What the held-out part of a cue-masking corpus reports, declared apart from the objective (which
needs torch): reading a run's records (``report``, ``compare``, ``view``) asks whether a metric is a
count without loading the model code."""

from __future__ import annotations

from negtrain.metrics.declared import count, score

#: The eval-set name of a cue-masking corpus's held-out sentences (not a registered benchmark).
CUE_CORPUS_NAME = "cue_corpus"

CUE_CORPUS_METRICS = (score("mlm_loss", lower_is_better=True), score("cue_recovery_accuracy"), count("n_masked"), count("n_cues"))
