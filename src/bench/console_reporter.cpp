#include "qjoule/bench/console_reporter.h"

#include <cstdio>

#include <fmt/format.h>

#include "qjoule/bench/task_table.h"

namespace qjoule::bench {

std::string format_duration(double seconds) {
  if (seconds < 60) return fmt::format("{:.0f}s", seconds);
  const auto s = static_cast<long>(seconds + 0.5);
  return fmt::format("{}m{:02d}s", s / 60, s % 60);
}

void ConsoleReporter::sweep_started(std::size_t total, std::size_t already) {
  if (already > 0)
    fmt::print(stderr, "resume: {} of {} runs already in {}; running the other {}\n", already, total, where_,
               total - already);
}

void ConsoleReporter::run_started(std::size_t index, std::size_t total, const std::string& run_name) {
  fmt::print(stderr, "[{:>{}}/{}] {} ...", index, std::to_string(total).size(), total, run_name);
  std::fflush(stderr);
}

void ConsoleReporter::run_aborted() { fmt::print(stderr, "\n"); }  // the error goes on its own line

namespace {

// `value` in `format`, or "n/a" where the record has no such figure (never a 0 for a missing number).
std::string figure(const std::optional<double>& value, const char* format) {
  return value ? fmt::format(fmt::runtime(format), *value) : std::string("n/a");
}

}  // namespace

void ConsoleReporter::run_finished(const RunRecord& r, std::size_t done, std::size_t to_run, double eta_s) {
  if (r.status != "ok") {
    fmt::print(stderr, " failed: {}\n", r.error);
    return;
  }
  const std::string quality = r.lm_ppl
                                  ? fmt::format("PPL {:.4f} ± {:.4f}, ΔPPL {}, mean KL {}, same top {}", *r.lm_ppl,
                                                r.lm_ppl_stderr.value_or(0.0), figure(r.lm_delta_ppl, "{:+.4f}"),
                                                figure(r.lm_kl_mean, "{:.4g}"), figure(r.lm_same_top_rate, "{:.3f}"))
                              : r.accuracy ? fmt::format("accuracy {:.4f}", *r.accuracy)
                                           : "agreement " + figure(r.fidelity_top1_agreement, "{:.3f}");
  std::string task_scores;  // --task: each task's acc, and its change from FP32's
  if (r.tasks.is_object())
    for (const auto& [name, t] : r.tasks.items()) {
      const auto delta = task_figure(r, name, "delta_acc");
      task_scores += fmt::format("; {} acc {}{}", name, figure(task_figure(r, name, "acc"), "{:.4f}"),
                                 delta ? fmt::format(" (Δ {:+.4f})", *delta) : std::string());
    }
  std::string eta = done < to_run ? fmt::format(" (ETA {})", format_duration(eta_s)) : "";
  // A busy host said where the figures are read, not only in the notes.
  if (const auto share = host_delivered_fraction(r); share && !busy_host(r).empty())
    eta = fmt::format("; busy host: {:.0f}% of its FP32 peak (see notes){}", *share * 100.0, eta);
  if (r.decode_tokens_per_s_mean) {
    const auto mj = [](const std::optional<double>& v) {
      return v ? fmt::format(", {:.3g} mJ/token", *v) : std::string();
    };
    std::string line = fmt::format(
        " prefill {} tokens: {:.1f} ± {:.1f} tokens/s{}; decode {} tokens: {:.1f} ± {:.1f} tokens/s ({:.2f} "
        "ms/token){}",
        r.prefill_tokens.value_or(0), r.prefill_tokens_per_s_mean.value_or(0.0),
        r.prefill_tokens_per_s_std.value_or(0.0), mj(r.prefill_mj_per_token), r.decode_tokens.value_or(0),
        *r.decode_tokens_per_s_mean, r.decode_tokens_per_s_std.value_or(0.0), r.decode_ms_per_token_mean.value_or(0.0),
        mj(r.decode_mj_per_token));
    if (!r.prefill_mj_per_token && !r.decode_mj_per_token) line += "; energy unavailable";
    fmt::print(stderr, "{}; {}{}{}\n", line, quality, task_scores, eta);
    return;
  }
  const std::string energy =
      r.energy_j_per_inference ? fmt::format("{:.3g} J/inference", *r.energy_j_per_inference) : "energy unavailable";
  const std::optional<double> p50 = r.latency ? std::optional<double>(r.latency->p50_ms) : std::nullopt;
  fmt::print(stderr, " p50 {} ms, {} seq/s, {}, {}{}\n", figure(p50, "{:.2f}"), figure(r.sequences_per_s, "{:.1f}"),
             energy, quality, eta);
}

}  // namespace qjoule::bench
