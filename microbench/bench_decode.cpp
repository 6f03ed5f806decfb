// Decode and prefill speed of a decoder language model with TinyLlama-1.1B's shapes (random weights,
// qjoule/model/synthetic/synthetic_decoder.h; every format's weights larger than the last-level cache), in each
// format, next to this machine's triad bandwidth measured in the same run:
//   decode   tokens/s of greedy decoding (one token per step, KV cache, argmax included), median of
//            --repeats runs of --decode tokens after a --prompt token prefill;
//   GB/s     model_bytes × decode tokens/s: the bytes the model holds (every Linear as packed, plus the
//            FP32 embeddings, norms and head) read once per token — the figure the format's memory
//            traffic is judged by (embeddings are held but barely read, so this slightly overstates
//            the traffic and understates nothing);
//   % triad  GB/s over the measured STREAM triad bandwidth (qjoule/limits/memory_bandwidth.h);
//   prefill  tokens/s of one --prompt token prefill (median of --repeats).
// --shape mixtral: a Mixtral-shaped mixture (16 layers, 8 experts of FFN 5632, top-2), whose GB/s counts the bytes
// a token reads (its top-2 experts' Linears, DecoderLM::linear_reports' token_share), not the bytes held.
// A plain program (not Google Benchmark): about a minute per format on 2 cores at the default sizes.
//   bench_decode [--formats fp32,bf16,int8,w8,int4,nf4] [--threads 2] [--prompt 128] [--decode 32]
//                [--layers 22] [--vocab 4096] [--isa avx512_bf16|avx512|avx2|scalar] [--repeats 3]
//                [--shape tinyllama|mixtral]
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "qjoule/limits/memory_bandwidth.h"
#include "qjoule/kernels/linear_weight_only.h"
#include "qjoule/kernels/threads.h"
#include "qjoule/model/decoder_lm.h"
#include "qjoule/model/quantization_plan.h"
#include "qjoule/model/synthetic/synthetic_decoder.h"
#include "qjoule/quant/layer_policy.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    out.push_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Decode and prefill speed of a TinyLlama-shaped synthetic decoder per format, vs triad bandwidth"};
  std::string formats = "fp32,bf16,int8,w8,int4,nf4", isa = "avx512_bf16", shape = "tinyllama";
  int threads = 2, layers = 0, repeats = 3;
  int64_t prompt = 128, decode = 32, vocab = 4096;
  app.add_option("--formats", formats, "comma-separated precisions")->capture_default_str();
  app.add_option("--threads", threads, "threads")->capture_default_str()->check(CLI::Range(1, 1024));
  app.add_option("--prompt", prompt, "prompt tokens (prefill)")->capture_default_str()->check(CLI::Range(1, 1024));
  app.add_option("--decode", decode, "decode tokens per run")->capture_default_str()->check(CLI::Range(1, 1024));
  app.add_option("--layers", layers, "layers (default: the shape's; TinyLlama 22, Mixtral-shaped 16)")
      ->check(CLI::Range(1, 64));
  app.add_option("--shape", shape, "tinyllama, or mixtral (8 experts of FFN 5632, top-2)")
      ->capture_default_str()
      ->check(CLI::IsMember({"tinyllama", "mixtral"}));
  app.add_option("--vocab", vocab, "vocabulary")->capture_default_str()->check(CLI::Range(16, 200000));
  app.add_option("--repeats", repeats, "runs per phase (median)")->capture_default_str()->check(CLI::Range(1, 100));
  app.add_option("--isa", isa, "widest weight-only ISA")
      ->capture_default_str()
      ->check(CLI::IsMember({"avx512_bf16", "avx512", "avx2", "scalar"}));
  CLI11_PARSE(app, argc, argv);

  using qjoule::kernels::WeightOnlyIsa;
  qjoule::kernels::set_weight_only_isa_limit(isa == "avx512_bf16" ? WeightOnlyIsa::avx512_bf16
                                             : isa == "avx512"    ? WeightOnlyIsa::avx512
                                             : isa == "avx2"      ? WeightOnlyIsa::avx2
                                                                  : WeightOnlyIsa::scalar);
  qjoule::kernels::set_num_threads(threads);
  const auto& triad = qjoule::limits::measured_triad(threads);
  fmt::print("triad: {:.1f} GB/s on {} threads ({}; arrays of {} MiB, last-level cache {} MiB)\n", triad.gb_per_s,
             threads, qjoule::limits::triad_method(), triad.buffer_bytes >> 20, triad.llc_bytes >> 20);

  auto spec =
      shape == "mixtral" ? qjoule::model::mixtral_shapes_spec(vocab) : qjoule::model::tinyllama_shapes_spec(vocab);
  if (layers > 0) spec.num_layers = layers;
  const auto t_params = Clock::now();
  const qjoule::model::DecoderParams params = qjoule::model::synthetic_decoder_params(spec);
  fmt::print("model: {} layers, hidden {}, FFN {}, {} heads / {} KV heads, vocab {} (random weights, {:.1f} s)\n",
             spec.num_layers, spec.hidden_size, spec.intermediate_size, spec.num_heads, spec.num_kv_heads,
             spec.vocab_size, seconds_since(t_params));
  std::vector<int32_t> ids(static_cast<size_t>(prompt));
  for (int64_t i = 0; i < prompt; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919 + 13) % vocab);

  fmt::print("\n{:<8} {:>10} {:>10} {:>10} {:>8} {:>12}  {}\n", "format", "MiB/token", "decode t/s", "GB/s", "% triad",
             "prefill t/s", "kernels (Linears)");
  for (const std::string& format : split(formats)) {
    qjoule::quant::LayerPolicyOptions po;
    po.precision = format;
    const auto t_build = Clock::now();
    const qjoule::model::DecoderLM m(
        params, qjoule::model::quantized_linear_factory(qjoule::quant::LayerPolicy::parse(po), {}));
    const double build_s = seconds_since(t_build);
    auto cache = m.make_cache(prompt + decode);
    std::vector<float> logits(static_cast<size_t>(vocab));
    std::vector<double> prefill_s, decode_s;
    for (int r = 0; r <= repeats; ++r) {  // r = 0: warm-up
      cache.clear();
      const auto t0 = Clock::now();
      m.forward(ids.data(), prompt, cache, logits.data(), prompt - 1);
      if (r > 0) prefill_s.push_back(seconds_since(t0));
      int32_t token = argmax(logits);
      const auto t1 = Clock::now();
      for (int64_t i = 0; i < decode; ++i) {
        m.forward(&token, 1, cache, logits.data(), 0);
        token = argmax(logits);
      }
      if (r > 0) decode_s.push_back(seconds_since(t1));
    }
    const double decode_tps = static_cast<double>(decode) / median(decode_s);
    const double prefill_tps = static_cast<double>(prompt) / median(prefill_s);
    // What a decode step reads: every Linear but a mixture's unchosen experts (token_share), embeddings and norms.
    double bytes = static_cast<double>(m.bytes_held());
    for (const auto& r : m.linear_reports()) bytes -= static_cast<double>(r.bytes_held) * (1.0 - r.token_share);
    const double gbps = bytes * decode_tps / 1e9;
    std::string kernels;
    for (const auto& [path, count] : m.kernel_path_counts())
      kernels += fmt::format("{}{} ×{}", kernels.empty() ? "" : "; ", path, count);
    fmt::print("{:<8} {:>10.0f} {:>10.2f} {:>10.1f} {:>7.0f}% {:>12.1f}  {} (built in {:.1f} s)\n", format,
               bytes / (1 << 20), decode_tps, gbps, 100.0 * gbps / triad.gb_per_s, prefill_tps, kernels, build_s);
    std::fflush(stdout);
  }
  return 0;
}
