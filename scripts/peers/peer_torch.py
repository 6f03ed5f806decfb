"""Hugging Face transformers and TorchAO on the CPU, beside qjoule: one record per format.

  transformers-fp32, transformers-bf16   transformers' own model, eager PyTorch (what a user gets by default)
  torchao-int8wo                         TorchAO Int8WeightOnlyConfig (per-row INT8 weights), BF16 activations
  torchao-int8dq                         TorchAO Int8DynamicActivationInt8WeightConfig (W8A8, dynamic
                                         per-token activations), FP32 activations
  torchao-int4wo                         TorchAO Int4WeightOnlyConfig(group_size=32): where this TorchAO has
                                         no CPU kernel, a failed record saying so (never another format)

TorchAO's formats run as its documentation has them on the CPU: each Linear compiled (torch.compile,
inductor, dynamic shapes), so its kernels are the ones TorchAO generates; transformers' formats run eager.
Decode: the prompt's cache cut back to the prompt (DynamicCache.crop), then decode-tokens greedy steps, as
`qjoule bench` does; prefill keeps the last position's logits only (logits_to_keep=1), as qjoule's does.

Run by scripts/peers/peers.sh in the torch environment (requirements-torch.lock).
"""

import time
import warnings

import peer_common as common

FORMATS = ["transformers-fp32", "transformers-bf16", "torchao-int8wo", "torchao-int8dq", "torchao-int4wo"]


def compile_linears(model, torch):
    # Every Linear shares one code object (Linear.forward), which torch.compile caches per code object, up
    # to its recompile limit (8): without raising it, the 9th Linear on falls back to eager unnoticed.
    import torch._dynamo
    for name in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
                 "accumulated_recompile_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 4096)
    if hasattr(torch._dynamo.config, "fail_on_recompile_limit_hit"):
        torch._dynamo.config.fail_on_recompile_limit_hit = True  # never eager under TorchAO's name, silently
    count = 0
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            module.forward = torch.compile(module.forward, dynamic=True)
            count += 1
    return count


def main():
    args = common.parse_args("transformers / TorchAO", FORMATS)
    warnings.filterwarnings("ignore")
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, DynamicCache
    torch.set_num_threads(args.threads)
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    versions = {"transformers": f"transformers {transformers.__version__} (torch {torch.__version__})"}
    try:
        import torchao
        versions["torchao"] = f"torchao {torchao.__version__} (torch {torch.__version__})"
    except ImportError as e:
        versions["torchao"] = f"torchao (not importable: {e})"
    base = common.KlBase(args.kl_base) if args.kl_base else None
    common.run_formats(args, lambda precision: versions[precision.split("-")[0]],
                       lambda precision, engine: run_format(args, precision, engine, base, torch,
                                                            AutoModelForCausalLM, DynamicCache))


def run_format(args, precision, engine, base, torch, AutoModelForCausalLM, DynamicCache):
    dtype = torch.bfloat16 if precision in ("transformers-bf16", "torchao-int8wo", "torchao-int4wo") else torch.float32
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype).eval()
    notes, kernel = [], f"torch {dtype} aten::linear (eager)"
    if precision.startswith("torchao"):
        from torchao.quantization import (Int4WeightOnlyConfig, Int8DynamicActivationInt8WeightConfig,
                                          Int8WeightOnlyConfig, quantize_)
        config = {"torchao-int8wo": Int8WeightOnlyConfig(),
                  "torchao-int8dq": Int8DynamicActivationInt8WeightConfig(),
                  "torchao-int4wo": Int4WeightOnlyConfig(group_size=32)}[precision]
        started = time.perf_counter()
        quantize_(model, config)
        with torch.no_grad():  # a forward on the CPU: a config without a CPU kernel fails here, not mid-timing
            model(input_ids=torch.tensor([[3, 4]]))
        linears = compile_linears(model, torch)
        kernel = f"torchao {type(config).__name__} on {linears} Linears, torch.compile (inductor, dynamic) each"
        notes.append(f"quantized by TorchAO in {time.perf_counter() - started:.1f} s; Linears compiled on first use "
                     "(during the warm-up, outside the timed windows)")
    prefill, decode = common.torch_decoder_phases(model, args, torch,
                                                  new_cache=lambda: DynamicCache(config=model.config))

    with torch.no_grad():  # compiles (TorchAO) and the first prompt's cache, before the bench's own warm-up
        prefill()
        decode()
    quality = None
    if base is not None:
        if base.vocab != model.config.vocab_size:
            raise ValueError(f"--kl-base {base.path}: vocabulary {base.vocab}, the model's {model.config.vocab_size}")

        @torch.no_grad()
        def log_probs_of(window):
            logits = model(input_ids=torch.tensor(window)[None]).logits[0].float()
            return torch.log_softmax(logits, dim=-1).numpy()
        quality = common.quality_on(base, log_probs_of, common.base_text(base.path))
    notes.append("prompt: pseudo-random token ids (seed 1234); decode: DynamicCache cut back to the prompt, then "
                 f"{args.decode_tokens} greedy steps")
    common.bench(args, engine, precision, prefill, decode, kernel_path=kernel,
                 model_bytes=common.torch_model_bytes(model),
                 quality=quality, notes=notes)


if __name__ == "__main__":
    main()
