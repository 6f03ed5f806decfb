#!/usr/bin/python3
"""Writes tests/fixtures/decoders: three tiny random causal language models in Hugging Face layout,
PyTorch's FP32 logits for a fixed token sequence, their perplexity on WikiText-2, and RoPE cases.

Plain PyTorch (Debian's python3-torch), written from the architectures' definitions in Hugging Face
transformers (no transformers package). Every weight is random (fixed torch.Generator seed per
model), stored as F32 except tiny-llama's, stored as BF16 like most Llama checkpoints (its
reference computes in FP32 from the BF16 values).

  tiny-llama   LlamaForCausalLM: hidden 128, 2 layers, 4 heads, 2 KV heads (GQA), head_dim 32, MLP 256,
               rope_theta 1e4 with llama3 rope_scaling, rms_norm_eps 1e-5, untied lm_head; BF16 weights
               (hidden 128 so that int4's default group of 128 fits).
               Tokenizer: tests/fixtures/bpe/sentencepiece (Llama-2 style, template "<s> $A").
  tiny-qwen2   Qwen2ForCausalLM: the same with q/k/v biases, 4 heads / 1 KV head, rope_theta 1e6,
               no rope_scaling, rms_norm_eps 1e-6, tied head (no lm_head.weight).
               Tokenizer: tests/fixtures/bpe/llama3 (byte-level, template "<|begin_of_text|> $A").
  tiny-gpt2    GPT2LMHeadModel: n_embd 64, 2 layers, 4 heads, n_positions 128, n_inner 4*64, gelu_new,
               tied head. Tensors without the "transformer." prefix, as openai-community/gpt2 stores
               them, including the causal-mask buffers h.{i}.attn.bias (F32 [1,1,128,128], to ignore).
               Tokenizer: tests/fixtures/bpe/byte_level (no BOS added by its post-processor).

Llama / Qwen2 forward (pre-norm; x: [T, hidden]):
  x = embed_tokens[ids]
  per layer: h = RMSNorm(x); x = x + o_proj(attention(h)); h = RMSNorm(x); x = x + down(silu(gate(h)) * up(h))
  logits = RMSNorm(x) @ lm_head.weightᵀ   (Qwen2: @ embed_tokens.weightᵀ)
  RMSNorm(x) = weight * x * rsqrt(mean(x²) + eps), in FP32
  attention: q = Wq h (+bq), k = Wk h (+bk), v = Wv h (+bv), split into heads of head_dim;
    RoPE at positions p = 0..T-1 (rotate_half convention): with freqs[p, j] = p * inv_freq[j],
      emb = cat(freqs, freqs), cos = cos(emb) * attention_factor, sin = sin(emb) * attention_factor,
      q' = q * cos + rotate_half(q) * sin, rotate_half(u) = cat(-u[d/2:], u[:d/2]); same for k;
    GQA (repeat_kv): query head j uses KV head j // (heads / kv_heads);
    probs = softmax(q' k'ᵀ * head_dim^-0.5 + causal mask), out = probs v, heads concatenated.
  inv_freq (transformers' modeling_rope_utils): default 1 / theta^(2j/d) for j < d/2, in FP32;
    llama3 (_compute_llama3_parameters): wavelen = 2π/inv_freq; wavelen > original/low_freq_factor:
    inv_freq/factor; wavelen < original/high_freq_factor: unchanged; otherwise, with
    s = (original/wavelen - low) / (high - low): (1 - s) * inv_freq/factor + s * inv_freq.
GPT-2 forward:
  x = wte[ids] + wpe[0..T)
  per layer: x = x + c_proj(attention(LN_1(x))); x = x + mlp.c_proj(gelu_new(mlp.c_fc(LN_2(x))))
  logits = LN_f(x) @ wteᵀ
  Conv1D layers compute x @ W + b with W stored [in, out]; c_attn's output columns are q | k | v;
  attention = softmax(q kᵀ / sqrt(64/4) + causal mask) v; LayerNorm eps 1e-5;
  gelu_new(x) = 0.5 x (1 + tanh(sqrt(2/π) (x + 0.044715 x³))).

Each model folder holds config.json, model.safetensors, tokenizer.json (a copy of the bpe
fixture), reference.safetensors (token_ids I32 [24], logits F32 [24, vocab]: one causal forward
over a fixed sequence that starts with the BOS id) and reference_ppl.json:

Perplexity on ../shared/data/wikitext2/test.txt (relative to the project root): read the whole
file as UTF-8, tokenize all of it with add_special_tokens=True (the post-processor template: a
leading BOS for llama and qwen2, nothing for gpt2) using make_bpe_tokenizer_fixtures.Reference
(here with a cache per pre-tokenized word, which changes no result), keep the first max_tokens ids
(N of them). Windows: for begin = 0, stride, 2·stride, ...: end = min(begin + ctx, N); one forward
over ids[begin:end] (positions restart at 0 in each window); score the targets t in
[max(begin + 1, prev_end), end), each with -log_softmax(logits at window position t - 1 - begin)[ids[t]]
(log_softmax of the FP32 logits taken in FP64; the sum accumulated in FP64); prev_end = end; stop
after the window whose end == N. ppl = exp(nll_sum / scored_tokens).

rope_cases.json: inv_freq and attention_factor for RoPE variants, computed as transformers does
(default, linear: inv_freq / factor, llama3, yarn with beta_fast 32, beta_slow 1, truncate, and
attention_factor = 0.1 ln(factor) + 1; yarn's correction range uses original_max_position_embeddings).

Usage: /usr/bin/python3 tools/make_tiny_decoder_fixtures.py [OUT_DIR]
Needs Debian's python3-torch and python3-regex (for the tokenizer reference).
"""
import json
import math
import shutil
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from safetensors_writer import safetensors_bytes  # noqa: E402
from make_bpe_tokenizer_fixtures import Reference  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "tests/fixtures/decoders"
BPE = ROOT / "tests/fixtures/bpe"
SHARED = ROOT.parent / "shared"
TEXT = "data/wikitext2/test.txt"  # under SHARED
SEQ = 24
SENTENCE = "The quick brown fox jumps over the lazy dog."
PPL_CASES = [(1000, 64, 32), (1000, 128, 128)]  # (max_tokens, ctx, stride)


# ---------------------------------------------------------------------------------------------
# Tokenizers

class CachedReference(Reference):
    """The reference encoder with a cache per pre-tokenized word (bpe is a pure function of it)."""

    def __init__(self, doc):
        super().__init__(doc)
        self.cache = {}

    def bpe(self, word):
        ids = self.cache.get(word)
        if ids is None:
            ids = self.cache[word] = tuple(super().bpe(word))
        return list(ids)


def load_tokenizer(name):
    doc = json.loads((BPE / name / "tokenizer.json").read_text(encoding="utf-8"))
    vocab_size = 1 + max(max(doc["model"]["vocab"].values()), max(t["id"] for t in doc["added_tokens"]))
    return doc, CachedReference(doc), vocab_size


def token_id(doc, content):
    return next(t["id"] for t in doc["added_tokens"] if t["content"] == content)


# ---------------------------------------------------------------------------------------------
# RoPE parameters (transformers' modeling_rope_utils)

def rope_parameters(head_dim, theta, scaling, max_position_embeddings):
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    kind = (scaling or {}).get("rope_type", "default")
    if kind == "default":
        return inv_freq, 1.0
    if kind == "linear":
        return inv_freq / scaling["factor"], 1.0
    if kind == "llama3":
        factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
        old = scaling["original_max_position_embeddings"]
        low_wavelen, high_wavelen = old / low, old / high
        wavelen = 2 * math.pi / inv_freq
        scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
        return torch.where(medium, smoothed, scaled), 1.0
    if kind == "yarn":
        factor = scaling["factor"]
        original = scaling.get("original_max_position_embeddings") or max_position_embeddings
        attention_factor = scaling.get("attention_factor")
        if attention_factor is None:
            attention_factor = 0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0
        beta_fast, beta_slow = scaling.get("beta_fast") or 32, scaling.get("beta_slow") or 1

        def correction_dim(rotations):
            return head_dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(theta))

        lo, hi = correction_dim(beta_fast), correction_dim(beta_slow)
        if scaling.get("truncate", True):
            lo, hi = math.floor(lo), math.ceil(hi)
        lo, hi = max(lo, 0), min(hi, head_dim - 1)
        if lo == hi:
            hi += 0.001
        ramp = torch.clamp((torch.arange(head_dim // 2, dtype=torch.float32) - lo) / (hi - lo), 0, 1)
        extrapolation = 1 - ramp
        pos_freqs = theta ** (torch.arange(0, head_dim, 2).float() / head_dim)
        inv = (1.0 / (factor * pos_freqs)) * (1 - extrapolation) + (1.0 / pos_freqs) * extrapolation
        return inv, attention_factor
    raise ValueError(kind)


ROPE_CASES = [
    ("default", 16, 10000.0, None, 128),
    ("default_theta_1e6", 16, 1000000.0, None, 128),
    ("linear", 16, 10000.0, {"rope_type": "linear", "factor": 4.0}, 128),
    ("llama3_tiny", 16, 10000.0, {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                  "original_max_position_embeddings": 32}, 128),
    ("llama3_8192", 64, 500000.0, {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                   "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}, 131072),
    ("yarn", 16, 10000.0, {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32}, 128),
]


def rope_cases():
    out = []
    for name, head_dim, theta, scaling, max_pos in ROPE_CASES:
        inv_freq, attention_factor = rope_parameters(head_dim, theta, scaling, max_pos)
        out.append({"name": name, "head_dim": head_dim, "rope_theta": theta, "rope_scaling": scaling,
                    "max_position_embeddings": max_pos, "inv_freq": [float(v) for v in inv_freq],
                    "attention_factor": float(attention_factor)})
    return out


# ---------------------------------------------------------------------------------------------
# Models

def linear(x, w, prefix):
    y = x @ w[prefix + ".weight"].T
    bias = w.get(prefix + ".bias")
    return y if bias is None else y + bias


def rms_norm(x, weight, eps):
    x = x.float()
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def causal_softmax(scores):
    t = scores.shape[-1]
    mask = torch.ones(t, t, dtype=torch.bool).tril()
    return torch.softmax(scores.masked_fill(~mask, torch.finfo(torch.float32).min), dim=-1)


def llama_forward(cfg, w, ids):
    t, heads, kv_heads = len(ids), cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d = cfg.get("head_dim") or cfg["hidden_size"] // heads
    eps = cfg["rms_norm_eps"]
    inv_freq, attention_factor = rope_parameters(d, cfg["rope_theta"], cfg["rope_scaling"],
                                                 cfg["max_position_embeddings"])
    freqs = torch.arange(t, dtype=torch.float32)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos() * attention_factor, emb.sin() * attention_factor
    x = w["model.embed_tokens.weight"][ids]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = linear(h, w, p + "self_attn.q_proj").view(t, heads, d).transpose(0, 1)
        k = linear(h, w, p + "self_attn.k_proj").view(t, kv_heads, d).transpose(0, 1)
        v = linear(h, w, p + "self_attn.v_proj").view(t, kv_heads, d).transpose(0, 1)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = k.repeat_interleave(heads // kv_heads, dim=0), v.repeat_interleave(heads // kv_heads, dim=0)
        probs = causal_softmax(q @ k.transpose(-1, -2) * d ** -0.5)
        ctx = (probs @ v).transpose(0, 1).reshape(t, heads * d)
        x = x + linear(ctx, w, p + "self_attn.o_proj")
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate, up = linear(h, w, p + "mlp.gate_proj"), linear(h, w, p + "mlp.up_proj")
        x = x + linear(torch.nn.functional.silu(gate) * up, w, p + "mlp.down_proj")
    x = rms_norm(x, w["model.norm.weight"], eps)
    return x @ w.get("lm_head.weight", w["model.embed_tokens.weight"]).T


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def gpt2_forward(cfg, w, ids):
    t, hidden, heads, eps = len(ids), cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    d = hidden // heads

    def ln(x, prefix):
        return torch.nn.functional.layer_norm(x, (hidden,), w[prefix + ".weight"], w[prefix + ".bias"], eps)

    def conv1d(x, prefix):
        return x @ w[prefix + ".weight"] + w[prefix + ".bias"]

    x = w["wte.weight"][ids] + w["wpe.weight"][:t]
    for i in range(cfg["n_layer"]):
        p = f"h.{i}."
        q, k, v = (u.view(t, heads, d).transpose(0, 1) for u in conv1d(ln(x, p + "ln_1"), p + "attn.c_attn").split(hidden, -1))
        probs = causal_softmax(q @ k.transpose(-1, -2) / math.sqrt(d))
        x = x + conv1d((probs @ v).transpose(0, 1).reshape(t, hidden), p + "attn.c_proj")
        x = x + conv1d(gelu_new(conv1d(ln(x, p + "ln_2"), p + "mlp.c_fc")), p + "mlp.c_proj")
    return ln(x, "ln_f") @ w["wte.weight"].T


def normal(gen, *shape, std):
    return torch.randn(*shape, generator=gen) * std


def llama_weights(cfg, gen, qkv_bias):
    hidden, inter, vocab = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d = cfg.get("head_dim") or hidden // heads
    # A tied head reads the embeddings: keep logits' std near 2 either way.
    w = {"model.embed_tokens.weight": normal(gen, vocab, hidden, std=0.3 if cfg["tie_word_embeddings"] else 0.6)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = 1 + normal(gen, hidden, std=0.1)
        for name, out_f in [("q", heads * d), ("k", kv_heads * d), ("v", kv_heads * d)]:
            w[p + f"self_attn.{name}_proj.weight"] = normal(gen, out_f, hidden, std=0.12)
            if qkv_bias:
                w[p + f"self_attn.{name}_proj.bias"] = normal(gen, out_f, std=0.05)
        w[p + "self_attn.o_proj.weight"] = normal(gen, hidden, heads * d, std=0.1)
        w[p + "post_attention_layernorm.weight"] = 1 + normal(gen, hidden, std=0.1)
        w[p + "mlp.gate_proj.weight"] = normal(gen, inter, hidden, std=0.1)
        w[p + "mlp.up_proj.weight"] = normal(gen, inter, hidden, std=0.1)
        w[p + "mlp.down_proj.weight"] = normal(gen, hidden, inter, std=0.1)
    w["model.norm.weight"] = 1 + normal(gen, hidden, std=0.1)
    if not cfg["tie_word_embeddings"]:
        w["lm_head.weight"] = normal(gen, vocab, hidden, std=0.25)
    return w


def gpt2_weights(cfg, gen):
    hidden, vocab, positions = cfg["n_embd"], cfg["vocab_size"], cfg["n_positions"]
    inner = cfg["n_inner"] or 4 * hidden
    w = {"wte.weight": normal(gen, vocab, hidden, std=0.3), "wpe.weight": normal(gen, positions, hidden, std=0.1)}
    for i in range(cfg["n_layer"]):
        p = f"h.{i}."
        w[p + "ln_1.weight"] = 1 + normal(gen, hidden, std=0.1)
        w[p + "ln_1.bias"] = normal(gen, hidden, std=0.05)
        w[p + "attn.bias"] = torch.ones(positions, positions).tril().view(1, 1, positions, positions)
        for name, in_f, out_f in [("attn.c_attn", hidden, 3 * hidden), ("attn.c_proj", hidden, hidden),
                                  ("mlp.c_fc", hidden, inner), ("mlp.c_proj", inner, hidden)]:
            w[p + name + ".weight"] = normal(gen, in_f, out_f, std=0.12 if name == "attn.c_attn" else 0.1)
            w[p + name + ".bias"] = normal(gen, out_f, std=0.05)
        w[p + "ln_2.weight"] = 1 + normal(gen, hidden, std=0.1)
        w[p + "ln_2.bias"] = normal(gen, hidden, std=0.05)
    w["ln_f.weight"] = 1 + normal(gen, hidden, std=0.1)
    w["ln_f.bias"] = normal(gen, hidden, std=0.05)
    return w


def llama_config(vocab_size, bos, eos):
    return {
        "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": bos, "eos_token_id": eos, "head_dim": 32, "hidden_act": "silu", "hidden_size": 128,
        "initializer_range": 0.02, "intermediate_size": 256, "max_position_embeddings": 128, "mlp_bias": False,
        "model_type": "llama", "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2,
        "pretraining_tp": 1, "rms_norm_eps": 1e-05,
        "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                         "original_max_position_embeddings": 32, "rope_type": "llama3"},
        "rope_theta": 10000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True,
        "vocab_size": vocab_size,
    }


def qwen2_config(vocab_size, bos, eos):
    return {
        "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": bos, "eos_token_id": eos,
        "hidden_act": "silu", "hidden_size": 64, "initializer_range": 0.02, "intermediate_size": 128,
        "max_position_embeddings": 128, "max_window_layers": 2, "model_type": "qwen2", "num_attention_heads": 4,
        "num_hidden_layers": 2, "num_key_value_heads": 1, "rms_norm_eps": 1e-06, "rope_scaling": None,
        "rope_theta": 1000000.0, "sliding_window": 128, "tie_word_embeddings": True, "torch_dtype": "float32",
        "use_cache": True, "use_sliding_window": False, "vocab_size": vocab_size,
    }


def gpt2_config(vocab_size, bos, eos):
    # Like openai-community/gpt2's config.json: no tie_word_embeddings key (PretrainedConfig's default, true).
    return {
        "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
        "bos_token_id": bos, "embd_pdrop": 0.1, "eos_token_id": eos, "initializer_range": 0.02,
        "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 128, "n_embd": 64, "n_head": 4, "n_inner": None,
        "n_layer": 2, "n_positions": 128, "reorder_and_upcast_attn": False, "resid_pdrop": 0.1,
        "scale_attn_by_inverse_layer_idx": False, "scale_attn_weights": True, "summary_activation": None,
        "summary_first_dropout": 0.1, "summary_proj_to_labels": True, "summary_type": "cls_index",
        "summary_use_proj": True, "torch_dtype": "float32", "use_cache": True, "vocab_size": vocab_size,
    }


# name, tokenizer fixture, BOS / EOS token contents, config, weights, forward, seed
MODELS = [
    ("tiny-llama", "sentencepiece", "<s>", "</s>", llama_config,
     lambda cfg, gen: llama_weights(cfg, gen, qkv_bias=False), llama_forward, 20261201),
    ("tiny-qwen2", "llama3", "<|begin_of_text|>", "<|end_of_text|>", qwen2_config,
     lambda cfg, gen: llama_weights(cfg, gen, qkv_bias=True), llama_forward, 20261202),
    ("tiny-gpt2", "byte_level", "<|endoftext|>", "<|endoftext|>", gpt2_config, gpt2_weights, gpt2_forward, 20261203),
]


def reference_ids(ref, bos, vocab_size, gen):
    """BOS, the start of a tokenized sentence, random ids, and the largest id: SEQ ids."""
    ids = ref.encode(SENTENCE)[:11]
    rest = torch.randint(0, vocab_size, (SEQ - 2 - len(ids),), generator=gen).tolist()
    return [bos] + ids + rest + [vocab_size - 1]


def perplexity(cfg, w, forward, ids, ctx, stride):
    n, nll, scored, prev_end, begin = len(ids), 0.0, 0, 0, 0
    while True:
        end = min(begin + ctx, n)
        window = torch.tensor(ids[begin:end], dtype=torch.int64)
        logp = torch.log_softmax(forward(cfg, w, window).double(), dim=-1)
        for t in range(max(begin + 1, prev_end), end):
            nll -= float(logp[t - 1 - begin, ids[t]])
            scored += 1
        prev_end = end
        if end == n:
            break
        begin += stride
    return nll, scored


def main():
    torch.set_num_threads(1)
    OUT.mkdir(parents=True, exist_ok=True)
    text = (SHARED / TEXT).read_text(encoding="utf-8")
    for name, tok_name, bos_token, eos_token, make_config, make_weights, forward, seed in MODELS:
        doc, ref, vocab_size = load_tokenizer(tok_name)
        bos, eos = token_id(doc, bos_token), token_id(doc, eos_token)
        cfg = make_config(vocab_size, bos, eos)
        gen = torch.Generator().manual_seed(seed)
        w = make_weights(cfg, gen)
        if cfg["torch_dtype"] == "bfloat16":
            # Stored as BF16, like most Llama checkpoints; the reference computes in FP32 from the
            # BF16 values, as a loader that widens them does.
            w = {k: v.to(torch.bfloat16).to(torch.float32) for k, v in w.items()}
        ids = reference_ids(ref, bos, vocab_size, gen)
        with torch.no_grad():
            logits = forward(cfg, w, torch.tensor(ids, dtype=torch.int64))
        out = OUT / name
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
        stored = {k: v.to(torch.bfloat16) for k, v in w.items()} if cfg["torch_dtype"] == "bfloat16" else w
        (out / "model.safetensors").write_bytes(safetensors_bytes(stored))
        shutil.copyfile(BPE / tok_name / "tokenizer.json", out / "tokenizer.json")
        (out / "reference.safetensors").write_bytes(safetensors_bytes(
            {"token_ids": torch.tensor(ids, dtype=torch.int32), "logits": logits.contiguous()}))

        start = time.time()
        all_ids = ref.encode(text, add_special_tokens=True)
        seconds = time.time() - start
        cases = []
        for max_tokens, ctx, stride in PPL_CASES:
            kept = all_ids[:max_tokens]
            with torch.no_grad():
                nll, scored = perplexity(cfg, w, forward, kept, ctx, stride)
            cases.append({"max_tokens": max_tokens, "ctx": ctx, "stride": stride, "n_tokens": len(kept),
                          "scored_tokens": scored, "nll_sum": nll, "ppl": math.exp(nll / scored),
                          "first_ids": kept[:32]})
        (out / "reference_ppl.json").write_text(json.dumps({"text": TEXT, "cases": cases}, indent=1) + "\n")
        print(f"{name}: vocab {vocab_size}, {sum(t.numel() for t in w.values())} weights, logits std "
              f"{float(logits.std()):.3f} (per-row std mean {float(logits.std(dim=-1).mean()):.3f}), "
              f"tokenized {len(all_ids)} ids in {seconds:.1f} s, ppl "
              + ", ".join(f"ctx {c['ctx']}/stride {c['stride']}: {c['ppl']:.4f}" for c in cases))
    (OUT / "rope_cases.json").write_text(json.dumps(rope_cases(), indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
