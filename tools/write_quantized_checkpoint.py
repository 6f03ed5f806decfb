#!/usr/bin/env python3
"""Writes a copy of a Hugging Face decoder or encoder-classifier checkpoint (safetensors + config.json)
as a pre-quantized checkpoint in one of the layouts people download: GPTQ, AWQ (gemm) or bitsandbytes
4-bit NF4. Plain
numpy (Debian's python3-numpy), written from the public format descriptions, independent of qjoule's
C++ code: qjoule's tests import what this writes, and this reads back what `qjoule export` writes.

Every transformer-block Linear (q/k/v/o_proj, gate/up/down_proj; a BERT or DistilBERT layer's Linears)
is quantized by rounding to nearest;
every other tensor is copied as FP32. With --dequantized DIR it also writes the FP32 checkpoint the
codes decode to (numpy's own dequantization), for comparing logits within a format's error budget.

Layouts (for Linear NAME, weight W [out, in]):
  gptq  NAME.qweight I32 [in/8, out]: input i's code in bits 4*(i%8) of word [i/8, o];
        NAME.qzeros I32 [groups, out/8]: output o's zero in bits 4*(o%8) of word [g, o/8], stored z-1
        unless checkpoint_format is gptq_v2; NAME.scales F16 [groups, out]; NAME.g_idx I32 [in].
        W[o, i] = (q - z[g_idx[i], o]) * s[g_idx[i], o]. desc_act: the columns are quantized in an
        order of decreasing column norm, groups formed in that order; g_idx maps each input to its group.
  awq   NAME.qweight I32 [in, out/8], NAME.qzeros I32 [groups, out/8]: word nibble k holds output
        8*w + (0, 2, 4, 6, 1, 3, 5, 7)[k]; scales F16 [groups, out]; zeros as is.
  bnb-nf4, bnb-nf4-dq  bitsandbytes Params4bit: NAME.weight U8 [out*in/2, 1] (flattened row-major, two
        codes a byte, first in the high nibble), NAME.weight.absmax (F32, or U8 codes of the dynamic map
        with double quantization plus nested_absmax / nested_quant_map), NAME.weight.quant_map, and
        NAME.weight.quant_state.bitsandbytes__nf4 (JSON bytes).

Usage: write_quantized_checkpoint.py SRC DST --layout gptq|awq|bnb-nf4|bnb-nf4-dq [--group-size G]
       [--sym] [--v1] [--desc-act] [--no-g-idx] [--dequantized DIR]
"""
import argparse
import json
import os
import shutil
import struct
import sys

import numpy as np

BLOCK_LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)  # word nibble k holds output 8*w + AWQ_ORDER[k]

# bitsandbytes' NF4 table (functional.get_4bit_type("nf4")) and the midpoints its CUDA kernel
# (dQuantizeNF4) compares x = w / absmax against, as FP32.
NF4 = np.array([-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
                -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
                0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
                0.7229568362236023, 1.0], dtype=np.float32)
NF4_MIDPOINTS = np.array([-0.8480964004993439, -0.6106329262256622, -0.4599952697753906, -0.33967943489551544,
                          -0.23460740596055984, -0.13791173323988914, -0.045525018125772476, 0.03979014977812767,
                          0.1202552504837513, 0.2035212516784668, 0.2920137718319893, 0.3893125355243683,
                          0.5016634166240692, 0.6427869200706482, 0.8614784181118011], dtype=np.float32)

NP_OF = {"F32": np.float32, "F16": np.float16, "I32": np.int32, "I64": np.int64, "U8": np.uint8, "I8": np.int8}
NAME_OF = {np.dtype(v): k for k, v in NP_OF.items()}


def read_safetensors(path):
    """name -> numpy array (BF16 widened to F32), in file order."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = blob[base + begin:base + end]
        if info["dtype"] == "BF16":
            bits = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
            arr = bits.view(np.float32)
        else:
            arr = np.frombuffer(raw, dtype=NP_OF[info["dtype"]])
        out[name] = arr.reshape(info["shape"]).copy()
    return out


def write_safetensors(path, tensors):
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr)
        raw = arr.tobytes()
        header[name] = {"dtype": NAME_OF[arr.dtype], "shape": list(arr.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def is_block_linear(name, t):
    """A transformer-block Linear: a decoder's q/k/v/o/gate/up/down_proj, or any 2-D weight inside a BERT
    (encoder.layer.N) or DistilBERT (transformer.layer.N) layer. Heads and embeddings stay unquantized."""
    if t.ndim != 2 or not name.endswith(".weight"):
        return False
    return any("." + p + ".weight" in name for p in BLOCK_LINEARS) or ".encoder.layer." in name or \
        ".transformer.layer." in name


# ---- GPTQ / AWQ ---------------------------------------------------------------------------------

def rtn_group(w, sym):
    """Round-to-nearest 4-bit codes of w [out, n] with one scale and zero per row (GPTQ's quantizer
    without the Hessian update): FP16 scale, integer zero, codes in [0, 15]."""
    if sym:
        xmax = np.maximum(np.abs(w).max(axis=1), 0)
        xmin = -xmax
    else:
        xmin = np.minimum(w.min(axis=1), 0)
        xmax = np.maximum(w.max(axis=1), 0)
    scale = ((xmax - xmin) / 15).astype(np.float16)
    scale = np.where(scale == 0, np.float16(1), scale)
    s32 = scale.astype(np.float32)
    zero = np.full(w.shape[0], 8, dtype=np.int64) if sym else np.clip(np.round(-xmin / s32), 0, 15).astype(np.int64)
    q = np.clip(np.round(w / s32[:, None]) + zero[:, None], 0, 15).astype(np.int64)
    return q, scale, zero


def quantize_groupwise(w, group_size, sym, desc_act):
    """codes [out, in], scales [groups, out] F16, zeros [groups, out], g_idx [in]."""
    out, n = w.shape
    g = n if group_size == -1 else group_size
    order = np.argsort(-np.linalg.norm(w, axis=0), kind="stable") if desc_act else np.arange(n)
    groups = (n + g - 1) // g
    codes = np.zeros((out, n), dtype=np.int64)
    scales = np.zeros((groups, out), dtype=np.float16)
    zeros = np.zeros((groups, out), dtype=np.int64)
    g_idx = np.zeros(n, dtype=np.int32)
    for j in range(groups):
        cols = order[j * g:(j + 1) * g]
        q, s, z = rtn_group(w[:, cols], sym)
        codes[:, cols] = q
        scales[j] = s
        zeros[j] = z
        g_idx[cols] = j
    return codes, scales, zeros, g_idx


def dequantize_groupwise(codes, scales, zeros, g_idx):
    s = scales.astype(np.float32)[g_idx].T  # [out, in]
    z = zeros[g_idx].T
    return ((codes - z).astype(np.float32) * s).astype(np.float32)


def pack_gptq(codes, zeros, v1):
    out, n = codes.shape
    qweight = np.zeros((n // 8, out), dtype=np.uint32)
    for k in range(8):
        qweight |= (codes[:, k::8].T.astype(np.uint32) & 15) << (4 * k)
    stored = (zeros - 1) & 15 if v1 else zeros
    qzeros = np.zeros((zeros.shape[0], out // 8), dtype=np.uint32)
    for k in range(8):
        qzeros |= (stored[:, k::8].astype(np.uint32) & 15) << (4 * k)
    return qweight.view(np.int32), qzeros.view(np.int32)


def pack_awq(codes, zeros):
    out, n = codes.shape
    qweight = np.zeros((n, out // 8), dtype=np.uint32)
    qzeros = np.zeros((zeros.shape[0], out // 8), dtype=np.uint32)
    for k, o in enumerate(AWQ_ORDER):
        qweight |= (codes[o::8, :].T.astype(np.uint32) & 15) << (4 * k)
        qzeros |= (zeros[:, o::8].astype(np.uint32) & 15) << (4 * k)
    return qweight.view(np.int32), qzeros.view(np.int32)


# ---- bitsandbytes NF4 ---------------------------------------------------------------------------

def nf4_codes(x):
    """bitsandbytes' dQuantizeNF4: the number of midpoints x is strictly above (FP32 compares)."""
    return (x[..., None] > NF4_MIDPOINTS).sum(axis=-1).astype(np.uint8)


def dynamic_map_signed():
    """bitsandbytes' create_dynamic_map(signed=True) as torch evaluates it in FP32: linspace(0.1, 1,
    2^i + 1) with torch's symmetric formula, means of neighbours, times +-10^(i-6); then 0 and 1."""
    data = []
    for i in range(7):
        n = 2 ** i + 1
        start, end = np.float32(0.1), np.float32(1.0)
        step = np.float32((end - start) / np.float32(n - 1))
        b = [start + step * np.float32(j) if j < n // 2 else end - step * np.float32(n - 1 - j) for j in range(n)]
        b = np.array(b, dtype=np.float32)
        means = (b[:-1] + b[1:]) / np.float32(2.0)
        power = np.float32(10.0 ** (i - 6))
        data += list(power * means) + list(-power * means)
    data += [np.float32(0.0), np.float32(1.0)]
    return np.array(sorted(data), dtype=np.float32)


def dynamic8_code(x, code):
    """bitsandbytes' dQuantize<0>: binary search from the middle entry, then the nearer bracket."""
    pivot, upper_pivot, lower_pivot = 127, 255, 0
    lower, upper = np.float32(-1.0), np.float32(1.0)
    val = code[pivot]
    i = 64
    while i > 0:
        if x > val:
            lower_pivot, lower, pivot = pivot, val, pivot + i
        else:
            upper_pivot, upper, pivot = pivot, val, pivot - i
        val = code[pivot]
        i >>= 1
    if upper_pivot == 255:
        upper = code[255]
    if lower_pivot == 0:
        lower = code[0]
    if x > val:
        return upper_pivot if x > (upper + val) * np.float32(0.5) else pivot
    return lower_pivot if x < (lower + val) * np.float32(0.5) else pivot


def quantize_bnb_nf4(w, double_quant):
    """The Params4bit tensors of w [out, in] and the FP32 weights they decode to."""
    out, n = w.shape
    flat = w.astype(np.float32).reshape(-1, 64)
    absmax = np.abs(flat).max(axis=1).astype(np.float32)
    inv = np.where(absmax > 0, np.float32(1.0) / np.where(absmax > 0, absmax, 1), 0).astype(np.float32)
    codes = nf4_codes((flat * inv[:, None]).astype(np.float32))
    codes[absmax == 0] = 7
    packed = ((codes[:, 0::2] << 4) | codes[:, 1::2]).astype(np.uint8).reshape(-1, 1)
    state = {"quant_type": "nf4", "blocksize": 64, "dtype": "float16", "shape": [out, n]}
    tensors = {"weight": packed, "weight.absmax": absmax, "weight.quant_map": NF4.copy()}
    decoded_absmax = absmax
    if double_quant:
        code = dynamic_map_signed()
        offset = np.float32(absmax.astype(np.float64).mean())
        centred = (absmax - offset).astype(np.float32)
        groups = (len(centred) + 255) // 256
        nested = np.zeros(groups, dtype=np.float32)
        qabs = np.zeros(len(centred), dtype=np.uint8)
        for g in range(groups):
            part = centred[g * 256:(g + 1) * 256]
            s = np.float32(np.abs(part).max())
            nested[g] = s
            if s == 0:
                qabs[g * 256:(g + 1) * 256] = 127
                continue
            inv_s = np.float32(1.0) / s
            qabs[g * 256:g * 256 + len(part)] = [dynamic8_code(np.float32(v * inv_s), code) for v in part]
        tensors.update({"weight.absmax": qabs, "weight.nested_absmax": nested, "weight.nested_quant_map": code})
        state.update({"nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": float(offset)})
        decoded_absmax = ((code[qabs] * np.repeat(nested, 256)[:len(qabs)]).astype(np.float32) + offset).astype(
            np.float32)
    tensors["weight.quant_state.bitsandbytes__nf4"] = np.frombuffer(json.dumps(state).encode(), dtype=np.uint8)
    decoded = (NF4[codes] * decoded_absmax[:, None]).astype(np.float32).reshape(out, n)
    return tensors, decoded


# ---- the checkpoint -----------------------------------------------------------------------------

def quantization_config(args):
    if args.layout == "gptq":
        return {"quant_method": "gptq", "bits": 4, "group_size": args.group_size, "sym": args.sym,
                "desc_act": args.desc_act, "checkpoint_format": "gptq" if args.v1 else "gptq_v2"}
    if args.layout == "awq":
        return {"quant_method": "awq", "bits": 4, "group_size": args.group_size, "version": "gemm",
                "zero_point": True}
    return {"quant_method": "bitsandbytes", "load_in_4bit": True, "load_in_8bit": False,
            "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": args.layout == "bnb-nf4-dq",
            "bnb_4bit_compute_dtype": "float16", "llm_int8_skip_modules": ["lm_head"]}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("src")
    p.add_argument("dst")
    p.add_argument("--layout", required=True, choices=["gptq", "awq", "bnb-nf4", "bnb-nf4-dq"])
    p.add_argument("--group-size", type=int, default=128)
    p.add_argument("--sym", action="store_true", help="gptq: symmetric (all zeros 8)")
    p.add_argument("--v1", action="store_true", help="gptq: the classic format (zeros stored minus one)")
    p.add_argument("--desc-act", action="store_true", help="gptq: act-order (g_idx not in order)")
    p.add_argument("--no-g-idx", action="store_true", help="gptq: leave g_idx out (allowed without act-order)")
    p.add_argument("--dequantized", help="also write the FP32 checkpoint the codes decode to here")
    args = p.parse_args()
    if args.layout == "awq" and (args.sym or args.desc_act or args.v1):
        sys.exit("write_quantized_checkpoint: --sym, --v1 and --desc-act are GPTQ options")

    src = read_safetensors(os.path.join(args.src, "model.safetensors"))
    out, deq = {}, {}
    for name, t in src.items():
        w = t.astype(np.float32)
        deq[name] = w
        if not is_block_linear(name, w):
            out[name] = w
            continue
        linear = name[:-len(".weight")]
        if args.layout.startswith("bnb"):
            tensors, decoded = quantize_bnb_nf4(w, args.layout == "bnb-nf4-dq")
            for suffix, arr in tensors.items():
                out[linear + "." + suffix] = arr
        else:
            codes, scales, zeros, g_idx = quantize_groupwise(w, args.group_size, args.sym, args.desc_act)
            if args.layout == "gptq":
                qweight, qzeros = pack_gptq(codes, zeros, args.v1)
            else:
                qweight, qzeros = pack_awq(codes, zeros)
            out[linear + ".qweight"] = qweight
            out[linear + ".qzeros"] = qzeros
            out[linear + ".scales"] = scales
            if args.layout == "gptq" and not args.no_g_idx:
                out[linear + ".g_idx"] = g_idx
            decoded = dequantize_groupwise(codes, scales, zeros, g_idx)
        deq[name] = decoded
    os.makedirs(args.dst, exist_ok=True)
    write_safetensors(os.path.join(args.dst, "model.safetensors"), out)
    with open(os.path.join(args.src, "config.json")) as f:
        config = json.load(f)
    config["quantization_config"] = quantization_config(args)
    with open(os.path.join(args.dst, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    for extra in ("tokenizer.json", "tokenizer_config.json"):
        if os.path.exists(os.path.join(args.src, extra)):
            shutil.copy(os.path.join(args.src, extra), os.path.join(args.dst, extra))
    if args.dequantized:
        os.makedirs(args.dequantized, exist_ok=True)
        write_safetensors(os.path.join(args.dequantized, "model.safetensors"), deq)
        with open(os.path.join(args.src, "config.json")) as f:
            plain = json.load(f)
        with open(os.path.join(args.dequantized, "config.json"), "w") as f:
            json.dump(plain, f, indent=2)
        for extra in ("tokenizer.json", "tokenizer_config.json"):
            if os.path.exists(os.path.join(args.src, extra)):
                shutil.copy(os.path.join(args.src, extra), os.path.join(args.dequantized, extra))


if __name__ == "__main__":
    main()
