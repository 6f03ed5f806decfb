"""OpenVINO on the CPU (through optimum-intel and NNCF), beside qjoule: one record per format.

  openvino-fp32        the model exported with FP32 weights (from a BF16 checkpoint too), INFERENCE_PRECISION_HINT
                       f32 (without the hint OpenVINO runs BF16 arithmetic on CPUs with AVX512_BF16 or AMX)
  openvino-int8wo      NNCF weight compression to INT8 (its default: asymmetric, per output channel);
                       activations in the precision OpenVINO chooses on this CPU (recorded)
  openvino-int4wo-g32  NNCF INT4 symmetric, groups of 32, every Linear it may (ratio 1.0); NNCF keeps the
                       embeddings and the head in INT8 (its backup precision), as OpenVINO deploys them

The model is optimum-intel's stateful export (the KV cache lives in the infer request's state). Decode: the
state after the prompt is saved once and restored before each repetition (the cut back to the prompt
`qjoule bench` makes; a copy of the prompt's keys and values, inside the timed call), then decode-tokens
greedy steps through the infer request. The export's logits cover every prompt position.

Run by scripts/peers/peers.sh in the OpenVINO environment (requirements-openvino.lock).
"""

import time
import warnings

import numpy as np

import peer_common as common

FORMATS = ["openvino-fp32", "openvino-int8wo", "openvino-int4wo-g32"]


def main():
    args = common.parse_args("OpenVINO", FORMATS)
    warnings.filterwarnings("ignore")
    from importlib.metadata import version
    engine = f"openvino {version('openvino')} (optimum-intel {version('optimum-intel')}, nncf {version('nncf')})"
    base = common.KlBase(args.kl_base) if args.kl_base else None
    common.run_formats(args, lambda precision: engine,
                       lambda precision, engine: run_format(args, precision, engine, base))


def load(args, precision):
    import torch
    from optimum.intel import OVModelForCausalLM, OVWeightQuantizationConfig
    config = {"INFERENCE_NUM_THREADS": str(args.threads), "PERFORMANCE_HINT": "LATENCY", "CACHE_DIR": ""}
    # Exported from FP32 weights whatever the checkpoint's type (a BF16 checkpoint would otherwise give BF16
    # constants under the fp32 name); the compressed formats start from the same weights.
    kwargs = {"torch_dtype": torch.float32}
    if precision == "openvino-fp32":
        config["INFERENCE_PRECISION_HINT"] = "f32"
        kwargs["load_in_8bit"] = False  # optimum-intel compresses models over 1B parameters to INT8 by default
    elif precision == "openvino-int8wo":
        kwargs["quantization_config"] = OVWeightQuantizationConfig(bits=8)
    else:
        kwargs["quantization_config"] = OVWeightQuantizationConfig(bits=4, group_size=32, sym=True, ratio=1.0)
    return OVModelForCausalLM.from_pretrained(args.model, export=True, compile=True, ov_config=config, **kwargs)


def run_format(args, precision, engine, base):
    import openvino
    started = time.perf_counter()
    model = load(args, precision)
    request = model.request
    hint = request.get_compiled_model().get_property("INFERENCE_PRECISION_HINT")
    weights = sum(op.get_byte_size() for op in model.model.get_ops() if op.get_type_name() == "Constant")
    ids = common.prompt_ids(model.config.vocab_size, args.prompt_tokens)[None]
    n = args.prompt_tokens
    beam = np.array([0], dtype=np.int32)

    def infer(tokens, past):
        request.infer({"input_ids": tokens, "attention_mask": np.ones((1, past + tokens.shape[1]), dtype=np.int64),
                       "position_ids": np.arange(past, past + tokens.shape[1], dtype=np.int64)[None],
                       "beam_idx": beam})
        return request.get_tensor("logits").data

    state = {}

    def prefill():
        request.reset_state()
        state["first"] = int(np.argmax(infer(ids, 0)[0, -1]))

    prefill()
    saved = [(s, s.state.data.copy()) for s in request.query_state()]

    def decode():
        for s, data in saved:
            s.state = openvino.Tensor(data)
        token = state["first"]
        for i in range(args.decode_tokens):
            token = int(np.argmax(infer(np.array([[token]], dtype=np.int64), n + i)[0, -1]))

    decode()
    quality = None
    if base is not None:
        if base.vocab != model.config.vocab_size:
            raise ValueError(f"--kl-base {base.path}: vocabulary {base.vocab}, the model's {model.config.vocab_size}")

        def log_probs_of(window):
            request.reset_state()
            logits = infer(np.asarray(window, dtype=np.int64)[None], 0)[0].astype(np.float64)
            shifted = logits - logits.max(axis=-1, keepdims=True)
            return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
        quality = common.quality_on(base, log_probs_of, common.base_text(base.path))
    notes = [f"exported and compressed by optimum-intel / NNCF in {time.perf_counter() - started:.1f} s",
             "prompt: pseudo-random token ids (seed 1234); decode: the infer request's state after the prompt "
             f"restored, then {args.decode_tokens} greedy steps", f"activations: INFERENCE_PRECISION_HINT {hint}"]
    common.bench(args, engine, precision, prefill, decode,
                 kernel_path=f"openvino CPU plugin, stateful infer request, inference precision {hint}",
                 model_bytes=weights, quality=quality, notes=notes)


if __name__ == "__main__":
    main()
