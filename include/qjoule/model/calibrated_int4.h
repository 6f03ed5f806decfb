// Calibrated int4 codes as the rest of qjoule sees them (calibration makes them: model/calibration/;
// loading, the device backends and the exporters read them): qjoule's own int4 blocks per Linear name,
// the norms and biases AWQ's scales changed, and how they were made. Types only; the factory that
// builds a model from them is calibrated_linear_factory.h.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "qjoule/kernels/linear.h"
#include "qjoule/model/encoder_params.h"
#include "qjoule/quant/formats.h"

namespace qjoule::model {

using Int4Codes =
    std::variant<quant::BlockMatrix<quant::BlockInt4Sym<32>>, quant::BlockMatrix<quant::BlockInt4Sym<64>>,
                 quant::BlockMatrix<quant::BlockInt4Sym<128>>, quant::BlockMatrix<quant::BlockInt4Asym<32>>,
                 quant::BlockMatrix<quant::BlockInt4Asym<64>>, quant::BlockMatrix<quant::BlockInt4Asym<128>>>;

struct CalibratedInt4 {
  std::map<std::string, Int4Codes> codes;  // by checkpoint Linear name ("model.layers.0.mlp.up_proj")
  std::set<std::string> int8_activations;  // the Linears whose precision has a8
  // Besides codes: each calibrated Linear's bias as the model runs it (AWQ may have scaled V's or up's
  // rows), and the norms AWQ's scales were folded into (by the norm's name, "model.layers.0.input_layernorm").
  std::map<std::string, std::vector<float>> biases;
  std::map<std::string, LayerNormParams> norms;
  // FP32 Linears whose weights AWQ's scales changed, by name: a mixture's router, its columns times the scales
  // folded into the norm before it ([out, in] as the checkpoint stores it).
  std::map<std::string, std::vector<float>> fp32_weights;
  std::string method;  // "GPTQ", "AWQ" or "GPTQ + AWQ"
  // GPTQ Linears that no calibration token reached (a mixture's experts its router never chose for them):
  // round-to-nearest codes, named here so that the run says so.
  std::set<std::string> round_to_nearest;
  bool bf16_products = false;  // CalibrationOptions::bf16_products, as it ran
  int64_t sequences = 0;
  int64_t tokens = 0;               // in all the sequences
  int64_t tokens_per_sequence = 0;  // the longest sequence's (a decoder's windows: each one's)
  double damp = 0.0, seconds = 0.0;
};

// Builds the Linear of int4 codes on one device: their bias (or nullptr), the Linear's name, and whether
// its precision has INT8 activations (a8).
using Int4CodesLinear = std::function<std::unique_ptr<kernels::Linear>(Int4Codes codes, const float* bias,
                                                                       const std::string& name, bool int8_activations)>;

}  // namespace qjoule::model
