#include "qjoule/model/gptq_calibration.h"

#include <chrono>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "qjoule/error.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/kernels/linear.h"
#include "qjoule/kernels/linear_weight_only.h"
#include "qjoule/model/decoder_config.h"
#include "qjoule/model/decoder_lm.h"
#include "qjoule/model/decoder_params.h"
#include "qjoule/model/quantization_plan.h"
#include "qjoule/quant/gptq.h"

namespace qjoule::model {
namespace {

// f(BlockInt4Sym<G>{} or BlockInt4Asym<G>{}) for the spec's group size and scheme.
template <class F>
auto with_int4_block(const quant::FormatSpec& spec, F&& f) {
  const auto with_group = [&]<int G>() {
    if (spec.int4_asymmetric) return f(quant::BlockInt4Asym<G>{});
    return f(quant::BlockInt4Sym<G>{});
  };
  switch (spec.group_size) {
    case 32: return with_group.template operator()<32>();
    case 64: return with_group.template operator()<64>();
    default: return with_group.template operator()<128>();
  }
}

// Σ x xᵀ of the inputs that Linears reading the same activations share (Q, K, V; gate, up).
struct InputStatistics {
  std::vector<float> hessian;
  int64_t tokens = 0;
};

// A Linear that GPTQ calibrates: before its block starts it holds nothing; begin() reads its FP32
// weights and runs on them while the first Linear of its input group sums Σ x xᵀ of the inputs (the
// others read the same activations); quantize() turns them into int4 codes and runs those from then on
// (the FP32 weights and the sums dropped).
class GptqLinear final : public kernels::Linear {
 public:
  GptqLinear(LinearParams shape, std::function<void(LinearParams&)> load, quant::FormatSpec spec,
             std::shared_ptr<InputStatistics> stats, bool records)
      : shape_(std::move(shape)), load_(std::move(load)), spec_(spec), stats_(std::move(stats)), records_(records) {}

  void begin() {
    LinearParams p = shape_;
    load_(p);
    weight_ = std::move(p.weight);
    bias_ = std::move(p.bias);
    active_ = kernels::make_linear_f32_onednn(weight_.data(), bias_.empty() ? nullptr : bias_.data(),
                                              shape_.out_features, shape_.in_features);
    if (records_) {
      stats_->hessian.assign(static_cast<std::size_t>(shape_.in_features * shape_.in_features), 0.0f);
      stats_->tokens = 0;
    }
    recording_ = true;
  }

  void quantize(double damp, CalibratedInt4& out) {
    recording_ = false;
    if (stats_->tokens == 0)
      fail("{}: no calibration input reached this Linear; expected its block to run first", shape_.name);
    const quant::GptqOptions options{damp, spec_.int4_act_order, 128};
    // The last Linear of the group takes the sums; the others copy them.
    std::vector<float> hessian = stats_.use_count() == 1 ? std::move(stats_->hessian) : stats_->hessian;
    stats_.reset();
    with_int4_block(spec_, [&]<class Block>(Block) {
      auto codes = quant::quantize_matrix_int4_gptq<Block>(weight_.data(), shape_.out_features, shape_.in_features,
                                                           std::move(hessian), options, shape_.name);
      active_ = kernels::make_linear_int4_packed(codes, bias_.empty() ? nullptr : bias_.data(), shape_.name);
      out.codes.insert_or_assign(shape_.name, Int4Codes(std::move(codes)));
    });
    std::vector<float>().swap(weight_);
  }

  void forward(const float* x, int64_t m, float* y) const override {
    if (!active_) fail("{}: run before its calibration block started", shape_.name);
    if (recording_ && records_) {
      const int64_t in = shape_.in_features;
      for (int64_t i = 0; i < m * in; ++i) {
        if (!std::isfinite(x[i])) {
          fail("{}: calibration input {} at [{}, {}]; expected finite values (GPTQ sums x xᵀ of every input)",
               shape_.name, std::isnan(x[i]) ? "NaN" : (x[i] > 0 ? "+Inf" : "-Inf"), i / in, i % in);
        }
      }
      quant::accumulate_hessian(x, m, in, stats_->hessian);
      stats_->tokens += m;
    }
    active_->forward(x, m, y);
  }
  int64_t in_features() const override { return shape_.in_features; }
  int64_t out_features() const override { return shape_.out_features; }
  std::string format() const override { return active_ ? active_->format() : "fp32"; }
  std::string kernel_path() const override { return active_ ? active_->kernel_path() : "calibration:not started"; }
  std::size_t bytes_held() const override { return active_ ? active_->bytes_held() : 0; }

 private:
  LinearParams shape_;
  std::function<void(LinearParams&)> load_;
  quant::FormatSpec spec_;
  std::vector<float> weight_, bias_;
  std::unique_ptr<kernels::Linear> active_;
  std::shared_ptr<InputStatistics> stats_;  // shared with the Linears reading the same input
  bool records_ = false;                    // the group's first: sums the inputs
  bool recording_ = false;
};

// Linear name -> the first Linear reading the same input (Q, K, V; gate, up): who shares whose sums.
void add_input_groups(const DecoderLayerParams& lp, std::map<std::string, std::string>& group_of) {
  for (const auto& group :
       {std::vector<const LinearParams*>{&lp.q, &lp.k, &lp.v}, std::vector<const LinearParams*>{&lp.gate, &lp.up}}) {
    for (const LinearParams* p : group) {
      if (!p->name.empty()) group_of[p->name] = group.front()->name;
    }
  }
}

std::vector<std::string> block_linear_names(const DecoderLayerParams& lp) {
  std::vector<std::string> names;
  for (const LinearParams* p : {&lp.qkv, &lp.q, &lp.k, &lp.v, &lp.o, &lp.gate, &lp.up, &lp.down}) {
    if (!p->name.empty()) names.push_back(p->name);
  }
  return names;
}

std::string duration_text(double seconds) {
  if (seconds < 90.0) return fmt::format("{:.0f} s", seconds);
  return fmt::format("{:.0f} min {:.0f} s", std::floor(seconds / 60.0), std::fmod(seconds, 60.0));
}

}  // namespace

bool policy_needs_calibration(const quant::LayerPolicy& policy) {
  if (quant::needs_calibration(policy.precision_spec())) return true;
  for (const auto& rule : policy.rules()) {
    if (quant::needs_calibration(rule.spec)) return true;
  }
  return false;
}

std::vector<std::vector<int32_t>> calibration_windows(const std::vector<int32_t>& tokens, int64_t n, int64_t len,
                                                      const std::string& source) {
  if (n <= 0 || len <= 0) fail("{}: {} calibration sequences of {} tokens; expected both positive", source, n, len);
  const int64_t have = static_cast<int64_t>(tokens.size());
  if (have < n * len) {
    fail(
        "{}: {} tokens, too few for {} calibration sequences of {} tokens ({} needed); expected a longer text, or "
        "fewer / shorter sequences (--calib-sequences, --calib-tokens)",
        source, have, n, len, n * len);
  }
  std::vector<std::vector<int32_t>> out;
  for (int64_t s = 0; s < n; ++s) out.emplace_back(tokens.begin() + s * len, tokens.begin() + (s + 1) * len);
  return out;
}

CalibratedInt4 calibrate_gptq(const std::filesystem::path& dir, const quant::LayerPolicy& policy,
                              const std::vector<std::vector<int32_t>>& sequences,
                              const GptqCalibrationOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  const auto ck = std::make_shared<const io::Checkpoint>(io::Checkpoint::open(dir.string()));
  auto config = load_decoder_config(dir.string(), *ck);
  if (config.quantization)
    fail("{}: a pre-quantized checkpoint; GPTQ calibrates FP32 / BF16 / FP16 weights, expected such a checkpoint",
         dir.string());
  if (sequences.empty()) fail("{}: no calibration sequences; expected at least one", dir.string());
  auto params = load_decoder_params(*ck, config, /*defer_linears=*/true);
  std::function<void(LinearParams&)> load = [ck, inner = std::move(params.load_linear)](LinearParams& p) { inner(p); };
  params.load_linear = nullptr;  // the factory reads what it needs: Q, K, V (and gate, up) built apart
  std::vector<std::vector<std::string>> layer_names;
  std::map<std::string, std::string> group_of;
  for (const auto& lp : params.layers) {
    layer_names.push_back(block_linear_names(lp));
    add_input_groups(lp, group_of);
  }
  std::map<std::string, std::shared_ptr<InputStatistics>> statistics;  // by group

  std::map<std::string, GptqLinear*> calibrated_here;
  const LinearFactory policy_linears = quantized_linear_factory(policy);
  DecoderLM model(std::move(params), [&](const LinearParams& p, bool in_block) -> std::unique_ptr<kernels::Linear> {
    const auto decision = policy.resolve(p.name, in_block);
    if (in_block && quant::needs_calibration(decision.spec)) {
      const auto group = group_of.count(p.name) != 0 ? group_of.at(p.name) : p.name;
      auto& stats = statistics[group];
      const bool records = stats == nullptr;  // the group's first calibrated Linear sums for all
      if (records) stats = std::make_shared<InputStatistics>();
      auto linear = std::make_unique<GptqLinear>(p, load, decision.spec, stats, records);
      calibrated_here[p.name] = linear.get();
      return linear;
    }
    LinearParams full = p;
    load(full);
    return policy_linears(full, in_block);
  });

  statistics.clear();  // the Linears hold the only references: the last of a group takes the sums
  const int64_t hidden = model.config().hidden_size;
  std::vector<std::vector<float>> states;  // each sequence's residual stream, block by block
  for (const auto& s : sequences) {
    states.emplace_back(s.size() * static_cast<std::size_t>(hidden));
    model.embed(s.data(), static_cast<int64_t>(s.size()), states.back().data());
  }
  CalibratedInt4 out;
  out.sequences = static_cast<int64_t>(sequences.size());
  out.tokens_per_sequence = static_cast<int64_t>(sequences.front().size());
  out.damp = options.damp;
  const int64_t layers = static_cast<int64_t>(layer_names.size());
  for (int64_t i = 0; i < layers; ++i) {
    const auto block_started = std::chrono::steady_clock::now();
    std::vector<GptqLinear*> here;
    for (const auto& name : layer_names[static_cast<std::size_t>(i)]) {
      if (auto it = calibrated_here.find(name); it != calibrated_here.end()) here.push_back(it->second);
    }
    if (!here.empty()) {
      for (GptqLinear* l : here) l->begin();
      for (const auto& x : states) {  // FP32 block: the inputs each Linear sums (outputs dropped)
        std::vector<float> scratch = x;
        model.forward_layer(i, scratch.data(), static_cast<int64_t>(scratch.size()) / hidden);
      }
      for (GptqLinear* l : here) l->quantize(options.damp, out);
    }
    for (auto& x : states) model.forward_layer(i, x.data(), static_cast<int64_t>(x.size()) / hidden);
    if (options.progress) {
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      const double block_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - block_started).count();
      options.progress(fmt::format("block {}/{} calibrated ({} Linears, GPTQ) in {:.1f} s; about {} left", i + 1,
                                   layers, here.size(), block_s,
                                   duration_text(elapsed / double(i + 1) * double(layers - i - 1))));
    }
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return out;
}

LinearFactory calibrated_linear_factory(LinearFactory fallback, std::shared_ptr<const CalibratedInt4> calibrated) {
  return [fallback = std::move(fallback), calibrated](const LinearParams& p,
                                                      bool in_block) -> std::unique_ptr<kernels::Linear> {
    const std::vector<std::string> names = p.fused_from.empty() ? std::vector<std::string>{p.name} : p.fused_from;
    std::size_t found = 0;
    for (const auto& n : names) found += calibrated->codes.count(n);
    if (found == 0) return fallback(p, in_block);
    if (found != names.size()) return nullptr;  // some parts calibrated, some not: built apart
    Int4Codes joined = calibrated->codes.at(names.front());
    bool same_layout = true;
    for (std::size_t i = 1; i < names.size(); ++i) {  // fused parts: their rows one after another
      std::visit(
          [&](auto& first) {
            using Matrix = std::decay_t<decltype(first)>;
            const Matrix* part = std::get_if<Matrix>(&calibrated->codes.at(names[i]));
            if (part == nullptr || part->cols != first.cols) {
              same_layout = false;
              return;
            }
            first.rows += part->rows;
            first.blocks.insert(first.blocks.end(), part->blocks.begin(), part->blocks.end());
          },
          joined);
    }
    if (!same_layout) return nullptr;
    const float* bias = p.bias.empty() ? nullptr : p.bias.data();
    return std::visit([&](auto&& m) { return kernels::make_linear_int4_packed(std::move(m), bias, p.name); },
                      std::move(joined));
  };
}

}  // namespace qjoule::model
