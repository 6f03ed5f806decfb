#include "qjoule/bench/task_table.h"

#include <set>

#include <fmt/format.h>

#include "qjoule/bench/paper_table.h"

namespace qjoule::bench {
namespace {

std::string number_or_dash(const nlohmann::json& value, const char* format) {
  return value.is_number() ? fmt::format(fmt::runtime(format), value.get<double>()) : std::string("—");
}

}  // namespace

std::string format_task_table(const std::vector<RunRecord>& records, double max_accuracy_drop_pt) {
  std::vector<std::string> names;  // in the order the records first name them
  std::set<std::string> seen;
  for (const auto& r : records)
    if (r.status == "ok" && r.tasks.is_object())
      for (const auto& [name, t] : r.tasks.items())
        if (seen.insert(name).second) names.push_back(name);
  if (names.empty()) return "";
  std::vector<PaperTableColumn> columns = {{"run", false}, {"precision", false}};
  for (const auto& name : names) {
    columns.push_back({name + " acc", true});
    columns.push_back({"Δacc", true});
    columns.push_back({"changed", true});
  }
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> drops;
  for (const auto& r : records) {
    if (r.status != "ok" || !r.tasks.is_object()) continue;
    std::vector<std::string> row = {escape_cell(r.run_name), escape_cell(r.config.precision.text())};
    for (const auto& name : names) {
      if (!r.tasks.contains(name)) {
        row.insert(row.end(), {"—", "—", "—"});
        continue;
      }
      const auto& t = r.tasks[name];
      row.push_back(fmt::format("{:.4f} ± {:.4f}", t.value("acc", 0.0), t.value("acc_stderr", 0.0)));
      row.push_back(number_or_dash(t["delta_acc"], "{:+.4f}"));
      row.push_back(t["changed_share"].is_number() ? fmt::format("{:.1f}%", t["changed_share"].get<double>() * 100.0)
                                                   : std::string("—"));
      if (t["delta_acc"].is_number() && -t["delta_acc"].get<double>() * 100.0 > max_accuracy_drop_pt + 1e-9)
        drops.push_back(
            fmt::format("{}: {:+.2f} pt acc on {} against FP32 ({:.4f} vs {:.4f}; {:.1f}% of answers changed)",
                        r.run_name, t["delta_acc"].get<double>() * 100.0, name, t.value("acc", 0.0),
                        t["fp32_acc"].get<double>(), t["changed_share"].get<double>() * 100.0));
    }
    rows.push_back(std::move(row));
  }
  std::string out =
      "\nTask accuracy (`--task`): acc ± its standard error; Δacc against FP32's answers on the same items; changed: "
      "the share of items whose answer differs from FP32's.\n\n";
  out += render_table(columns, rows);
  if (!drops.empty()) {
    out += fmt::format("\n! Task accuracy drop above {} pt:\n", max_accuracy_drop_pt);
    for (const auto& d : drops) out += fmt::format("- {}\n", d);
  }
  return out;
}

}  // namespace qjoule::bench
