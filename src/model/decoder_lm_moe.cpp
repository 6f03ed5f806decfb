// DecoderLM's mixture-of-experts MLP: the router's logits come back to the host, which picks each token's
// experts (moe_routing.h); each expert then runs once over the rows of the tokens routed to it (a prefill reads
// every expert's weights once, a decode step reads its top-k experts' only), and its output rows are added to
// their tokens' output weighted by the routing weights, experts in index order, as transformers sums them.
#include "qjoule/model/decoder_lm.h"
#include "qjoule/model/moe_routing.h"

namespace qjoule::model {

void DecoderLM::moe_block(const Layer& layer, const Scratch& s, int64_t n) const {
  GraphOps& ops = *ops_;
  const MoeConfig& moe = config_.moe;
  const int64_t h = config_.hidden_size, experts = moe.num_experts;
  linear(layer.router, s.hn, n, s.route);
  std::vector<float> logits(static_cast<std::size_t>(n * experts));
  ops.copy_out(s.route.slice(0, n * experts), logits.data());
  const auto routes = route_top_k(logits, n, experts, moe.experts_per_token, moe.normalize_top_k);
  ops.copy_rows(s.xin, h, s.hn, h, h, n);  // s.hn then gathers the weighted sum
  std::vector<char> written(static_cast<std::size_t>(n), 0);
  for (int64_t e = 0; e < experts; ++e) {
    const std::vector<ExpertRoute>& chosen = routes[static_cast<std::size_t>(e)];
    if (chosen.empty()) continue;
    const auto m = static_cast<int64_t>(chosen.size());
    Tensor x = s.xin;  // every token, in order (a decode step's chosen experts)
    if (m < n) {
      for (int64_t j = 0; j < m; ++j)
        ops.copy_rows(s.xe.slice(j * h, h), h, s.xin.slice(chosen[j].token * h, h), h, h, 1);
      x = s.xe;
    }
    const Expert& ex = layer.experts[static_cast<std::size_t>(e)];
    gated_mlp(ex.gate_up, ex.gate, ex.up, ex.down, moe.expert_intermediate_size, x, m, s.ye, s);
    for (int64_t j = 0; j < m; ++j) {
      const int64_t t = chosen[static_cast<std::size_t>(j)].token;
      ops.add_scaled(s.hn.slice(t * h, h), s.ye.slice(j * h, h), chosen[static_cast<std::size_t>(j)].weight, h,
                     written[static_cast<std::size_t>(t)] != 0);
      written[static_cast<std::size_t>(t)] = 1;
    }
  }
}

}  // namespace qjoule::model
