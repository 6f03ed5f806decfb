#include "qjoule/model/fused_linear_params.h"

#include "qjoule/error.h"

namespace qjoule::model {

std::string fused_name(const std::vector<std::string>& names) {
  const auto dot = names.front().rfind('.');
  const std::string prefix = dot == std::string::npos ? "" : names.front().substr(0, dot + 1);
  std::string out = names.front();
  for (size_t i = 1; i < names.size(); ++i)
    out += "+" + (names[i].starts_with(prefix) ? names[i].substr(prefix.size()) : names[i]);
  return out;
}

LinearParams fuse_linear_params(const std::vector<const LinearParams*>& parts) {
  if (parts.size() < 2) fail("fusing Linears: {} part(s), expected at least two", parts.size());
  const LinearParams& first = *parts.front();
  LinearParams f;
  f.in_features = first.in_features;
  bool any_bias = false;
  std::size_t rows = 0;
  for (const LinearParams* p : parts) {
    if (p->in_features != first.in_features)
      fail("{}: {} inputs where {} has {}; fused Linears must read the same input", p->name, p->in_features, first.name,
           first.in_features);
    if (p->weight.size() != static_cast<std::size_t>(p->out_features * p->in_features))
      fail("{}: {} weights loaded, expected {} × {}", p->name, p->weight.size(), p->out_features, p->in_features);
    any_bias = any_bias || !p->bias.empty();
    rows += static_cast<std::size_t>(p->out_features);
  }
  f.weight.reserve(rows * static_cast<std::size_t>(first.in_features));
  for (const LinearParams* p : parts) {
    f.out_features += p->out_features;
    f.weight.insert(f.weight.end(), p->weight.begin(), p->weight.end());
    if (any_bias) {
      if (p->bias.empty()) {
        f.bias.insert(f.bias.end(), static_cast<size_t>(p->out_features), 0.0f);
      } else {
        f.bias.insert(f.bias.end(), p->bias.begin(), p->bias.end());
      }
    }
    f.fused_from.push_back(p->name);
  }
  f.name = fused_name(f.fused_from);
  return f;
}

}  // namespace qjoule::model
