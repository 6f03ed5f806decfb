#include "report/decoder_speed_charts.h"

#include <optional>
#include <string>
#include <utility>

#include "report/chart_builders.h"

namespace qjoule::report {

std::vector<ReportChart> decoder_speed_charts(const std::vector<const bench::RunRecord*>& runs) {
  using namespace chart_builders;  // NOLINT
  const auto chart = [&runs](const char* id, const std::string& title, const std::string& unit,
                             const std::vector<std::pair<std::string, Metric>>& metrics, const char* none) {
    ReportChart c{id, title, nullptr, {}};
    json data = per_precision_data(runs, metrics, unit);
    if (!has_values(data)) {
      c.notes.push_back(none);
      return c;
    }
    c.config = chart_config("bar", title, std::move(data), axis("precision", "category"), axis(unit));
    return c;
  };
  // A decoder run's generic latency is its prefill's (run_record.h).
  const Metric prefill_ms = [](const RunRecord& r) -> std::optional<double> {
    return r.latency ? std::optional<double>(r.latency->p50_ms) : std::nullopt;
  };
  const Metric decode_ms = [](const RunRecord& r) { return r.decode_ms_per_token_mean; };
  const Metric prefill_tokens_per_s = [](const RunRecord& r) {
    return r.prefill_tokens_per_s_mean ? r.prefill_tokens_per_s_mean : r.tokens_per_s;
  };
  const Metric decode_tokens_per_s = [](const RunRecord& r) { return r.decode_tokens_per_s_mean; };
  return {chart("chart-phase-latency", "Latency per phase (ms): prefill p50 per batch of prompts, decode per token",
                "ms", {{"prefill", prefill_ms}, {"decode", decode_ms}}, "No run has a prefill or decode latency."),
          chart("chart-prefill-throughput", "Prefill throughput per precision (prompt tokens/s)", "tokens/s",
                {{"", prefill_tokens_per_s}}, "No run has a prefill throughput."),
          chart("chart-decode-throughput", "Decode throughput per precision (generated tokens/s)", "tokens/s",
                {{"", decode_tokens_per_s}}, "No run has a decode throughput.")};
}

}  // namespace qjoule::report
