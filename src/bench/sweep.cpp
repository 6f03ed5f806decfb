#include "qjoule/bench/sweep.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/json_fields.h"
#include "bench/run_config_reader.h"
#include "qjoule/error.h"
#include "qjoule/quant/precision.h"
#include "qjoule/io/json_error_text.h"

namespace qjoule::bench {
namespace {

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

// The trimmed items of a comma-separated list; an empty item or list fails naming the option.
std::vector<std::string> split_list(const std::string& option, const std::string& text) {
  std::vector<std::string> items;
  std::string_view rest = text;
  while (true) {
    const auto comma = rest.find(',');
    const auto item = trim(rest.substr(0, comma));
    if (item.empty()) {
      if (trim(text).empty()) fail("{} is empty, expected a comma-separated list of values", option);
      fail("{} '{}': empty item, expected a comma-separated list of values", option, text);
    }
    items.emplace_back(item);
    if (comma == std::string_view::npos) return items;
    rest.remove_prefix(comma + 1);
  }
}

// One positive integer; messages quote `whole` (the text the user typed) when the item is not a number.
std::size_t parse_positive(const std::string& option, const std::string& whole, const std::string& item) {
  std::size_t value = 0;
  const auto* end = item.data() + item.size();
  const auto [ptr, ec] = std::from_chars(item.data(), end, value);
  if (ptr != end || item.empty()) fail("{} '{}': '{}' is not a positive integer", option, whole, item);
  if (ec == std::errc::result_out_of_range) fail("{} '{}': '{}' is too large", option, whole, item);
  if (value == 0) fail("{} {}: expected at least 1", option, item);
  return value;
}

bool is_number_key(std::string_view key) { return key == "batch" || key == "seq" || key == "threads"; }

// Sets one swept key of `config` from its text value.
void apply(RunConfig& config, const std::string& key, const std::string& value) {
  if (is_number_key(key)) {
    const std::size_t n = parse_positive("sweep " + key, value, value);
    if (key == "batch") config.batch = n;
    if (key == "seq") config.seq = n;
    if (key == "threads") {
      if (n > (std::size_t{1} << 20)) fail("sweep threads {} is too large", n);
      config.threads = static_cast<int>(n);
    }
  } else if (key == "model") {
    config.model = value;
  } else if (key == "device") {
    config.device = value;
  } else {
    config.precision = value;
  }
}

void check_swept_keys(const SweepSpec& spec) {
  std::set<std::string> seen;
  for (const auto& [key, values] : spec.swept) {
    if (std::find(kRunConfigKeys.begin(), kRunConfigKeys.end(), key) == kRunConfigKeys.end())
      fail("sweep: unknown key '{}', expected one of: {}", key, fmt::join(kRunConfigKeys, ", "));
    if (!seen.insert(key).second) fail("sweep: key '{}' is given twice", key);
    if (values.empty()) fail("sweep: '{}' has no values, expected at least one", key);
  }
}

// Appends config unless a run of the same name is already listed.
void add_unique(std::vector<RunConfig>& runs, std::set<std::string>& names, const RunConfig& config) {
  if (names.insert(run_name(config)).second) runs.push_back(config);
}

std::vector<RunConfig> expand_cross_product(const SweepSpec& spec) {
  // precision moves to the end (fastest) with its fp32 values first: baselines precede their variants.
  auto axes = spec.swept;
  std::stable_partition(axes.begin(), axes.end(), [](const auto& axis) { return axis.first != "precision"; });
  for (auto& [key, values] : axes)
    if (key == "precision")
      std::stable_partition(values.begin(), values.end(), [](const std::string& v) {
        const quant::Precision precision(v);
        return precision.spec() && precision.spec()->format == quant::Format::fp32;
      });

  std::vector<RunConfig> runs;
  std::set<std::string> names;
  std::vector<std::size_t> index(axes.size(), 0);  // an odometer over the axes, the last digit fastest
  while (true) {
    RunConfig config = spec.defaults;
    for (std::size_t a = 0; a < axes.size(); ++a) apply(config, axes[a].first, axes[a].second[index[a]]);
    add_unique(runs, names, config);
    std::size_t a = axes.size();
    while (a > 0) {
      --a;
      if (++index[a] < axes[a].second.size()) break;
      index[a] = 0;
      if (a == 0) return runs;
    }
    if (axes.empty()) return runs;
  }
}

std::vector<RunConfig> expand_one_at_a_time(const SweepSpec& spec) {
  std::vector<RunConfig> runs;
  std::set<std::string> names;
  add_unique(runs, names, spec.defaults);
  for (const auto& [key, values] : spec.swept) {
    for (const auto& value : values) {
      RunConfig config = spec.defaults;
      apply(config, key, value);
      add_unique(runs, names, config);
    }
  }
  return runs;
}

}  // namespace

std::vector<RunConfig> expand_sweep(const SweepSpec& spec) {
  check_swept_keys(spec);
  // Validate every value up front, so a typo in the last value fails before the first run.
  for (const auto& [key, values] : spec.swept) {
    for (const auto& value : values) {
      RunConfig probe = spec.defaults;
      apply(probe, key, value);
      (void)run_name(probe);
    }
  }
  return spec.mode == SweepSpec::Mode::cross_product ? expand_cross_product(spec) : expand_one_at_a_time(spec);
}

SweepSpec parse_sweep_file(const std::filesystem::path& path) {
  const std::string where = fmt::format("sweep file '{}'", path.string());
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read {}: {}", where, std::generic_category().message(errno));
  std::stringstream text;
  text << in.rdbuf();

  // ordered_json keeps the order of the "sweep" keys, which sets the nesting of the runs.
  nlohmann::ordered_json ordered;
  try {
    ordered = nlohmann::ordered_json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    fail("{} is not valid JSON: {}", where, io::json_error_text(e));
  }
  const nlohmann::json document = ordered;
  const detail::JsonPlace top{where, ""};
  static constexpr std::string_view kTopKeys[] = {"defaults", "sweep", "mode"};
  detail::require_object_with_keys(document, top, kTopKeys);

  SweepSpec spec;
  if (document.contains("defaults"))
    spec.defaults = detail::read_run_config(document["defaults"], top.child("defaults"));

  if (document.contains("sweep")) {
    const auto sweep_place = top.child("sweep");
    detail::require_object_with_keys(document["sweep"], sweep_place, kRunConfigKeys);
    for (const auto& item : ordered["sweep"].items()) {
      const auto place = sweep_place.child(item.key());
      const nlohmann::json values = item.value();
      const bool numbers = is_number_key(item.key());
      if (!values.is_array())
        fail("{} is {}, expected an array of {}", place.text(), detail::describe_json(values),
             numbers ? "positive integers" : "strings");
      if (values.empty()) fail("{} is empty, expected at least one value", place.text());
      std::vector<std::string> texts;
      for (std::size_t i = 0; i < values.size(); ++i) {
        if (numbers) {
          texts.push_back(std::to_string(detail::read_positive_integer(values[i], place.element(i))));
        } else {
          texts.push_back(detail::read_string(values[i], place.element(i)));
          if (trim(texts.back()).empty()) fail("{} is empty, expected a value", place.element(i).text());
        }
      }
      spec.swept.emplace_back(item.key(), std::move(texts));
    }
  }

  if (document.contains("mode")) {
    const auto& mode = document["mode"];
    const auto place = top.child("mode");
    if (mode == "cross_product") {
      spec.mode = SweepSpec::Mode::cross_product;
    } else if (mode == "one_at_a_time") {
      spec.mode = SweepSpec::Mode::one_at_a_time;
    } else {
      fail("{} is {}, expected \"cross_product\" or \"one_at_a_time\"", place.text(), detail::describe_json(mode));
    }
  }
  return spec;
}

std::vector<std::size_t> parse_size_list(const std::string& option, const std::string& text) {
  std::vector<std::size_t> values;
  for (const auto& item : split_list(option, text)) values.push_back(parse_positive(option, text, item));
  return values;
}

std::vector<std::string> parse_string_list(const std::string& option, const std::string& text) {
  return split_list(option, text);
}

}  // namespace qjoule::bench
