"""The ``data:`` section: training sources, how they are mixed, and the benchmarks evaluated."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from negtrain.config.section import MAX_EPOCH_EXAMPLES, MAX_SOURCE_WEIGHT, MAX_TEMPERATURE, MIN_TEMPERATURE, Section


_PROMPT_HELP = (
    "seq2seq / causal_lm: this benchmark's input template (its input names as placeholders); "
    "unset: model.prompt, else the benchmark's default for the family. The resolved value is "
    "written to the run's recipe.yaml."
)
_VERBALIZER_HELP = (
    "seq2seq / causal_lm on a label benchmark: label -> the text that stands for it (every label, "
    "distinct texts), e.g. {entailment: yes, not_entailment: no}; unset: the benchmark's default. "
    "Evaluation scores each label by its text's log-likelihood; training targets the gold label's text."
)


class SourceConfig(Section):
    benchmark: str = Field(description="A registered benchmark name (see `negtrain evaluate --list`).")
    split: str = Field(description="One of the benchmark's splits.")
    prompt: str | None = Field(None, description=_PROMPT_HELP)
    verbalizer: dict[str, str] | None = Field(None, description=_VERBALIZER_HELP)
    select: list[dict[str, list[str | int | bool] | str | int | bool]] | None = Field(
        None,
        description="Train on part of the split: a list of clauses, each {filter: value or [values]}; a row is kept "
        "when it matches any clause (every filter of the clause). The filters are the benchmark's (tinad: polarity "
        "affirmation/negation, negation_type verbal/non_verbal/analytic/synthetic/clausal/subclausal, pattern 1-11, "
        "distractor true/false), e.g. [{polarity: affirmation}, {negation_type: synthetic}] for TINAD's Table 7 row "
        "'Affirmations + synthetic'. The run's training line names the source with its selection. Unset: every row.",
    )
    weight: float = Field(
        1.0,
        gt=0,
        le=MAX_SOURCE_WEIGHT,
        description="Relative sampling weight w_i: the source's share of an epoch is proportional to "
        "w_i * n_i (proportional mixing) or w_i * n_i^(1/T) (temperature mixing); see data.mix. "
        "At most 1e6 (only ratios of weights matter).",
    )


class MixConfig(Section):
    """How the training sources are mixed into epochs.

    Source i has n_i examples and weight w_i. Its share of an epoch is

    - ``sampling: proportional``: p_i = w_i * n_i / sum_j w_j * n_j;
    - ``sampling: temperature``:  p_i = w_i * n_i^(1/T) / sum_j w_j * n_j^(1/T) (T = 1 is
      proportional; a larger T flattens the mix towards small sources; T -> inf is uniform).

    An epoch has E examples, ``epoch``:

    - ``all`` (default): E = sum_i n_i, the size of all sources together;
    - ``largest``: one pass over the largest source: it contributes exactly its n_max examples,
      each once, and E = n_max / p_max;
    - an integer N: E = N examples.

    Source i contributes c_i = p_i * E examples, rounded so the counts sum to E (largest
    remainders). A source with c_i > n_i is oversampled: it contributes floor(c_i / n_i) full passes
    plus c_i mod n_i distinct examples; one with c_i < n_i contributes c_i distinct examples. Which
    examples is drawn from the seed and the epoch number: the same seed gives the same epochs,
    and every epoch draws afresh. With the defaults (all weights 1, proportional, ``all``) every
    example is seen exactly once per epoch, in the same order as unmixed training. The realised
    per-source counts of each epoch are logged in metrics.jsonl (the ``sources`` field of the
    ``train`` line).
    """

    sampling: Literal["proportional", "temperature"] = Field(
        "proportional", description="'proportional': p_i ∝ w_i·n_i; 'temperature': p_i ∝ w_i·n_i^(1/T)."
    )
    temperature: float | None = Field(
        None,
        ge=MIN_TEMPERATURE,
        le=MAX_TEMPERATURE,
        description="T for sampling: temperature (required there, rejected otherwise); 0.01 to 1000 "
        "(T = 0.01 already gives a source 10x the size of another 10^100 times its share; T = 1000 "
        "is uniform to within 1%).",
    )
    epoch: Literal["all", "largest"] | int = Field(
        "all",
        description="Examples per epoch: 'all' (sum of the sources' sizes), 'largest' (one pass over "
        "the largest source) or a positive integer up to 100,000,000.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> MixConfig:
        if self.sampling == "temperature" and self.temperature is None:
            raise ValueError("mix.sampling 'temperature' needs mix.temperature (T in p_i ∝ n_i^(1/T))")
        if self.sampling != "temperature" and self.temperature is not None:
            raise ValueError("mix.temperature is only used with mix.sampling: temperature")
        if isinstance(self.epoch, int) and not 0 < self.epoch <= MAX_EPOCH_EXAMPLES:
            raise ValueError(
                f"mix.epoch must be 'all', 'largest' or a positive number of examples, at most {MAX_EPOCH_EXAMPLES:,}"
            )
        return self


def eval_set_name(benchmark: str, split: str, variant: str | None = None) -> str:
    """An eval set's name, ``<benchmark>/<split>[/<variant>]``: what its metric keys start with in
    metrics.jsonl, selection, sweeps, reports and cards alike (the one place it is spelled)."""
    return f"{benchmark}/{split}" + (f"/{variant}" if variant else "")


class EvalConfig(Section):
    """One benchmark split to score, with its own prompt, verbalizer and few-shot examples."""

    benchmark: str = Field(description="A registered benchmark name (see `negtrain evaluate --list`).")
    split: str = Field(description="One of the benchmark's splits.")
    prompt: str | None = Field(None, description=_PROMPT_HELP)
    verbalizer: dict[str, str] | None = Field(None, description=_VERBALIZER_HELP)
    strategy: str | None = Field(
        None,
        description="seq2seq / causal_lm: a named prompt strategy of the benchmark (negtrain/prompts/<benchmark>.yaml, "
        "listed by `negtrain evaluate --list`): its template, demonstrations, and how it is answered "
        "(verbalizer log-likelihood, or greedy generation read by an answer rule). Not with `prompt`.",
    )
    shots: int | Literal["paper"] = Field(
        0,
        description="seq2seq / causal_lm: solved examples put before each prompt (in-context learning). "
        "A number K: drawn per scored example, deterministically from the seed and the example's id, never from "
        "the scored example's contrast group; their ids are written next to each prediction. 'paper': "
        "the strategy's fixed demonstrations, verbatim from its paper.",
    )
    min_shots: int | None = Field(
        None,
        ge=0,
        description="The fewest shots a prompt may drop to where `shots` do not fit the model's context "
        "(CondaQA, Ravichander et al. 2022, Appendix C.2: nine shots, 'sometimes only 8 fit in the context': "
        "shots 9, min_shots 8). Each row gets the most shots that fit, its last shot dropped first; the number "
        "used is written next to each prediction (n_shots) and counted in the metrics line (shots_used). "
        "A row that does not fit even with min_shots is an error before anything is generated. Unset: every "
        "prompt has `shots` (one that does not fit is an error, or cut under evaluation.truncate: left).",
    )
    shots_split: str | None = Field(
        None,
        description="The split shots are drawn from; unset: the benchmark's train split, else (a "
        "benchmark with no train split, e.g. nannli) the scored split itself, minus the scored "
        "example's contrast group.",
    )
    variant: str | None = Field(
        None,
        description="A name for this entry when one benchmark split is evaluated several ways (a "
        "protocol's variants, e.g. 'conditional_q/few'): metrics.jsonl lines carry it, and its predictions "
        "go to predictions/<benchmark>-<split>-<variant with '-' for '/'>.jsonl.",
    )

    @property
    def name(self) -> str:
        """The eval set's name (:func:`eval_set_name`)."""
        return eval_set_name(self.benchmark, self.split, self.variant)

    @field_validator("shots")
    @classmethod
    def _shots(cls, value):
        if isinstance(value, int) and value < 0:
            raise ValueError("shots must be >= 0 or 'paper'")
        return value

    @model_validator(mode="after")
    def _min_shots(self) -> "EvalConfig":
        if self.min_shots is not None and not (isinstance(self.shots, int) and self.min_shots <= self.shots):
            raise ValueError(f"min_shots {self.min_shots} needs a number of shots at least as large (shots is {self.shots!r})")
        return self


class DataConfig(Section):
    train: list[SourceConfig] = Field(
        default_factory=list,
        description="Training sources. With the default weights and data.mix every example is seen once per epoch.",
    )
    mix: MixConfig = Field(default_factory=MixConfig, description="How training sources are mixed (see MixConfig).")
    eval: list[EvalConfig] | Literal["all"] = Field(
        default_factory=list,
        description="Benchmarks evaluated at the end of every epoch (and by `validate`). 'all': every "
        "benchmark the model family can score, on its test split(s) (`negtrain evaluate --list`); a "
        "benchmark whose data cannot be read is skipped and said so at the start; the resolved list "
        "is written to the run's recipe.yaml.",
    )
    test: list[EvalConfig] | Literal["all"] | None = Field(None, description="Benchmarks for `negtrain test`; defaults to `eval`.")
    allow_test_rows: bool = Field(
        False,
        description="Allow a data.train source to share rows with a split the run reports as test (a test split, "
        "`all`, an evaluation-only set): NegNLI's train85 holds half of test's groups. Refused unless true; when "
        "true, provenance.json, the metrics lines of that split and every card say the run trained on them.",
    )
    batch_size: int = Field(
        32,
        gt=0,
        description="Training examples per device per step. Under DDP a step takes one batch per rank, "
        "so W ranks at batch_size b train exactly as one device at W*b (with bucket_by_length off): the "
        "loss is the mean over the step's examples (tokens for token-level losses) on all ranks.",
    )
    eval_batch_size: int = Field(
        128,
        gt=0,
        description="Evaluation examples per device per batch. Evaluation batches are always sorted by "
        "length; on a CPU a smaller batch can be faster (perf/results/settings.md).",
    )
    bucket_by_length: bool = Field(
        True,
        description="Group examples of similar length into batches so padding is small. Batches are still shuffled; examples within a pool of 50 batches are sorted by "
        "length. (Evaluation is always length-sorted.) Caveat: where length correlates with a subset "
        "(ScoNe's conditions), batches become nearly single-subset, which changes the training "
        "trajectory; turn it off to compare.",
    )
    num_workers: int = Field(0, ge=0, description="DataLoader workers; batches are cheap to build, so 0 is usually best.")
    num_proc: int | None = Field(
        None,
        gt=0,
        description="Processes that tokenize a split the first time it is used (it is then stored and mapped by "
        "every later run, rank and worker). null: every core this process may run on. Results are identical for "
        "any value; set 1 to keep tokenization off the other cores.",
    )
