#!/usr/bin/env python3
"""Reads a pre-quantized checkpoint (GPTQ v1 / v2, AWQ gemm, bitsandbytes NF4 with or without double
quantization) with numpy, from the public layouts (write_quantized_checkpoint.py's docstring), and writes
the FP32 checkpoint its codes decode to: the reverse direction of the layout tests, applied to what
`qjoule export` writes. Every tensor that is not a packed Linear is copied as FP32.

Usage: read_quantized_checkpoint.py QDIR OUT
"""
import json
import os
import shutil
import sys

import numpy as np

from write_quantized_checkpoint import AWQ_ORDER, read_safetensors, write_safetensors


def unpack_rows(words, order):
    """[r, c] int32 words -> [r, 8 c] nibbles, nibble k of word j at column 8 j + order[k]."""
    w = words.view(np.uint32)
    out = np.zeros((w.shape[0], w.shape[1] * 8), dtype=np.int64)
    for k, col in enumerate(order):
        out[:, col::8] = (w >> (4 * k)) & 15
    return out


def dequantize_gptq_awq(t, linear, qc):
    awq = qc["quant_method"] == "awq"
    qweight, qzeros = t.pop(linear + ".qweight"), t.pop(linear + ".qzeros")
    scales = t.pop(linear + ".scales").astype(np.float32)
    if awq:
        codes = unpack_rows(qweight, AWQ_ORDER).T  # [out, in]
        zeros = unpack_rows(qzeros, AWQ_ORDER)
    else:
        codes = unpack_rows(qweight.T.copy(), range(8))  # qweight [in/8, out] -> [out, in]
        zeros = unpack_rows(qzeros, range(8))
        if qc.get("checkpoint_format", "gptq") != "gptq_v2":
            zeros = zeros + 1
    n = codes.shape[1]
    g = qc.get("group_size", 128)
    g_idx = t.pop(linear + ".g_idx", None)
    if g_idx is None:
        g_idx = np.zeros(n, dtype=np.int64) if g == -1 else np.arange(n) // g
    s = scales[g_idx].T
    z = zeros[g_idx].T
    return ((codes - z).astype(np.float32) * s).astype(np.float32)


def dequantize_bnb(t, linear):
    base = linear + ".weight"
    state = json.loads(bytes(t.pop(base + ".quant_state.bitsandbytes__nf4")).decode())
    out, n = state["shape"]
    packed = t.pop(base).reshape(-1)
    codes = np.empty(packed.size * 2, dtype=np.int64)
    codes[0::2] = packed >> 4
    codes[1::2] = packed & 15
    table = t.pop(base + ".quant_map")
    absmax = t.pop(base + ".absmax")
    if "nested_offset" in state:
        nested = t.pop(base + ".nested_absmax")
        code = t.pop(base + ".nested_quant_map")
        per = np.repeat(nested, state["nested_blocksize"])[:absmax.size]
        absmax = ((code[absmax] * per).astype(np.float32) + np.float32(state["nested_offset"])).astype(np.float32)
    w = table[codes].reshape(-1, state["blocksize"]) * absmax[:, None]
    return w.astype(np.float32).reshape(out, n)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    qdir, out_dir = sys.argv[1], sys.argv[2]
    with open(os.path.join(qdir, "config.json")) as f:
        config = json.load(f)
    qc = config.pop("quantization_config")
    t = read_safetensors(os.path.join(qdir, "model.safetensors"))
    out = {}
    linears = sorted({n[:-len(".qweight")] for n in t if n.endswith(".qweight")} |
                     {n.split(".weight.quant_state.")[0] for n in t if ".weight.quant_state." in n})
    for linear in linears:
        if qc["quant_method"] == "bitsandbytes":
            out[linear + ".weight"] = dequantize_bnb(t, linear)
        else:
            out[linear + ".weight"] = dequantize_gptq_awq(t, linear, qc)
    for name, arr in t.items():
        out[name] = arr.astype(np.float32)
    os.makedirs(out_dir, exist_ok=True)
    write_safetensors(os.path.join(out_dir, "model.safetensors"), dict(sorted(out.items())))
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    for extra in ("tokenizer.json", "tokenizer_config.json"):
        if os.path.exists(os.path.join(qdir, extra)):
            shutil.copy(os.path.join(qdir, extra), os.path.join(out_dir, extra))


if __name__ == "__main__":
    main()
