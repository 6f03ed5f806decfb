// The Slurm pieces that need no cluster: task plans, batch scripts, the shard merge (idempotent,
// torn lines cut), the record's Slurm place; and the sweep loop both modes share.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_of.h"
#include "qjoule/bench/results_store.h"
#include "qjoule/bench/slurm_sweep.h"
#include "qjoule/bench/sweep_loop.h"
#include "record_examples.h"
#include "test_paths.h"

namespace qjoule::bench {
namespace {

namespace fs = std::filesystem;
using test::error_of;
using ::testing::HasSubstr;
using ::testing::Not;

std::vector<RunConfig> configs_of(const std::vector<std::string>& precisions) {
  std::vector<RunConfig> out;
  for (const auto& p : precisions) {
    RunConfig c;
    c.precision = p;
    out.push_back(c);
  }
  return out;
}

RunRecord record_for(const RunConfig& c) {
  RunRecord r = examples::full_record();
  r.config = c;
  r.run_name = run_name(c);
  return r;
}

TEST(SlurmSweep, TasksTakeChunksOfThePendingRunsInOrder) {
  const auto configs = configs_of({"fp32", "int8", "w8", "int4", "nf4"});
  const auto one = plan_slurm_tasks(configs, 1);
  ASSERT_EQ(one.size(), 5u);
  EXPECT_EQ(one[1], std::vector<std::string>{run_name(configs[1])});
  const auto two = plan_slurm_tasks(configs, 2);
  ASSERT_EQ(two.size(), 3u);
  EXPECT_EQ(two[2], std::vector<std::string>{run_name(configs[4])});
  EXPECT_THAT(error_of([&] { (void)plan_slurm_tasks(configs, 0); }), HasSubstr("--slurm-chunk 0"));
}

TEST(SlurmSweep, ScriptsRunTheSameCommandWithQuotingAndUserOptionsLast) {
  const auto s = slurm_scripts("/data/out", {"/opt/qjoule", "bench", "--model", "it's here"}, "/home/me", 4, 2,
                               {"--partition=gpu", "--gres=gpu:1"});
  EXPECT_THAT(s.array, HasSubstr("#SBATCH --array=0-3\n"));
  EXPECT_THAT(s.array, HasSubstr("#SBATCH --cpus-per-task=2\n"));
  EXPECT_THAT(s.array, HasSubstr("#SBATCH --exclusive\n"));
  EXPECT_THAT(s.array, HasSubstr("#SBATCH --chdir=/home/me\n"));
  EXPECT_THAT(s.array, HasSubstr("#SBATCH --output=/data/out/slurm/job%A-task%a.log\n"));
  EXPECT_THAT(s.array, HasSubstr("#SBATCH --exclusive\n#SBATCH --chdir=/home/me\n#SBATCH "
                                 "--output=/data/out/slurm/job%A-task%a.log\n#SBATCH --partition=gpu\n#SBATCH "
                                 "--gres=gpu:1\n"));
  EXPECT_THAT(s.array, HasSubstr("exec '/opt/qjoule' 'bench' '--model' 'it'\\''s here' --slurm-task\n"));
  EXPECT_THAT(s.merge, HasSubstr("exec '/opt/qjoule' 'bench' '--model' 'it'\\''s here' --slurm-merge\n"));
  EXPECT_THAT(s.merge, Not(HasSubstr("--partition=gpu")));
  EXPECT_THAT(error_of([] { slurm_scripts("/o", {"q"}, "/", 0, 1, {}); }), HasSubstr("no array task"));
}

TEST(SlurmSweep, MergeAddsEachRunOnceCutsTornLinesAndIsIdempotent) {
  const fs::path out = test::temp_dir("slurm_merge");
  fs::remove_all(out);
  const auto configs = configs_of({"fp32", "int8", "w8"});
  {
    auto a = ResultsStore::open(out / "shards" / "job7-task0");
    a.append(record_for(configs[0]));
    a.append(record_for(configs[1]));
    auto b = ResultsStore::open(out / "shards" / "job7-task1");
    b.append(record_for(configs[1]));  // the same run in a later shard (a resubmission): merged once
  }
  std::ofstream(out / "shards" / "job7-task1" / "results.jsonl", std::ios::app) << "{\"schema_version\": 2, \"run";
  auto store = ResultsStore::open(out);
  const auto first = merge_slurm_shards(store, out);
  EXPECT_EQ(first.shards, 2u);
  EXPECT_EQ(first.added, 2u);
  EXPECT_EQ(first.already, 1u);
  ASSERT_EQ(first.notes.size(), 1u);
  EXPECT_THAT(first.notes[0], HasSubstr("torn last line"));
  EXPECT_EQ(configs_to_run(configs, store).size(), 1u);
  const auto again = merge_slurm_shards(store, out);
  EXPECT_EQ(again.added, 0u);
  EXPECT_EQ(again.already, 3u);
  EXPECT_EQ(store.records().size(), 2u);
}

TEST(SlurmSweep, TaskIdAndPlaceComeFromTheJobEnvironment) {
  ::unsetenv("SLURM_JOB_ID");
  EXPECT_EQ(slurm_place(), std::nullopt);
  ::unsetenv("SLURM_ARRAY_TASK_ID");
  EXPECT_THAT(error_of([] { slurm_array_task_id(); }), HasSubstr("--slurm-task runs inside a Slurm array task"));
  ::setenv("SLURM_JOB_ID", "42", 1);
  ::setenv("SLURM_ARRAY_JOB_ID", "40", 1);
  ::setenv("SLURM_ARRAY_TASK_ID", "2", 1);
  ::setenv("SLURMD_NODENAME", "node7", 1);
  const auto place = slurm_place();
  ASSERT_TRUE(place);
  EXPECT_EQ(place->at("job_id"), "42");
  EXPECT_EQ(place->at("array_task_id"), "2");
  EXPECT_EQ(place->at("node"), "node7");
  EXPECT_TRUE(place->at("job_gpus").is_null());
  EXPECT_EQ(slurm_array_task_id(), 2u);
  EXPECT_EQ(slurm_shard_dir("/o"), fs::path("/o/shards/job40-task2"));
  const fs::path out = test::temp_dir("slurm_tasks");
  fs::create_directories(out / "slurm");
  std::ofstream(out / "slurm" / "tasks.json") << R"([["a"], ["b", "c"]])";
  EXPECT_EQ(slurm_task_run_names(out, 1), (std::vector<std::string>{"b", "c"}));
  EXPECT_THAT(error_of([&] { slurm_task_run_names(out, 2); }), HasSubstr("no task 2 (the file lists 2 tasks)"));
  for (const char* v : {"SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURMD_NODENAME"}) ::unsetenv(v);
}

class CountingReporter final : public SweepReporter {
 public:
  void sweep_started(std::size_t total, std::size_t already) override {
    total_ = total;
    already_ = already;
  }
  void run_finished(const RunRecord&, std::size_t done, std::size_t to_run, double) override {
    finished_.push_back(std::to_string(done) + "/" + std::to_string(to_run));
  }
  std::size_t total_ = 0, already_ = 0;
  std::vector<std::string> finished_;
};

TEST(SweepLoop, RunsWhatTheStoreLacksAppendsEachAndCountsFailures) {
  const fs::path out = test::temp_dir("sweep_loop");
  fs::remove_all(out);
  const auto configs = configs_of({"fp32", "int8", "w8"});
  auto store = ResultsStore::open(out);
  store.append(record_for(configs[0]));
  CountingReporter reporter;
  std::vector<std::string> ran;
  const auto outcome = run_sweep(
      configs, store,
      [&](const RunConfig& c) {
        ran.push_back(c.precision.text());
        RunRecord r = record_for(c);
        if (c.precision == "w8") {
          r.status = "failed";
          r.error = "boom";
        }
        return r;
      },
      reporter);
  EXPECT_EQ(ran, (std::vector<std::string>{"int8", "w8"}));
  EXPECT_EQ(outcome.total, 3u);
  EXPECT_EQ(outcome.skipped, 1u);
  EXPECT_EQ(outcome.ran, 2u);
  EXPECT_EQ(outcome.failed, 1u);
  EXPECT_EQ(reporter.already_, 1u);
  EXPECT_EQ(reporter.finished_, (std::vector<std::string>{"1/2", "2/2"}));
  EXPECT_EQ(store.records().size(), 3u);
  EXPECT_TRUE(configs_to_run(configs, store).empty());
}

}  // namespace
}  // namespace qjoule::bench
