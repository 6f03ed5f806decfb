// The CPU backend's rows (qjoule/kernels/backend_registry.h): per format, the function that builds its
// Linear from FP32 weights and the kernels it may run, per ISA, with the kernel path each writes. The
// weight-only kernels choose their ISA at run time (weight_only_isa(): the widest the CPU has); the
// dense ones are oneDNN's (its implementation, `*`, named in the path) behind qjoule's decode GEMVs.
#include <utility>

#include "kernels/cpu/backend_rows.h"
#include "qjoule/error.h"
#include "qjoule/kernels/linear_onednn_lowp.h"
#include "qjoule/kernels/linear_weight_only.h"

namespace qjoule::kernels::detail {

using quant::Format;

namespace {

// The kernels of a 4-bit weight-only format whose FP32 kernel is `k` ("int4_f32"): the x16 decode GEMV on
// AVX512_VNNI and on AVX2 (16-bit integer activations), the BF16 one on AVX512_BF16, FP32 below; prefill (m > 4)
// in BF16 or FP32 panels for oneDNN's matmul on AVX-512, in the AVX2 kernel otherwise.
std::vector<KernelVariant> four_bit_kernels(const std::string& k) {
  const std::string stem = k.substr(0, k.size() - 4);  // "int4"
  return {
      {"avx512_vnni", "qjoule:avx512_vnni:" + stem + "_x16,m>4:*", "decode: 16-bit integer activations per block"},
      {"avx512_bf16", "qjoule:avx512_bf16:" + stem + "_bf16,m>4:*", "decode: BF16 products; prefill: panels"},
      {"avx512", "qjoule:avx512:" + k + ",m>4:qjoule:avx2:" + k, "FP32 FMA"},
      {"avx2", "qjoule:avx2:" + stem + "_x16,m>4:qjoule:avx2:" + k,
       "decode: 16-bit integer activations per block, vpmaddwd; prefill: FP32 FMA"},
      {"avx2", "qjoule:avx2:" + k, "FP32 FMA"},
      {"scalar", "qjoule:scalar:" + k, "the scalar twin"},
  };
}

// A 4-bit format whose weights are repacked at load on AVX512_VNNI for the x16 kernel ("int4", "nf4", "nf4dq",
// "mxfp4", "nvfp4"): where the rows' BF16 panels run on AMX tiles its prefill on those panels decoded from them,
// elsewhere (or with QJOULE_REPACKED_PREFILL=x16) the x16 kernel at every m; then its row-wise kernels
// (QJOULE_WEIGHT_ONLY_LAYOUT=rows, QJOULE_WEIGHT_ONLY_DECODE=float).
std::vector<KernelVariant> repacked_x16_kernels(const std::string& stem) {
  std::vector<KernelVariant> out = {
      {"amx", "qjoule:avx512_vnni:" + stem + "_x16_repacked,m>4:*",
       "decode: 16-bit integer activations on weights repacked at load; prefill: BF16 panels decoded from them, "
       "on AMX tiles"},
      {"avx512_vnni", "qjoule:avx512_vnni:" + stem + "_x16_repacked",
       "16-bit integer activations on weights repacked at load, every m"}};
  for (auto& v : four_bit_kernels(stem + "_f32")) out.push_back(std::move(v));
  return out;
}

}  // namespace

std::vector<BackendFormat> cpu_builtin_formats() {
  std::vector<BackendFormat> rows;
  rows.push_back({Format::fp32,
                  {{"avx512", "qjoule:avx512:f32_gemv,m>4:onednn:*:f32", "decode: qjoule's FP32 GEMV"},
                   {"any", "onednn:*:f32", "oneDNN's FP32 matmul"}},
                  [](const quant::FormatSpec&, const float* W, const float* bias, int64_t out, int64_t in,
                     const std::string&, const float*) { return make_linear_f32_onednn(W, bias, out, in); }});
  rows.push_back({Format::bf16,
                  {{"avx512_bf16", "qjoule:avx512_bf16:bf16_gemv,m>4:*", "decode: vdpbf16ps GEMV; prefill: oneDNN"},
                   {"any", "onednn:*:bf16bf16f32", "oneDNN's BF16 matmul (AVX512_BF16, AMX)"},
                   {"avx2", "qjoule:avx2:bf16w_bf16a_f32acc", "BF16 widened in registers, FP32 FMA"},
                   {"scalar", "qjoule:scalar:bf16w_bf16a_f32acc", "the scalar twin"}},
                  [](const quant::FormatSpec&, const float* W, const float* bias, int64_t out, int64_t in,
                     const std::string& name, const float*) { return make_linear_bf16(W, bias, out, in, name); }});
  rows.push_back(
      {Format::fp16,
       {{"avx512", "qjoule:avx512:f16w_f32,m>4:*", "decode: F16C conversion, FP32 FMA; prefill: panels"},
        {"avx2", "qjoule:avx2:f16w_f32*", "F16C conversion, FP32 FMA"},
        {"scalar", "qjoule:scalar:f16w_f32", "the scalar twin"}},
       [](const quant::FormatSpec&, const float* W, const float* bias, int64_t out, int64_t in, const std::string& name,
          const float*) { return make_linear_fp16_weights(W, bias, out, in, name); }});
  rows.push_back(
      {Format::int8,
       {{"avx512_vnni", "qjoule:avx512_vnni:u8s8s32_gemv,m>4:onednn:*:u8s8s32*", "decode: vpdpbusd GEMV"},
        {"any", "onednn:*:u8s8s32*", "oneDNN's u8 x s8 matmul (w7bit without VNNI)"}},
       [](const quant::FormatSpec&, const float* W, const float* bias, int64_t out, int64_t in, const std::string& name,
          const float* smoothing) { return make_linear_int8_w8a8(W, bias, out, in, name, smoothing); },
       /*takes_smoothing=*/true});
  rows.push_back({Format::w8,
                  {{"avx512", "qjoule:avx512:w8_x16,m>4:*", "decode: 16-bit integer activations"},
                   {"avx512_bf16", "qjoule:avx512_bf16:w8_bf16,m>4:*", "decode: BF16 products; prefill: panels"},
                   {"avx512", "qjoule:avx512:w8_f32,m>4:qjoule:avx2:w8_f32", "FP32 FMA"},
                   {"avx2", "qjoule:avx2:w8_x16,m>4:qjoule:avx2:w8_f32", "decode: 16-bit integer activations"},
                   {"avx2", "qjoule:avx2:w8_f32", "FP32 FMA"},
                   {"scalar", "qjoule:scalar:w8_f32", "the scalar twin"}},
                  [](const quant::FormatSpec&, const float* W, const float* bias, int64_t out, int64_t in,
                     const std::string& name, const float*) { return make_linear_w8(W, bias, out, in, name); }});
  std::vector<KernelVariant> int4 = repacked_x16_kernels("int4");
  int4.push_back({"avx512_vnni", "qjoule:avx512_vnni:int4_s8_repacked",
                  "a8: INT8 activations per block, integer dots on weights repacked at load into 16-row panels"});
  for (const char* isa : {"avx512_vnni", "avx_vnni", "avx2", "scalar"})
    int4.push_back({isa, fmt::format("qjoule:{}:int4_s8", isa), "a8: INT8 activations per block, integer dots"});
  rows.push_back({Format::int4, std::move(int4),
                  [](const quant::FormatSpec& f, const float* W, const float* bias, int64_t out, int64_t in,
                     const std::string& name, const float*) {
                    Int4Options o;
                    o.group_size = f.group_size;
                    o.asymmetric = f.int4_asymmetric;
                    o.int8_activations = f.int4_int8_activations;
                    return make_linear_int4(W, bias, out, in, o, name);
                  }});
  std::vector<KernelVariant> nf4 = repacked_x16_kernels("nf4");
  for (auto& v : repacked_x16_kernels("nf4dq")) nf4.push_back(std::move(v));
  rows.push_back({Format::nf4, std::move(nf4),
                  [](const quant::FormatSpec& f, const float* W, const float* bias, int64_t out, int64_t in,
                     const std::string& name, const float*) {
                    Nf4Options o;
                    o.double_quant = f.nf4_double_quant;
                    return make_linear_nf4(W, bias, out, in, o, name);
                  }});
  rows.push_back({Format::mxfp4, repacked_x16_kernels("mxfp4"),
                  [](const quant::FormatSpec&, const float* W, const float* bias, int64_t out, int64_t in,
                     const std::string& name, const float*) { return make_linear_mxfp4(W, bias, out, in, name); }});
  rows.push_back({Format::nvfp4, repacked_x16_kernels("nvfp4"),
                  [](const quant::FormatSpec&, const float* W, const float* bias, int64_t out, int64_t in,
                     const std::string& name, const float*) { return make_linear_nvfp4(W, bias, out, in, name); }});
  return rows;
}

}  // namespace qjoule::kernels::detail
