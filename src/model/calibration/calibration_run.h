// What decoder and encoder calibration (decoder_calibration.h, encoder_calibration.h) share: the
// calibrated Linears as the model's factory builds them (those reading one input share its statistics),
// and the run of one block: its FP32 pass while those Linears sum their inputs' statistics, AWQ's and
// GPTQ's codes, then the quantized pass that makes the next block's inputs, and a progress line with ETA.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "model/calibration/calibrating_linear.h"
#include "qjoule/model/calibration/decoder_calibration.h"

namespace qjoule::model::detail {

// What calibration starts from: an unquantized checkpoint `dir` (`prequantized`: its config says otherwise)
// and at least one sequence; else one line.
void check_calibration_inputs(const std::filesystem::path& dir, bool prequantized,
                              const std::vector<std::vector<int32_t>>& sequences);

// Each sequence's embeddings, [tokens, hidden] (Model::embed), the first block's inputs.
template <class Model>
std::vector<std::vector<float>> embedded_states(const Model& model, const std::vector<std::vector<int32_t>>& sequences,
                                                int64_t hidden) {
  std::vector<std::vector<float>> states;
  for (const auto& s : sequences) {
    states.emplace_back(s.size() * static_cast<std::size_t>(hidden));
    model.embed(s.data(), static_cast<int64_t>(s.size()), states.back().data());
  }
  return states;
}

class CalibrationRun {
 public:
  explicit CalibrationRun(CalibrationOptions options);

  // A CalibratingLinear for p in `spec` (a calibrated int4), reading its weights with `load` when its block
  // starts; the Linears of one `group` (the name of the first Linear reading their input) share its sums.
  std::unique_ptr<kernels::Linear> make_linear(const LinearParams& p, const quant::FormatSpec& spec,
                                               const std::string& group, std::function<void(LinearParams&)> load);
  // Once the model is built: its Linears hold the only references to the statistics.
  void linears_built() { statistics_.clear(); }
  // The calibrated Linears among `names` (one block's), by name.
  std::map<std::string, CalibratingLinear*> find(const std::vector<std::string>& names) const;

  // Block i of `blocks`: the Linears `here` record while `forward` runs the block (FP32) on a copy of each of
  // `states` (`last`, the block's last Linear, drops its outputs meanwhile); `quantize_awq` gives the AWQ
  // Linears their codes, GPTQ gives its own theirs; then `forward` runs the quantized block on `states` in
  // place. Then the progress line.
  void calibrate_block(int64_t i, int64_t blocks, const std::map<std::string, CalibratingLinear*>& here,
                       const std::string& last, std::vector<std::vector<float>>& states, int64_t hidden,
                       const std::function<void(float* x, int64_t tokens)>& forward,
                       const std::function<void(CalibratedInt4&)>& quantize_awq);

  // The result: codes and changes of every block, the method(s), sizes and seconds.
  CalibratedInt4 finish(const std::vector<std::vector<int32_t>>& sequences);

 private:
  CalibrationOptions options_;
  std::chrono::steady_clock::time_point started_;
  std::map<std::string, std::shared_ptr<InputStatistics>> statistics_;  // by group, while the model is built
  std::map<std::string, CalibratingLinear*> linears_;
  std::set<std::string_view> methods_;  // "AWQ" sorts before "GPTQ"
  CalibratedInt4 out_;
};

}  // namespace qjoule::model::detail
