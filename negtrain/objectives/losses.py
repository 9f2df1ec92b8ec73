"""Loss terms on masked-LM logits, as pure functions of (batch, vocabulary) logits at the mask.

All take logits of shape (N, V) at one position per example and return a per-example tensor (N,);
the caller averages. They are written in log space so that p(obj) close to 0 or 1 stays finite.
"""

from __future__ import annotations

import math

import torch


def _full(logits: torch.Tensor) -> torch.Tensor:
    """At least float32 (bf16/fp16 logits under autocast are upcast; float64 stays float64)."""
    return logits if logits.dtype in (torch.float32, torch.float64) else logits.float()


def unlikelihood(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """−log(1 − p(target)) per example (Hosseini et al. 2021, eq. 2).

    Computed from log p with the stable log(1 − e^x): log(−expm1(x)) for p > 1/2 and
    log1p(−e^x) otherwise, so it is accurate for p near 0 and finite for p near 1.
    """
    logp = torch.log_softmax(_full(logits), dim=-1).gather(-1, target.unsqueeze(-1)).squeeze(-1)
    logp = logp.clamp(max=-torch.finfo(logp.dtype).tiny)  # p < 1 strictly
    near_one = logp > -math.log(2.0)
    return -torch.where(near_one, torch.log(-torch.expm1(logp)), torch.log1p(-torch.exp(logp)))


def likelihood(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """−log p(target) per example: cross-entropy on the object token."""
    return torch.nn.functional.cross_entropy(_full(logits), target, reduction="none")


def kl_to_reference(logits: torch.Tensor, reference_logits: torch.Tensor) -> torch.Tensor:
    """KL(p_reference ‖ p_model) over the vocabulary, per example; zero when the two agree."""
    logp = torch.log_softmax(_full(logits), dim=-1)
    logq = torch.log_softmax(_full(reference_logits), dim=-1)
    return (logq.exp() * (logq - logp)).sum(-1)


def combine(gamma: float, ul: torch.Tensor, ll: torch.Tensor) -> torch.Tensor:
    """γ·UL + (1−γ)·LL, averaged over the batch. γ = 1 and γ = 0 give exactly one term."""
    if gamma == 1.0:
        return ul.mean()
    if gamma == 0.0:
        return ll.mean()
    return gamma * ul.mean() + (1.0 - gamma) * ll.mean()
