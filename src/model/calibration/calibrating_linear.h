// A Linear that calibration (model/calibration/decoder_calibration.h) quantizes: before its block starts it holds
// nothing; begin() reads its FP32 weights and runs on them while the first Linear of its input group
// sums the inputs' statistics (Σ x xᵀ for GPTQ and AWQ, Σ |x| per channel for AWQ; the others of the
// group read the same activations); then GPTQ quantizes it (quantize_gptq), or AWQ scales and clips
// its weights in place (awq_block.h) before finish_round_to_nearest; from then on it runs its int4
// codes (the FP32 weights and the sums dropped).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "qjoule/kernels/linear.h"
#include "qjoule/model/calibration/decoder_calibration.h"
#include "qjoule/model/encoder_params.h"
#include "qjoule/quant/format_spec.h"

namespace qjoule::model::detail {

// The statistics of the inputs that the Linears reading the same activations share (Q, K, V; gate, up).
struct InputStatistics {
  std::vector<float> hessian;   // Σ x xᵀ, its lower triangle (quant::accumulate_hessian)
  std::vector<double> abs_sum;  // Σ |x| per input channel
  int64_t tokens = 0;
};

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

class CalibratingLinear final : public kernels::Linear {
 public:
  // bf16_products: the recording pass multiplies in BF16 (CalibrationOptions::bf16_products).
  CalibratingLinear(LinearParams shape, std::function<void(LinearParams&)> load, quant::FormatSpec spec,
                    std::shared_ptr<InputStatistics> stats, bool records, bool bf16_products);

  void begin();
  // GPTQ's codes from the sums (the last Linear of a group takes them; the others copy).
  void quantize_gptq(double damp, CalibratedInt4& out);
  // Round-to-nearest's codes of the weights as they stand (AWQ's, once scaled and clipped).
  void finish_round_to_nearest(CalibratedInt4& out);

  const LinearParams& shape() const { return shape_; }
  const quant::FormatSpec& spec() const { return spec_; }
  std::vector<float>& weight() { return weight_; }  // [out, in], FP32, between begin() and the codes
  std::vector<float>& bias() { return bias_; }
  InputStatistics& statistics() const;  // fails if no input reached the Linear
  // Whether any calibration input reached it (a mixture's expert may be chosen for no calibration token).
  bool has_calibration_input() const { return stats_ != nullptr && stats_->tokens > 0; }
  // The block's last Linear (down): while it records, its outputs only reach the residual stream of the
  // FP32 pass, which is dropped, so it writes zeros instead of computing them.
  void drop_outputs_while_recording() { drop_outputs_ = true; }

  // Trials (model/calibration/awq_block_trials.h): w runs in FP32 products (with the bias as it stands), nothing
  // recorded, until set_trial_weights(nullptr) goes back to recording weight() as begin() left it.
  void set_trial_weights(const std::vector<float>* w);

  // AWQ on a classifier (model/calibration/awq_classifier_choice.h): round-to-nearest's codes of the weights and bias
  // as begin() read them, kept (before AWQ changes them) so that the calibrated model can run either.
  void keep_round_to_nearest_alternative();
  // Once calibrated: runs round-to-nearest's codes (true) or its own (false).
  void run_round_to_nearest(bool on);
  bool runs_round_to_nearest() const { return runs_rtn_; }
  // Puts round-to-nearest's codes and bias into `out` in place of this Linear's own.
  void take_round_to_nearest(CalibratedInt4& out);

  void forward(const float* x, int64_t m, float* y) const override;
  int64_t in_features() const override { return shape_.in_features; }
  int64_t out_features() const override { return shape_.out_features; }
  std::string format() const override { return active_ ? active_->format() : "fp32"; }
  std::string kernel_path() const override { return active_ ? active_->kernel_path() : "calibration:not started"; }
  std::size_t bytes_held() const override { return active_ ? active_->bytes_held() : 0; }

 private:
  void finish(Int4Codes codes, CalibratedInt4& out);
  void reload();  // the unquantized Linear of weight_ and bias_ (FP32, or BF16 products)

  LinearParams shape_;
  std::function<void(LinearParams&)> load_;
  quant::FormatSpec spec_;
  std::vector<float> weight_, bias_;
  std::unique_ptr<kernels::Linear> active_;
  std::unique_ptr<kernels::Linear> other_;  // the codes not running now (keep_round_to_nearest_alternative)
  bool runs_rtn_ = false;
  std::optional<Int4Codes> rtn_codes_;
  std::vector<float> rtn_bias_;
  std::shared_ptr<InputStatistics> stats_;  // shared with the Linears reading the same input
  bool records_ = false;                    // the group's first: sums the inputs
  bool recording_ = false;
  bool drop_outputs_ = false;
  bool bf16_products_ = false;
};

}  // namespace qjoule::model::detail
