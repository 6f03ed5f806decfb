// roof_point against hand-computed rooflines, the limits' JSON both ways with its one-line errors, and
// which compute type a kernel path's prefill runs in.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bench/record_roofline.h"
#include "bench/roofline_work.h"
#include "error_of.h"
#include "qjoule/limits/machine_limits.h"
#include "qjoule/limits/roofline.h"
#include "qjoule/model/encoder_classifier.h"
#include "qjoule/model/quantization_plan.h"
#include "qjoule/model/synthetic/synthetic_encoder.h"
#include "qjoule/quant/layer_policy.h"
#include "small_encoder_spec.h"

namespace qjoule::limits {
namespace {

using test::error_of;
using ::testing::HasSubstr;

MachineLimits machine() {
  MachineLimits l;
  l.threads = 2;
  l.read_gb_per_s = 40.0;
  l.triad_gb_per_s = 30.0;
  l.fp32_gflops = 400.0;
  l.int8_gops = 1600.0;
  l.unavailable["bf16_gflops"] = "this CPU has no AVX512_BF16";
  l.method = "test";
  l.machine = "cpu=test";
  l.measured_at = "2026-11-26T00:00:00Z";
  return l;
}

TEST(Roofline, DecodeIsUnderTheMemoryRoofAndABigBatchUnderTheComputeRoof) {
  std::string why;
  // 2 FLOP per byte (a GEMV reading FP32-like weights), 10 tokens/s of 1 GB each: 10 GB/s of 40.
  auto p = roof_point({2e9, 1e9, ComputeType::fp32}, 10.0, machine(), why);
  ASSERT_TRUE(p) << why;
  EXPECT_DOUBLE_EQ(p->achieved_gflops, 20.0);
  EXPECT_DOUBLE_EQ(p->achieved_gb_per_s, 10.0);
  EXPECT_DOUBLE_EQ(p->roof_gflops, 80.0);  // 2 FLOP/B × 40 GB/s < 400
  EXPECT_DOUBLE_EQ(p->fraction, 0.25);
  EXPECT_EQ(p->bound, "memory: read 40.0 GB/s");
  // 1000 FLOP per byte: compute-bound; int8 against its own peak.
  p = roof_point({1e9, 1e6, ComputeType::int8}, 800.0, machine(), why);
  ASSERT_TRUE(p) << why;
  EXPECT_DOUBLE_EQ(p->roof_gflops, 1600.0);
  EXPECT_DOUBLE_EQ(p->fraction, 0.5);
  EXPECT_EQ(p->bound, "compute: int8 1600 GOP/s");
}

TEST(Roofline, ARunWhoseLimitsWereContendedSaysSoInItsNotes) {
  bench::RunRecord r;
  limits::CachedLimits quiet{machine(), true, "read from the cache"};
  bench::record_machine_limits(r, quiet);
  EXPECT_EQ(r.environment["machine_limits"]["contention"], "");
  EXPECT_TRUE(r.notes.empty());
  limits::CachedLimits contended{machine(), false, "measured"};
  contended.limits.contention = "other processes used 0.70 cores that its 2 threads needed while it was measured";
  bench::record_machine_limits(r, contended);
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_EQ(r.notes[0],
            "machine limits: other processes used 0.70 cores that its 2 threads needed while it was measured (they "
            "may be low, and this run's % roof figures high)");
}

TEST(Roofline, ADecodeAboveTheReadBandwidthSaysWhyItCanBe) {
  bench::RunRecord r;
  bench::record_decode_roofline(r, machine(), 2e9, 1e9, 38.0);  // 38 GB/s of 40: below, no note
  EXPECT_DOUBLE_EQ(*r.decode_roof_fraction, 0.95);
  EXPECT_TRUE(r.notes.empty());
  bench::record_decode_roofline(r, machine(), 2e9, 1e9, 43.0);  // 43 of 40: the fraction kept, and said
  EXPECT_DOUBLE_EQ(*r.decode_roof_fraction, 43.0 / 40.0);
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_EQ(r.notes[0],
            "decode read 43.0 GB/s, 108% of the limits' read bandwidth (40.0 GB/s): the bandwidth was measured low "
            "(`qjoule limits --refresh` on a quiet machine), or the weights were in the caches");
}

TEST(Roofline, ADecodeComparedWithTheReadBesideItSaysSoWhereTheHostsMemoryMovedFromTheLimits) {
  bench::RunRecord r;
  bench::record_decode_roofline(r, machine(), 2e9, 1e9, 30.0);  // 30 GB/s of the limits' 40
  limits::HostCapacity h;
  h.read_gb_per_s_before = 44.0;  // within 15% of 40: the fraction kept, no note
  h.read_gb_per_s_after = 42.0;
  bench::record_decode_read_beside(r, h, machine());
  EXPECT_DOUBLE_EQ(r.environment["host_capacity"]["decode_roof_fraction_beside"].get<double>(), 30.0 / 44.0);
  EXPECT_TRUE(r.notes.empty());
  h.read_gb_per_s_before = 60.0;
  h.read_gb_per_s_after.reset();
  bench::record_decode_read_beside(r, h, machine());
  EXPECT_DOUBLE_EQ(r.environment["host_capacity"]["decode_roof_fraction_beside"].get<double>(), 0.5);
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_EQ(r.notes[0],
            "decode read 30.0 GB/s: 75% of the limits' read bandwidth (40.0 GB/s) and 50% of the 60.0 GB/s the host "
            "gave beside this run (read probes 60.0 / - GB/s right before / after its windows): the host's memory ran "
            "faster than when the limits were measured");
  h.read_gb_per_s_before = 20.0;
  bench::record_decode_read_beside(r, h, machine());
  ASSERT_EQ(r.notes.size(), 2u);
  EXPECT_THAT(r.notes[1], HasSubstr("and 150% of the 20.0 GB/s the host gave beside this run"));
  EXPECT_THAT(r.notes[1], HasSubstr("ran slower than when the limits were measured"));
  bench::RunRecord encoder;  // no decode: nothing to compare
  bench::record_decode_read_beside(encoder, h, machine());
  EXPECT_FALSE(encoder.environment.contains("host_capacity"));
}

TEST(Roofline, WhatCannotBeComparedSaysWhy) {
  std::string why;
  EXPECT_FALSE(roof_point({1e9, 1e6, ComputeType::bf16}, 10.0, machine(), why));
  EXPECT_EQ(why, "no bf16 peak on this machine (this CPU has no AVX512_BF16)");
  EXPECT_FALSE(roof_point({1e9, 1e6, ComputeType::fp32}, 0.0, machine(), why));
  EXPECT_EQ(why, "no throughput measured");
  EXPECT_FALSE(roof_point({0.0, 1e6, ComputeType::fp32}, 10.0, machine(), why));
  EXPECT_EQ(why, "the phase's work is unknown");
  auto l = machine();
  l.read_gb_per_s.reset();
  EXPECT_FALSE(roof_point({1e9, 1e6, ComputeType::fp32}, 10.0, l, why));
  EXPECT_EQ(why, "the memory bandwidth was not measured");
}

TEST(Roofline, AGpuRunIsUnderItsDeviceCopyOrItsTypesCuBlasLtRate) {
  MachineLimits gpu;
  gpu.device = "cuda:0";
  gpu.read_gb_per_s = 3000.0;
  gpu.fp16_gflops = 700000.0;
  std::string why;
  auto p = roof_point({2e9, 1e9, ComputeType::fp16}, 300.0, gpu, why);  // decode-like: 300 GB/s of 3000
  ASSERT_TRUE(p) << why;
  EXPECT_DOUBLE_EQ(p->fraction, 0.1);
  EXPECT_EQ(p->bound, "memory: device copy 3000.0 GB/s");
  EXPECT_FALSE(roof_point({2e9, 1e6, ComputeType::fp8}, 300.0, gpu, why));
  EXPECT_EQ(why, "no fp8 peak on this machine (not measured)");
}

TEST(MachineLimitsJson, RoundTripsAndBadFilesAreOneLineNamingTheKey) {
  const auto json = to_json(machine());
  EXPECT_EQ(to_json(machine_limits_from_json(json)), json);
  EXPECT_TRUE(json["bf16_gflops"].is_null());
  auto bad = json;
  bad.erase("fp32_gflops");
  EXPECT_THAT(error_of([&] { machine_limits_from_json(bad); }),
              HasSubstr("machine limits: key 'fp32_gflops' is missing; expected a positive number or null"));
  bad = json;
  bad["read_gb_per_s"] = -3.0;
  EXPECT_THAT(error_of([&] { machine_limits_from_json(bad); }),
              HasSubstr("machine limits: 'read_gb_per_s' is -3.0; expected a positive number or null"));
  bad = json;
  bad["threads"] = "two";
  EXPECT_THAT(error_of([&] { machine_limits_from_json(bad); }),
              HasSubstr("machine limits: 'threads' is \"two\"; expected a thread count"));
  EXPECT_THAT(error_of([&] { machine_limits_from_json(nlohmann::json::array()); }),
              HasSubstr("machine limits: found array; expected a JSON object"));
  // "contention": absent in what earlier versions wrote (uncontended), else a string.
  auto old = json;
  old.erase("contention");
  EXPECT_EQ(machine_limits_from_json(old).contention, "");
  bad = json;
  bad["contention"] = 0.5;
  EXPECT_THAT(error_of([&] { machine_limits_from_json(bad); }),
              HasSubstr("machine limits: 'contention' is 0.5; expected a string (\"\" when uncontended)"));
}

TEST(PrefillComputeType, FromTheKernelPathThePrefillPartOfIt) {
  using bench::prefill_compute_type;
  EXPECT_EQ(prefill_compute_type("onednn:brg:avx512_core_vnni:u8s8s32"), ComputeType::int8);
  EXPECT_EQ(prefill_compute_type("qjoule:avx512_bf16:nf4_bf16,m>4:bf16_panel+onednn:brg:avx512_core_bf16:bf16bf16f32"),
            ComputeType::bf16);
  // The decode part multiplies in BF16, the prefill (what is measured) on FP32 panels.
  EXPECT_EQ(prefill_compute_type("qjoule:avx512_bf16:nf4_bf16,m>4:f32_panel+onednn:brg:avx512_core:f32"),
            ComputeType::fp32);
  EXPECT_EQ(prefill_compute_type("onednn:gemm:jit:f32"), ComputeType::fp32);
  // qjoule's own integer kernels at every m (int4:a8; int4's x16 kernel on repacked weights).
  EXPECT_EQ(prefill_compute_type("qjoule:avx512_vnni:int4_s8_repacked"), ComputeType::int8);
  EXPECT_EQ(prefill_compute_type("qjoule:avx2:int4_s8"), ComputeType::int8);
  EXPECT_EQ(prefill_compute_type("qjoule:avx512_vnni:int4_x16_repacked"), ComputeType::int8);
  // The avx512_bf16 level's repacked layers prefill on the rows' panels: the panels' type counts.
  EXPECT_EQ(prefill_compute_type("qjoule:avx512_vnni:nf4_x16_repacked,m>4:bf16_panel+onednn:brg:avx512_core_bf16:"
                                 "bf16bf16f32"),
            ComputeType::bf16);
  EXPECT_EQ(prefill_compute_type("qjoule:avx512_vnni:int4_x16_repacked,m>4:bf16_panel+onednn:brg:avx512_core_amx:"
                                 "bf16bf16f32"),
            ComputeType::amx_bf16);
  EXPECT_EQ(prefill_compute_type("qjoule:avx512_vnni:int4_x16_repacked,m>4:f32_panel+onednn:brg:avx512_core:f32"),
            ComputeType::fp32);
  EXPECT_EQ(prefill_compute_type("qjoule:avx512_vnni:int4_x16,m>4:f32_panel+onednn:brg:avx512_core:f32"),
            ComputeType::fp32);
  // The CUDA backend's cuBLASLt types; the 4-bit formats' prefill multiplies FP16 panels.
  EXPECT_EQ(prefill_compute_type("cublaslt:f16:tensor_op"), ComputeType::fp16);
  EXPECT_EQ(prefill_compute_type("qjoule:cuda:nf4_gemv+f16_cublaslt"), ComputeType::fp16);
  EXPECT_EQ(prefill_compute_type("cublaslt:tf32:tensor_op"), ComputeType::tf32);
  EXPECT_EQ(prefill_compute_type("cublaslt:bf16:tensor_op"), ComputeType::bf16);
  EXPECT_EQ(prefill_compute_type("cublaslt:s8:tensor_op"), ComputeType::int8);
  EXPECT_EQ(prefill_compute_type("cublaslt:e4m3:tensor_op"), ComputeType::fp8);
  EXPECT_EQ(prefill_compute_type("cublaslt:f32"), ComputeType::fp32);
  EXPECT_EQ(to_string(ComputeType::int8), "int8");
  // oneDNN on an AMX CPU: its ISA names the tiles (oneDNN 2: ..._amx_int8 / _amx_bf16; 3: avx512_core_amx).
  EXPECT_EQ(prefill_compute_type("qjoule:avx512_vnni:u8s8s32_gemv,m>4:onednn:brg:avx512_core_bf16_amx_int8:u8s8s32"),
            ComputeType::amx_int8);
  EXPECT_EQ(prefill_compute_type("qjoule:avx512_bf16:nf4_bf16,m>4:bf16_panel+onednn:brg:avx512_core_bf16_amx_bf16:"
                                 "bf16bf16f32"),
            ComputeType::amx_bf16);
  EXPECT_EQ(prefill_compute_type("onednn:brg:avx512_core_amx:u8s8s32"), ComputeType::amx_int8);
  EXPECT_EQ(prefill_compute_type("onednn:brg:avx512_core_amx:bf16bf16f32"), ComputeType::amx_bf16);
  EXPECT_EQ(peak_key(ComputeType::amx_int8), "amx_int8_gops");
  EXPECT_EQ(peak_key(ComputeType::amx_bf16), "amx_bf16_gflops");
  EXPECT_EQ(peak_key(ComputeType::int8), "int8_gops");
  EXPECT_EQ(peak_key(ComputeType::fp16), "fp16_gflops");
}

TEST(Roofline, AnAmxRunIsUnderTheTilesPeakNotTheDotProducts) {
  MachineLimits l = machine();
  l.amx_int8_gops = 16000.0;
  std::string why;
  // 2e9 OP and 1e6 bytes a token at 4e3 tokens/s: 8000 GOP/s, compute-bound, half the AMX INT8 peak
  // (five times the AVX-512 VNNI one it used to be compared with).
  auto p = roof_point({2e9, 1e6, ComputeType::amx_int8}, 4e3, l, why);
  ASSERT_TRUE(p) << why;
  EXPECT_DOUBLE_EQ(p->fraction, 0.5);
  EXPECT_EQ(p->bound, "compute: amx_int8 16000 GOP/s");
  l.unavailable["amx_bf16_gflops"] = "this CPU has no AMX tiles of this type";
  EXPECT_FALSE(roof_point({2e9, 1e6, ComputeType::amx_bf16}, 4e3, l, why));
  EXPECT_EQ(why, "no amx_bf16 peak on this machine (this CPU has no AMX tiles of this type)");
}

TEST(Roofline, AttentionsFp32ArithmeticBesideInt8GemmsTakesItsTimeAtTheFp32Peak) {
  std::string why;
  // 1e9 FLOP a token, a fifth of it attention in FP32: 0.8e9 / 1600 + 0.2e9 / 400 = 1e-3 s a
  // GFLOP-token, so the mix's roof is 1000 GFLOP/s (not the 1600 of the int8 GEMMs alone).
  PhaseWork mix{1e9, 1e6, ComputeType::int8};
  mix.fp32_flops_per_token = 0.2e9;
  auto p = roof_point(mix, 500.0, machine(), why);
  ASSERT_TRUE(p) << why;
  EXPECT_DOUBLE_EQ(p->roof_gflops, 1000.0);
  EXPECT_DOUBLE_EQ(p->fraction, 0.5);
  EXPECT_EQ(p->bound,
            "compute: int8 1600 GOP/s (GEMMs) + fp32 400 GFLOP/s (attention, 20% of the FLOPs): 1000 for the mix");
  // FP32 GEMMs: the attention runs at their peak anyway; the roof and the text are the FP32 peak's.
  PhaseWork fp32{1e9, 1e6, ComputeType::fp32};
  fp32.fp32_flops_per_token = 0.2e9;
  p = roof_point(fp32, 200.0, machine(), why);
  ASSERT_TRUE(p) << why;
  EXPECT_DOUBLE_EQ(p->roof_gflops, 400.0);
  EXPECT_EQ(p->bound, "compute: fp32 400 GFLOP/s");
  // Without an FP32 peak the mix cannot be compared: said, not guessed.
  auto l = machine();
  l.fp32_gflops.reset();
  l.unavailable["fp32_gflops"] = "this CPU has neither AVX-512 nor AVX2 with FMA";
  EXPECT_FALSE(roof_point(mix, 500.0, l, why));
  EXPECT_EQ(why,
            "no fp32 peak on this machine for the attention beside the int8 GEMMs (this CPU has neither AVX-512 nor "
            "AVX2 with FMA)");
}

TEST(Roofline, AnInt8EncodersBatchesCountTheirAttentionAsFp32Work) {
  const model::SyntheticEncoderSpec spec = test::small_encoder_spec();  // dim 64, 2 layers
  quant::LayerPolicyOptions o;
  o.precision = "int8";
  const model::EncoderClassifier m(model::synthetic_encoder_params(spec),
                                   model::quantized_linear_factory(quant::LayerPolicy::parse(o)));
  const PhaseWork w = bench::encoder_phase_work(m, 2, 16);
  EXPECT_EQ(w.compute, ComputeType::int8);
  EXPECT_DOUBLE_EQ(w.fp32_flops_per_token, 4.0 * 16 * 64 * 2);  // QKᵀ and P·V: 2 × 2 × seq × hidden × layers
  EXPECT_GT(w.flops_per_token, w.fp32_flops_per_token);         // the Linears' besides
}

TEST(MachineLimitsJson, TheAmxPeaksRoundTripAndVersion2ReadsWithoutThem) {
  MachineLimits l = machine();
  l.amx_bf16_gflops = 9000.0;
  const auto json = to_json(l);
  EXPECT_EQ(json["amx_bf16_gflops"], 9000.0);
  EXPECT_TRUE(json["amx_int8_gops"].is_null());
  EXPECT_EQ(machine_limits_from_json(json).amx_bf16_gflops, 9000.0);
  auto v2 = json;
  v2["version"] = 2;
  v2.erase("amx_bf16_gflops");
  v2.erase("amx_int8_gops");
  EXPECT_FALSE(machine_limits_from_json(v2).amx_bf16_gflops);
  auto bad = json;
  bad.erase("amx_int8_gops");
  EXPECT_THAT(error_of([&] { machine_limits_from_json(bad); }),
              HasSubstr("machine limits: key 'amx_int8_gops' is missing; expected a positive number or null"));
}

}  // namespace
}  // namespace qjoule::limits
