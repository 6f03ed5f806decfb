// DecoderLM's recorded decode step (decoder_lm.h, set_decode_graph): the forward of one token with
// every buffer it touches made once per KV cache, the token id and its position in device memory, so
// that one recording (GraphOps::capture: a CUDA graph on the GPU) replays every step of a run.
#include <fmt/format.h>

#include "qjoule/error.h"
#include "qjoule/model/decoder_lm.h"

namespace qjoule::model {

struct DecoderLM::StepGraph {
  const void* cache_keys = nullptr;  // the cache the buffers and the recording were made for
  const void* cache_values = nullptr;
  int64_t capacity = 0;
  Tensor step;  // i32 [2]: the token id, its position
  Scratch scratch;
  Tensor logits;  // [vocab]
  bool warmed = false;
  std::unique_ptr<CapturedWork> work;
  std::string unavailable;  // why no recording runs (then every step runs kernel by kernel)
  std::string path;         // what the recording is, said when it was made (decode_step_path)
};

bool DecoderLM::decode_step_graph(int32_t id, KvCache& cache, float* logits) const {
  GraphOps& ops = *ops_;
  if (!ops.records_work()) return false;  // the CPU
  if (!decode_graph_on_) {
    decode_step_path_ = "kernel by kernel: the decode graph is off (QJOULE_DECODE_GRAPH=0 or set_decode_graph(false))";
    return false;
  }
  if (config_.moe.num_experts > 0) {
    decode_step_path_ = fmt::format(
        "kernel by kernel: a mixture's router chooses each token's {} of {} experts on the host, between kernels, "
        "which one recording cannot follow",
        config_.moe.experts_per_token, config_.moe.num_experts);
    return false;
  }
  if (!rope_long_inv_freq_.empty() && cache.capacity_ > config_.rope_scaling.original_max_position_embeddings) {
    decode_step_path_ = fmt::format(
        "kernel by kernel: LongRoPE turns to its long factors past {} positions, which one recording cannot follow "
        "(a KV cache of {})",
        config_.rope_scaling.original_max_position_embeddings, cache.capacity_);
    return false;
  }
  if (!step_graph_) step_graph_ = std::make_shared<StepGraph>();
  StepGraph& g = *step_graph_;
  if (!g.unavailable.empty()) return false;
  if (g.cache_keys != static_cast<const void*>(cache.k_.f32()) ||
      g.cache_values != static_cast<const void*>(cache.v_.f32()) || g.capacity != cache.capacity_) {
    g.work.reset();
    g.warmed = false;
    g.step = ops.empty(DType::i32, 2, "the decode step's token and position");
    g.scratch = make_scratch(1);
    g.logits = ops.empty(DType::f32, config_.vocab_size, "the decode step's logits");
    g.cache_keys = cache.k_.f32();
    g.cache_values = cache.v_.f32();
    g.capacity = cache.capacity_;
  }
  const int64_t past = cache.size_;
  const int32_t step[2] = {id, static_cast<int32_t>(past)};
  ops.copy_in(step, g.step);
  // `past` sizes the operations' checks only: they read the position from g.step when they run.
  const auto body = [this, &g, &cache, past] {
    const Segment token{0, 1, past, &cache, 0};
    enqueue_forward(g.step.slice(0, 1), 1, std::span(&token, 1), g.scratch, g.logits);
  };
  // The position source is set for the step alone, whatever leaves it.
  struct PositionScope {
    GraphOps& ops;
    ~PositionScope() { ops.set_position_source({}); }
  };
  ops.set_position_source(g.step.slice(1, 1));
  const PositionScope scope{ops};
  try {
    if (g.work) {
      g.work->replay();
      if (decode_step_path_ != g.path) decode_step_path_ = g.path;  // after set_decode_graph(false), say so again
    } else if (!g.warmed) {
      body();  // plainly, once: every Linear's plans and working buffers exist before the recording
      g.warmed = true;
    } else {
      g.work = ops.capture(body);
      if (!g.work) fail("the {} backend records nothing", to_string(ops.device()));
      // Said once, when recorded: nothing is formatted on the steps that replay.
      const auto layers = static_cast<double>(std::max<std::size_t>(layers_.size(), 1));
      g.path = fmt::format("one {} a token: {} kernels ({:.1f} a layer over {} layers) + {} other nodes, 1 launch",
                           ops.device().kind == Device::Kind::cuda ? "CUDA graph" : "recording", g.work->kernels(),
                           static_cast<double>(g.work->kernels()) / layers, layers_.size(), g.work->other_nodes());
      decode_step_path_ = g.path;
      g.work->replay();
    }
  } catch (const Error& e) {
    g.unavailable = e.what();
    g.work.reset();
    decode_step_path_ = "kernel by kernel: no CUDA graph: " + g.unavailable;
    return false;  // this step runs again, kernel by kernel
  }
  cache.size_ = past + 1;
  ops.copy_out(g.logits, logits);
  return true;
}

std::string DecoderLM::decode_step_path() const { return decode_step_path_; }

}  // namespace qjoule::model
