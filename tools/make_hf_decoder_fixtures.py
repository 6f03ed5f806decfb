#!/usr/bin/env python3
"""Writes tiny decoder fixtures of the 2025-2026 architectures into tests/fixtures/decoders, with the
reference computed by Hugging Face transformers itself (its own modeling code, from PyPI), not by a
re-implementation:

  tiny-qwen3   Qwen3ForCausalLM: hidden 64, 2 layers, 4 heads / 2 KV heads, an explicit head_dim of 32
               (≠ hidden / heads = 16, as Qwen3's own 128 ≠ 1024 / 16), per-head RMSNorm of q and k
               (q_norm / k_norm, weights [head_dim]), no q/k/v biases, rope_theta 1e6, tied head; F32.
               Tokenizer: tests/fixtures/bpe/llama3 (byte-level, template "<|begin_of_text|> $A").
  tiny-gemma3  Gemma3ForCausalLM: hidden 64, 3 layers (sliding_window_pattern 3: two sliding-window layers
               of 8 tokens, then one full), 4 heads / 1 KV head of head_dim 32, query_pre_attn_scalar 24
               (≠ head_dim), q/k norms, sandwich norms, RMSNorm as (1 + w), GeGLU (gelu_pytorch_tanh),
               embeddings times sqrt(64), RoPE 1e6 with linear scaling 2 on the full layer and
               rope_local_base_freq 1e4 on the sliding ones, tied head; F32. Its reference runs 40 tokens
               (five windows) and greedy decoding past the window. Tokenizer: llama3.
  tiny-phi3    Phi3ForCausalLM as Phi-4-mini is laid out: fused qkv_proj and gate_up_proj, partial_rotary_factor
               0.75 (12 of each head's 16 values turn), LongRoPE ("longrope": short and long factors) with
               original_max_position_embeddings 32 of 128, so that the 40-token reference runs on the long
               factors and greedy decoding crosses from the short to the long ones; 4/2 heads, tied head; F32.
               Its seed is one whose 32 greedy tokens are not one token repeated (a tied random model tends
               to repeat its last token). Tokenizer: llama3.
  tiny-llama32 LlamaForCausalLM as Llama 3.2 1B / 3B are laid out: tied head (no lm_head.weight), llama3 RoPE
               scaling (factor 8, low 1, high 4, original_max_position_embeddings 32 of 128), rope_theta 5e5,
               4/2 heads of 16, explicit head_dim; F32; a seed whose greedy tokens vary. Tokenizer: llama3.
  The mixture-of-experts decoders, smaller (hidden 32) to keep the fixtures' budget, each saved by
  save_pretrained, which writes the Hub's layout (one tensor per expert and projection):
  tiny-mixtral MixtralForCausalLM: 4 experts of FFN 32 (block_sparse_moe.experts.{e}.w1 / w2 / w3 and the
               router block_sparse_moe.gate), top-2, the chosen weights renormalised; 4/2 heads of 8;
               rope_theta 1e6; untied head.
  tiny-qwen3-moe Qwen3MoeForCausalLM: 3 layers, layer 1 dense (mlp_only_layers [1], intermediate 48), the
               others 6 experts of moe_intermediate_size 16 (mlp.experts.{e}.gate_proj / up_proj /
               down_proj, router mlp.gate), top-3 with norm_topk_prob; Qwen3's per-head q/k norms, head_dim
               16 (≠ 32 / 4); config.json's "num_experts" as the Hub writes it; tied head.
  tiny-olmoe   OlmoeForCausalLM: 4 experts of FFN 24, top-2 without renormalising (norm_topk_prob false),
               q_norm / k_norm over all of q's and k's columns (not per head), 4/4 heads; tied head (the
               fixtures' budget; OLMoE's own is untied, as tiny-mixtral's).

Each folder gets what the tiny decoder fixtures of tools/make_tiny_decoder_fixtures.py have, so that
every decoder test covers it (tests/model/decoder_fixtures.h):
  config.json           as the Hub's checkpoints of the architecture write it (top-level rope_theta /
                        rope_scaling, torch_dtype), not transformers 5's rewritten form
  model.safetensors     transformers' save_pretrained (a tied head stored once)
  tokenizer.json        a copy of the bpe fixture
  reference.safetensors token_ids I32 [n] and logits F32 [n, vocab] (one causal forward; n 24, or 40 for
                        a sliding-window model), and
                        greedy_prompt I32 [8] with greedy_ids I32 [32]: 32 greedy tokens transformers'
                        generate() gives after the prompt (do_sample=False, no EOS stop)
  reference_ppl.json    perplexity of the first 1000 tokens of ../shared/data/wikitext2/test.txt (ctx
                        64 / stride 32 and ctx 128 / stride 128), the windows as in
                        make_tiny_decoder_fixtures.py; the text tokenized by Hugging Face tokenizers

Weights: transformers' random init re-drawn wider (N(0, 0.08) for matrices, 1 + N(0, 0.1) for norm
weights) so that the logits and the q/k norms are not near-constant; fixed seeds, FP32 throughout.

Usage (a venv from PyPI, not needed by the build or CI; tested with torch 2.15.0, transformers 5.24.0):
  python3 -m venv /tmp/hf && /tmp/hf/bin/pip install torch transformers safetensors
  /tmp/hf/bin/pip install regex   # make_tiny_decoder_fixtures.py, whose perplexity windows this shares
  /tmp/hf/bin/python tools/make_hf_decoder_fixtures.py [OUT_DIR [NAME ...]]   (NAMEs: those fixtures only)
"""
import json
import math
import shutil
import sys
import tempfile
from pathlib import Path

import torch
import transformers
from safetensors.torch import save_file
from tokenizers import Tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_tiny_decoder_fixtures import perplexity  # noqa: E402  the same windows, scored the same way

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "tests/fixtures/decoders"
ONLY = set(sys.argv[2:])
BPE = ROOT / "tests/fixtures/bpe"
SHARED = ROOT.parent / "shared"
TEXT = "data/wikitext2/test.txt"  # under SHARED
PROMPT, GREEDY = 8, 32
SENTENCE = "The quick brown fox jumps over the lazy dog."
PPL_CASES = [(1000, 64, 32), (1000, 128, 128)]  # (max_tokens, ctx, stride)


def qwen3_config(vocab_size, bos, eos):
    return {
        "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": bos, "eos_token_id": eos, "head_dim": 32, "hidden_act": "silu", "hidden_size": 64,
        "initializer_range": 0.02, "intermediate_size": 128, "max_position_embeddings": 128,
        "max_window_layers": 2, "model_type": "qwen3", "num_attention_heads": 4, "num_hidden_layers": 2,
        "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000.0,
        "sliding_window": None, "tie_word_embeddings": True, "torch_dtype": "float32", "use_cache": True,
        "use_sliding_window": False, "vocab_size": vocab_size,
    }


def gemma3_config(vocab_size, bos, eos):
    return {
        "architectures": ["Gemma3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "attn_logit_softcapping": None, "bos_token_id": bos, "eos_token_id": eos, "final_logit_softcapping": None,
        "head_dim": 32, "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 64, "initializer_range": 0.02,
        "intermediate_size": 128, "max_position_embeddings": 128, "model_type": "gemma3_text",
        "num_attention_heads": 4, "num_hidden_layers": 3, "num_key_value_heads": 1, "pad_token_id": 0,
        "query_pre_attn_scalar": 24, "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000.0,
        "rope_scaling": {"factor": 2.0, "rope_type": "linear"}, "rope_theta": 1000000.0, "sliding_window": 8,
        "sliding_window_pattern": 3, "torch_dtype": "float32", "use_cache": True, "vocab_size": vocab_size,
    }


def phi3_config(vocab_size, bos, eos):
    return {
        "architectures": ["Phi3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": bos,
        "embd_pdrop": 0.0, "eos_token_id": eos, "full_attn_mod": 1, "hidden_act": "silu", "hidden_size": 64,
        "initializer_range": 0.02, "intermediate_size": 96, "interpolate_factor": 1, "lm_head_bias": False,
        "max_position_embeddings": 128, "model_type": "phi3", "num_attention_heads": 4, "num_hidden_layers": 2,
        "num_key_value_heads": 2, "original_max_position_embeddings": 32, "pad_token_id": eos,
        "partial_rotary_factor": 0.75, "resid_pdrop": 0.0, "rms_norm_eps": 1e-05,
        "rope_scaling": {"long_factor": [1.0, 1.5, 2.5, 4.0, 6.0, 9.0],
                         "short_factor": [1.0, 1.1, 1.3, 1.6, 2.0, 2.5], "type": "longrope"},
        "rope_theta": 10000.0, "sliding_window": 262144, "tie_word_embeddings": True, "torch_dtype": "float32",
        "use_cache": True, "vocab_size": vocab_size,
    }


def llama32_config(vocab_size, bos, eos):
    return {
        "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": bos,
        "eos_token_id": eos, "head_dim": 16, "hidden_act": "silu", "hidden_size": 64, "initializer_range": 0.02,
        "intermediate_size": 128, "max_position_embeddings": 128, "mlp_bias": False, "model_type": "llama",
        "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2, "pretraining_tp": 1,
        "rms_norm_eps": 1e-05,
        "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                         "original_max_position_embeddings": 32, "rope_type": "llama3"},
        "rope_theta": 500000.0, "tie_word_embeddings": True, "torch_dtype": "float32", "use_cache": True,
        "vocab_size": vocab_size,
    }


def mixtral_config(vocab_size, bos, eos):
    return {
        "architectures": ["MixtralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": bos, "eos_token_id": eos,
        "hidden_act": "silu", "hidden_size": 32, "initializer_range": 0.02, "intermediate_size": 32,
        "max_position_embeddings": 128, "model_type": "mixtral", "num_attention_heads": 4,
        "num_experts_per_tok": 2, "num_hidden_layers": 2, "num_key_value_heads": 2, "num_local_experts": 4,
        "output_router_logits": False, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.02,
        "router_jitter_noise": 0.0, "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "float32",
        "use_cache": True, "vocab_size": vocab_size,
    }


def qwen3_moe_config(vocab_size, bos, eos):
    return {
        "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": bos, "decoder_sparse_step": 1, "eos_token_id": eos, "head_dim": 16, "hidden_act": "silu",
        "hidden_size": 32, "initializer_range": 0.02, "intermediate_size": 48, "max_position_embeddings": 128,
        "max_window_layers": 3, "mlp_only_layers": [1], "model_type": "qwen3_moe", "moe_intermediate_size": 16,
        "norm_topk_prob": True, "num_attention_heads": 4, "num_experts": 6, "num_experts_per_tok": 3,
        "num_hidden_layers": 3, "num_key_value_heads": 2, "output_router_logits": False, "rms_norm_eps": 1e-06,
        "rope_scaling": None, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "sliding_window": None,
        "tie_word_embeddings": True, "torch_dtype": "float32", "use_cache": True, "use_sliding_window": False,
        "vocab_size": vocab_size,
    }


def olmoe_config(vocab_size, bos, eos):
    return {
        "architectures": ["OlmoeForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": bos,
        "clip_qkv": None, "eos_token_id": eos, "hidden_act": "silu", "hidden_size": 32, "initializer_range": 0.02,
        "intermediate_size": 24, "max_position_embeddings": 128, "model_type": "olmoe", "norm_topk_prob": False,
        "num_attention_heads": 4, "num_experts": 4, "num_experts_per_tok": 2, "num_hidden_layers": 2,
        "num_key_value_heads": 4, "output_router_logits": False, "pad_token_id": 1, "rms_norm_eps": 1e-05,
        "rope_scaling": None, "rope_theta": 10000.0, "router_aux_loss_coef": 0.01, "tie_word_embeddings": True,
        "torch_dtype": "float32", "use_cache": True, "vocab_size": vocab_size,
    }


MODELS = [
    # name, bpe fixture, BOS, EOS, config, seed, tokens of the reference logits, norm weights' centre
    ("tiny-qwen3", "llama3", "<|begin_of_text|>", "<|end_of_text|>", qwen3_config, 20261128, 24, 1.0),
    # Gemma's RMSNorm multiplies by 1 + w: weights centred on 0 scale by about 1.
    ("tiny-gemma3", "llama3", "<|begin_of_text|>", "<|end_of_text|>", gemma3_config, 20261129, 40, 0.0),
    ("tiny-phi3", "llama3", "<|begin_of_text|>", "<|end_of_text|>", phi3_config, 20261132, 40, 1.0),
    ("tiny-llama32", "llama3", "<|begin_of_text|>", "<|end_of_text|>", llama32_config, 20261203, 24, 1.0),
    ("tiny-mixtral", "llama3", "<|begin_of_text|>", "<|end_of_text|>", mixtral_config, 20261204, 24, 1.0),
    ("tiny-qwen3-moe", "llama3", "<|begin_of_text|>", "<|end_of_text|>", qwen3_moe_config, 20261205, 24, 1.0),
    ("tiny-olmoe", "llama3", "<|begin_of_text|>", "<|end_of_text|>", olmoe_config, 20261206, 24, 1.0),
]


def token_id(doc, content):
    return next(t["id"] for t in doc["added_tokens"] if t["content"] == content)


def redraw(model, gen, norm_centre):
    """Wider random weights than transformers' init: matrices N(0, 0.08), norm weights centre + N(0, 0.1)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.copy_(norm_centre + 0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.08 * torch.randn(p.shape, generator=gen))


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    text = (SHARED / TEXT).read_text(encoding="utf-8")
    for name, tok_name, bos_token, eos_token, make_config, seed, seq, norm_centre in MODELS:
        if ONLY and name not in ONLY:
            continue
        tok_path = BPE / tok_name / "tokenizer.json"
        doc = json.loads(tok_path.read_text(encoding="utf-8"))
        tok = Tokenizer.from_file(str(tok_path))
        vocab_size = tok.get_vocab_size(with_added_tokens=True)
        bos, eos = token_id(doc, bos_token), token_id(doc, eos_token)
        cfg = make_config(vocab_size, bos, eos)
        out = OUT / name
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
        gen = torch.Generator().manual_seed(seed)
        config = transformers.AutoConfig.from_pretrained(out)
        config._attn_implementation = "eager"
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model.eval()
        redraw(model, gen, norm_centre)
        if getattr(config, "layer_types", None):
            print(f"{name}: layer_types {config.layer_types}, sliding_window {config.sliding_window}")
        state = {k: v.contiguous() for k, v in model.state_dict().items()}
        if model.config.tie_word_embeddings:
            state.pop("lm_head.weight", None)  # stored once, as save_pretrained stores a tied head
        if "experts" in " ".join(state):
            # transformers 5 holds the experts as 3-D tensors; save_pretrained writes them one per expert.
            with tempfile.TemporaryDirectory() as saved:
                model.save_pretrained(saved)
                shutil.copyfile(Path(saved) / "model.safetensors", out / "model.safetensors")
        else:
            save_file(state, out / "model.safetensors", metadata={"format": "pt"})
        shutil.copyfile(tok_path, out / "tokenizer.json")

        ids = tok.encode(SENTENCE, add_special_tokens=True).ids[:12]
        ids += torch.randint(0, vocab_size, (seq - 1 - len(ids),), generator=gen).tolist() + [vocab_size - 1]
        prompt = ids[:PROMPT]
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].float()
            greedy = model.generate(torch.tensor([prompt]), max_new_tokens=GREEDY, min_new_tokens=GREEDY,
                                    do_sample=False, eos_token_id=None, pad_token_id=eos)[0, PROMPT:]
        save_file({"token_ids": torch.tensor(ids, dtype=torch.int32), "logits": logits.contiguous(),
                   "greedy_prompt": torch.tensor(prompt, dtype=torch.int32),
                   "greedy_ids": greedy.to(torch.int32).contiguous()}, out / "reference.safetensors")

        all_ids = tok.encode(text, add_special_tokens=True).ids
        cases = []
        for max_tokens, ctx, stride in PPL_CASES:
            kept = all_ids[:max_tokens]
            with torch.no_grad():
                nll, scored = perplexity(None, None, lambda _c, _w, window: model(window[None]).logits[0], kept,
                                         ctx, stride)
            cases.append({"max_tokens": max_tokens, "ctx": ctx, "stride": stride, "n_tokens": len(kept),
                          "scored_tokens": scored, "nll_sum": nll, "ppl": math.exp(nll / scored),
                          "first_ids": kept[:32]})
        (out / "reference_ppl.json").write_text(json.dumps({"text": TEXT, "cases": cases}, indent=1) + "\n")
        print(f"{name}: vocab {vocab_size}, {sum(t.numel() for t in state.values())} weights, logits std "
              f"{float(logits.std()):.3f}, greedy {greedy.tolist()[:8]}..., ppl "
              + ", ".join(f"ctx {c['ctx']}/stride {c['stride']}: {c['ppl']:.4f}" for c in cases)
              + f" (torch {torch.__version__}, transformers {transformers.__version__})")


if __name__ == "__main__":
    main()
