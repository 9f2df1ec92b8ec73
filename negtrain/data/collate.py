"""Building padded batches from a flat :class:`EncodedSplit`: pad to the batch's longest example."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch.utils.data import Dataset

from negtrain.data.encoded import EncodedSplit

#: The label value a loss skips (PyTorch's and transformers' ``ignore_index``): padding of label
#: rows, and every token of a masked-LM batch that is not a prediction target.
IGNORE = -100


class BatchIndices(Dataset):
    """The dataset of a loader whose collator does the fetching: item ``i`` is ``i``.

    A whole batch passes through untouched (``__getitems__``), so the collator receives the
    sampler's :class:`~negtrain.data.sampler.SampledBatch` with its epoch, in a worker as well.
    """

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> int:
        return index

    def __getitems__(self, indices: Sequence[int]) -> Sequence[int]:
        return indices


class PadCollator:
    """Turns a list of example indices into model inputs, padded to the longest in the batch.

    ``extras`` are per-example tensors (targets, labels) that are indexed alongside. ``real``
    marks each row as a real example (False throughout a sampler's padding batch, which only keeps
    a DDP rank in step: the training loss and the run's counts leave it out).
    """

    def __init__(
        self,
        encoded: EncodedSplit,
        pad_id: int,
        extras: Mapping[str, torch.Tensor] | None = None,
        pad_left: bool = False,
    ) -> None:
        self.encoded = encoded
        self.pad_id = pad_id
        self.extras = dict(extras or {})
        self.pad_left = pad_left

    def __call__(self, indices: Sequence[int]) -> dict[str, torch.Tensor]:
        idx = torch.as_tensor(indices, dtype=torch.long)
        starts = self.encoded.offsets[idx]
        lengths = self.encoded.offsets[idx + 1] - starts
        width = int(lengths.max())
        ids = torch.full((len(idx), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(idx), width), dtype=torch.long)
        types = torch.zeros((len(idx), width), dtype=torch.long) if self.encoded.token_type_ids is not None else None
        for row, (s, n) in enumerate(zip(starts.tolist(), lengths.tolist(), strict=False)):
            cols = slice(width - n, width) if self.pad_left else slice(0, n)
            # Read, not sliced from the mapping (EncodedSplit.span): the run's memory stays flat in
            # the size of the training set.
            ids[row, cols] = self.encoded.span("input_ids", s, n)
            mask[row, cols] = 1
            if types is not None:
                types[row, cols] = self.encoded.span("token_type_ids", s, n)
        real = torch.full((len(idx),), not getattr(indices, "padding", False), dtype=torch.bool)
        batch = {"input_ids": ids, "attention_mask": mask, "index": idx, "real": real}
        if types is not None:
            batch["token_type_ids"] = types
        for name, values in self.extras.items():
            batch[name] = values[idx]
        return batch
