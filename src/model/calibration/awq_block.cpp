#include "model/calibration/awq_block.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace qjoule::model::detail {
namespace {

// The scales of the Linears `members` (all reading one input), applied to their columns and to their inputs'
// statistics (the input is x / s from now on); empty where α = 0 won. Members of one input on the same tokens
// share statistics; a mixture's experts (`own_tokens`) each have their own, each measured on its own H, the
// channel means taken over all of them; a member no token reached is scaled, not measured.
std::vector<float> scale_group(const std::vector<CalibratingLinear*>& members, const quant::AwqOptions& options,
                               bool own_tokens = false) {
  const int64_t cols = members.front()->shape().in_features;
  std::vector<InputStatistics*> stats;  // distinct, reached by some token
  for (CalibratingLinear* m : members)
    if (m->has_calibration_input() && std::find(stats.begin(), stats.end(), &m->statistics()) == stats.end())
      stats.push_back(&m->statistics());
  if (stats.empty()) return {};
  std::vector<double> abs_sum(static_cast<std::size_t>(cols), 0.0);
  double tokens = 0.0;
  for (const InputStatistics* st : stats) {
    for (int64_t j = 0; j < cols; ++j) abs_sum[size_t(j)] += st->abs_sum[size_t(j)];
    tokens += double(st->tokens);
  }
  std::vector<float> mean_abs(static_cast<std::size_t>(cols));
  for (int64_t j = 0; j < cols; ++j) mean_abs[size_t(j)] = static_cast<float>(abs_sum[size_t(j)] / tokens);
  std::vector<quant::AwqMember> list;
  for (CalibratingLinear* m : members) {
    if (!m->has_calibration_input()) continue;
    list.push_back({m->weight().data(), m->shape().out_features,
                    [spec = m->spec(), name = m->shape().name](const float* w, int64_t rows, int64_t c, float* out) {
                      with_int4_block(
                          spec, [&]<class Block>(Block) { quant::int4_round_trip<Block>(w, rows, c, out, name); });
                    },
                    own_tokens ? &m->statistics().hessian : nullptr});
  }
  auto found = quant::search_awq_scales(list, cols, mean_abs, stats.front()->hessian, options);
  if (found.alpha == 0.0) return {};
  const std::vector<float>& s = found.scales;
  for (CalibratingLinear* m : members) {
    float* w = m->weight().data();
    for (int64_t r = 0; r < m->shape().out_features; ++r)
      for (int64_t j = 0; j < cols; ++j) w[r * cols + j] *= s[size_t(j)];
  }
  for (InputStatistics* st : stats)
    for (int64_t i = 0; i < cols; ++i)
      for (int64_t j = 0; j <= i; ++j) st->hessian[size_t(i * cols + j)] /= s[size_t(i)] * s[size_t(j)];
  return found.scales;
}

// Divides norm n's output by s.
void fold_into_norm(LayerNormParams& n, const std::vector<float>& s) {
  for (std::size_t j = 0; j < s.size(); ++j) {
    n.gamma[j] /= s[j];
    if (!n.beta.empty()) n.beta[j] /= s[j];
  }
}

// Divides rows first .. first + s.size() − 1 of l (and its bias) by s.
void fold_into_rows(CalibratingLinear& l, int64_t first, const std::vector<float>& s) {
  const int64_t cols = l.shape().in_features;
  float* w = l.weight().data();
  for (std::size_t i = 0; i < s.size(); ++i) {
    const int64_t r = first + static_cast<int64_t>(i);
    for (int64_t j = 0; j < cols; ++j) w[r * cols + j] /= s[i];
    if (!l.bias().empty()) l.bias()[size_t(r)] /= s[i];
  }
}

void clip(CalibratingLinear& l, const quant::AwqOptions& options) {
  with_int4_block(l.spec(), [&]<class Block>(Block) {
    quant::clip_awq<Block>(l.weight().data(), l.shape().out_features, l.shape().in_features, l.statistics().hessian,
                           options, l.shape().name);
  });
}

// A mixture's experts (AwqBlock::experts): scaled only where every expert's gate and up are AWQ's.
bool scale_mixture(AwqBlock& b, const quant::AwqOptions& options) {
  std::vector<CalibratingLinear*> in;
  bool all = !b.experts.empty() && b.norms_fold && !b.router.weight.empty();
  for (const AwqExpert& e : b.experts) {
    all = all && e.gate != nullptr && e.up != nullptr;
    in.push_back(e.gate);
    in.push_back(e.up);
  }
  bool changed = false;
  if (auto s = all ? scale_group(in, options, /*own_tokens=*/true) : std::vector<float>{}; !s.empty()) {
    fold_into_norm(b.mlp_norm, s);
    const int64_t cols = b.router.in_features;
    for (int64_t r = 0; r < b.router.out_features; ++r)
      for (int64_t j = 0; j < cols; ++j) b.router.weight[size_t(r * cols + j)] *= s[size_t(j)];
    b.router_changed = changed = true;
  }
  for (const AwqExpert& e : b.experts)
    if (e.down != nullptr && e.up != nullptr && e.down->has_calibration_input())
      if (auto s = scale_group({e.down}, options); !s.empty()) fold_into_rows(*e.up, 0, s);
  return changed;
}

}  // namespace

bool scale_awq_block(AwqBlock& b, const quant::AwqOptions& options) {
  bool norm_changed = false;
  // The attention norm's readers: c_attn alone, or Q, K and V (every non-fused block has all three).
  std::vector<CalibratingLinear*> attn;
  if (b.qkv != nullptr) {
    attn = {b.qkv};
  } else if (b.q != nullptr && b.k != nullptr && b.v != nullptr) {
    attn = {b.q, b.k, b.v};
  }
  if (!attn.empty() && b.norms_fold) {
    if (auto s = scale_group(attn, options); !s.empty()) {
      fold_into_norm(b.attn_norm, s);
      norm_changed = true;
    }
  }
  // O reads V's outputs (mixed by attention, which commutes with a per-channel scale).
  CalibratingLinear* v_rows = b.v != nullptr ? b.v : b.qkv;
  if (b.o != nullptr && v_rows != nullptr &&
      (b.qkv != nullptr || b.v->shape().out_features == b.o->shape().in_features)) {
    if (auto s = scale_group({b.o}, options); !s.empty())
      fold_into_rows(*v_rows, v_rows->shape().out_features - b.o->shape().in_features, s);
  }
  std::vector<CalibratingLinear*> mlp;
  if (b.up != nullptr && (b.gate_up_fused || (b.gate != nullptr) == b.gated)) {
    for (CalibratingLinear* l : {b.gate, b.up})
      if (l != nullptr) mlp.push_back(l);
  }
  if (!mlp.empty() && b.norms_fold) {
    if (auto s = scale_group(mlp, options); !s.empty()) {
      fold_into_norm(b.mlp_norm, s);
      norm_changed = true;
    }
  }
  // down reads act(gate) · up: its scales fold into up's rows (the second half of a fused gate | up).
  if (b.down != nullptr && b.up != nullptr && (b.gated || b.gate_up_fused)) {
    if (auto s = scale_group({b.down}, options); !s.empty())
      fold_into_rows(*b.up, b.up->shape().out_features - b.down->shape().in_features, s);
  }
  return scale_mixture(b, options) || norm_changed;
}

void finish_awq_block(AwqBlock& b, bool norms_changed, bool clip_linears, const quant::AwqOptions& options,
                      CalibratedInt4& out) {
  for (CalibratingLinear* l : {b.v, b.o, b.gate, b.up, b.down}) {
    if (l != nullptr && clip_linears) clip(*l, options);
  }
  for (CalibratingLinear* l : {b.qkv, b.q, b.k, b.v, b.o, b.gate, b.up, b.down}) {
    if (l != nullptr) l->finish_round_to_nearest(out);
  }
  for (const AwqExpert& e : b.experts)  // an expert no token reached: scaled, not clipped (no statistics)
    for (CalibratingLinear* l : {e.gate, e.up, e.down}) {
      if (l == nullptr) continue;
      if (clip_linears && l->has_calibration_input()) clip(*l, options);
      l->finish_round_to_nearest(out);
      if (!l->has_calibration_input()) out.round_to_nearest.insert(l->shape().name);
    }
  if (norms_changed) {
    out.norms.insert_or_assign(b.attn_norm.name, b.attn_norm);
    out.norms.insert_or_assign(b.mlp_norm.name, b.mlp_norm);
  }
  if (b.router_changed) out.fp32_weights.insert_or_assign(b.router.name, b.router.weight);
}

}  // namespace qjoule::model::detail
