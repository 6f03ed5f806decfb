#include "qjoule/model/kv_cache.h"

#include <algorithm>

#include "qjoule/error.h"

namespace qjoule::model {
namespace {

int64_t total_rows(const std::vector<int64_t>& rows) {
  int64_t total = 0;
  for (const int64_t r : rows) total += r;
  return total;
}

}  // namespace

KvCache::KvCache(GraphOps& ops, int64_t layers, int64_t capacity, int64_t kv_dim, std::vector<int64_t> layer_rows,
                 std::vector<int64_t> layer_window)
    : layers_(layers),
      capacity_(capacity),
      kv_dim_(kv_dim),
      rows_(std::move(layer_rows)),
      window_(std::move(layer_window)) {
  if (rows_.empty()) rows_.assign(static_cast<std::size_t>(layers), capacity);
  if (window_.empty()) window_.assign(static_cast<std::size_t>(layers), 0);
  if (static_cast<int64_t>(rows_.size()) != layers || static_cast<int64_t>(window_.size()) != layers)
    fail("KV cache: {} rows and {} windows for {} layers", rows_.size(), window_.size(), layers);
  for (int64_t l = 0; l < layers; ++l) {
    const int64_t r = rows_[static_cast<std::size_t>(l)], w = window_[static_cast<std::size_t>(l)];
    if (r > capacity || r <= 0 || (r < capacity && (w <= 0 || r < w)))
      fail(
          "KV cache: layer {} holds {} rows of {} positions with a window of {}; expected all of them, or a ring "
          "of at least the window",
          l, r, capacity, w);
  }
  offset_.reserve(rows_.size());
  int64_t at = 0;
  for (const int64_t r : rows_) {
    offset_.push_back(at);
    at += r;
  }
  k_ = ops.empty(DType::f32, total_rows(rows_) * kv_dim, "the key cache");
  v_ = ops.empty(DType::f32, total_rows(rows_) * kv_dim, "the value cache");
}

int64_t KvCache::rows(int64_t layer) const { return rows_.at(static_cast<std::size_t>(layer)); }

Tensor KvCache::keys(int64_t layer) const {
  return k_.slice(offset_.at(static_cast<std::size_t>(layer)) * kv_dim_, rows(layer) * kv_dim_);
}

Tensor KvCache::values(int64_t layer) const {
  return v_.slice(offset_.at(static_cast<std::size_t>(layer)) * kv_dim_, rows(layer) * kv_dim_);
}

void KvCache::truncate(int64_t tokens) {
  if (tokens < 0 || tokens > size_) fail("KV cache: cannot keep {} tokens of the {} it holds", tokens, size_);
  // A ring of R rows holds positions size − R .. size − 1; the next token (at `tokens`) reads the
  // window's earlier positions tokens − w + 1 .. tokens − 1.
  int64_t earliest = 0;
  for (int64_t l = 0; l < layers_; ++l) {
    const int64_t r = rows(l), w = window_[static_cast<std::size_t>(l)];
    if (r < capacity_) earliest = std::max(earliest, size_ - r + w - 1);
  }
  if (tokens > 0 && tokens < earliest)
    fail(
        "KV cache: cannot go back to {} tokens of the {} it holds: its sliding-window layers keep the last "
        "positions only, back to {} tokens (make the cache with room to rewind further)",
        tokens, size_, earliest);
  size_ = tokens;
}

}  // namespace qjoule::model
