"""Small GGUF files written for the tests with the ``gguf`` package (llama.cpp's own writer): a
two-layer Llama of random F32 weights with a byte-level tokenizer, converted in about a second, and
the same tensors under a header that names another architecture (``mamba``), whose tensors are
then not in the file."""

from __future__ import annotations

from pathlib import Path

import numpy as np

HIDDEN, LAYERS, HEADS, FFN = 16, 2, 2, 32


def _byte_tokens() -> list[str]:
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    return [bytes_to_unicode()[b] for b in range(256)] + ["\u0120t", "he", "<|endoftext|>"]


def write_llama_gguf(path: Path, architecture: str = "llama", seed: int = 0) -> Path:
    """A tiny Llama GGUF at ``path``; ``architecture`` is what its header says it is (its metadata
    keys are under that name, so transformers builds that architecture's model from them)."""
    import gguf

    rng = np.random.default_rng(seed)
    tokens = _byte_tokens()
    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_name("tiny-test-llama")
    writer.add_context_length(64)
    writer.add_embedding_length(HIDDEN)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(HEADS)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(HIDDEN // HEADS)
    writer.add_vocab_size(len(tokens))
    if architecture == "mamba":  # what transformers' mamba config reads
        writer.add_ssm_conv_kernel(4)
        writer.add_ssm_inner_size(2 * HIDDEN)
        writer.add_ssm_state_size(4)
        writer.add_ssm_time_step_rank(2)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([1] * 258 + [3])
    writer.add_token_merges(["\u0120 t", "h e"])
    writer.add_bos_token_id(258)
    writer.add_eos_token_id(258)

    def weight(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32) * 0.1

    writer.add_tensor("token_embd.weight", weight(len(tokens), HIDDEN))
    for i in range(LAYERS):
        for name, shape in (("attn_q", (HIDDEN, HIDDEN)), ("attn_k", (HIDDEN, HIDDEN)), ("attn_v", (HIDDEN, HIDDEN)),
                            ("attn_output", (HIDDEN, HIDDEN)), ("ffn_gate", (FFN, HIDDEN)), ("ffn_up", (FFN, HIDDEN)),
                            ("ffn_down", (HIDDEN, FFN))):
            writer.add_tensor(f"blk.{i}.{name}.weight", weight(*shape))
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(HIDDEN, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(HIDDEN, dtype=np.float32))
    writer.add_tensor("output_norm.weight", np.ones(HIDDEN, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
