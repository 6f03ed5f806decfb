// DecoderLM::forward_batch: several sequences, each over its own KV cache, in one forward whose
// Linears, norms and activations see all their rows at once.
#include <cstring>

#include <fmt/format.h>

#include "qjoule/error.h"
#include "qjoule/model/decoder_lm.h"

namespace qjoule::model {

void DecoderLM::forward_batch(std::span<const DecoderSequence> sequences) const {
  if (sequences.empty()) fail("a batched forward needs at least one sequence, got none");
  for (std::size_t i = 0; i < sequences.size(); ++i) {
    const DecoderSequence& q = sequences[i];
    if (q.cache == nullptr || q.ids == nullptr || q.logits == nullptr)
      fail("sequence {} of the batch: expected its ids, its KV cache and where its logits go", i);
  }
  if (sequences.size() == 1) {  // forward() itself, with its checks
    const DecoderSequence& q = sequences.front();
    forward(q.ids, q.n, *q.cache, q.logits, q.logits_from);
    return;
  }
  std::vector<Segment> segments;
  int64_t n = 0, rows = 0;
  for (std::size_t i = 0; i < sequences.size(); ++i) {
    const DecoderSequence& q = sequences[i];
    check_forward(q.ids, q.n, *q.cache, q.logits_from, fmt::format("sequence {} of the batch", i));
    for (std::size_t j = 0; j < i; ++j) {
      if (sequences[j].cache == q.cache)
        fail("sequences {} and {} of the batch share one KV cache; expected a cache each", j, i);
    }
    segments.push_back({n, q.n, q.cache->size_, q.cache, q.logits_from});
    n += q.n;
    rows += q.n - q.logits_from;
  }
  GraphOps& ops = *ops_;
  std::vector<int32_t> ids;
  ids.reserve(static_cast<std::size_t>(n));
  for (const DecoderSequence& q : sequences) ids.insert(ids.end(), q.ids, q.ids + q.n);
  const Tensor id_tensor = ops.empty(DType::i32, n, "the token ids");
  ops.copy_in(ids.data(), id_tensor);
  Scratch s = make_scratch(n);
  const int64_t h = config_.hidden_size, vocab = config_.vocab_size;
  s.lx = ops.empty(DType::f32, rows * h, "the rows that give logits");
  s.lhn = ops.empty(DType::f32, rows * h, "the rows that give logits");
  std::vector<float> logits(static_cast<std::size_t>(rows * vocab));
  const Tensor out = ops.host_output(logits.data(), rows * vocab, "the logits");
  add_window_scratch(s, n, segments);
  enqueue_forward(id_tensor, n, segments, s, out);
  for (const Segment& g : segments) g.cache->size_ += g.n;
  ops.copy_out(out, logits.data());
  const float* from = logits.data();
  for (const DecoderSequence& q : sequences) {
    const auto count = static_cast<std::size_t>((q.n - q.logits_from) * vocab);
    std::memcpy(q.logits, from, count * sizeof(float));
    from += count;
  }
}

}  // namespace qjoule::model
