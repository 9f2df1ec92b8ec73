"""Prompt strategies as data: one YAML file per benchmark (``<benchmark>.yaml``), each strategy a
template, its fixed demonstrations verbatim from the paper, how it is answered and where it comes
from; the protocols (``protocols.yaml``) that run a paper's table; and the answer rules that read
a generated response (:mod:`negtrain.prompts.answers`)."""
