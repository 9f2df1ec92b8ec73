"""The ``objective:`` section of the 'mlm' family: one settings class per objective."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from negtrain.config.section import Section


class RetentionConfig(Section):
    """A knowledge-retention term on plain text, added to the unlikelihood loss with its own weight.

    The text is read whole, not streamed (unlike ``cue_masking.corpus.streaming``): every batch
    draws its retention lines at random from the whole file, which needs every line at hand. It
    is a side term of a few lines per batch, so a retention file is small next to a corpus."""

    text_files: list[str] = Field(description="Line-delimited UTF-8 text files (one passage a line).")
    weight: float = Field(gt=0, description="The term's weight: loss = γ·UL + (1−γ)·LL + weight·retention.")
    loss: Literal["mlm", "kl"] = Field(
        "mlm",
        description="'mlm': cross-entropy on randomly masked tokens; 'kl': KL(frozen start model ‖ model) at "
        "those masked positions.",
    )
    mlm_probability: float = Field(0.15, gt=0, le=1)
    batch_size: int = Field(8, gt=0, description="Retention lines drawn (with a seeded generator) per training batch.")


class UnlikelihoodConfig(Section):
    """Unlikelihood training on negated-LAMA probes (Hosseini et al. 2021).

    Per probe, with m the mask position and o the object token:
    UL = −log(1 − p(o | negated sentence)); LL = −log p(o | affirmative sentence) ('ce') or
    KL(p_start ‖ p_model) over the vocabulary at m of the affirmative sentence ('kl', the paper's code);
    loss = γ·UL + (1−γ)·LL, averaged over the batch, plus the optional retention term.
    """

    gamma: float = Field(0.5, ge=0, le=1, description="γ: the weight of the unlikelihood term.")
    likelihood: Literal["kl", "ce"] = Field("kl", description="The affirmative term: 'kl' to the frozen start model, or 'ce' on obj_label.")
    multi_token_objects: Literal["reject", "first_subtoken"] = Field(
        "reject",
        description="An obj_label that is several tokens: 'reject' (a DataError naming the probe) or "
        "'first_subtoken' (train and score on its first sub-token).",
    )
    retention: RetentionConfig | None = Field(None, description="Optional retention term on plain text.")


class CorpusConfig(Section):
    """The cue-masking corpus: text files and/or the text of the recipe's data.train benchmark splits."""

    text_files: list[str] = Field(default_factory=list, description="Line-delimited UTF-8 text files.")
    from_train_benchmarks: bool = Field(
        True, description="Add the sentences of every data.train benchmark split's input texts (deduplicated)."
    )
    keep: Literal["cue_sentences", "all"] = Field(
        "cue_sentences", description="'cue_sentences': keep only sentences with a negation cue (CueNB's corpus)."
    )
    held_out: int = Field(
        200,
        ge=0,
        description="Sentences held out (seeded draw) for the per-epoch MLM loss and cue recovery. With "
        "streaming: the cap on the eval set, which holds the first `held_out` held-out lines in file order.",
    )
    max_sentences: int | None = Field(None, gt=0, description="Cap on training sentences (seeded draw), for quick runs.")
    streaming: bool = Field(
        False,
        description="Read text_files as a stream, for a corpus larger than memory "
        "(negtrain/data/corpus_stream.py): one indexing pass (cached), then every epoch the lines are "
        "read in file order, shuffled inside windows of shuffle_buffer lines and tokenized batch by "
        "batch; a resumed run continues at the same line. Lines are held out by a hash of their text "
        "(held_out_rate), not by a seeded draw; duplicates are not removed. Needs text_files; "
        "from_train_benchmarks must be false and max_sentences unset (use trainer.max_steps or "
        "limit_train_batches for a short run).",
    )
    held_out_rate: float = Field(
        0.01,
        ge=0,
        lt=1,
        description="Streaming only: the share of lines held out, chosen by a keyed hash of the line's text, so the "
        "held-out set is the same for every seed, rank count and resume. Held-out lines are never trained on.",
    )
    shuffle_buffer: int = Field(
        10000,
        gt=0,
        description="Streaming only: training lines per shuffle window (each window is permuted, seeded by "
        "seed and epoch). A line moves at most one window; shuffle a topic-sorted corpus on disk first.",
    )

    @model_validator(mode="after")
    def _streaming(self) -> CorpusConfig:
        if not self.streaming:
            return self
        if not self.text_files:
            raise ValueError("streaming: true reads text_files; list at least one")
        if self.from_train_benchmarks:
            raise ValueError(
                "streaming: true reads text_files only; set from_train_benchmarks: false (or add the benchmark "
                "sentences to a text file)"
            )
        if self.max_sentences is not None:
            raise ValueError("streaming: true has no max_sentences; bound a short run with trainer.max_steps or limit_train_batches")
        return self


class CueMaskingConfig(Section):
    """Negation-cue masking (CueNB, Truong et al. 2022)."""

    cue_mask_prob: float = Field(1.0, ge=0, le=1, description="Probability of masking each negation-cue token.")
    cue_token: Literal["cue", "mask"] = Field(
        "cue",
        description="What a masked cue becomes: 'cue' = a new special token [CUE] (added, embeddings "
        "resized), 'mask' = the tokenizer's mask token.",
    )
    mlm_probability: float = Field(0.15, ge=0, le=1, description="Masking rate of the other (non-cue) tokens.")
    mask_replace_prob: float = Field(0.8, ge=0, le=1, description="Of the masked non-cue tokens: share replaced by the mask token.")
    random_replace_prob: float = Field(0.1, ge=0, le=1, description="... share replaced by a random token (the rest stay).")
    corpus: CorpusConfig = Field(default_factory=CorpusConfig)

    @model_validator(mode="after")
    def _shares(self) -> CueMaskingConfig:
        if self.mask_replace_prob + self.random_replace_prob > 1 + 1e-9:
            raise ValueError("mask_replace_prob + random_replace_prob must be at most 1")
        return self


class ObjectiveConfig(Section):
    """The training objective of the 'mlm' family: exactly one of the sections.

    Each section is named after its objective in ``negtrain/objectives/table.py``; adding an
    objective adds its settings class and one field here."""

    unlikelihood: UnlikelihoodConfig | None = None
    cue_masking: CueMaskingConfig | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> ObjectiveConfig:
        if len(self._set()) != 1:
            names = list(type(self).model_fields)
            raise ValueError(f"objective: set exactly one of {' or '.join(repr(n) for n in names)}")
        return self

    def _set(self) -> list[str]:
        return [name for name in type(self).model_fields if getattr(self, name) is not None]

    @property
    def name(self) -> str:
        """The chosen objective's name."""
        return self._set()[0]

    @property
    def settings(self) -> Section:
        """The chosen objective's settings section."""
        return getattr(self, self.name)
