// The report's chart helpers (chart_builders.h): colours, which keys vary, labels, axes, configs and
// per-precision bar data.
#include "report/chart_builders.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace qjoule::report::chart_builders {

constexpr std::array<const char*, 10> kPalette = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                                  "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
const char* color(std::size_t i) { return kPalette[i % kPalette.size()]; }

std::vector<const RunRecord*> successful(const std::vector<RunRecord>& records) {
  std::vector<const RunRecord*> out;
  for (const auto& r : records)
    if (r.status == "ok") out.push_back(&r);
  return out;
}

Variation variation_of(const std::vector<const RunRecord*>& runs) {
  Variation v;
  for (const auto* r : runs) {
    const auto& a = runs.front()->config;
    v.model = v.model || r->config.model != a.model;
    v.device = v.device || r->config.device != a.device;
    v.batch = v.batch || r->config.batch != a.batch;
    v.seq = v.seq || r->config.seq != a.seq;
    v.threads = v.threads || r->config.threads != a.threads;
  }
  return v;
}

// "bs8", "distilbert cpu s128 t2": the varying keys of a run's shape (no precision).
std::string shape_label(const RunRecord& r, const Variation& v) {
  std::vector<std::string> parts;
  if (v.model) parts.push_back(r.config.model);
  if (v.device) parts.push_back(r.config.device);
  if (v.batch) parts.push_back(fmt::format("bs{}", r.config.batch));
  if (v.seq) parts.push_back(fmt::format("s{}", r.config.seq));
  if (v.threads) parts.push_back(fmt::format("t{}", r.config.threads));
  return fmt::format("{}", fmt::join(parts, " "));
}

std::string run_label(const RunRecord& r, const Variation& v) {
  const std::string shape = shape_label(r, v);
  return r.config.precision.text() + (shape.empty() ? "" : " " + shape) + (r.not_representative ? " *" : "");
}

std::vector<std::string> precisions_of(const std::vector<const RunRecord*>& runs) {
  return in_first_appearance_order<std::string>(runs, [](const RunRecord& r) { return r.config.precision.text(); });
}

json axis(const std::string& title, const std::string& type) {
  return {{"type", type}, {"title", {{"display", true}, {"text", title}}}};
}

// Animations off: the page draws synchronously, so its status is final when its script ends.
json chart_config(const std::string& type, const std::string& title, json data, json x_axis, json y_axis) {
  return {{"type", type},
          {"data", std::move(data)},
          {"options",
           {{"animation", false},
            {"responsive", true},
            {"maintainAspectRatio", false},
            {"plugins", {{"title", {{"display", true}, {"text", title}}}, {"legend", {{"position", "bottom"}}}}},
            {"scales", {{"x", std::move(x_axis)}, {"y", std::move(y_axis)}}}}}};
}

json value_or_null(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

json bar_dataset(const std::string& label, json values, std::size_t color_index) {
  return {{"label", label},
          {"data", std::move(values)},
          {"backgroundColor", color(color_index)},
          {"borderColor", color(color_index)}};
}

namespace {

// One (shape, series) pair of a per-precision chart: its entries per precision (the last run of that
// precision and shape), null where it has none.
struct SeriesSlot {
  const std::vector<const RunRecord*>& runs;
  const std::vector<std::string>& precisions;
  const Variation& v;
  const std::string& shape;
  std::size_t series = 0, color = 0;

  json values(const std::function<json(const RunRecord&)>& entry, bool& any) const {
    json out = json::array();
    for (const auto& precision : precisions) {
      json value = nullptr;
      for (const auto* r : runs)
        if (r->config.precision == precision && shape_label(*r, v) == shape) value = entry(*r);
      any = any || !value.is_null();
      out.push_back(std::move(value));
    }
    return out;
  }
};

// Every shape (the varying keys) × each of `series`, the precisions as categories: `add` appends a pair's
// datasets; the colour index counts every pair, drawn or not.
json over_shapes(const std::vector<const RunRecord*>& runs, std::size_t series,
                 const std::function<void(const SeriesSlot&, json&)>& add) {
  const Variation v = variation_of(runs);
  const auto precisions = precisions_of(runs);
  const auto shapes =
      in_first_appearance_order<std::string>(runs, [&](const RunRecord& r) { return shape_label(r, v); });
  json datasets = json::array();
  std::size_t color = 0;
  for (const auto& shape : shapes)
    for (std::size_t i = 0; i < series; ++i) add(SeriesSlot{runs, precisions, v, shape, i, color++}, datasets);
  return {{"labels", precisions}, {"datasets", std::move(datasets)}};
}

std::string series_label(const std::string& shape, const std::string& metric, const std::string& unnamed) {
  if (shape.empty()) return metric.empty() ? unnamed : metric;
  return metric.empty() ? shape : shape + " " + metric;
}

}  // namespace

// Bars: one category per precision, one dataset per shape (the varying keys), value or null (a gap,
// never a 0-valued bar). Datasets with no value at all are left out.
json per_precision_data(const std::vector<const RunRecord*>& runs,
                        const std::vector<std::pair<std::string, Metric>>& metrics, const std::string& unnamed) {
  return over_shapes(runs, metrics.size(), [&](const SeriesSlot& slot, json& datasets) {
    const auto& [label, metric] = metrics[slot.series];
    bool any = false;
    json values = slot.values([&](const RunRecord& r) { return value_or_null(metric(r)); }, any);
    if (any) datasets.push_back(bar_dataset(series_label(slot.shape, label, unnamed), std::move(values), slot.color));
  });
}

json per_precision_data_with_errors(const std::vector<const RunRecord*>& runs,
                                    const std::vector<ValueWithError>& series) {
  return over_shapes(runs, series.size(), [&](const SeriesSlot& slot, json& datasets) {
    const ValueWithError& s = series[slot.series];
    bool any = false, any_error = false;
    json values = slot.values([&](const RunRecord& r) { return value_or_null(s.value(r)); }, any);
    json whiskers = slot.values(
        [&](const RunRecord& r) -> json {
          const auto value = s.value(r), error = s.error(r);
          if (!value || !error) return nullptr;
          return json::array({*value - *error, *value + *error});
        },
        any_error);
    if (!any) return;
    const std::string label = series_label(slot.shape, s.label, s.label);
    const std::string stack = fmt::format("s{}", slot.color);
    json bars = bar_dataset(label, std::move(values), slot.color);
    bars["stack"] = stack;
    bars["order"] = 1;  // drawn first: its whisker (order 0) over it
    datasets.push_back(std::move(bars));
    if (any_error)
      datasets.push_back({{"label", label + " ± standard error"},
                          {"data", std::move(whiskers)},
                          {"stack", stack},
                          {"order", 0},
                          {"barPercentage", 0.12},
                          {"backgroundColor", "#333333"},
                          {"borderColor", "#333333"}});
  });
}

bool has_values(const json& data) { return !data["datasets"].empty(); }

}  // namespace qjoule::report::chart_builders
