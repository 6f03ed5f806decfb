#!/usr/bin/env python3
"""Writes reference_transformers.safetensors into the decoder fixtures whose reference.safetensors came from
qjoule's own PyTorch re-implementation (tools/make_tiny_decoder_fixtures.py, tools/train_tiny_decoder_fixture.py):
Hugging Face transformers' own modeling code (from PyPI) runs each checkpoint as published, so that qjoule's
FP32 logits stand beside the implementation users trust (issue 58), not only beside qjoule's re-implementation.

  trained-llama  64 tokens: the first 63 of WikiText-2's test text (../shared/data/wikitext2/test.txt; a fixed
                 sentence when it is absent) as the fixture's tokenizer encodes them, BOS first
  tiny-llama, tiny-qwen2, tiny-gpt2
                 the 24 token ids of their reference.safetensors

Each file: token_ids I32 [n] and logits F32 [n, vocab] (one causal forward, float32, eager attention), and
greedy_prompt I32 [8] with greedy_ids I32 [32]: generate()'s 32 greedy tokens after the first 8 ids
(do_sample=False, no EOS stop). Deterministic: no random numbers are drawn.

  python3 -m venv /tmp/hfvenv && /tmp/hfvenv/bin/pip install torch transformers safetensors tokenizers
  /tmp/hfvenv/bin/python tools/make_transformers_reference.py        # versions used: see the README
"""
import sys
from pathlib import Path

import torch
import transformers
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests/fixtures/decoders"
TEXT = ROOT.parent / "shared/data/wikitext2/test.txt"
SENTENCE = "The quick brown fox jumps over the lazy dog, and the energy of each token is measured twice."
PROMPT, GREEDY, TRAINED_TOKENS = 8, 32, 64


def ids_for(name, folder):
    if name != "trained-llama":
        return load_file(str(folder / "reference.safetensors"))["token_ids"].tolist()
    text = TEXT.read_text(encoding="utf-8")[:4000] if TEXT.exists() else SENTENCE * 8
    return Tokenizer.from_file(str(folder / "tokenizer.json")).encode(text, add_special_tokens=True).ids[:TRAINED_TOKENS]


def main():
    torch.manual_seed(0)
    for name in ["trained-llama", "tiny-llama", "tiny-qwen2", "tiny-gpt2"]:
        folder = FIXTURES / name
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
        ids = ids_for(name, folder)
        prompt = ids[:PROMPT]
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].float()
            greedy = model.generate(torch.tensor([prompt]), max_new_tokens=GREEDY, min_new_tokens=GREEDY,
                                    do_sample=False, eos_token_id=None, pad_token_id=0)[0, PROMPT:]
        save_file({"token_ids": torch.tensor(ids, dtype=torch.int32), "logits": logits.contiguous(),
                   "greedy_prompt": torch.tensor(prompt, dtype=torch.int32),
                   "greedy_ids": greedy.to(torch.int32).contiguous()},
                  str(folder / "reference_transformers.safetensors"), metadata={"transformers": transformers.__version__,
                                                                                 "torch": torch.__version__})
        print(f"{name}: {len(ids)} tokens, transformers {transformers.__version__}, torch {torch.__version__}, "
              f"greedy {greedy.tolist()[:8]}...")
    return 0


if __name__ == "__main__":
    sys.exit(main())
