// Shared by the GPU model (encoder_classifier_cuda.cpp) and its stub: no CUDA here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qjoule/kernels/make_linear.h"
#include "qjoule/model/encoder_classifier_cuda.h"

namespace qjoule::model::cuda_model_detail {

// EncoderClassifier::forward's input checks, with the same messages.
void check_forward_inputs(const EncoderConfig& config, const int32_t* ids, int64_t batch, int64_t seq);

// Whether Q, K and V in these formats are built as one Linear with the same numbers as three.
bool fuses_qkv(const quant::FormatSpec& q, const quant::FormatSpec& k, const quant::FormatSpec& v);

// {"a.b.q_lin", "a.b.k_lin", "a.b.v_lin"} -> "a.b.q_lin+k_lin+v_lin".
std::string fused_name(const std::vector<std::string>& names);

}  // namespace qjoule::model::cuda_model_detail
