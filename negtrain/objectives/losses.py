"""Loss terms on masked-LM logits, as pure functions of (batch, vocabulary) logits at the mask.

All take logits of shape (N, V) at one position per example and return a per-example tensor (N,);
the caller averages. They are written in log space so that p(obj) close to 0 or 1 stays finite.
"""

from __future__ import annotations

import torch


def unlikelihood(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """−log(1 − p(target)) per example (Hosseini et al. 2021, eq. 2).

    log(1 − p_t) = logsumexp(logits without t) − logsumexp(logits): exact, and finite unless p_t is
    exactly 1 in floating point.
    """
    logits = logits.float()
    others = logits.scatter(-1, target.unsqueeze(-1), float("-inf"))
    return torch.logsumexp(logits, dim=-1) - torch.logsumexp(others, dim=-1)


def likelihood(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """−log p(target) per example: cross-entropy on the object token."""
    return torch.nn.functional.cross_entropy(logits.float(), target, reduction="none")


def kl_to_reference(logits: torch.Tensor, reference_logits: torch.Tensor) -> torch.Tensor:
    """KL(p_reference ‖ p_model) over the vocabulary, per example; zero when the two agree."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    logq = torch.log_softmax(reference_logits.float(), dim=-1)
    return (logq.exp() * (logq - logp)).sum(-1)


def combine(gamma: float, ul: torch.Tensor, ll: torch.Tensor) -> torch.Tensor:
    """γ·UL + (1−γ)·LL, averaged over the batch. γ = 1 and γ = 0 give exactly one term."""
    if gamma == 1.0:
        return ul.mean()
    if gamma == 0.0:
        return ll.mean()
    return gamma * ul.mean() + (1.0 - gamma) * ll.mean()
