#include "model/tied_embeddings.h"

#include <cstring>

namespace qjoule::model {
namespace {

bool same_bits(const float* a, const float* b, std::size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

// BF16 words widened exactly (the low 16 bits zero), compared with FP32 rows bit for bit.
bool widened_equal(const uint16_t* bits, const float* f32, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const uint32_t wide = static_cast<uint32_t>(bits[i]) << 16;
    uint32_t held = 0;
    std::memcpy(&held, f32 + i, sizeof held);
    if (wide != held) return false;
  }
  return true;
}

}  // namespace

Tensor tied_embeddings_view(const kernels::Linear& head, const std::vector<float>& f32,
                            const std::vector<uint16_t>& bf16, float embedding_scale) {
  const kernels::Linear::HostRows rows = head.host_weight_rows();
  if (rows.data == nullptr) return {};
  const int64_t count = head.out_features() * head.in_features();
  const auto n = static_cast<std::size_t>(count);
  void* data = const_cast<void*>(rows.data);  // read only: the lookups never write the table
  if (rows.element_bytes == 2) {
    if (bf16.size() != n || std::memcmp(rows.data, bf16.data(), n * sizeof(uint16_t)) != 0) return {};
    return Tensor(Device{}, DType::bf16, data, count, nullptr);
  }
  if (rows.element_bytes != 4 || embedding_scale != 1.0f) return {};
  const auto* held = static_cast<const float*>(rows.data);
  const bool equal = !bf16.empty() ? bf16.size() == n && widened_equal(bf16.data(), held, n)
                                   : f32.size() == n && same_bits(f32.data(), held, n);
  if (!equal) return {};
  return Tensor(Device{}, DType::f32, data, count, nullptr);
}

}  // namespace qjoule::model
