#include "qjoule/quant/layer_policy.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "qjoule/error.h"
#include "qjoule/quant/format.h"
#include "qjoule/quant/format_spec.h"

namespace qjoule::quant {
namespace {

std::string_view trim(std::string_view s) {
  const auto not_space = [](char c) { return c != ' ' && c != '\t'; };
  while (!s.empty() && !not_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && !not_space(s.back())) s.remove_suffix(1);
  return s;
}

// Comma-separated items, trimmed; an empty item (",,", leading or trailing comma) is an error.
std::vector<std::string_view> split_items(std::string_view text, std::string_view option) {
  std::vector<std::string_view> items;
  if (trim(text).empty()) return items;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string_view item = trim(text.substr(start, comma == std::string_view::npos ? text.npos : comma - start));
    if (item.empty())
      fail("{}: empty item in '{}'; expected comma-separated patterns without empty entries", option, text);
    items.push_back(item);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return items;
}

void check_pattern(std::string_view pattern, std::string_view option) {
  for (char c : pattern) {
    if (c == ' ' || c == '\t') {
      fail("{}: pattern '{}' contains whitespace; expected a glob over tensor names (only * and ? are wildcards)",
           option, pattern);
    }
    if (c == '[' || c == ']') {
      fail("{}: pattern '{}' uses '{}'; expected only * and ? as wildcards (character classes are not supported)",
           option, pattern, c);
    }
  }
}

std::string first_match(const std::vector<std::string>& patterns, std::string_view name) {
  for (const std::string& p : patterns)
    if (glob_match(p, name)) return p;
  return {};
}

}  // namespace

bool glob_match(std::string_view pattern, std::string_view name) {
  // Iterative matcher: on a mismatch, retry from the last '*' with one more character consumed.
  size_t p = 0, n = 0, star = std::string_view::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++p;
      ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::vector<std::string> parse_glob_list(std::string_view text, std::string_view option) {
  std::vector<std::string> patterns;
  for (std::string_view item : split_items(text, option)) {
    check_pattern(item, option);
    patterns.emplace_back(item);
  }
  return patterns;
}

std::vector<LayerPrecisionRule> parse_layer_precision(std::string_view text,
                                                      const std::vector<std::string>& known_formats) {
  constexpr std::string_view option = "--layer-precision";
  std::vector<LayerPrecisionRule> rules;
  for (std::string_view item : split_items(text, option)) {
    // The first '=' ends the pattern: the format may hold more (int4:g=64, int8:sq=0.5).
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      fail("{}: item '{}' is not PATTERN=FORMAT; expected e.g. '*.ffn.*=int4,*.attention.*=int8'", option, item);
    }
    const std::string_view pattern = trim(item.substr(0, eq)), format = trim(item.substr(eq + 1));
    if (pattern.empty() || format.empty()) {
      fail("{}: item '{}' has an empty {}; expected PATTERN=FORMAT", option, item,
           pattern.empty() ? "pattern" : "format");
    }
    check_pattern(pattern, option);
    if (!known_formats.empty() &&
        std::find(known_formats.begin(), known_formats.end(), format) == known_formats.end()) {
      fail("{}: item '{}' names unknown format '{}'; expected one of {}", option, item, format,
           fmt::join(known_formats, ", "));
    }
    rules.push_back({std::string(pattern), std::string(format)});
  }
  return rules;
}

LayerPolicy LayerPolicy::parse(const LayerPolicyOptions& options, const FormatSpec& defaults,
                               const std::vector<std::string>& known_formats) {
  LayerPolicy policy;
  policy.precision_ = std::string(trim(options.precision));
  if (policy.precision_.empty()) fail("--precision: empty; expected a format name such as fp32 or int8");
  if (!known_formats.empty() &&
      std::find(known_formats.begin(), known_formats.end(), policy.precision_) == known_formats.end()) {
    fail("--precision: unknown format '{}'; expected one of {}", policy.precision_, fmt::join(known_formats, ", "));
  }
  policy.include_ = parse_glob_list(options.include, "--quant-include");
  policy.exclude_ = parse_glob_list(options.exclude, "--quant-exclude");
  for (auto& rule : parse_layer_precision(options.layer_precision, known_formats))
    policy.rules_.push_back({std::move(rule.pattern), rule.format, FormatSpec{}});
  // The formats last, in the order written, so that a bad pattern is reported before a bad format.
  policy.precision_spec_ = parse_format_spec(policy.precision_, defaults);
  policy.fp32_spec_ = parse_format_spec(name(Format::fp32), defaults);
  policy.defaults_ = defaults;
  for (auto& rule : policy.rules_) rule.spec = parse_format_spec(rule.format, defaults);
  return policy;
}

LayerPolicy LayerPolicy::uniform(const Precision& precision) {
  LayerPolicy policy;
  policy.precision_spec_ = precision.spec_or_fail();
  policy.precision_ = precision.text();
  return policy;
}

LayerDecision LayerPolicy::resolve_head(std::string_view layer_name, Format head_stored) const {
  if (const std::string hit = first_match(exclude_, layer_name); !hit.empty())
    return {std::string(name(Format::fp32)), fp32_spec_,
            fmt::format("the head, excluded by --quant-exclude '{}'", hit)};
  for (const LayerFormatRule& rule : rules_) {
    if (glob_match(rule.pattern, layer_name))
      return {rule.format, rule.spec, fmt::format("the head, --layer-precision '{}={}'", rule.pattern, rule.format)};
  }
  if (precision_spec_.format == Format::fp32)
    return {std::string(name(Format::fp32)), fp32_spec_, "the head, FP32 as the run"};
  if (head_stored == Format::fp32)
    return {std::string(name(Format::fp32)), fp32_spec_,
            "the head in the checkpoint's fp32, as stored (--layer-precision 'lm_head=FORMAT' quantizes it)"};
  const std::string format(name(head_stored));
  FormatSpec defaults = defaults_;
  defaults.emulate = precision_spec_.emulate;  // an emulated run emulates its head too
  return {format, parse_format_spec(format, defaults),
          fmt::format("the head in the checkpoint's {}, as deployed (below FP32; --layer-precision "
                      "'lm_head=FORMAT' quantizes it, --quant-exclude lm_head keeps it FP32)",
                      format)};
}

LayerDecision LayerPolicy::resolve(std::string_view layer_name, bool is_block_linear,
                                   std::optional<Format> head_stored) const {
  if (!is_block_linear && head_stored && include_.empty()) return resolve_head(layer_name, *head_stored);
  std::string candidate_reason;
  if (!include_.empty()) {
    const std::string hit = first_match(include_, layer_name);
    if (hit.empty()) return {std::string(name(Format::fp32)), fp32_spec_, "not matched by --quant-include"};
    candidate_reason = fmt::format("included by --quant-include '{}'", hit);
  } else {
    if (!is_block_linear)
      return {std::string(name(Format::fp32)), fp32_spec_, "not a transformer-block linear (kept FP32 by default)"};
    candidate_reason = "block linear";
  }
  if (const std::string hit = first_match(exclude_, layer_name); !hit.empty()) {
    return {std::string(name(Format::fp32)), fp32_spec_, fmt::format("excluded by --quant-exclude '{}'", hit)};
  }
  for (const LayerFormatRule& rule : rules_) {
    if (glob_match(rule.pattern, layer_name)) {
      return {rule.format, rule.spec,
              fmt::format("{}, --layer-precision '{}={}'", candidate_reason, rule.pattern, rule.format)};
    }
  }
  return {precision_, precision_spec_, fmt::format("{}, --precision {}", candidate_reason, precision_)};
}

}  // namespace qjoule::quant
