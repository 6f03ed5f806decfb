#include "model/calibration/calibrating_linear.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "qjoule/error.h"
#include "qjoule/kernels/linear.h"
#include "qjoule/kernels/linear_weight_only.h"
#include "qjoule/kernels/make_linear.h"
#include "qjoule/quant/gptq.h"
#include "qjoule/quant/precision.h"
#include "qjoule/quant/quantize_int4.h"

namespace qjoule::model::detail {

CalibratingLinear::CalibratingLinear(LinearParams shape, std::function<void(LinearParams&)> load,
                                     quant::FormatSpec spec, std::shared_ptr<InputStatistics> stats, bool records,
                                     bool bf16_products)
    : shape_(std::move(shape)),
      load_(std::move(load)),
      spec_(spec),
      stats_(std::move(stats)),
      records_(records),
      bf16_products_(bf16_products) {}

void CalibratingLinear::begin() {
  LinearParams p = shape_;
  load_(p);
  weight_ = std::move(p.weight);
  bias_ = std::move(p.bias);
  reload();
  if (records_) {
    stats_->hessian.assign(static_cast<std::size_t>(shape_.in_features * shape_.in_features), 0.0f);
    stats_->abs_sum.assign(static_cast<std::size_t>(shape_.in_features), 0.0);
    stats_->tokens = 0;
  }
  recording_ = true;
}

void CalibratingLinear::reload() {
  if (bf16_products_) {
    active_ = kernels::make_linear(quant::Precision("bf16").spec_or_fail(), weight_.data(),
                                   bias_.empty() ? nullptr : bias_.data(), shape_.out_features, shape_.in_features,
                                   shape_.name);
    return;
  }
  active_ = kernels::make_linear_f32_onednn(weight_.data(), bias_.empty() ? nullptr : bias_.data(), shape_.out_features,
                                            shape_.in_features);
}

void CalibratingLinear::set_trial_weights(const std::vector<float>* w) {
  recording_ = w == nullptr;
  if (w == nullptr) {
    reload();
    return;
  }
  active_ = kernels::make_linear_f32_onednn(w->data(), bias_.empty() ? nullptr : bias_.data(), shape_.out_features,
                                            shape_.in_features);
}

InputStatistics& CalibratingLinear::statistics() const {
  if (stats_ == nullptr || stats_->tokens == 0)
    fail("{}: no calibration input reached this Linear; expected its block to run first", shape_.name);
  return *stats_;
}

void CalibratingLinear::quantize_gptq(double damp, CalibratedInt4& out) {
  statistics();
  const quant::GptqOptions options{damp, spec_.int4_act_order, 128};
  // The last Linear of the group takes the sums; the others copy them.
  std::vector<float> hessian = stats_.use_count() == 1 ? std::move(stats_->hessian) : stats_->hessian;
  with_int4_block(spec_, [&]<class Block>(Block) {
    finish(quant::quantize_matrix_int4_gptq<Block>(weight_.data(), shape_.out_features, shape_.in_features,
                                                   std::move(hessian), options, shape_.name),
           out);
  });
}

void CalibratingLinear::finish_round_to_nearest(CalibratedInt4& out) {
  with_int4_block(spec_, [&]<class Block>(Block) {
    finish(quant::quantize_matrix_int4<Block>(weight_.data(), shape_.out_features, shape_.in_features, shape_.name),
           out);
  });
}

void CalibratingLinear::keep_round_to_nearest_alternative() {
  if (weight_.empty())
    fail("{}: no weights to keep round-to-nearest's codes of; expected its block started", shape_.name);
  with_int4_block(spec_, [&]<class Block>(Block) {
    rtn_codes_ =
        quant::quantize_matrix_int4<Block>(weight_.data(), shape_.out_features, shape_.in_features, shape_.name);
  });
  rtn_bias_ = bias_;
  other_ = std::visit(
      [&](const auto& m) {
        return kernels::make_linear_int4_packed(m, rtn_bias_.empty() ? nullptr : rtn_bias_.data(), shape_.name,
                                                spec_.int4_int8_activations);
      },
      *rtn_codes_);
}

void CalibratingLinear::run_round_to_nearest(bool on) {
  if (!rtn_codes_ || !other_ || recording_)
    fail("{}: no round-to-nearest alternative to run; expected keep_round_to_nearest_alternative() and its codes",
         shape_.name);
  if (on != runs_rtn_) std::swap(active_, other_);
  runs_rtn_ = on;
}

void CalibratingLinear::take_round_to_nearest(CalibratedInt4& out) {
  if (!rtn_codes_) fail("{}: no round-to-nearest alternative to take", shape_.name);
  out.codes.insert_or_assign(shape_.name, std::move(*rtn_codes_));
  if (!rtn_bias_.empty()) out.biases.insert_or_assign(shape_.name, rtn_bias_);
  rtn_codes_.reset();
}

void CalibratingLinear::finish(Int4Codes codes, CalibratedInt4& out) {
  recording_ = false;
  stats_.reset();
  const float* bias = bias_.empty() ? nullptr : bias_.data();
  const bool a8 = spec_.int4_int8_activations;
  active_ =
      std::visit([&](const auto& m) { return kernels::make_linear_int4_packed(m, bias, shape_.name, a8); }, codes);
  if (a8) out.int8_activations.insert(shape_.name);
  if (!bias_.empty()) out.biases.insert_or_assign(shape_.name, bias_);
  out.codes.insert_or_assign(shape_.name, std::move(codes));
  std::vector<float>().swap(weight_);
}

void CalibratingLinear::forward(const float* x, int64_t m, float* y) const {
  if (!active_) fail("{}: run before its calibration block started", shape_.name);
  if (recording_ && records_) {
    const int64_t in = shape_.in_features;
    for (int64_t i = 0; i < m * in; ++i) {
      if (!std::isfinite(x[i])) {
        fail("{}: calibration input {} at [{}, {}]; expected finite values ({} sums x xᵀ of every input)", shape_.name,
             std::isnan(x[i]) ? "NaN" : (x[i] > 0 ? "+Inf" : "-Inf"), i / in, i % in, quant::calibration_method(spec_));
      }
    }
    quant::accumulate_hessian(x, m, in, stats_->hessian);
    for (int64_t t = 0; t < m; ++t)
      for (int64_t j = 0; j < in; ++j) stats_->abs_sum[size_t(j)] += std::fabs(x[t * in + j]);
    stats_->tokens += m;
  }
  if (recording_ && drop_outputs_) {
    std::fill(y, y + m * shape_.out_features, 0.0f);
    return;
  }
  active_->forward(x, m, y);
}

}  // namespace qjoule::model::detail
