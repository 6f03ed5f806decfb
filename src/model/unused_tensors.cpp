#include "qjoule/model/unused_tensors.h"

#include <algorithm>
#include <array>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace qjoule::model {
namespace {

bool is_known_buffer(std::string_view name) {
  static constexpr std::array<std::string_view, 4> kSuffixes = {".attn.bias", ".attn.masked_bias",
                                                                "rotary_emb.inv_freq", "position_ids"};
  for (const auto suffix : kSuffixes)
    if (name.size() >= suffix.size() && name.substr(name.size() - suffix.size()) == suffix) return true;
  return false;
}

}  // namespace

std::string unused_tensors_warning(const io::Checkpoint& checkpoint) {
  std::vector<std::string> unused;
  for (auto& name : checkpoint.unread_tensors())
    if (!is_known_buffer(name)) unused.push_back(std::move(name));
  if (unused.empty()) return "";
  constexpr std::size_t kShown = 3;
  const std::size_t shown = std::min(unused.size(), kShown);
  const std::vector<std::string> first(unused.begin(), unused.begin() + static_cast<std::ptrdiff_t>(shown));
  return fmt::format("{}: {} tensor{} not used by the model: {}{}", checkpoint.source().string(), unused.size(),
                     unused.size() == 1 ? " is" : "s are", fmt::join(first, ", "),
                     unused.size() > shown ? fmt::format(" (and {} more)", unused.size() - shown) : std::string());
}

}  // namespace qjoule::model
