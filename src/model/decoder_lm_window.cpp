// A sliding-window layer's attention over a ring of its last positions (KvCache, DecoderLM::make_cache
// with a rewind): the layer keeps R >= window rows, row p mod R holding position p.
//
// A decode step of a ring of exactly the window: its key and value go to their row, and the token reads
// every row the ring holds (the window, in ring order: softmax does not depend on the order).
// Otherwise: the window's earlier rows (at most window − 1) are copied in position order into scratch,
// the new rows after them, the windowed causal attention runs there as over a whole cache, and the new
// rows go to their ring rows.
#include <algorithm>

#include "qjoule/model/decoder_lm.h"

namespace qjoule::model {
namespace {

// Rows [first, first + count) of a ring of `rows` as at most two runs: calls copy(ring_row, offset, count)
// for each, offset counting from `first`.
template <class Copy>
void ring_runs(int64_t first, int64_t count, int64_t rows, const Copy& copy) {
  int64_t done = 0;
  while (done < count) {
    const int64_t at = (first + done) % rows;
    const int64_t run = std::min(count - done, rows - at);
    copy(at, done, run);
    done += run;
  }
}

}  // namespace

void DecoderLM::add_window_scratch(Scratch& s, int64_t n, std::span<const Segment> segments) const {
  int64_t window = 0;
  for (const Segment& g : segments)
    for (int64_t l = 0; l < config_.num_layers; ++l) {
      const int64_t w = layers_[static_cast<std::size_t>(l)].window;
      if (g.cache->ring(l) && !(g.n == 1 && g.cache->rows(l) == w)) window = std::max(window, w);
    }
  if (window == 0) return;
  s.wk = ops_->empty(DType::f32, (window - 1 + n) * config_.kv_dim(), "a sliding window's keys");
  s.wv = ops_->empty(DType::f32, (window - 1 + n) * config_.kv_dim(), "a sliding window's values");
}

void DecoderLM::ring_attention(const Layer& layer, int64_t index, const Scratch& s, const Segment& g, const Tensor& q,
                               int64_t q_stride, const Tensor& k, const Tensor& v, int64_t kv_stride, float scale,
                               const Tensor& ctx) const {
  GraphOps& ops = *ops_;
  const int64_t kvd = config_.kv_dim(), rows = g.cache->rows(index), window = layer.window;
  const Tensor kc = g.cache->keys(index), vc = g.cache->values(index);
  const auto attend = [&](const Tensor& keys, const Tensor& values, int64_t past, int64_t w) {
    ops.causal_attention(q, q_stride, keys, values, kvd, past, g.n, config_.num_heads, config_.num_kv_heads,
                         config_.head_dim, scale, ctx, w);
  };
  if (g.n == 1 && rows == window) {
    ops.store_kv(k, v, kv_stride, kc, vc, kvd, g.past % rows, 1, kvd);
    attend(kc, vc, std::min(g.past, rows - 1), 0);
    return;
  }
  const int64_t old = std::min(g.past, window - 1);  // the earlier positions the first new token reads
  ring_runs(g.past - old, old, rows, [&](int64_t at, int64_t offset, int64_t count) {
    ops.copy_rows(s.wk.slice(offset * kvd, count * kvd), kvd, kc.slice(at * kvd, count * kvd), kvd, kvd, count);
    ops.copy_rows(s.wv.slice(offset * kvd, count * kvd), kvd, vc.slice(at * kvd, count * kvd), kvd, kvd, count);
  });
  ops.store_kv(k, v, kv_stride, s.wk, s.wv, kvd, old, g.n, kvd);
  attend(s.wk, s.wv, old, window);
  // The new positions into the ring (the last `rows` of them where there are more).
  const int64_t kept = std::min(g.n, rows), skipped = g.n - kept;
  ring_runs(g.past + skipped, kept, rows, [&](int64_t at, int64_t offset, int64_t count) {
    const int64_t from = (old + skipped + offset) * kvd;
    ops.copy_rows(kc.slice(at * kvd, count * kvd), kvd, s.wk.slice(from, count * kvd), kvd, kvd, count);
    ops.copy_rows(vc.slice(at * kvd, count * kvd), kvd, s.wv.slice(from, count * kvd), kvd, kvd, count);
  });
}

}  // namespace qjoule::model
