#include "model/streamed_linear_f32.h"

#include "qjoule/quant/format.h"

#include <utility>

namespace qjoule::model {
namespace {

class StreamedLinearF32 final : public kernels::Linear {
 public:
  StreamedLinearF32(LinearParams shape, std::function<void(LinearParams&)> load)
      : shape_(std::move(shape)), load_(std::move(load)) {
    free_weights(shape_);
  }

  void forward(const float* x, int64_t m, float* y) const override {
    if (m <= 0) return;
    LinearParams p = shape_;
    load_(p);
    const auto linear = kernels::make_linear_f32_onednn(p.weight.data(), p.bias.empty() ? nullptr : p.bias.data(),
                                                        p.out_features, p.in_features);
    free_weights(p);  // the Linear holds its own copy: one copy of this layer at a time
    linear->forward(x, m, y);
  }

  int64_t in_features() const override { return shape_.in_features; }
  int64_t out_features() const override { return shape_.out_features; }
  std::string format() const override { return std::string(quant::name(quant::Format::fp32)); }
  std::string kernel_path() const override {
    return "qjoule:streamed_f32 (weights read from the checkpoint at each forward, then the FP32 Linear)";
  }
  std::size_t bytes_held() const override { return 0; }

 private:
  LinearParams shape_;
  std::function<void(LinearParams&)> load_;
};

}  // namespace

std::unique_ptr<kernels::Linear> make_streamed_linear_f32(LinearParams shape, std::function<void(LinearParams&)> load) {
  return std::make_unique<StreamedLinearF32>(std::move(shape), std::move(load));
}

}  // namespace qjoule::model
