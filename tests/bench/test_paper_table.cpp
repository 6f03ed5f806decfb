// The paper table: deltas against the FP32 baseline on hand-made records, markers, the lines below
// the table, alignment; summary.md.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qjoule/bench/paper_table.h"
#include "record_examples.h"
#include "test_paths.h"

namespace qjoule::bench {
namespace {

using examples::table_record;
using ::testing::HasSubstr;
using ::testing::Not;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The table row of a run (the line that starts with "| <name>").
std::string row_of(const std::string& table, const std::string& name) {
  for (const auto& line : lines_of(table))
    if (line.rfind("| " + name + " ", 0) == 0) return line;
  ADD_FAILURE() << "no row for " << name << " in\n" << table;
  return "";
}

std::vector<std::string> cells_of(const std::string& row) {
  std::vector<std::string> cells;
  std::stringstream in(row);
  std::string cell;
  std::getline(in, cell, '|');  // before the first bar
  while (std::getline(in, cell, '|')) {
    const auto first = cell.find_first_not_of(' ');
    const auto last = cell.find_last_not_of(' ');
    cells.push_back(first == std::string::npos ? "" : cell.substr(first, last - first + 1));
  }
  return cells;
}

std::size_t code_points(const std::string& text) {
  std::size_t n = 0;
  for (char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// Columns: 0 run, 1 precision, 2 batch, 3 seq, 4 threads, 5 p50, 6 seq/s, 7 J/inf, 8 accuracy,
// 9 size MiB, 10 speed-up, 11 energy, 12 accuracy delta, 13 size x, 14 peak MiB (15 decode tok/s).
TEST(BenchPaperTable, DecoderRunsAddADecodeColumnAndALegend) {
  RunRecord fp32 = examples::decoder_record();
  fp32.config.precision = "fp32";
  fp32.run_name = run_name(fp32.config);
  fp32.fidelity_top1_agreement = 1.0;
  fp32.decode_tokens_per_s_mean = 5'000.0;
  RunRecord int8 = examples::decoder_record();
  const auto encoder = table_record("fp32", 10.0, 0.5, 0.90, 256ull << 20);
  const auto table = format_paper_table({encoder, fp32, int8}, 20.0);
  const auto header = cells_of(lines_of(table)[0]);
  ASSERT_EQ(header.size(), 16u) << table;
  EXPECT_EQ(header[14], "peak MiB");
  EXPECT_EQ(header[15], "decode tok/s");
  EXPECT_EQ(header[7], "J/inference") << "the energy column keeps its place";
  EXPECT_EQ(cells_of(row_of(table, fp32.run_name))[15], "5000.0");
  const auto q = cells_of(row_of(table, int8.run_name));
  EXPECT_EQ(q[15], "7700.1");
  EXPECT_EQ(q[6], "2000.0") << "seq/s of a decoder run: prefills/s";
  EXPECT_EQ(cells_of(row_of(table, encoder.run_name))[15], "—");
  EXPECT_THAT(table, HasSubstr("Decoder runs: p50 ms, seq/s and J/inference are per prefill"));

  // Encoder-only tables keep their 15 columns.
  EXPECT_EQ(cells_of(lines_of(format_paper_table({encoder}, 2.0))[0]).size(), 15u);
  // A decoder's accuracy advice has no SmoothQuant (not supported for decoders).
  int8.fidelity_top1_agreement = 0.5;
  const auto flagged = format_paper_table({fp32, int8}, 1.0);
  EXPECT_THAT(flagged, HasSubstr("qjoule ppl"));
  EXPECT_THAT(flagged, Not(HasSubstr("SmoothQuant")));
}

// A sweep of decoder runs only is a decoder's table: decode speed and energy, perplexity on the text
// with ΔPPL flagged above --max-ppl-increase, mean KL and same-top rate, decode speed-up over FP32.
TEST(BenchPaperTable, ADecoderSweepOnATextIsADecodersTable) {
  const auto with_text = [](const std::string& precision, double decode_tok_s, double ppl) {
    RunRecord r = examples::decoder_record();
    r.config.precision = precision;
    r.run_name = run_name(r.config);
    r.decode_tokens_per_s_mean = decode_tok_s;
    r.lm_text = "wiki.txt";
    r.lm_ppl = ppl;
    r.lm_ppl_stderr = 0.25;
    r.lm_base_ppl = 10.0;
    r.lm_delta_ppl = ppl - 10.0;
    r.lm_kl_mean = (ppl - 10.0) / 100;
    r.lm_same_top_rate = 0.95;
    return r;
  };
  const RunRecord fp32 = with_text("fp32", 100.0, 10.0);
  const RunRecord int4 = with_text("int4", 300.0, 10.4);
  RunRecord nf4 = with_text("nf4", 250.0, 10.7);
  nf4.lm_delta_ppl_stderr = 0.0625;  // the paired error beside ΔPPL where the record has one
  nf4.decode_mj_per_token.reset();
  nf4.decode_energy_unavailable = "no energy sensor: a very long reason that belongs in a footnote";
  const auto table = format_paper_table({fp32, int4, nf4}, 1.0, 5.0);
  const auto header = cells_of(lines_of(table)[0]);
  EXPECT_EQ(header,
            (std::vector<std::string>{"run", "precision", "prefill tok/s", "decode tok/s", "decode mJ/tok", "PPL",
                                      "ΔPPL", "mean KL", "same top", "size MiB", "peak MiB", "decode x"}));
  const auto q4 = cells_of(row_of(table, int4.run_name));
  EXPECT_EQ(q4[5], "10.4000 ± 0.2500");
  EXPECT_EQ(q4[6], "+0.4000 (+4.00%)") << "under 5%: not flagged; no paired error (a record before version 8)";
  EXPECT_EQ(q4[8], "95.00%");
  EXPECT_EQ(q4[11], "3.00x");
  EXPECT_EQ(cells_of(row_of(table, fp32.run_name))[11], "baseline");
  const auto n4 = cells_of(row_of(table, nf4.run_name));
  EXPECT_EQ(n4[6], "+0.7000 ± 0.0625 (+7.00%) !");
  EXPECT_EQ(n4[4], "n/a [1]");
  EXPECT_THAT(table, HasSubstr("n/a [1] decode energy unavailable: no energy sensor: a very long reason"));
  EXPECT_THAT(table, HasSubstr("! Perplexity increase above 5%:"));
  EXPECT_THAT(table, HasSubstr("perplexity +7.00% over FP32 (10.7000 vs 10.0000) — try smaller groups"));
  // A looser threshold flags nothing.
  EXPECT_THAT(format_paper_table({fp32, int4, nf4}, 1.0, 10.0), Not(HasSubstr("Perplexity increase above")));
}

TEST(BenchPaperTable, DeltasAgainstTheFp32Baseline) {
  const auto fp32 = table_record("fp32", 10.0, 0.5, 0.90, 256ull << 20);
  auto int8 = table_record("int8", 4.0, 0.2, 0.89, 64ull << 20);
  int8.peak_rss_bytes = 100ull << 20;
  const auto table = format_paper_table({fp32, int8}, 2.0);

  const auto base = cells_of(row_of(table, fp32.run_name));
  ASSERT_EQ(base.size(), 15u) << table;
  EXPECT_EQ(base[5], "10.00");
  EXPECT_EQ(base[6], "100.0");
  EXPECT_EQ(base[7], "0.5");
  EXPECT_EQ(base[8], "90.00%");
  EXPECT_EQ(base[9], "256.0");
  for (int c = 10; c < 14; ++c) EXPECT_EQ(base[c], "baseline");

  const auto q = cells_of(row_of(table, int8.run_name));
  EXPECT_EQ(q[1], "int8");
  EXPECT_EQ(q[2], "1");
  EXPECT_EQ(q[3], "128");
  EXPECT_EQ(q[4], "1");
  EXPECT_EQ(q[5], "4.00");
  EXPECT_EQ(q[9], "64.0");
  EXPECT_EQ(q[10], "2.50x");
  EXPECT_EQ(q[11], "-60.0%");
  EXPECT_EQ(q[12], "-1.00");
  EXPECT_EQ(q[13], "4.00x");
  EXPECT_EQ(q[14], "100");  // peak MiB: the run's peak_rss_bytes, next to its model's 64 MiB
  auto no_peak = int8;
  no_peak.peak_rss_bytes.reset();
  EXPECT_EQ(cells_of(row_of(format_paper_table({fp32, no_peak}, 2.0), int8.run_name))[14], "—");
  EXPECT_THAT(table, Not(HasSubstr("Accuracy drop above")));
}

TEST(BenchPaperTable, BaselinesMatchModelDeviceAndShape) {
  const auto fp32_bs1 = table_record("fp32", 10.0, 0.5, 0.90, 256ull << 20, 1);
  const auto fp32_bs8 = table_record("fp32", 40.0, 0.1, 0.90, 256ull << 20, 8);
  const auto int8_bs8 = table_record("int8", 10.0, 0.05, 0.90, 64ull << 20, 8);
  auto int8_t4 = table_record("int8", 5.0, 0.05, 0.90, 64ull << 20, 1);
  int8_t4.config.threads = 4;
  int8_t4.run_name = run_name(int8_t4.config);
  const auto table = format_paper_table({fp32_bs1, fp32_bs8, int8_bs8, int8_t4}, 1.0);
  EXPECT_EQ(cells_of(row_of(table, int8_bs8.run_name))[10], "4.00x");  // against bs8, not bs1
  EXPECT_EQ(cells_of(row_of(table, int8_bs8.run_name))[11], "-50.0%");
  EXPECT_EQ(cells_of(row_of(table, int8_t4.run_name))[10], "—");  // no fp32 with 4 threads
  EXPECT_THAT(table, HasSubstr("No FP32 baseline with the same model, device, batch, seq and threads for: " +
                               int8_t4.run_name));
}

TEST(BenchPaperTable, AccuracyDropsAboveTheThresholdAreFlaggedWithWhatToTry) {
  const auto fp32 = table_record("fp32", 10.0, 0.5, 0.90, 256ull << 20);
  const auto int8 = table_record("int8", 4.0, 0.2, 0.85, 64ull << 20);
  const auto int4 = table_record("int4:g64", 3.0, 0.1, 0.895, 40ull << 20);
  const auto table = format_paper_table({fp32, int8, int4}, 1.0);
  EXPECT_EQ(cells_of(row_of(table, int8.run_name))[12], "-5.00 !");
  EXPECT_EQ(cells_of(row_of(table, int4.run_name))[12], "-0.50");
  EXPECT_THAT(table, HasSubstr("! Accuracy drop above 1 pt:"));
  const auto lines = lines_of(table);
  const auto flagged = std::find_if(lines.begin(), lines.end(),
                                    [&](const std::string& l) { return l.rfind("- " + int8.run_name, 0) == 0; });
  ASSERT_NE(flagged, lines.end()) << table;
  EXPECT_THAT(*flagged, HasSubstr("-5.00 pt accuracy"));
  EXPECT_THAT(*flagged, HasSubstr("SmoothQuant (`--precisions int8:sq=0.5`)"));
  EXPECT_THAT(*flagged, HasSubstr("`--precisions w8`"));
  EXPECT_THAT(*flagged, HasSubstr("first and last blocks"));
  EXPECT_THAT(table, Not(HasSubstr("- " + int4.run_name)));
}

TEST(BenchPaperTable, RunsBelowThirtyPercentOfTheirRoofAreFlaggedAndTheRestAreNot) {
  auto above = table_record("fp32", 10.0, 0.5, 0.90, 256ull << 20);
  auto below = table_record("int8", 4.0, 0.2, 0.90, 64ull << 20);
  above.roof_fraction = 0.31;
  above.roof_bound = "compute: fp32 400 GFLOP/s";
  below.roof_fraction = 0.29;
  below.roof_bound = "memory: read 24.6 GB/s";
  const auto table = format_paper_table({above, below}, 1.0);
  EXPECT_EQ(cells_of(row_of(table, above.run_name)).back(), "31%");
  EXPECT_EQ(cells_of(row_of(table, below.run_name)).back(), "29%");
  EXPECT_THAT(table, HasSubstr("! Below 30% of the machine's limit:\n- " + below.run_name +
                               ": batches at 29% of the machine's limit (memory: read 24.6 GB/s): this figure is "
                               "limited by qjoule's kernel, not by the hardware or the format\n"));
  EXPECT_THAT(table, Not(HasSubstr("- " + above.run_name + ": batches at")));
  // Without roof figures (older records, the examples) there is no column and no list.
  const auto plain = format_paper_table({table_record("fp32", 10.0, 0.5, 0.90, 256ull << 20)}, 1.0);
  EXPECT_THAT(plain, Not(HasSubstr("% roof")));
  EXPECT_THAT(plain, Not(HasSubstr("Below 30%")));
}

TEST(BenchPaperTable, ABelowTheLineFigureOnABusyHostIsBlamedOnTheHostNotTheKernel) {
  auto busy = table_record("int8", 4.0, 0.2, 0.90, 64ull << 20);
  auto quiet = table_record("fp32", 10.0, 0.5, 0.90, 256ull << 20);
  for (auto* r : {&busy, &quiet}) {
    r->roof_fraction = 0.05;
    r->roof_bound = "compute: fp32 400 GFLOP/s";
  }
  busy.environment["host_capacity"] = {{"delivered_fraction", 0.5}, {"busy", "the host delivered 50%"}};
  quiet.environment["host_capacity"] = {{"delivered_fraction", 0.95}, {"busy", ""}};
  const auto table = format_paper_table({quiet, busy}, 1.0);
  // 5% with half the host: not in proportion (threads meeting at barriers), so still the host's.
  EXPECT_THAT(table, HasSubstr("- " + busy.run_name +
                               ": batches at 5% of the machine's limit (compute: fp32 400 GFLOP/s), on a busy host: "
                               "the host delivered 50%; re-run on a quiet machine before reading it as the "
                               "kernel's\n"));
  EXPECT_THAT(table, HasSubstr("- " + quiet.run_name +
                               ": batches at 5% of the machine's limit (compute: fp32 400 GFLOP/s): this figure is "
                               "limited by qjoule's kernel, not by the hardware or the format\n"));
}

// A decode compared with the memory read beside it: in parentheses where that read was more than 15% off the
// limits' read, and a below-the-line figure that the host's slower memory explains is not the kernel's.
TEST(BenchPaperTable, ADecodeBesideAHostsSlowerMemoryShowsBothFractionsAndIsNotBlamedOnTheKernel) {
  const auto decoder = [](const std::string& precision, double limits_fraction, std::optional<double> beside) {
    RunRecord r = examples::decoder_record();
    r.config.precision = precision;
    r.run_name = run_name(r.config);
    r.roof_fraction = 0.5;
    r.roof_bound = "compute: int8 900 GOP/s";
    r.decode_roof_fraction = limits_fraction;
    r.decode_roof_bound = "memory: read 60.0 GB/s";
    if (beside) r.environment["host_capacity"] = {{"busy", ""}, {"decode_roof_fraction_beside", *beside}};
    return r;
  };
  const RunRecord slow = decoder("int4", 0.25, 0.8);  // the host's memory read 19 GB/s of the limits' 60
  const RunRecord near = decoder("nf4", 0.5, 0.55);   // within 15%: one figure
  const RunRecord old = decoder("w8", 0.2, std::nullopt);
  const auto table = format_paper_table({slow, near, old}, 1.0);
  const auto header = cells_of(lines_of(table)[0]);
  ASSERT_EQ(header.back(), "decode % roof") << table;
  EXPECT_EQ(cells_of(row_of(table, slow.run_name)).back(), "25% (80%)");
  EXPECT_EQ(cells_of(row_of(table, near.run_name)).back(), "50%");
  EXPECT_EQ(cells_of(row_of(table, old.run_name)).back(), "20%");
  EXPECT_THAT(table, HasSubstr("decode % roof (in parentheses): over the memory read measured right before and after "
                               "the run"));
  EXPECT_THAT(table, HasSubstr("- " + slow.run_name +
                               ": decode at 25% of the machine's limit (memory: read 60.0 GB/s), but at 80% of the "
                               "memory read measured beside the run: the host's memory ran slower than when the "
                               "limits were measured (the record's notes)\n"));
  EXPECT_THAT(table, HasSubstr("- " + old.run_name +
                               ": decode at 20% of the machine's limit (memory: read 60.0 GB/s): this figure is "
                               "limited by qjoule's kernel"));
  EXPECT_THAT(format_paper_table({near, old}, 1.0), Not(HasSubstr("in parentheses")));
  RunRecord garbled = decoder("nf4:dq", 0.25, std::nullopt);  // a hand-edited record: not a number, not read
  garbled.environment["host_capacity"] = {{"busy", ""}, {"decode_roof_fraction_beside", "high"}};
  EXPECT_FALSE(decode_roof_fraction_beside(garbled));
  EXPECT_EQ(cells_of(row_of(format_paper_table({garbled}, 1.0), garbled.run_name)).back(), "25%");
}

TEST(BenchPaperTable, OnAGpuWhatToTryNamesOnlyFormatsWithACudaKernel) {
  auto fp32 = table_record("fp32", 10.0, 0.5, 0.90, 256ull << 20);
  auto int8 = table_record("int8", 4.0, 0.2, 0.85, 64ull << 20);
  for (auto* r : {&fp32, &int8}) {
    r->config.device = "cuda";
    r->run_name = run_name(r->config);
  }
  const auto table = format_paper_table({fp32, int8}, 1.0);
  const auto lines = lines_of(table);
  const auto flagged = std::find_if(lines.begin(), lines.end(),
                                    [&](const std::string& l) { return l.rfind("- " + int8.run_name, 0) == 0; });
  ASSERT_NE(flagged, lines.end()) << table;
  EXPECT_THAT(*flagged, HasSubstr("`--precisions fp16`"));
  EXPECT_THAT(*flagged, Not(HasSubstr("`--precisions w8`")));  // no CUDA kernel
  EXPECT_THAT(*flagged, Not(HasSubstr("SmoothQuant")));        // CPU only
}

TEST(BenchPaperTable, WithoutLabelsTheAgreementWithFp32StandsIn) {
  auto fp32 = table_record("fp32", 10.0, 0.5, std::nullopt, 256ull << 20);
  auto nf4 = table_record("nf4", 8.0, 0.4, std::nullopt, 40ull << 20);
  nf4.fidelity_top1_agreement = 0.97;
  const auto table = format_paper_table({fp32, nf4}, 1.0);
  const auto q = cells_of(row_of(table, nf4.run_name));
  EXPECT_EQ(q[8], "97.00% agr.");
  EXPECT_EQ(q[12], "-3.00 agr. !");
  EXPECT_EQ(cells_of(row_of(table, fp32.run_name))[8], "—");
  EXPECT_THAT(table, HasSubstr("agr. top-1 agreement with the FP32 run"));
  EXPECT_THAT(table, HasSubstr("-3.00 pt top-1 agreement with FP32"));
}

TEST(BenchPaperTable, UnavailableEstimatedEmulatedAndFailedRuns) {
  const auto fp32 = table_record("fp32", 10.0, std::nullopt, 0.90, 256ull << 20);
  auto estimated = table_record("int4", 6.0, 0.3, 0.90, 40ull << 20);
  estimated.energy_method = "estimated: cpu-tdp=65 x utilisation";
  auto emulated = table_record("int8:emulate", 30.0, std::nullopt, 0.90, 64ull << 20);
  emulated.not_representative = true;
  const auto failed = examples::failed_record();
  const auto table = format_paper_table({fp32, estimated, emulated, failed}, 1.0);

  EXPECT_EQ(cells_of(row_of(table, fp32.run_name))[7], "n/a [1]");  // one footnote per distinct reason
  EXPECT_EQ(cells_of(row_of(table, emulated.run_name))[7], "n/a [1]");
  EXPECT_THAT(table, HasSubstr("n/a [1] energy unavailable: "));
  EXPECT_THAT(table, Not(HasSubstr("n/a [2]")));
  EXPECT_EQ(cells_of(row_of(table, estimated.run_name))[7], "0.3 (est.)");
  EXPECT_EQ(cells_of(row_of(table, estimated.run_name))[11], "—");  // the baseline has no energy
  EXPECT_EQ(cells_of(row_of(table, emulated.run_name))[0], emulated.run_name + " *");
  EXPECT_THAT(table, HasSubstr("`*` emulated format: its latency and energy are not representative."));
  EXPECT_THAT(table, HasSubstr("(est.) estimated energy, not measured"));
  EXPECT_THAT(table, HasSubstr("Failed runs:\n- " + failed.run_name + ": " + failed.error));
  for (const auto& line : lines_of(table)) {
    if (line.rfind("| ", 0) == 0) {
      EXPECT_THAT(line, Not(HasSubstr(failed.run_name)));
    }
  }
}

TEST(BenchPaperTable, ColumnsAreAlignedForTheTerminal) {
  const auto table = format_paper_table({table_record("fp32", 10.0, 0.5, 0.9, 256ull << 20),
                                         table_record("int4:g64:asym", 3.123, 0.123456, 0.8, 40ull << 20, 32)},
                                        1.0);
  std::size_t width = 0;
  for (const auto& line : lines_of(table)) {
    if (line.empty() || line[0] != '|') break;
    if (width == 0) width = code_points(line);
    EXPECT_EQ(code_points(line), width) << line;
  }
  EXPECT_GT(width, 0u);
  EXPECT_THAT(table, HasSubstr("| run "));
  EXPECT_THAT(table, HasSubstr("| :---"));  // text columns left-aligned
  EXPECT_THAT(table, HasSubstr("---: |"));  // numbers right-aligned
}

TEST(BenchPaperTable, AsDataWithAnotherBaseline) {
  const auto fp32 = table_record("fp32", 10.0, 0.5, 0.90, 256ull << 20);
  const auto int8 = table_record("int8", 4.0, 0.2, 0.89, 64ull << 20);
  const auto failed = examples::failed_record();
  const auto table = build_paper_table({fp32, failed, int8}, 1.0, "int8");
  ASSERT_EQ(table.rows.size(), 2u);
  EXPECT_EQ(table.rows[1].record, 2u);  // indices into the records, past the failed one
  EXPECT_EQ(table.columns[table.energy_column].header, "J/inference");
  EXPECT_EQ(table.rows[0].cells[10], "0.40x");  // fp32 against int8
  EXPECT_EQ(table.rows[0].cells[11], "+150.0%");
  EXPECT_EQ(table.rows[1].cells[10], "baseline");
  EXPECT_EQ(table.failed, std::vector<std::string>{failed.run_name + ": " + failed.error});
  EXPECT_TRUE(table.legend.empty());
  // The default is the markdown table's.
  EXPECT_EQ(build_paper_table({fp32, int8}, 1.0).rows[1].cells[10], "2.50x");
}

TEST(BenchPaperTable, NoRecords) { EXPECT_EQ(format_paper_table({}, 1.0), "No successful runs.\n"); }

TEST(BenchPaperTable, SummaryMarkdown) {
  const auto dir = test::temp_dir("bench_summary");
  auto fp32 = table_record("fp32", 10.0, 0.5, 0.9, 256ull << 20);
  fp32.notes = {"idle baseline 12.5 W subtracted"};
  fp32.environment = {{"cpu", "AMD EPYC 7B13"}, {"cores", 2}, {"host_capacity", {{"busy", ""}}}};
  write_summary_md({fp32, table_record("int8", 4.0, 0.2, 0.89, 64ull << 20)}, dir / "summary.md", 1.0);
  std::ifstream in(dir / "summary.md");
  std::stringstream text;
  text << in.rdbuf();
  const auto md = text.str();
  EXPECT_EQ(md.rfind("# qjoule bench\n\n| run ", 0), 0u) << md;
  EXPECT_THAT(md, HasSubstr(" 2.50x |"));
  EXPECT_THAT(md, HasSubstr("## Notes\n\n- " + fp32.run_name + ": idle baseline 12.5 W subtracted\n"));
  EXPECT_THAT(md, HasSubstr("## Environment\n\n- cores: 2\n- cpu: AMD EPYC 7B13\n"));
  EXPECT_THAT(md, Not(HasSubstr("host_capacity")));  // each run's own, not the machine's
}

}  // namespace
}  // namespace qjoule::bench
