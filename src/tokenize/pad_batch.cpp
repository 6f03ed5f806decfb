#include <algorithm>

#include "qjoule/tokenize/batch.h"

namespace qjoule::tokenize {

Batch pad_batch(const std::vector<std::vector<int32_t>>& sequences, int32_t pad_id) {
  Batch batch;
  batch.batch_size = sequences.size();
  for (const auto& sequence : sequences) batch.seq_len = std::max(batch.seq_len, sequence.size());
  batch.input_ids.assign(batch.batch_size * batch.seq_len, pad_id);
  batch.attention_mask.assign(batch.batch_size * batch.seq_len, 0);
  for (size_t row = 0; row < sequences.size(); ++row) {
    const auto offset = static_cast<std::ptrdiff_t>(row * batch.seq_len);
    std::copy(sequences[row].begin(), sequences[row].end(), batch.input_ids.begin() + offset);
    std::fill_n(batch.attention_mask.begin() + offset, sequences[row].size(), 1);
  }
  return batch;
}

}  // namespace qjoule::tokenize
