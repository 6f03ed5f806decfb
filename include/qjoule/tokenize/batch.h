// A batch of token-id sequences padded to a common length, row-major [batch_size, seq_len].
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace qjoule::tokenize {

struct Batch {
  size_t batch_size = 0;
  size_t seq_len = 0;
  std::vector<int32_t> input_ids;       // batch_size * seq_len, padded with the pad id
  std::vector<int32_t> attention_mask;  // 1 for real tokens, 0 for padding
};

// Pads every sequence (right side) to the longest one. An empty list gives an empty batch.
Batch pad_batch(const std::vector<std::vector<int32_t>>& sequences, int32_t pad_id);

}  // namespace qjoule::tokenize
