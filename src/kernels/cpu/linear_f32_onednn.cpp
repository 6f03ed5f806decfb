// FP32 linear layer on oneDNN's matmul. Weights stay in Hugging Face's [out, in] layout and are
// described to oneDNN as a transposed [in, out] matrix; one primitive is created per distinct
// row count m and cached, since transformer shapes repeat.
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "kernels/cpu/onednn_engine.h"
#include "qjoule/kernels/linear.h"

namespace qjoule::kernels {
namespace {

using dnnl::memory;

class LinearF32OneDnn final : public Linear {
 public:
  LinearF32OneDnn(const float* weight, const float* bias, int64_t out_features, int64_t in_features)
      : out_(out_features), in_(in_features), weight_(weight, weight + out_features * in_features) {
    if (bias != nullptr) bias_.assign(bias, bias + out_features);
    kernel_path_ = onednn_kernel_path(entry_for(1).pd) + ":f32";
  }

  void forward(const float* x, int64_t m, float* y) const override {
    if (m <= 0) return;
    const Entry& e = entry_for(m);
    memory src(e.pd.src_desc(), onednn_cpu_engine(), const_cast<float*>(x));
    memory wei(e.pd.weights_desc(), onednn_cpu_engine(), const_cast<float*>(weight_.data()));
    memory dst(e.pd.dst_desc(), onednn_cpu_engine(), y);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}};
    if (!bias_.empty()) {
      args.emplace(DNNL_ARG_BIAS, memory(e.pd.bias_desc(), onednn_cpu_engine(), const_cast<float*>(bias_.data())));
    }
    e.prim.execute(onednn_cpu_stream(), args);
    onednn_cpu_stream().wait();
  }

  int64_t in_features() const override { return in_; }
  int64_t out_features() const override { return out_; }
  std::string format() const override { return "fp32"; }
  std::string kernel_path() const override { return kernel_path_; }
  std::size_t bytes_held() const override { return (weight_.size() + bias_.size()) * sizeof(float); }

 private:
  struct Entry {
    dnnl::matmul::primitive_desc pd;
    dnnl::matmul prim;
  };

  const Entry& entry_for(int64_t m) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = cache_.find(m);
    if (it != cache_.end()) return it->second;
    memory::desc src_md({m, in_}, memory::data_type::f32, memory::format_tag::ab);
    memory::desc wei_md({in_, out_}, memory::data_type::f32, memory::format_tag::ba);  // W[out,in] seen as Wᵀ
    memory::desc dst_md({m, out_}, memory::data_type::f32, memory::format_tag::ab);
    dnnl::matmul::primitive_desc pd;
    if (bias_.empty()) {
      pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(src_md, wei_md, dst_md), onednn_cpu_engine());
    } else {
      memory::desc bias_md({1, out_}, memory::data_type::f32, memory::format_tag::ab);
      pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(src_md, wei_md, bias_md, dst_md), onednn_cpu_engine());
    }
    return cache_.emplace(m, Entry{pd, dnnl::matmul(pd)}).first->second;
  }

  int64_t out_, in_;
  std::vector<float> weight_, bias_;
  std::string kernel_path_;
  mutable std::mutex mutex_;
  mutable std::map<int64_t, Entry> cache_;
};

}  // namespace

std::unique_ptr<Linear> make_linear_f32_onednn(const float* weight, const float* bias, int64_t out_features,
                                               int64_t in_features) {
  return std::make_unique<LinearF32OneDnn>(weight, bias, out_features, in_features);
}

void linear_f32_ref(const float* x, int64_t m, const float* weight, const float* bias, int64_t out_features,
                    int64_t in_features, float* y) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t o = 0; o < out_features; ++o) {
      double acc = bias != nullptr ? bias[o] : 0.0;
      for (int64_t k = 0; k < in_features; ++k) acc += double(x[i * in_features + k]) * weight[o * in_features + k];
      y[i * out_features + o] = static_cast<float>(acc);
    }
  }
}

}  // namespace qjoule::kernels
