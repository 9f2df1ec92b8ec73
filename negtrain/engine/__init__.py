"""The evaluation engine every language-model evaluation takes: an eval entry becomes typed
requests (:mod:`negtrain.engine.requests`), a backend answers them, and the answers become the
metric's updates (:mod:`negtrain.engine.entry_requests`). Report cards, paper protocols and the
per-epoch evaluation of ``fit``/``validate``/``test`` of the language-model families all go this
way; a backend is a row of :data:`negtrain.config.BACKENDS`."""
