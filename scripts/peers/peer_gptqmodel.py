"""GPTQModel's GPTQ beside qjoule's: the same model, calibration text and layout (4 bits, groups of 128,
symmetric, no act-order), its checkpoint scored by GPTQModel itself and run by qjoule.

  gptqmodel-int4-g128   GPTQModel's GPTQ (its defaults otherwise, damp 0.01 as qjoule's), calibrated on the
                        first --calib-sequences windows of --calib-tokens tokens of --calib, tokenized whole
                        without special tokens, exactly as `qjoule ... --calib` cuts them

The record: GPTQModel's own decoder on the CPU in FP32 activations (speed through its CPU kernel, named in the
kernel path) and its quality on the FP32
reference's tokens and windows (--kl-base, as every peer). Then `qjoule ppl` runs the checkpoint GPTQModel
wrote (qjoule reads GPTQ checkpoints as published) against the same reference: the two perplexities of one
checkpoint, printed and kept in the record's notes.

Run by scripts/peers/peers.sh in the GPTQModel environment (requirements-gptqmodel.lock).
"""

import json
import os
import subprocess
import time
import warnings

import peer_common as common

FORMATS = ["gptqmodel-int4-g128"]


def main():
    args = common.parse_args("GPTQModel", FORMATS, calibration=True)
    warnings.filterwarnings("ignore")
    from importlib.metadata import version
    engine = f"gptqmodel {version('gptqmodel')} (torch {version('torch')})"
    common.run_formats(args, lambda precision: engine, lambda precision, engine: run(args, precision, engine))


def calibration_windows(args, tokenizer):
    with open(args.calib, encoding="utf-8") as f:
        ids = tokenizer(f.read(), add_special_tokens=False)["input_ids"]
    n, length = args.calib_sequences, args.calib_tokens
    if len(ids) < n * length:
        raise ValueError(f"--calib {args.calib}: {len(ids)} tokens, fewer than {n} windows of {length}")
    return [{"input_ids": ids[s * length:(s + 1) * length], "attention_mask": [1] * length} for s in range(n)]


def run(args, precision, engine):
    # GPTQModel's CPU pool takes half the cores by default, and its model loader asks for 2 of them: on a
    # 2-core machine that is 1 < 2 and it refuses to start.
    os.environ.setdefault("GPTQMODEL_CPU_WORKERS", str(max(2, args.threads)))
    import torch
    from pathlib import Path

    import gptqmodel.looper.loop_processor
    from gptqmodel import GPTQModel, QuantizeConfig
    from transformers import AutoTokenizer
    # GPTQModel writes its quantization log into ./logs (the repository, run from there): into --work instead.
    gptqmodel.looper.loop_processor._PROJECT_LOG_DIR = Path(args.work) / "gptqmodel-logs"
    torch.set_num_threads(args.threads)
    checkpoint = os.path.join(args.work, common.model_label(args.model) + "-gptqmodel-int4-g128")
    started = time.perf_counter()
    if not os.path.exists(os.path.join(checkpoint, "config.json")):
        tokenizer = AutoTokenizer.from_pretrained(args.model)
        config = QuantizeConfig(bits=4, group_size=128, sym=True, desc_act=False, damp_percent=0.01)
        model = GPTQModel.load(args.model, config, device="cpu")
        model.quantize(calibration_windows(args, tokenizer), batch_size=1)
        model.save(checkpoint)
        del model
    quantized_s = time.perf_counter() - started
    # FP32 activations, as the FP32 reference and qjoule's own perplexities are computed (GPTQModel's default
    # for this checkpoint's BF16 config is BF16 arithmetic, another kernel: TorchCpuAvx512Linear).
    model = GPTQModel.load(checkpoint, device="cpu", dtype=torch.float32)
    prefill, decode = common.torch_decoder_phases(model, args, torch, last_logits_only=False)
    prefill()
    decode()
    notes = [f"GPTQ by GPTQModel on {args.calib}: {args.calib_sequences} windows of {args.calib_tokens} tokens, "
             f"4 bits, group 128, sym, no act-order, damp 0.01; {quantized_s:.1f} s (checkpoint {checkpoint})"]
    quality = None
    if args.kl_base:
        base = common.KlBase(args.kl_base)

        @torch.no_grad()
        def log_probs_of(window):
            return torch.log_softmax(model(input_ids=torch.tensor(window)[None]).logits[0].float(), -1).numpy()
        quality = common.quality_on(base, log_probs_of, common.base_text(base.path))
        theirs = quality["lm_ppl"]
        ours = qjoule_ppl(args, checkpoint, base)
        notes.append(f"qjoule ppl runs this checkpoint: PPL {ours:.6f}, GPTQModel's own {theirs:.6f} "
                     f"({(ours / theirs - 1) * 100:+.4f}%)")
        print(f"  {notes[-1]}", flush=True)
    kernels = sorted({type(m).__name__ for m in model.model.modules() if hasattr(m, "qweight")})
    common.bench(args, engine, precision, prefill, decode, model_bytes=common.torch_model_bytes(model.model),
                 kernel_path=f"gptqmodel {', '.join(kernels) or 'no quantized Linear found'} (CPU, FP32 activations)",
                 quality=quality, notes=notes)


def qjoule_ppl(args, checkpoint, base):
    """qjoule's perplexity of the checkpoint on the reference's text and windows."""
    out = os.path.join(args.work, "gptqmodel-qjoule-ppl.json")
    identity_text = common.base_text(base.path)
    subprocess.run([os.environ.get("QJOULE", "build/release/src/cli/qjoule"), "ppl", "--model", checkpoint,
                    "--text", identity_text, "--max-tokens", str(len(base.ids)), "--ctx", str(base.ctx),
                    "--stride", str(base.stride), "--kl-base", base.path, "--threads", str(args.threads),
                    "--json", out], check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        return json.load(f)["ppl"]


if __name__ == "__main__":
    main()
