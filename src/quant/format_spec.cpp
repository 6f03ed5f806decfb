#include "qjoule/quant/format_spec.h"

#include <charconv>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "qjoule/error.h"

namespace qjoule::quant {
namespace {

std::vector<std::string_view> split_colons(std::string_view s) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t colon = s.find(':', start);
    parts.push_back(s.substr(start, colon == std::string_view::npos ? s.npos : colon - start));
    if (colon == std::string_view::npos) return parts;
    start = colon + 1;
  }
}

// The value of an option written KEY=VALUE (the current grammar) or KEYVALUE (the old one), or
// nullopt when `option` is not KEY's. `old` is set when the old spelling was used.
std::optional<std::string_view> keyed_value(std::string_view option, std::string_view key, bool* old = nullptr) {
  if (!option.starts_with(key) || option.size() == key.size()) return std::nullopt;
  std::string_view rest = option.substr(key.size());
  const bool is_old = rest.front() != '=';
  if (!is_old) rest.remove_prefix(1);
  if (is_old && !(rest.front() >= '0' && rest.front() <= '9')) return std::nullopt;  // "sym" is not "s" + "ym"
  if (old != nullptr) *old = is_old;
  return rest;
}

void require_format(const FormatSpec& f, Format expected, std::string_view spec, std::string_view option) {
  if (f.format != expected) {
    fail("precision '{}': option '{}' applies to {} only, not to {}", spec, option, name(expected), f.format);
  }
}

int parse_group(std::string_view spec, std::string_view value) {
  if (value == "32") return 32;
  if (value == "64") return 64;
  if (value == "128") return 128;
  fail("precision '{}': int4 group size '{}', expected 32, 64 or 128", spec, value);
}

float parse_alpha(std::string_view spec, std::string_view value) {
  float alpha = 0.0f;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), alpha);
  if (ec != std::errc() || end != value.data() + value.size() || value.empty()) {
    fail(
        "precision '{}': SmoothQuant alpha '{}' is not a number, expected sq=ALPHA with ALPHA in [0, 1], e.g. "
        "int8:sq=0.5",
        spec, value);
  }
  if (!(alpha >= 0.0f && alpha <= 1.0f)) {
    fail("precision '{}': SmoothQuant alpha {} is outside [0, 1]", spec, value);
  }
  return alpha;
}

}  // namespace

FormatSpec parse_format_spec(std::string_view spec, const FormatSpec& defaults) {
  const std::vector<std::string_view> parts = split_colons(spec);
  const auto format = find_format(parts[0]);
  if (!format) {
    fail(
        "precision '{}': unknown format '{}'; expected one of {} (options as NAME:OPTION, e.g. int4:g=64:asym, "
        "int8:sq=0.5, nf4:dq)",
        spec, parts[0], all_format_names());
  }
  FormatSpec f = defaults;
  f.format = *format;
  // Defaults that do not apply to this format are dropped, so equal formats compare equal.
  if (f.format != Format::int4) {
    f.group_size = 128;
    f.int4_asymmetric = false;
    f.int4_int8_activations = false;
    f.int4_gptq = false;
    f.int4_act_order = false;
    f.int4_awq = false;
  }
  if (f.format != Format::nf4) f.nf4_double_quant = false;
  if (f.format != Format::int8) f.smoothquant_alpha.reset();
  if (f.format == Format::fp32) f.emulate = false;

  const FormatTraits& row = traits(f.format);
  if (f.format != Format::fp32 && !row.emulatable && row.options.empty() && (f.emulate || parts.size() > 1)) {
    fail("precision '{}': {} takes no options (one fixed scheme, no fake-quantized twin)", spec, f.format);
  }
  // Each kind of option at most once: "int4:g=64:g=128" or "int4:sym:asym" would otherwise run with
  // the last one, silently.
  std::map<std::string_view, std::string_view> given;  // kind -> the option that set it
  const auto once = [&](std::string_view kind, std::string_view o) {
    const auto [at, inserted] = given.emplace(kind, o);
    if (inserted) return;
    if (at->second == o) fail("precision '{}': option '{}' is given twice; expected it once", spec, o);
    fail("precision '{}': options '{}' and '{}' contradict each other; expected one of them", spec, at->second, o);
  };
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const std::string_view o = parts[i];
    if (const auto g = keyed_value(o, "g")) {
      require_format(f, Format::int4, spec, o);
      once("g", o);
      f.group_size = parse_group(spec, *g);
    } else if (o == "sym" || o == "asym") {
      require_format(f, Format::int4, spec, o);
      once("scheme", o);
      f.int4_asymmetric = o == "asym";
    } else if (o == "a8") {
      require_format(f, Format::int4, spec, o);
      once(o, o);
      f.int4_int8_activations = true;
    } else if (o == "gptq" || o == "actorder") {
      require_format(f, Format::int4, spec, o);
      once(o, o);
      (o == "gptq" ? f.int4_gptq : f.int4_act_order) = true;
    } else if (o == "awq") {
      require_format(f, Format::int4, spec, o);
      once(o, o);
      f.int4_awq = true;
    } else if (o == "dq") {
      require_format(f, Format::nf4, spec, o);
      once(o, o);
      f.nf4_double_quant = true;
    } else if (const auto alpha = keyed_value(o, "sq")) {
      require_format(f, Format::int8, spec, o);
      once("sq", o);
      f.smoothquant_alpha = parse_alpha(spec, *alpha);
    } else if (o == "emulate") {
      once(o, o);
      f.emulate = f.format != Format::fp32;  // fp32 has nothing to emulate: it is its own layer
    } else {
      fail(
          "precision '{}': unknown option '{}'; expected g=32|64|128, sym, asym, a8, gptq, actorder, awq (int4), dq "
          "(nf4), sq=ALPHA (int8) or emulate",
          spec, o);
    }
  }
  if (f.format == Format::int4 && f.group_size != 32 && f.group_size != 64 && f.group_size != 128) {
    fail("precision '{}': int4 group size {}; expected 32, 64 or 128", spec, f.group_size);
  }
  if (f.int4_act_order && !f.int4_gptq) {
    fail(
        "precision '{}': option 'actorder' orders GPTQ's columns; expected it with 'gptq' (e.g. int4:g=128:gptq:actorder)",
        spec);
  }
  if (f.int4_gptq && f.int4_awq) {
    fail("precision '{}': options 'gptq' and 'awq' contradict each other; expected one calibration method", spec);
  }
  if (f.int4_awq && f.emulate) {
    fail(
        "precision '{}': options 'awq' and 'emulate' contradict each other; expected one of them (awq makes real "
        "int4 codes)",
        spec);
  }
  if (f.int4_gptq && f.emulate) {
    fail(
        "precision '{}': options 'gptq' and 'emulate' contradict each other; expected one of them (gptq makes real "
        "int4 codes)",
        spec);
  }
  return f;
}

std::string to_string(const FormatSpec& f) {
  std::string s(name(f.format));
  if (f.format == Format::int4) {
    s += fmt::format(":g={}:{}", f.group_size, f.int4_asymmetric ? "asym" : "sym");
    if (f.int4_int8_activations) s += ":a8";
    if (f.int4_gptq) s += ":gptq";
    if (f.int4_act_order) s += ":actorder";
    if (f.int4_awq) s += ":awq";
  }
  if (f.format == Format::nf4 && f.nf4_double_quant) s += ":dq";
  if (f.format == Format::int8 && f.smoothquant_alpha) s += fmt::format(":sq={}", *f.smoothquant_alpha);
  if (f.emulate) s += ":emulate";
  return s;
}

std::string run_token(const FormatSpec& f) {
  std::string token(traits(f.format).run_token);
  if (f.format == Format::int4) token += fmt::format("_g{}_{}", f.group_size, f.int4_asymmetric ? "asym" : "sym");
  if (f.format == Format::int8 && f.smoothquant_alpha) token += fmt::format("_sq{}", *f.smoothquant_alpha);
  if (f.format == Format::nf4 && f.nf4_double_quant) token += "_dq";
  if (f.format == Format::int4 && f.int4_int8_activations) token += "_a8";
  if (f.format == Format::int4 && f.int4_gptq) token += f.int4_act_order ? "_gptq_actorder" : "_gptq";
  if (f.format == Format::int4 && f.int4_awq) token += "_awq";
  if (f.emulate) token += "_emulated";
  return token;
}

std::string calibration_needed_message(const FormatSpec& spec) {
  return fmt::format(
      "precision '{}' needs calibration inputs ({} chooses its {} from them) and none reached this layer: "
      "GPTQ and AWQ calibrate decoders in `qjoule ppl`, `generate` and `bench` (--calib FILE); expected {} for "
      "round-to-nearest elsewhere",
      to_string(spec), calibration_method(spec), spec.int4_awq ? "scales" : "codes", to_string(round_to_nearest(spec)));
}

std::string_view calibration_method(const FormatSpec& spec) {
  if (spec.int4_gptq) return "GPTQ";
  if (spec.int4_awq) return "AWQ";
  return "";
}

std::optional<FormatSpec> try_parse_format_spec(std::string_view spec) {
  try {
    return parse_format_spec(spec);
  } catch (const Error&) {
    return std::nullopt;
  }
}

std::string old_spelling_note(std::string_view spec) {
  const std::vector<std::string_view> parts = split_colons(spec);
  for (std::size_t i = 1; i < parts.size(); ++i) {
    for (std::string_view key : {"g", "sq"}) {
      bool old = false;
      const auto value = keyed_value(parts[i], key, &old);
      if (value && old) {
        return fmt::format("precision '{}': '{}' is the old spelling of '{}={}' (still read)", spec, parts[i], key,
                           *value);
      }
    }
  }
  return "";
}

}  // namespace qjoule::quant
