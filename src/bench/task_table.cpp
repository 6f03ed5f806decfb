#include "qjoule/bench/task_table.h"

#include <set>

#include <fmt/format.h>

#include "qjoule/bench/paper_table.h"

namespace qjoule::bench {
namespace {

std::string number_or_dash(const std::optional<double>& value, const char* format) {
  return value ? fmt::format(fmt::runtime(format), *value) : std::string("—");
}

}  // namespace

std::vector<std::string> task_names(const std::vector<const RunRecord*>& records) {
  std::set<std::string> names;
  for (const RunRecord* r : records)
    if (r->tasks.is_object())
      for (const auto& [name, t] : r->tasks.items()) names.insert(name);
  return {names.begin(), names.end()};
}

std::vector<std::string> task_names(const std::vector<RunRecord>& records) {
  std::vector<const RunRecord*> all;
  for (const auto& r : records) all.push_back(&r);
  return task_names(all);
}

std::optional<double> task_figure(const RunRecord& record, const std::string& task, std::string_view key) {
  if (!record.tasks.is_object() || !record.tasks.contains(task)) return std::nullopt;
  const nlohmann::json& t = record.tasks.at(task);
  const std::string name(key);
  if (!t.is_object() || !t.contains(name) || !t.at(name).is_number()) return std::nullopt;
  return t.at(name).get<double>();
}

TaskTable build_task_table(const std::vector<RunRecord>& records, double max_accuracy_drop_pt) {
  TaskTable table;
  const std::vector<std::string> names = task_names(records);
  if (names.empty()) return table;
  table.columns = {{"run", false}, {"precision", false}};
  for (const auto& name : names) {
    table.columns.push_back({name + " acc", true});
    table.columns.push_back({"Δacc", true});
    table.columns.push_back({"changed", true});
  }
  for (std::size_t i = 0; i < records.size(); ++i) {
    const RunRecord& r = records[i];
    if (r.status != "ok" || !r.tasks.is_object()) continue;
    std::vector<std::string> row = {r.run_name, r.config.precision.text()};
    for (const auto& name : names) {
      if (!r.tasks.contains(name)) {
        row.insert(row.end(), {"—", "—", "—"});
        continue;
      }
      const auto fig = [&](std::string_view key) { return task_figure(r, name, key); };
      row.push_back(
          fmt::format("{} ± {}", number_or_dash(fig("acc"), "{:.4f}"), number_or_dash(fig("acc_stderr"), "{:.4f}")));
      row.push_back(number_or_dash(fig("delta_acc"), "{:+.4f}"));
      const auto changed = fig("changed_share");
      row.push_back(changed ? fmt::format("{:.1f}%", *changed * 100.0) : std::string("—"));
      const auto delta = fig("delta_acc"), fp32 = fig("fp32_acc"), acc = fig("acc");
      if (delta && fp32 && acc && -*delta * 100.0 > max_accuracy_drop_pt + 1e-9)
        table.drops.push_back(
            fmt::format("{}: {:+.2f} pt acc on {} against FP32 ({:.4f} vs {:.4f}; {:.1f}% of answers changed)",
                        r.run_name, *delta * 100.0, name, *acc, *fp32, changed.value_or(0.0) * 100.0));
    }
    table.rows.push_back({i, std::move(row)});
  }
  return table;
}

std::string format_task_table(const std::vector<RunRecord>& records, double max_accuracy_drop_pt) {
  const TaskTable table = build_task_table(records, max_accuracy_drop_pt);
  if (table.columns.empty()) return "";
  std::vector<std::vector<std::string>> rows;
  for (const auto& row : table.rows) {
    std::vector<std::string> cells;
    for (const auto& cell : row.cells) cells.push_back(escape_cell(cell));
    rows.push_back(std::move(cells));
  }
  std::string out =
      "\nTask accuracy (`--task`): acc ± its standard error; Δacc against FP32's answers on the same items; changed: "
      "the share of items whose answer differs from FP32's.\n\n";
  out += render_table(table.columns, rows);
  if (!table.drops.empty()) {
    out += fmt::format("\n! Task accuracy drop above {} pt:\n", max_accuracy_drop_pt);
    for (const auto& d : table.drops) out += fmt::format("- {}\n", d);
  }
  return out;
}

}  // namespace qjoule::bench
