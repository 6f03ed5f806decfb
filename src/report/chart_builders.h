// The report's chart helpers, shared by report_charts.cpp and decoder_speed_charts.cpp: one colour
// palette, the configuration keys that vary across runs (only those label a run), axes, Chart.js
// configs, and bars of one metric per precision (a gap, never a 0-valued bar, where a run has none).
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "qjoule/bench/run_record.h"

namespace qjoule::report::chart_builders {

using bench::RunRecord;
using nlohmann::json;
using Metric = std::function<std::optional<double>(const RunRecord&)>;

const char* color(std::size_t i);
std::vector<const RunRecord*> successful(const std::vector<RunRecord>& records);

// Which configuration keys differ between runs: only those go into labels.
struct Variation {
  bool model = false, device = false, batch = false, seq = false, threads = false;
};

Variation variation_of(const std::vector<const RunRecord*>& runs);
// "bs8", "distilbert cpu s128 t2": the varying keys of a run's shape (no precision).
std::string shape_label(const RunRecord& r, const Variation& v);
std::string run_label(const RunRecord& r, const Variation& v);

template <typename Key>
std::vector<Key> in_first_appearance_order(const std::vector<const RunRecord*>& runs,
                                           const std::function<Key(const RunRecord&)>& key_of) {
  std::vector<Key> keys;
  for (const auto* r : runs) {
    Key key = key_of(*r);
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(std::move(key));
  }
  return keys;
}

std::vector<std::string> precisions_of(const std::vector<const RunRecord*>& runs);
json axis(const std::string& title, const std::string& type = "linear");
// Animations off: the page draws synchronously, so its status is final when its script ends.
json chart_config(const std::string& type, const std::string& title, json data, json x_axis, json y_axis);
json value_or_null(const std::optional<double>& v);
json bar_dataset(const std::string& label, json values, std::size_t color_index);
// Bars: one category per precision, one dataset per shape (the varying keys) and metric, value or null.
// Datasets with no value at all are left out. A dataset is named by its shape and metric label, or
// `unnamed` (what the bars are: "tokens/s") where both are empty: never a bare "value".
json per_precision_data(const std::vector<const RunRecord*>& runs,
                        const std::vector<std::pair<std::string, Metric>>& metrics, const std::string& unnamed);
// A metric and the standard error drawn as its whisker.
struct ValueWithError {
  std::string label;
  Metric value, error;
};
// per_precision_data's bars (one dataset per shape and series), each followed by its whiskers: a thin
// floating bar [value − error, value + error] in the same stack, so it shares its bar's slot (the chart's
// value axis must not be stacked: chart_config's y with "stacked": false). A run without an error gets
// no whisker.
json per_precision_data_with_errors(const std::vector<const RunRecord*>& runs,
                                    const std::vector<ValueWithError>& series);
bool has_values(const json& data);

}  // namespace qjoule::report::chart_builders
