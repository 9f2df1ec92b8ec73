"""The recipe schema: YAML validated into typed, documented config.

A recipe is data. Every field is documented where it is declared, one module per section
(``model.py``, ``data.py``, ``trainer.py``, ``selection.py``, ``tracking.py``, ``objective.py``,
``evaluation.py``), put together in ``recipe.py``; ``negtrain recipes`` and the README point here.
Unknown keys are rejected with a "did you mean" suggestion (``suggestions.py``) before any work
starts, so a typo never silently falls back to a default. Recipe files are read by
``yaml_loader.py``.

Every public name is re-exported here: code imports from ``negtrain.config``, not from its modules.
"""

from negtrain.config.backends import (
    BACKENDS,
    DEFAULT_BACKEND,
    SHIPPED_BACKENDS,
    BackendRow,
    backend_names,
    backend_row,
    check_backend,
    loads_here,
    register_backend,
    unregister_backend,
)
from negtrain.config.data import DataConfig, EvalConfig, MixConfig, SourceConfig, eval_set_name
from negtrain.config.evaluation import RUN_ONLY_SERVER_SETTINGS, EvaluationConfig, ServerConfig
from negtrain.config.model import (
    DEFAULT_FAMILY,
    FAMILY_PICK,
    FAMILY_SECTIONS,
    SHIPPED_FAMILIES,
    AdapterConfig,
    CausalLmModelConfig,
    LanguageModelConfig,
    MlmModelConfig,
    ModelConfig,
    ModelSection,
    NliModelConfig,
    Seq2SeqModelConfig,
    families,
    families_where,
    families_with,
    family_names,
    family_of,
    family_section,
    model_config,
    register_family,
    unregister_family,
)
from negtrain.config.objective import (
    CorpusConfig,
    CueMaskingConfig,
    ObjectiveConfig,
    RetentionConfig,
    UnlikelihoodConfig,
)
from negtrain.config.recipe import (
    SHORTHAND_SECTIONS,
    Recipe,
    is_text_field,
    to_dict,
    validate_recipe,
    validate_section,
    without_other_families,
)
from negtrain.config.section import (
    MAX_EPOCH_EXAMPLES,
    MAX_SOURCE_WEIGHT,
    MAX_TEMPERATURE,
    MAX_TORCH_THREADS,
    MIN_TEMPERATURE,
    Section,
)
from negtrain.config.selection import (
    SelectionConfig,
    is_test_split,
    on_test_split,
    selected_on_test_note,
    selection_bias_note,
    selection_split,
)
from negtrain.config.suggestions import check_keys
from negtrain.config.tracking import LoggerConfig, SweepConfig, SweepParameter
from negtrain.config.trainer import TrainerConfig
from negtrain.config.yaml_loader import MAX_YAML_DEPTH, MAX_YAML_VALUES, load_yaml, parse_yaml
from negtrain.core.card_settings import MAX_BOOTSTRAP  # the bound the card's --bootstrap flag and evaluation.bootstrap share

__all__ = [
    "MAX_EPOCH_EXAMPLES", "MAX_SOURCE_WEIGHT", "MAX_TEMPERATURE", "MAX_TORCH_THREADS", "MAX_YAML_DEPTH",
    "MAX_YAML_VALUES", "MIN_TEMPERATURE", "RUN_ONLY_SERVER_SETTINGS", "SHORTHAND_SECTIONS", "DEFAULT_FAMILY", "FAMILY_PICK", "FAMILY_SECTIONS", "SHIPPED_FAMILIES",
    "CausalLmModelConfig", "LanguageModelConfig", "MlmModelConfig", "ModelSection", "NliModelConfig",
    "Seq2SeqModelConfig", "families", "families_where", "families_with", "family_names", "family_of", "family_section", "model_config", "register_family", "unregister_family",
    "BACKENDS", "DEFAULT_BACKEND", "SHIPPED_BACKENDS", "BackendRow", "backend_names", "backend_row", "check_backend", "loads_here",
    "register_backend", "unregister_backend",
    "AdapterConfig", "CorpusConfig", "CueMaskingConfig", "DataConfig", "EvalConfig", "eval_set_name", "EvaluationConfig", "MAX_BOOTSTRAP",
    "LoggerConfig", "MixConfig", "ModelConfig", "ObjectiveConfig", "Recipe", "RetentionConfig", "Section",
    "SelectionConfig", "ServerConfig", "SourceConfig", "SweepConfig", "SweepParameter", "TrainerConfig", "UnlikelihoodConfig",
    "check_keys", "is_text_field", "load_yaml", "parse_yaml", "selection_bias_note", "selection_split",
    "is_test_split", "on_test_split", "selected_on_test_note",
    "to_dict", "validate_recipe", "validate_section", "without_other_families",
]
