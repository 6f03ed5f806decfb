// Attention of one new token (a decode step) over the KV cache on the GPU (decode_attention_cuda.cu):
// the keys split into chunks across blocks (flash-decoding) so that a long context costs reads, not a
// serial loop; the `heads / kv_heads` query heads of one kv head share one read of its keys and values;
// a second kernel combines the chunks. The twin of causal_attention_f32 for n_new = 1.
// Device pointers, enqueued on `stream`; "" when the launch was accepted, else the error as one line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

struct CUstream_st;

namespace qjoule::kernels::cuda_detail {

// The launch for `keys` keys at most: keys per chunk (a power of two from 16 to 64: the smallest that
// makes at most 64 chunks, so that a short context still spreads over kv_heads × its chunks blocks;
// less where the chunk's keys, values, queries and scores would not fit in 48 KiB of shared memory),
// chunks, shared memory of one block, and the scratch the chunks' parts take: heads × splits ×
// (head_dim + 2) floats.
struct DecodeAttentionPlan {
  bool fits = false;
  std::string why;  // when it does not fit
  int64_t chunk = 0, splits = 0;
  std::size_t shared_bytes = 0;
  int64_t scratch_floats = 0;
};
inline DecodeAttentionPlan decode_attention_plan(int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t keys) {
  DecodeAttentionPlan p;
  if (heads <= 0 || kv_heads <= 0 || heads % kv_heads != 0 || head_dim <= 0 || keys <= 0) {
    p.why = "heads " + std::to_string(heads) + ", kv heads " + std::to_string(kv_heads) + ", head_dim " +
            std::to_string(head_dim) + ", keys " + std::to_string(keys) + ": expected positive sizes, heads a multiple";
    return p;
  }
  if (kv_heads > 65535) {
    p.why = std::to_string(kv_heads) + " kv heads exceed the grid's 65535";
    return p;
  }
  const int64_t group = heads / kv_heads;
  const auto bytes = [&](int64_t chunk) {
    return static_cast<std::size_t>(2 * chunk * (head_dim + 1) + group * head_dim + group * chunk) * sizeof(float);
  };
  int64_t chunk = 16;
  while (chunk < 64 && chunk * 64 < keys) chunk *= 2;
  while (chunk > 1 && bytes(chunk) > 48 * 1024) chunk /= 2;
  if (bytes(chunk) > 48 * 1024) {
    p.why = "head_dim " + std::to_string(head_dim) + " with " + std::to_string(group) +
            " query heads per kv head needs more than 48 KiB of shared memory";
    return p;
  }
  p.fits = true;
  p.chunk = chunk;
  p.splits = (keys + chunk - 1) / chunk;
  p.shared_bytes = bytes(chunk);
  p.scratch_floats = heads * p.splits * (head_dim + 2);
  return p;
}

// The keys a decode step reads at most: past + 1 (or max_keys with the position read on the device), no
// more than the window.
inline int64_t decode_attention_keys(int64_t past, bool position_on_device, int64_t max_keys, int64_t window) {
  const int64_t keys = position_on_device ? max_keys : past + 1;
  return window > 0 && keys > window ? window : keys;
}

// ctx[heads · head_dim] = softmax(q·kᵀ·scale)·v of the one new token q [heads · head_dim] over keys 0 ..
// past of k_cache / v_cache [>= past + 1, kv_stride] (its own key and value already stored); query
// head h reads kv head h / (heads / kv_heads). With `position` (device, not null) past = *position when
// the kernels run, and the launch is sized for max_keys. window > 0: the token reads its last `window` keys
// only (rows past − window + 1 .. past). scratch: plan.scratch_floats on the device, the plan made for
// decode_attention_keys(...) keys.
std::string decode_attention_cuda(const float* q, const float* k_cache, const float* v_cache, int64_t kv_stride,
                                  int64_t past, const int32_t* position, int64_t max_keys, int64_t heads,
                                  int64_t kv_heads, int64_t head_dim, float scale, float* scratch,
                                  int64_t scratch_floats, float* ctx, int64_t window, CUstream_st* stream);

}  // namespace qjoule::kernels::cuda_detail
