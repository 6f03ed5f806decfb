#!/usr/bin/env python3
"""Writes tests/fixtures/fp4/reference.json: MXFP4 and NVFP4 codes, scales and decoded values of a small
matrix, computed in NumPy straight from the definitions (OCP Microscaling v1.0: E2M1 elements, E8M0 block
scales of 32; NVIDIA NVFP4: E2M1 elements, FP8 E4M3 block scales of 16, an FP32 tensor scale), not from
qjoule's code: the C++ references (src/quant/quantize_fp4.cpp) must give the same bits.

E2M1 and E4M3 are encoded by searching their value lists for the nearest value (a tie to the even
code), which is what round-to-nearest-even means for them; the MX scale is floor(log2(amax)) - 2.

  /usr/bin/python3 tools/make_fp4_reference.py tests/fixtures/fp4/reference.json   (Debian python3-numpy)
"""

import json
import sys

import numpy as np

E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=np.float64)


def e4m3_positive_values():
    """Codes 0x00..0x7E (0x7F is NaN): value of each, by the E4M3FN definition."""
    out = []
    for code in range(0x7F):
        e, m = code >> 3, code & 7
        out.append(m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))
    return np.array(out)


E4M3 = e4m3_positive_values()


def nearest_even(values, a):
    """Index of the value nearest to a >= 0, a tie taking the even index; beyond the last: the last."""
    if a >= values[-1]:
        return len(values) - 1
    d = np.abs(values - a)
    best = np.flatnonzero(d == d.min())
    return int(best[0] if len(best) == 1 or best[0] % 2 == 0 else best[1])


def e2m1_code(x):
    code = nearest_even(E2M1, abs(float(x)))
    return code | 8 if code != 0 and np.signbit(x) else code


def e4m3_code(x):
    return 0 if not x > 0 else nearest_even(E4M3, float(x))


def blocks(row, size):
    return [row[i:i + size] for i in range(0, len(row), size)]


def mxfp4(w):
    scales, codes, values = [], [], []
    for row in w:
        for blk in blocks(row, 32):
            amax = float(np.max(np.abs(blk)))
            shared = int(np.clip(np.floor(np.log2(amax)) - 2, -127, 127)) if amax > 0 else -127
            scale = 2.0 ** shared
            scales.append(shared + 127 if amax > 0 else 0)
            c = [e2m1_code(np.float32(v) / np.float32(scale)) if amax > 0 else 0 for v in blk]
            codes += c
            values += [float(np.float32(E2M1[k & 7] * (-1 if k & 8 else 1)) * np.float32(scale)) for k in c]
    return scales, codes, values


def nvfp4(w):
    f = np.float32
    amax = f(np.max(np.abs(w)))
    s_t = amax / f(6 * 448) if amax > 0 else f(1)
    scales, codes, values = [], [], []
    for row in w:
        for blk in blocks(row, 16):
            s_b_code = e4m3_code(f(np.max(np.abs(blk))) / f(6) / s_t)
            s_b = f(E4M3[s_b_code])
            denom = s_b * s_t
            c = [e2m1_code(f(v) / denom) if denom != 0 else 0 for v in blk]
            scales.append(s_b_code)
            codes += c
            values += [float(f(f(E2M1[k & 7] * (-1 if k & 8 else 1)) * s_b) * s_t) for k in c]
    return float(s_t), scales, codes, values


def matrix():
    rng = np.random.default_rng(7)
    w = rng.standard_normal((3, 70)).astype(np.float32) * np.float32(0.05)
    w[0, :32] = np.float32(0.0)                                # an all-zero block
    w[1, :8] = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -5.0], dtype=np.float32)  # E2M1 ties (scale 1)
    w[1, 8:32] = np.float32(0.5)
    w[1, 31] = np.float32(7.9)                                 # saturates at 6 in its block
    w[2, 40:50] = np.float32(1e-30)                            # tiny values
    return w


def main():
    w = matrix()
    mx_scales, mx_codes, mx_values = mxfp4(w)
    s_t, nv_scales, nv_codes, nv_values = nvfp4(w)
    out = {"rows": int(w.shape[0]), "cols": int(w.shape[1]), "w": [float(v) for v in w.ravel()],
           "mxfp4": {"scales": mx_scales, "codes": mx_codes, "values": mx_values},
           "nvfp4": {"tensor_scale": s_t, "scales": nv_scales, "codes": nv_codes, "values": nv_values},
           "e4m3_values": [float(v) for v in E4M3]}
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=0)
        f.write("\n")


if __name__ == "__main__":
    main()
