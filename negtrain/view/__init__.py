"""``negtrain view``: a static results browser of run directories, report cards and protocol
outputs (see docs/viewer.md).

- :mod:`negtrain.view.sources`: what a PATH holds: its evaluations (a card's one, a run's one per
  epoch), each eval set with its record and predictions file;
- :mod:`negtrain.view.site_data`: the data of the site, scored by the same code as
  ``evaluate --predictions`` (so every count equals the card's), with the paired statistics of
  ``compare`` for A vs B;
- :mod:`negtrain.view.site`: the folder written (HTML, one script, one stylesheet, the data as
  small scripts loaded per benchmark) and serving it on 127.0.0.1.
"""
