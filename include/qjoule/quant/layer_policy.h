// Which layers get quantized, and to which format (`--quant-include`, `--quant-exclude`,
// `--layer-precision`, on top of `--precision`).
//
// Resolution for one Linear layer (name as the caller passes it: a module or tensor name such as
// "distilbert.transformer.layer.0.attention.q_lin" or "...q_lin.weight"):
//   1. Candidate set. With --quant-include: the layers whose name matches one of its patterns.
//      Without it: the default set, the Linear layers inside transformer blocks (Q, K, V, attention
//      output, FFN in/out — the caller says so with `is_block_linear`). Embeddings, LayerNorms,
//      softmax, pooler / pre_classifier and classifier are not block linears and stay FP32 unless
//      --quant-include names them explicitly.
//   2. --quant-exclude removes matching layers from the candidate set (exclude beats include).
//   3. A candidate takes the format of the FIRST --layer-precision rule whose pattern matches, else
//      --precision. A rule may say "fp32" to keep one candidate unquantized.
//   Non-candidates always stay "fp32". Every decision carries a one-line reason for reports.
// Every format is parsed once, by LayerPolicy::parse (with the command's defaults: --group-size, ...):
// a decision carries its FormatSpec, and nothing below the policy reads a spec's text again.
//
// Patterns are globs over the whole name: `*` matches any run of characters (dots included, possibly
// empty), `?` exactly one character; everything else is literal. Lists are comma separated;
// whitespace around items is ignored. Bad syntax stops with one line naming the option and the item.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qjoule/quant/format_spec.h"
#include "qjoule/quant/precision.h"

namespace qjoule::quant {

// Whole-string glob match with `*` and `?`.
bool glob_match(std::string_view pattern, std::string_view name);

// "a*,b?c" → {"a*", "b?c"}. Empty items, whitespace inside an item and '[' / ']' are rejected
// (brackets would read as character classes, which qjoule does not support).
std::vector<std::string> parse_glob_list(std::string_view text, std::string_view option);

struct LayerPrecisionRule {
  std::string pattern;
  std::string format;
};
// "PATTERN=FORMAT,PATTERN=FORMAT" → rules in order (the first match wins). When `known_formats` is
// non-empty, a format not in it is rejected with the list of supported ones.
std::vector<LayerPrecisionRule> parse_layer_precision(std::string_view text,
                                                      const std::vector<std::string>& known_formats = {});

struct LayerPolicyOptions {
  std::string precision = "fp32";  // --precision: the format for candidates no rule names
  std::string include;             // --quant-include (empty: the default set)
  std::string exclude;             // --quant-exclude
  std::string layer_precision;     // --layer-precision
};

// A --layer-precision rule of a parsed policy: as written, and its format parsed.
struct LayerFormatRule {
  std::string pattern;
  std::string format;
  FormatSpec spec;
};

struct LayerDecision {
  std::string format;  // as written; "fp32" means: keep the FP32 layer
  FormatSpec spec;     // `format` parsed, with the policy's defaults
  std::string reason;  // e.g. "block linear, --precision int8" or "excluded by --quant-exclude '*.ffn.*'"
  bool quantized() const { return spec.format != Format::fp32; }
};

class LayerPolicy {
 public:
  // Parses every option, each format with `defaults` for the options it does not write (format_spec.h);
  // `known_formats` (e.g. kernels::supported_precisions()) validates format names when non-empty.
  static LayerPolicy parse(const LayerPolicyOptions& options, const FormatSpec& defaults = {},
                           const std::vector<std::string>& known_formats = {});
  // The default set (the block Linears) in one precision, already parsed (a bench run's): one line when
  // its text is not a spec.
  static LayerPolicy uniform(const Precision& precision);

  // `head_stored`: the layer is a language model's head whose checkpoint stores it in this format (bf16,
  // fp16 or fp32). Then, unless --quant-include names layers, the head is held as deployed: in that
  // format whenever --precision is below FP32 (FP32 with --precision fp32), a --layer-precision rule that
  // matches it quantizes it (e.g. 'lm_head=int8'), --quant-exclude keeps it FP32.
  LayerDecision resolve(std::string_view layer_name, bool is_block_linear,
                        std::optional<Format> head_stored = std::nullopt) const;

  const std::string& precision() const { return precision_; }
  const FormatSpec& precision_spec() const { return precision_spec_; }
  const std::vector<std::string>& include() const { return include_; }
  const std::vector<std::string>& exclude() const { return exclude_; }
  const std::vector<LayerFormatRule>& rules() const { return rules_; }

 private:
  LayerDecision resolve_head(std::string_view layer_name, Format head_stored) const;

  std::string precision_ = "fp32";
  FormatSpec precision_spec_, fp32_spec_;
  FormatSpec defaults_;  // what the formats were parsed with: a head's 16-bit spec is parsed with them too
  std::vector<std::string> include_, exclude_;
  std::vector<LayerFormatRule> rules_;
};

}  // namespace qjoule::quant
