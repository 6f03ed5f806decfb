// A precision spec: a Format plus its options, parsed by one function that every command uses
// (bench --precisions, eval / ppl / generate --precision, --layer-precision, info).
//
// Grammar: NAME[:OPTION]...
//   NAME       a row of the format table (format.h): fp32 bf16 fp16 int8 w8 int4 nf4 tf32 fp8
//   g=N        int4: weights per scale along the input dimension, 32, 64 or 128 (default 128)
//   sym|asym   int4: symmetric (default) or with zero points
//   a8         int4: activations quantized per block of 32 to INT8 (integer dot products)
//   gptq       int4: the codes chosen by GPTQ on calibration inputs (quant/gptq.h; needs --calib)
//   actorder   int4 with gptq: columns in order of decreasing input energy (static groups)
//   awq        int4: the weights scaled and clipped by AWQ on calibration inputs (quant/awq.h; needs --calib)
//   dq         nf4: double-quantized block scales
//   sq=ALPHA   int8: SmoothQuant with migration strength ALPHA in [0, 1]
//   emulate    fake quantization for accuracy studies (CPU, any format but fp32; see make_linear.h)
// Old spellings still read: g64 for g=64, sq0.5 for sq=0.5 (old_spelling_note says so once).
// Options that do not apply to NAME fail with one line naming the spec, the option and the format.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "qjoule/quant/format.h"

namespace qjoule::quant {

struct FormatSpec {
  Format format = Format::fp32;
  int group_size = 128;                    // int4: 32, 64 or 128
  bool int4_asymmetric = false;            // int4: asym scheme with zero points
  bool int4_int8_activations = false;      // int4: W4A8 path (a8)
  bool nf4_double_quant = false;           // nf4: double-quantized absmax (dq)
  bool int4_gptq = false;                  // int4: GPTQ-calibrated codes (gptq)
  bool int4_act_order = false;             // int4 gptq: act-order (actorder)
  bool int4_awq = false;                   // int4: AWQ-calibrated weights (awq)
  bool emulate = false;                    // fake quantization, accuracy studies only
  std::optional<float> smoothquant_alpha;  // int8: SmoothQuant (sq=ALPHA)

  bool operator==(const FormatSpec&) const = default;
};

// Parses `spec` (above). Options the spec does not mention keep their value from `defaults`, so
// --group-size / --int4-scheme / --double-quant / --emulate can set them for every layer; a default
// that does not apply to the format (a group size for nf4) is ignored.
FormatSpec parse_format_spec(std::string_view spec, const FormatSpec& defaults = {});

// The canonical spec, options that apply only: "int4:g=128:sym", "int4:g=64:asym:a8",
// "int4:g=128:sym:gptq:actorder", "nf4:dq",
// "int8:sq=0.5", "bf16:emulate". parse_format_spec(to_string(s)) == s.
[[nodiscard]] std::string to_string(const FormatSpec& spec);

// The spec's part of a run name (only [A-Za-z0-9.-_]; equal formats give equal tokens, so "int4" and
// "int4:g=128:sym" both give "int4_g128_sym"): "fp32", "int8_w8a8", "int8_w8a8_sq0.5", "w8a32",
// "int4_g64_asym", "int4_g128_sym_a8", "int4_g128_sym_gptq_actorder", "int4_g128_sym_awq", "nf4_dq"; emulate
// adds "_emulated" last.
[[nodiscard]] std::string run_token(const FormatSpec& spec);

// The spec parsed, or nullopt where parse_format_spec would fail (for records written by another
// version, and for sorting and labelling, where a bad spec is reported elsewhere).
[[nodiscard]] std::optional<FormatSpec> try_parse_format_spec(std::string_view spec);

// Whether the spec's weights come from calibration (int4 gptq or awq), not from the weights alone.
[[nodiscard]] inline bool needs_calibration(const FormatSpec& spec) { return spec.int4_gptq || spec.int4_awq; }
// The spec without its calibration options: what round-to-nearest runs ("int4:g=128:sym" for
// "int4:g=128:sym:gptq:actorder").
[[nodiscard]] inline FormatSpec round_to_nearest(FormatSpec spec) {
  spec.int4_gptq = spec.int4_act_order = spec.int4_awq = false;
  return spec;
}
// What a Linear built from weights alone in such a spec says: "precision 'int4:g=128:sym:gptq' needs
// calibration inputs (GPTQ chooses its codes from them) and none reached this layer: ...".
// The calibration method's name: "GPTQ", "AWQ"; "" for round-to-nearest.
[[nodiscard]] std::string_view calibration_method(const FormatSpec& spec);
[[nodiscard]] std::string calibration_needed_message(const FormatSpec& spec);

// "" when `spec` is written in the current grammar; otherwise one line saying how to write it now,
// e.g. "precision 'int4:g64': 'g64' is the old spelling of 'g=64' (still read)".
[[nodiscard]] std::string old_spelling_note(std::string_view spec);

}  // namespace qjoule::quant
