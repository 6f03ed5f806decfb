// results.jsonl: append and reopen, torn-last-line recovery, bad lines, unwritable directories;
// results.csv as a projection of the same records.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "error_of.h"

#include "qjoule/bench/results_store.h"
#include "qjoule/error.h"
#include "record_examples.h"
#include "test_paths.h"

namespace qjoule::bench {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

using test::error_of;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_text(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string line_of(const RunRecord& record) { return to_json(record).dump() + "\n"; }

TEST(BenchResultsStore, CreatesTheDirectoryAppendsAndReopens) {
  const auto dir = test::temp_dir("bench_store_append") / "nested" / "out";
  {
    auto store = ResultsStore::open(dir);
    EXPECT_TRUE(fs::is_directory(dir));
    EXPECT_TRUE(store.records().empty());
    EXPECT_TRUE(store.notes().empty());
    store.append(examples::full_record());
    store.append(examples::failed_record());
    EXPECT_TRUE(store.has(examples::full_record().run_name));
    EXPECT_EQ(store.records().size(), 2u);
  }
  const std::string text = read_text(dir / "results.jsonl");
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2);
  EXPECT_EQ(text.back(), '\n');

  auto store = ResultsStore::open(dir);
  ASSERT_EQ(store.records().size(), 2u);
  EXPECT_TRUE(store.notes().empty());
  EXPECT_EQ(to_json(store.records()[0]), to_json(examples::full_record()));
  EXPECT_EQ(to_json(store.records()[1]), to_json(examples::failed_record()));
  EXPECT_TRUE(store.has(examples::failed_record().run_name));
  EXPECT_FALSE(store.has("nope"));
  EXPECT_EQ(store.results_path(), dir / "results.jsonl");
}

// One writer per results file: a second store on the same folder (a second `bench --resume` on one
// --out) is refused with one line naming the holder, until the first is closed.
TEST(BenchResultsStore, ASecondWriterOnTheSameFolderIsRefusedNamingTheHolder) {
  const auto dir = test::temp_dir("bench_store_locked");
  {
    auto first = ResultsStore::open(dir);
    const auto message = error_of([&] { ResultsStore::open(dir); });
    EXPECT_THAT(message, HasSubstr("results.jsonl' is in use by another qjoule bench (pid " +
                                   std::to_string(::getpid()) + "); wait for it to finish, or choose another --out"));
    auto moved = std::move(first);  // the lock moves with the store
    EXPECT_THAT(error_of([&] { ResultsStore::open(dir); }), HasSubstr("is in use by another qjoule bench"));
  }
  EXPECT_NO_THROW(ResultsStore::open(dir));
}

TEST(BenchResultsStore, AppendingARecordedRunFails) {
  auto store = ResultsStore::open(test::temp_dir("bench_store_duplicate"));
  store.append(examples::full_record());
  EXPECT_THAT(error_of([&] { store.append(examples::full_record()); }),
              HasSubstr("run '" + examples::full_record().run_name + "' is already recorded"));
  EXPECT_EQ(store.records().size(), 1u);
}

TEST(BenchResultsStore, ATornLastLineIsCutOffAndReported) {
  const auto dir = test::temp_dir("bench_store_torn");
  const std::string good = line_of(examples::full_record());
  const std::string whole = line_of(examples::failed_record());
  write_text(dir / "results.jsonl", good + whole.substr(0, whole.size() / 2));  // killed mid-write

  {
    auto store = ResultsStore::open(dir);
    ASSERT_EQ(store.records().size(), 1u);
    ASSERT_EQ(store.notes().size(), 1u);
    EXPECT_THAT(store.notes()[0], HasSubstr("cut off a torn last line"));
    EXPECT_THAT(store.notes()[0], HasSubstr(std::to_string(whole.size() / 2) + " bytes"));
    EXPECT_EQ(read_text(dir / "results.jsonl"), good);  // truncated to the last good newline
    EXPECT_FALSE(store.has(examples::failed_record().run_name));
    store.append(examples::failed_record());  // the resumed run records it again
  }
  auto store = ResultsStore::open(dir);
  EXPECT_EQ(store.records().size(), 2u);
  EXPECT_TRUE(store.notes().empty());
  EXPECT_EQ(read_text(dir / "results.jsonl"), good + whole);
}

TEST(BenchResultsStore, ATornLastLineWithANewlineIsCutOffToo) {
  const auto dir = test::temp_dir("bench_store_torn_newline");
  const std::string good = line_of(examples::full_record());
  write_text(dir / "results.jsonl", good + "{\"schema_version\": 1, \"run_na\n");
  auto store = ResultsStore::open(dir);
  EXPECT_EQ(store.records().size(), 1u);
  EXPECT_EQ(store.notes().size(), 1u);
  EXPECT_EQ(read_text(dir / "results.jsonl"), good);
}

TEST(BenchResultsStore, ABadMiddleLineFailsNamingFileAndLine) {
  const auto dir = test::temp_dir("bench_store_bad_middle");
  const auto path = dir / "results.jsonl";
  write_text(path, line_of(examples::full_record()) + "{not json\n" + line_of(examples::failed_record()));
  const auto message = error_of([&] { ResultsStore::open(dir); });
  EXPECT_THAT(message, HasSubstr(path.string() + ":2: not a JSON line"));
  EXPECT_EQ(read_text(path).size(), line_of(examples::full_record()).size() + 10 +
                                        line_of(examples::failed_record()).size());  // left untouched
  write_text(path, line_of(examples::full_record()) + "{\"latency_ms\": 1E400}\n" + line_of(examples::failed_record()));
  EXPECT_THAT(error_of([&] { ResultsStore::open(dir); }),
              HasSubstr(path.string() + ":2: not a JSON line (number overflow parsing '1E400')"));
}

TEST(BenchResultsStore, RecordsThatDoNotReadFailNamingTheLine) {
  const auto dir = test::temp_dir("bench_store_bad_record");
  auto json = to_json(examples::full_record());
  json["schema_version"] = 9;
  write_text(dir / "results.jsonl", json.dump() + "\n");
  EXPECT_THAT(error_of([&] { ResultsStore::open(dir); }),
              HasSubstr("results.jsonl:1: run record: schema_version 9, expected 1 to 8"));

  write_text(dir / "results.jsonl", line_of(examples::full_record()) + "\n" + line_of(examples::full_record()));
  EXPECT_THAT(error_of([&] { ResultsStore::open(dir); }),
              HasSubstr(":3: run '" + examples::full_record().run_name + "' is recorded twice (also on line 1)"));
}

// tests/fixtures/bench/results-v1.jsonl: a results.jsonl written by qjoule before schema version 2.
TEST(BenchResultsStore, AVersion1FileResumesWithVersion2LinesAppended) {
  const auto dir = test::temp_dir("bench_store_v1");
  const std::string v1 = read_text(test::fixtures_dir() / "bench" / "results-v1.jsonl");
  ASSERT_THAT(v1, HasSubstr("{\"accuracy\":"));
  ASSERT_THAT(v1, HasSubstr("\"schema_version\":1,"));
  write_text(dir / "results.jsonl", v1);
  {
    auto store = ResultsStore::open(dir);
    ASSERT_EQ(store.records().size(), 14u);
    EXPECT_TRUE(store.notes().empty());
    for (const auto& r : store.records()) {
      EXPECT_EQ(r.schema_version, kRunRecordSchemaVersion);
      EXPECT_FALSE(r.decode_tokens);
      EXPECT_TRUE(to_json(r)["prefill_tokens_per_s_mean"].is_null());
    }
    store.append(examples::decoder_record());
  }
  auto store = ResultsStore::open(dir);
  ASSERT_EQ(store.records().size(), 15u);
  EXPECT_EQ(store.records().back().decode_tokens, 32u);
  EXPECT_EQ(read_text(dir / "results.jsonl").rfind(v1, 0), 0u) << "the old lines are left as they were";
  const auto csv = format_results_csv(store.records());
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 16);
}

TEST(BenchResultsStore, AnUnwritableDirectoryFailsBeforeAnyRun) {
  // Tests run as root, whom chmod does not stop: a path under a regular file cannot be a directory.
  const auto file = test::temp_dir("bench_store_unwritable") / "a-file";
  write_text(file, "x");
  const auto out = file / "out";
  EXPECT_EQ(error_of([&] { ResultsStore::open(out); }),
            "output directory '" + out.string() + "' is not writable: Not a directory");
  EXPECT_THAT(error_of([&] { ResultsStore::open(file); }),
              HasSubstr("output directory '" + file.string() + "' is not writable"));
}

TEST(BenchResultsStore, MovesKeepTheFile) {
  const auto dir = test::temp_dir("bench_store_move");
  {
    auto store = ResultsStore::open(dir);
    ResultsStore moved = std::move(store);
    moved.append(examples::full_record());
  }
  EXPECT_EQ(ResultsStore::open(dir).records().size(), 1u);
}

TEST(BenchResultsCsv, HeaderAndRowsAreTheScalarKeys) {
  const auto columns = results_csv_columns();
  EXPECT_EQ(columns.size(), kRunRecordKeys.size() - 4);
  EXPECT_EQ(std::count(columns.begin(), columns.end(), "tasks"), 0);
  EXPECT_EQ(std::count(columns.begin(), columns.end(), "environment"), 0);
  EXPECT_EQ(std::count(columns.begin(), columns.end(), "energy_window"), 0);
  EXPECT_EQ(std::count(columns.begin(), columns.end(), "decode_energy_window"), 0);

  RunRecord comma = examples::failed_record();
  comma.error = "bad \"shape\", expected 64";
  const auto csv = format_results_csv(
      {examples::full_record(), examples::energy_unavailable_record(), comma, examples::decoder_record()});
  std::vector<std::string> lines;
  std::stringstream in(csv);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0].rfind("schema_version,run_name,start_time,model,device,precision,batch,seq,threads,status,", 0),
            0u);
  EXPECT_THAT(lines[0], HasSubstr(",latency_p50_ms,"));
  EXPECT_THAT(lines[0], HasSubstr(",energy_j_per_inference,"));
  // The version-1 columns keep their places; the phase columns follow them.
  EXPECT_THAT(lines[0], HasSubstr(",kernel_paths,notes,prefill_tokens,prefill_tokens_per_s_mean,"));
  // ... and the text-quality columns (version 3) follow those.
  EXPECT_THAT(lines[0], HasSubstr(",decode_energy_j,decode_energy_unavailable,lm_text,lm_text_tokens,"));
  EXPECT_THAT(lines[0], HasSubstr(",lm_rms_dp,lm_kl_base,lm_unavailable,weights_source,roof_flops_per_token,"));
  // ... then the roofs (version 4), the calibration (version 5), the head (version 7) and the engine and
  // paired errors (version 8) last (version 6's tasks is an object).
  EXPECT_THAT(lines[0], ::testing::EndsWith(",roof_unavailable,decode_roof_flops_per_token,decode_roof_bytes_per_token,"
                                            "decode_roof_gb_per_s,decode_roof_fraction,decode_roof_bound,"
                                            "calibration_tokens,calibration_damp,calibration_seconds,head_format,"
                                            "head_bytes,engine,lm_delta_ppl_stderr,lm_kl_stderr"));
  // An encoder run: 12 empty phase cells, 18 empty text-quality cells, no weights_source, 7 empty roof
  // cells, the reason there is no roof, 5 empty decode-roof cells, 3 empty calibration cells, no head, no
  // engine, no paired errors.
  const std::string no_roof = "not measured (no reason recorded)";
  EXPECT_THAT(lines[1], ::testing::EndsWith(std::string(38, ',') + no_roof + ",,,,,,,,,,,,,"));
  EXPECT_THAT(lines[4],
              HasSubstr(",64,128500.25,3100.5," + to_json(examples::decoder_record())["prefill_mj_per_token"].dump() +
                        ",32,25,7700.125,165.5,0.13,3.25,4.2,"));
  EXPECT_THAT(lines[4], ::testing::EndsWith(",not measured (no reason recorded)," + std::string(8, ',') + no_roof +
                                            ",,,,,,,,,,,,,"))
      << "a decoder run without a text";
  EXPECT_THAT(lines[1], HasSubstr("8,distilbert-base_cpu_int8_w8a8_s128_bs8_t2,2026-11-23T19:45:02Z,"
                                  "distilbert-base,cpu,int8,8,128,2,ok,,false,5,20,20,4.25,0.5,3.5,4.0,5.0,6.0,6.5,"));
  EXPECT_THAT(lines[1], HasSubstr(",int8 onednn:gemm:u8s8s32 x30; fp32 layernorm x13,"));
  // Nulls are empty cells; a cell with commas is quoted.
  EXPECT_THAT(lines[2], HasSubstr(",0.085,1882.35,240940.8,,,,,,,,\"no energy sensor: RAPL masked in a container, "
                                  "no NVML, no meter given\",68000000,267000000,,,,,0.985,"));
  EXPECT_THAT(lines[3], HasSubstr(",failed,\"bad \"\"shape\"\", expected 64\","));
  for (const auto& line : lines) {
    // Every row has as many cells as the header: count commas outside quotes.
    std::size_t cells = 1;
    bool quoted = false;
    for (char c : line) {
      if (c == '"') quoted = !quoted;
      if (c == ',' && !quoted) ++cells;
    }
    EXPECT_EQ(cells, columns.size()) << line;
  }
}

TEST(BenchResultsCsv, EachTasksFiguresFollowTheScalarColumns) {
  RunRecord a = examples::decoder_record(), b = examples::decoder_record(), c = examples::decoder_record();
  a.tasks = {{"arc", {{"items", 20}, {"acc", 0.5}, {"acc_stderr", 0.11}, {"fp32_acc", 0.55}, {"delta_acc", -0.05}}}};
  b.tasks = {{"hella,swag", {{"items", 10}, {"acc", 0.3}}}, {"arc", {{"items", 20}, {"acc", 0.45}}}};
  c.tasks = nullptr;  // a run without --task (or a failed one): empty task cells
  const auto csv = format_results_csv({a, b, c});
  std::vector<std::string> lines;
  std::stringstream in(csv);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 4u);
  // After the scalar columns: arc's ten figures, then hella,swag's (quoted): by name.
  EXPECT_THAT(
      lines[0],
      ::testing::EndsWith(
          ",lm_kl_stderr,task.arc.items,task.arc.acc,task.arc.acc_stderr,task.arc.acc_norm,"
          "task.arc.acc_norm_stderr,task.arc.fp32_acc,task.arc.delta_acc,task.arc.delta_acc_stderr,task.arc."
          "delta_acc_norm,task.arc.changed_share,\"task.hella,swag.items\",\"task.hella,swag.acc\",\"task.hella,"
          "swag.acc_stderr\",\"task.hella,swag.acc_norm\",\"task.hella,swag.acc_norm_stderr\",\"task."
          "hella,swag.fp32_acc\",\"task.hella,swag.delta_acc\",\"task.hella,swag.delta_acc_stderr\",\"task.hella,"
          "swag.delta_acc_norm\",\"task.hella,swag.changed_share\""));
  EXPECT_THAT(lines[1], ::testing::EndsWith(",20,0.5,0.11,,,0.55,-0.05,,," + std::string(10, ',')));
  EXPECT_THAT(lines[2], ::testing::EndsWith(",20,0.45,,,,,,,,,10,0.3,,,,,,,,"));
  EXPECT_THAT(lines[3], ::testing::EndsWith(std::string(20, ',')));
  EXPECT_EQ(format_results_csv({c}).find("task."), std::string::npos) << "no task, no task column";
}

TEST(BenchResultsCsv, WrittenAtomically) {
  const auto dir = test::temp_dir("bench_csv_write");
  write_results_csv({examples::full_record()}, dir / "results.csv");
  write_results_csv({examples::full_record(), examples::failed_record()}, dir / "results.csv");
  const auto text = read_text(dir / "results.csv");
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3);
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1u);  // no temporary left behind
  EXPECT_THAT(error_of([&] { write_results_csv({}, dir / "missing" / "results.csv"); }),
              HasSubstr("cannot write '" + (dir / "missing" / "results.csv").string() + "'"));
}

}  // namespace
}  // namespace qjoule::bench
