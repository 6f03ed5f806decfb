// A decoder's keys and values for the tokens seen so far, FP32, on the model's device (made by
// DecoderLM::make_cache). Each layer holds `capacity` rows, [capacity, kv_dim], row p the key or value
// of position p; a sliding-window layer may hold fewer: a ring of R rows where row p mod R holds
// position p, the last R positions kept (R >= its window, so every key its attention reads is there).
// Going back (truncate) is then possible only as far as the ring still holds what the next token reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "qjoule/model/graph_ops.h"

namespace qjoule::model {

class KvCache {
 public:
  KvCache() = default;
  // `layer_rows` / `layer_window`: each layer's rows and window (empty: `capacity` rows and no window each).
  KvCache(GraphOps& ops, int64_t layers, int64_t capacity, int64_t kv_dim, std::vector<int64_t> layer_rows = {},
          std::vector<int64_t> layer_window = {});
  int64_t size() const { return size_; }  // tokens held
  int64_t capacity() const { return capacity_; }
  void clear() { size_ = 0; }
  // Forgets every token after the first `tokens` (e.g. back to the prompt, to decode again); a ring that no
  // longer holds the keys the next token would read is an error naming how far back it can go.
  void truncate(int64_t tokens);
  std::size_t bytes() const { return k_.bytes() + v_.bytes(); }
  // Layer `layer`'s rows: capacity(), or a sliding-window layer's ring of fewer.
  int64_t rows(int64_t layer) const;
  bool ring(int64_t layer) const { return rows(layer) < capacity_; }
  // Layer `layer`'s keys and values: [rows(layer), kv_dim].
  Tensor keys(int64_t layer) const;
  Tensor values(int64_t layer) const;

 private:
  friend class DecoderLM;
  int64_t layers_ = 0, capacity_ = 0, kv_dim_ = 0, size_ = 0;
  std::vector<int64_t> rows_, window_, offset_;  // per layer; offset_ in rows from the start of k_ / v_
  Tensor k_, v_;                                 // the layers' rows, one after another
};

}  // namespace qjoule::model
