#include "qjoule/bench/paper_table.h"
#include "qjoule/bench/task_table.h"
#include "qjoule/limits/roofline.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "io/atomic_file.h"
#include "bench/paper_table_roofs.h"
#include "bench/what_to_try.h"
#include "qjoule/error.h"
#include "qjoule/quant/format_spec.h"

namespace qjoule::bench {
namespace {

// Display width of UTF-8 text: code points, so "—" and "Δ" count as one column.
std::size_t display_width(const std::string& text) {
  return static_cast<std::size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::optional<std::string> token_of(const RunRecord& record) {
  try {
    return precision_token(record.config.precision);
  } catch (const Error&) {
    return std::nullopt;  // an unnamed precision cannot be a baseline; the row still shows
  }
}

using ShapeKey = std::tuple<std::string, std::string, std::size_t, std::size_t, int>;
ShapeKey shape_of(const RunRecord& r) {
  return {r.config.model, r.config.device, r.config.batch, r.config.seq, r.config.threads};
}

bool is_estimated(const RunRecord& record) { return record.energy_method.rfind("estimated", 0) == 0; }

// "FP32", "INT8": how the legend names the baseline format.
std::string upper(std::string text) {
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

// The first successful run of the baseline precision for each model and shape.
std::map<ShapeKey, const RunRecord*> baselines_of(const std::vector<RunRecord>& records,
                                                  const std::string& baseline_precision) {
  const std::string baseline_token = precision_token(baseline_precision);
  std::map<ShapeKey, const RunRecord*> baselines;
  for (const auto& record : records)
    if (record.status == "ok" && token_of(record) == baseline_token) baselines.emplace(shape_of(record), &record);
  return baselines;
}

const RunRecord* baseline_of(const std::map<ShapeKey, const RunRecord*>& baselines, const RunRecord& r) {
  const auto found = baselines.find(shape_of(r));
  return found == baselines.end() ? nullptr : found->second;
}

std::string failed_line(const RunRecord& r) {
  return fmt::format("{}: {}", r.run_name, r.error.empty() ? "(no error recorded)" : r.error);
}

// The footnote mark of an unavailable-energy reason: "n/a [k]", each distinct reason numbered once.
std::string footnote(std::vector<std::string>& reasons, const std::string& reason_or_empty) {
  const std::string reason = reason_or_empty.empty() ? "no reason recorded" : reason_or_empty;
  auto it = std::find(reasons.begin(), reasons.end(), reason);
  if (it == reasons.end()) it = reasons.insert(reasons.end(), reason);
  return fmt::format("n/a [{}]", it - reasons.begin() + 1);
}

std::string mib(std::uint64_t bytes) { return fmt::format("{:.1f}", static_cast<double>(bytes) / (1024.0 * 1024.0)); }

// The decoder table: every successful run is a decoder run (build_paper_table's doc).
PaperTable build_decoder_table(const std::vector<RunRecord>& records, double max_accuracy_drop_pt,
                               const std::string& baseline_precision, double max_ppl_increase_pct) {
  const auto baselines = baselines_of(records, baseline_precision);
  PaperTable table;
  table.decoder_layout = true;
  table.max_accuracy_drop_pt = max_accuracy_drop_pt;
  table.columns = {{"run", false},          {"precision", false}, {"prefill tok/s", true}, {"decode tok/s", true},
                   {"decode mJ/tok", true}, {"PPL", true},        {"ΔPPL", true},          {"mean KL", true},
                   {"same top", true},      {"size MiB", true},   {"peak MiB", true},      {"decode x", true}};
  const bool roofs = any_roof(records);
  if (roofs) {
    table.columns.push_back({"prefill % roof", true});
    table.columns.push_back({"decode % roof", true});
  }
  table.energy_column = 4;
  bool any_text = false, any_agreement = false, any_emulated = false, any_estimated = false, any_beside = false;
  std::vector<std::string> without_baseline, texts;
  for (std::size_t index = 0; index < records.size(); ++index) {
    const RunRecord& r = records[index];
    if (r.status != "ok") {
      table.failed.push_back(failed_line(r));
      continue;
    }
    const RunRecord* base = baseline_of(baselines, r);
    if (!base) without_baseline.push_back(r.run_name);
    std::vector<std::string> row;
    row.push_back(r.run_name + (r.not_representative ? " *" : ""));
    row.push_back(r.config.precision.text());
    row.push_back(r.prefill_tokens_per_s_mean ? fmt::format("{:.1f}", *r.prefill_tokens_per_s_mean) : kMissing);
    row.push_back(r.decode_tokens_per_s_mean ? fmt::format("{:.2f}", *r.decode_tokens_per_s_mean) : kMissing);
    if (r.decode_mj_per_token) {
      row.push_back(fmt::format("{:.4g}{}", *r.decode_mj_per_token, is_estimated(r) ? " (est.)" : ""));
      any_estimated = any_estimated || is_estimated(r);
    } else {
      row.push_back(footnote(table.energy_footnotes,
                             r.decode_energy_unavailable.empty() ? r.energy_unavailable : r.decode_energy_unavailable));
    }
    if (r.lm_ppl) {
      any_text = true;
      if (std::find(texts.begin(), texts.end(), r.lm_text) == texts.end()) texts.push_back(r.lm_text);
      row.push_back(fmt::format("{:.4f} ± {:.4f}", *r.lm_ppl, r.lm_ppl_stderr.value_or(0.0)));
      std::string delta = kMissing;
      if (r.lm_delta_ppl && r.lm_base_ppl && *r.lm_base_ppl > 0) {
        const double pct = *r.lm_delta_ppl / *r.lm_base_ppl * 100.0;
        // ± the paired standard error where the record has one (records before version 8 have none).
        delta = r.lm_delta_ppl_stderr
                    ? fmt::format("{:+.4f} ± {:.4f} ({:+.2f}%)", *r.lm_delta_ppl, *r.lm_delta_ppl_stderr, pct)
                    : fmt::format("{:+.4f} ({:+.2f}%)", *r.lm_delta_ppl, pct);
        if (pct > max_ppl_increase_pct + 1e-9) {
          delta += " !";
          table.accuracy_drops.push_back(fmt::format("{}: perplexity {:+.2f}% over FP32 ({:.4f} vs {:.4f}) — try {}",
                                                     r.run_name, pct, *r.lm_ppl, *r.lm_base_ppl,
                                                     what_to_try_decoder(r)));
        }
      }
      row.push_back(delta);
      row.push_back(r.lm_kl_mean ? fmt::format("{:.4g}", *r.lm_kl_mean) : kMissing);
      row.push_back(r.lm_same_top_rate ? fmt::format("{:.2f}%", *r.lm_same_top_rate * 100) : kMissing);
    } else {
      row.push_back(kMissing);
      row.push_back(kMissing);
      row.push_back(r.fidelity_mean_kl ? fmt::format("{:.4g} agr.", *r.fidelity_mean_kl) : kMissing);
      if (r.fidelity_top1_agreement) {
        any_agreement = true;
        const double drop = (1.0 - *r.fidelity_top1_agreement) * 100;
        std::string cell = fmt::format("{:.2f}% agr.", *r.fidelity_top1_agreement * 100);
        if (drop > max_accuracy_drop_pt + 1e-9) {
          cell += " !";
          table.accuracy_drops.push_back(
              fmt::format("{}: {:.2f} pt top-1 agreement with FP32 — try {}", r.run_name, -drop, what_to_try(r)));
        }
        row.push_back(cell);
      } else {
        row.push_back(kMissing);
      }
    }
    row.push_back(r.model_bytes > 0 ? mib(r.model_bytes) : kMissing);
    row.push_back(r.peak_rss_bytes ? fmt::format("{:.0f}", static_cast<double>(*r.peak_rss_bytes) / (1024.0 * 1024.0))
                                   : kMissing);
    if (base == &r) {
      row.push_back("baseline");
    } else {
      row.push_back(base && base->decode_tokens_per_s_mean && r.decode_tokens_per_s_mean &&
                            *base->decode_tokens_per_s_mean > 0
                        ? fmt::format("{:.2f}x", *r.decode_tokens_per_s_mean / *base->decode_tokens_per_s_mean)
                        : kMissing);
    }
    if (roofs) {
      row.push_back(roof_cell(r.roof_fraction));
      row.push_back(decode_roof_cell(r));
      any_beside = any_beside || decode_beside_apart(r);
      warn_below_roof(table, r, "prefill", r.roof_fraction, r.roof_bound);
      warn_below_roof(table, r, "decode", r.decode_roof_fraction, r.decode_roof_bound);
    }
    any_emulated = any_emulated || r.not_representative;
    table.rows.push_back({index, std::move(row)});
  }
  table.accuracy_drops_heading = any_text ? fmt::format("Perplexity increase above {}%", max_ppl_increase_pct)
                                          : fmt::format("Top-1 agreement drop above {} pt", max_accuracy_drop_pt);
  for (std::size_t i = 0; i < table.energy_footnotes.size(); ++i)
    table.legend.push_back(fmt::format("n/a [{}] decode energy unavailable: {}", i + 1, table.energy_footnotes[i]));
  if (any_emulated) table.legend.push_back("`*` emulated format: its speed and energy are not representative.");
  if (roofs) table.legend.push_back(kRoofLegend);
  if (any_beside) table.legend.push_back(kDecodeBesideLegend);
  if (any_estimated)
    table.legend.push_back("(est.) estimated energy, not measured: see energy_method in results.jsonl.");
  table.legend.push_back(
      "Decoder runs, batch 1: prefill tok/s over seq prompt tokens, decode tok/s and mJ/tok over greedy steps "
      "(means over repetitions; prefill energy is in results.jsonl).");
  if (any_text)
    table.legend.push_back(fmt::format(
        "PPL ± standard error on {} (lm_* in results.jsonl, scored as `qjoule ppl` scores it); ΔPPL, mean KL "
        "(nats/token, KL(FP32 ‖ run)) and same top (tokens whose most likely next token is FP32's) against the FP32 "
        "reference; ! marks ΔPPL above {}%.",
        fmt::join(texts, ", "), max_ppl_increase_pct));
  if (any_agreement)
    table.legend.push_back(
        "agr.: last-token top-1 agreement (and mean KL) with FP32 on pseudo-random prompts, not text; "
        "`qjoule bench --text FILE` measures perplexity and KL on real text.");
  if (!without_baseline.empty())
    table.legend.push_back(
        fmt::format("No {} baseline with the same model, device, seq and threads for: {} (add {} to the precisions "
                    "for decode x).",
                    upper(baseline_precision), fmt::join(without_baseline, ", "), baseline_precision));
  return table;
}

}  // namespace

std::string escape_cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

std::string render_table(const std::vector<PaperTableColumn>& columns,
                         const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width(columns.size());
  for (std::size_t c = 0; c < columns.size(); ++c) {
    width[c] = std::max<std::size_t>(display_width(columns[c].header), 3);
    for (const auto& row : rows) width[c] = std::max(width[c], display_width(row[c]));
  }
  // Appends only (no `a + b` temporaries): GCC 12 raises a false -Wrestrict on those at -O3.
  const auto line = [&](const std::vector<std::string>& cells) {
    std::string out = "|";
    for (std::size_t c = 0; c < columns.size(); ++c) {
      const std::size_t pad = width[c] - display_width(cells[c]);
      out += ' ';
      if (columns[c].right_aligned) out.append(pad, ' ');
      out += cells[c];
      if (!columns[c].right_aligned) out.append(pad, ' ');
      out += " |";
    }
    out += '\n';
    return out;
  };
  std::vector<std::string> headers;
  for (const auto& column : columns) headers.push_back(column.header);
  std::string out = line(headers);
  out += '|';
  for (std::size_t c = 0; c < columns.size(); ++c) {
    out += columns[c].right_aligned ? " " : " :";
    out.append(width[c] - 1, '-');
    out += columns[c].right_aligned ? ": |" : " |";
  }
  out += '\n';
  for (const auto& row : rows) out += line(row);
  return out;
}

PaperTable build_paper_table(const std::vector<RunRecord>& records, double max_accuracy_drop_pt,
                             const std::string& baseline_precision, double max_ppl_increase_pct) {
  const bool all_decoders =
      std::any_of(records.begin(), records.end(), [](const RunRecord& r) { return r.status == "ok"; }) &&
      std::all_of(records.begin(), records.end(),
                  [](const RunRecord& r) { return r.status != "ok" || r.decode_tokens.has_value(); });
  if (all_decoders) return build_decoder_table(records, max_accuracy_drop_pt, baseline_precision, max_ppl_increase_pct);
  const auto baselines = baselines_of(records, baseline_precision);

  PaperTable table;
  table.max_accuracy_drop_pt = max_accuracy_drop_pt;
  table.accuracy_drops_heading = fmt::format("Accuracy drop above {} pt", max_accuracy_drop_pt);
  table.energy_column = 7;  // J/inference
  table.columns = {{"run", false},          {"precision", false}, {"batch", true},    {"seq", true},
                   {"threads", true},       {"p50 ms", true},     {"seq/s", true},    {"J/inference", true},
                   {"accuracy", true},      {"size MiB", true},   {"speed-up", true}, {"energy", true},
                   {"accuracy Δ pt", true}, {"size x", true},     {"peak MiB", true}};
  // Decoder runs add a last column, so encoder-only tables keep their shape.
  const bool any_decoder = std::any_of(records.begin(), records.end(), [](const RunRecord& r) {
    return r.status == "ok" && r.decode_tokens_per_s_mean.has_value();
  });
  if (any_decoder) table.columns.push_back({"decode tok/s", true});
  const bool roofs = any_roof(records);
  if (roofs) table.columns.push_back({"% roof", true});
  std::vector<std::string> without_baseline;
  bool any_agreement = false, any_emulated = false, any_estimated = false;
  std::vector<std::string>& unavailable_reasons = table.energy_footnotes;  // distinct, in order of appearance

  for (std::size_t index = 0; index < records.size(); ++index) {
    const RunRecord& r = records[index];
    if (r.status != "ok") {
      table.failed.push_back(failed_line(r));
      continue;
    }
    const RunRecord* base = baseline_of(baselines, r);
    const bool this_is_base = base == &r;
    if (!base) without_baseline.push_back(r.run_name);

    std::vector<std::string> row;
    row.push_back(r.run_name + (r.not_representative ? " *" : ""));
    row.push_back(r.config.precision.text());
    row.push_back(std::to_string(r.config.batch));
    row.push_back(std::to_string(r.config.seq));
    row.push_back(std::to_string(r.config.threads));
    row.push_back(r.latency ? fmt::format("{:.2f}", r.latency->p50_ms) : kMissing);
    row.push_back(r.sequences_per_s ? fmt::format("{:.1f}", *r.sequences_per_s) : kMissing);
    if (r.energy_j_per_inference) {
      row.push_back(fmt::format("{:.4g}{}", *r.energy_j_per_inference, is_estimated(r) ? " (est.)" : ""));
      any_estimated = any_estimated || is_estimated(r);
    } else {
      // A short cell and one numbered footnote per distinct reason (the reasons are long).
      row.push_back(footnote(unavailable_reasons, r.energy_unavailable));
    }

    // Accuracy on labels when there are labels; else agreement with FP32's top-1 ("agr.").
    std::optional<double> drop_pt;  // how far below the reference this row is, in points
    std::string accuracy_delta = kMissing;
    if (r.accuracy) {
      row.push_back(fmt::format("{:.2f}%", *r.accuracy * 100));
      if (base && base->accuracy && !this_is_base) {
        const double delta = (*r.accuracy - *base->accuracy) * 100;
        drop_pt = -delta;
        accuracy_delta = fmt::format("{:+.2f}", delta);
      }
    } else if (r.fidelity_top1_agreement) {
      any_agreement = true;
      row.push_back(fmt::format("{:.2f}% agr.", *r.fidelity_top1_agreement * 100));
      if (!this_is_base) {
        const double delta = (*r.fidelity_top1_agreement - 1.0) * 100;  // FP32 agrees with itself fully
        drop_pt = -delta;
        accuracy_delta = fmt::format("{:+.2f} agr.", delta);
      }
    } else {
      row.push_back(kMissing);
    }
    row.push_back(r.model_bytes > 0 ? fmt::format("{:.1f}", static_cast<double>(r.model_bytes) / (1024.0 * 1024.0))
                                    : kMissing);

    if (this_is_base) {
      for (int i = 0; i < 4; ++i) row.push_back("baseline");
    } else {
      row.push_back(base && base->latency && r.latency && r.latency->p50_ms > 0
                        ? fmt::format("{:.2f}x", base->latency->p50_ms / r.latency->p50_ms)
                        : kMissing);
      row.push_back(
          base && base->energy_j_per_inference && r.energy_j_per_inference && *base->energy_j_per_inference > 0
              ? fmt::format("{:+.1f}%", (*r.energy_j_per_inference / *base->energy_j_per_inference - 1.0) * 100)
              : kMissing);
      // The tolerance keeps 0.90 - 0.89 (= 1.0000000000000009 pt) from tripping a 1 pt threshold.
      if (drop_pt && *drop_pt > max_accuracy_drop_pt + 1e-9) {
        accuracy_delta += " !";
        table.accuracy_drops.push_back(fmt::format("{}: {:.2f} pt {} — try {}", r.run_name, -*drop_pt,
                                                   r.accuracy ? "accuracy" : "top-1 agreement with FP32",
                                                   what_to_try(r)));
      }
      row.push_back(accuracy_delta);
      row.push_back(r.fp32_bytes > 0 && r.model_bytes > 0
                        ? fmt::format("{:.2f}x", static_cast<double>(r.fp32_bytes) / static_cast<double>(r.model_bytes))
                        : kMissing);
    }
    // The run's peak resident memory, next to size MiB's model bytes: what the format really costs.
    row.push_back(r.peak_rss_bytes ? fmt::format("{:.0f}", static_cast<double>(*r.peak_rss_bytes) / (1024.0 * 1024.0))
                                   : kMissing);
    if (any_decoder)
      row.push_back(r.decode_tokens_per_s_mean ? fmt::format("{:.1f}", *r.decode_tokens_per_s_mean) : kMissing);
    if (roofs) {
      row.push_back(roof_cell(r.roof_fraction));
      warn_below_roof(table, r, r.decode_tokens ? "prefill" : "batches", r.roof_fraction, r.roof_bound);
      warn_below_roof(table, r, "decode", r.decode_roof_fraction, r.decode_roof_bound);
    }
    any_emulated = any_emulated || r.not_representative;
    table.rows.push_back({index, std::move(row)});
  }

  for (std::size_t i = 0; i < unavailable_reasons.size(); ++i)
    table.legend.push_back(fmt::format("n/a [{}] energy unavailable: {}", i + 1, unavailable_reasons[i]));
  if (any_emulated) table.legend.push_back("`*` emulated format: its latency and energy are not representative.");
  if (roofs) table.legend.push_back(kRoofLegend);
  if (any_estimated)
    table.legend.push_back("(est.) estimated energy, not measured: see energy_method in results.jsonl.");
  if (any_agreement)
    table.legend.push_back("agr. top-1 agreement with the FP32 run of the same model and shape (no labelled dataset).");
  if (any_decoder)
    table.legend.push_back(
        "Decoder runs: p50 ms, seq/s and J/inference are per prefill of seq prompt tokens; decode "
        "tok/s is the mean over repetitions of greedy decode steps (results.jsonl has both phases' "
        "tokens/s and mJ/token: prefill_*, decode_*).");
  if (!without_baseline.empty())
    table.legend.push_back(
        fmt::format("No {} baseline with the same model, device, batch, seq and threads for: {} "
                    "(add {} to the precisions for deltas).",
                    upper(baseline_precision), fmt::join(without_baseline, ", "), baseline_precision));
  return table;
}

std::string format_paper_table(const std::vector<RunRecord>& records, double max_accuracy_drop_pt,
                               double max_ppl_increase_pct) {
  const PaperTable table = build_paper_table(records, max_accuracy_drop_pt, "fp32", max_ppl_increase_pct);
  std::vector<std::vector<std::string>> rows;
  for (const auto& row : table.rows) {
    std::vector<std::string> cells;
    for (const auto& cell : row.cells) cells.push_back(escape_cell(cell));
    rows.push_back(std::move(cells));
  }
  const auto listed = [](const std::vector<std::string>& items) {
    std::string out;
    for (const auto& item : items) out += fmt::format("- {}\n", item);
    return out;
  };
  std::string out = rows.empty() ? std::string("No successful runs.\n") : render_table(table.columns, rows);
  if (!table.legend.empty()) out += fmt::format("\n{}\n", fmt::join(table.legend, "\n"));
  if (!table.accuracy_drops.empty())
    out += fmt::format("\n! {}:\n{}", table.accuracy_drops_heading, listed(table.accuracy_drops));
  if (!table.roof_warnings.empty())
    out += fmt::format("\n! Below {:.0f}% of the machine's limit:\n{}", limits::kRoofWarningFraction * 100,
                       listed(table.roof_warnings));
  if (!table.failed.empty()) out += fmt::format("\nFailed runs:\n{}", listed(table.failed));
  out += format_task_table(records, max_accuracy_drop_pt);
  return out;
}

void write_summary_md(const std::vector<RunRecord>& records, const std::filesystem::path& path,
                      double max_accuracy_drop_pt, double max_ppl_increase_pct) {
  std::string md = "# qjoule bench\n\n";
  md += format_paper_table(records, max_accuracy_drop_pt, max_ppl_increase_pct);

  std::string notes;
  for (const auto& r : records)
    for (const auto& note : r.notes) notes += fmt::format("- {}: {}\n", r.run_name, note);
  if (!notes.empty()) md += fmt::format("\n## Notes\n\n{}", notes);

  // The machine, from the first record that describes it (every run of a bench shares it, but for what
  // the host delivered around each run).
  for (const auto& r : records) {
    if (r.environment.empty()) continue;
    md += "\n## Environment\n\n";
    for (const auto& item : r.environment.items()) {
      if (item.key() == "host_capacity") continue;  // each run's own: a busy host's runs say so in their notes
      md += fmt::format("- {}: {}\n", item.key(),
                        item.value().is_string()
                            ? item.value().get<std::string>()
                            : item.value().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    }
    break;
  }
  md += fmt::format(
      "\nEvery number comes from results.jsonl (schema version {}, docs/bench-records.md); "
      "accuracy drops above {} pt{} are flagged.\n",
      kRunRecordSchemaVersion, max_accuracy_drop_pt,
      std::any_of(records.begin(), records.end(), [](const RunRecord& r) { return r.lm_ppl.has_value(); })
          ? fmt::format(" and perplexity increases above {}%", max_ppl_increase_pct)
          : std::string());
  io::write_file_atomically(path, md);
}

}  // namespace qjoule::bench
