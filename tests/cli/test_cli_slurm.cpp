// `qjoule bench --slurm` on a real one-node Slurm cluster (scripts/slurm-local.sh): a sweep as an
// array job and a merge job, exactly once through a cancelled task and a resume. Skips, with the
// script's reason, where the cluster cannot start (not root, no slurm-wlm, no munge).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "run_command.h"
#include "test_paths.h"

namespace {

using qjoule::test::run_command;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string qjoule() { return qjoule::test::qjoule_binary().string(); }
fs::path repo() { return qjoule::test::fixtures_dir().parent_path().parent_path(); }

// Run name -> environment.slurm of every record in OUT/results.jsonl (a name twice fails the test).
std::map<std::string, nlohmann::json> records_of(const fs::path& out) {
  std::map<std::string, nlohmann::json> records;
  std::ifstream in(out / "results.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    const auto record = nlohmann::json::parse(line);
    const std::string name = record.at("run_name");
    EXPECT_EQ(records.count(name), 0u) << name << " recorded twice";
    EXPECT_EQ(record.at("status"), "ok") << name << ": " << record.at("error");
    records[name] = record.at("environment").value("slurm", nlohmann::json());
  }
  return records;
}

// Polls squeue until it lists nothing (at most `seconds`).
void wait_for_empty_queue(int seconds) {
  for (int i = 0; i < seconds * 2; ++i) {
    if (run_command("squeue -h").output.find_first_not_of(" \n") == std::string::npos) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  ADD_FAILURE() << "squeue still lists jobs after " << seconds << " s";
}

TEST(CliSlurm, SweepOnALocalClusterIsExactlyOnceThroughCancelAndResume) {
  const auto started = run_command("bash " + (repo() / "scripts/slurm-local.sh").string() + " start");
  if (started.exit_code != 0) GTEST_SKIP() << "no local Slurm cluster: " << started.output;

  const fs::path tiny = qjoule::test::fixtures_dir() / "tiny-bert";
  const auto sweep = [&](const fs::path& out, const std::string& min_time) {
    return qjoule() + " bench --model " + tiny.string() + " --dataset " + (tiny / "dataset.tsv").string() +
           " --precisions fp32,int8,w8 --batch 1,4 --seq 16 --threads 1 --idle 0 --min-time " + min_time + " --out " +
           out.string();
  };

  // Six configurations, six array tasks, one merge: six distinct records, each naming its job and task.
  const fs::path first = qjoule::test::temp_dir("cli_slurm_first");
  fs::remove_all(first);
  const auto r = run_command(sweep(first, "0.2") + " --slurm --wait");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("slurm: submitted 6 runs as array job "));
  EXPECT_THAT(r.output, HasSubstr("slurm: 6 done, 0 failed, 0 missing of 6 runs"));
  auto records = records_of(first);
  EXPECT_EQ(records.size(), 6u);
  std::set<std::string> tasks;
  for (const auto& [name, place] : records) {
    ASSERT_TRUE(place.is_object()) << name << " does not name its Slurm job";
    EXPECT_TRUE(place.at("job_id").is_string()) << name;
    EXPECT_TRUE(place.at("node").is_string()) << name;
    tasks.insert(place.at("array_task_id").get<std::string>());
  }
  EXPECT_EQ(tasks.size(), 6u) << "one array task per configuration";
  const auto status = run_command(qjoule() + " bench --out " + first.string() + " --status");
  EXPECT_EQ(status.exit_code, 0) << status.output;
  EXPECT_THAT(status.output, HasSubstr("6 runs: 6 done\n"));
  EXPECT_TRUE(fs::exists(first / "summary.md"));
  EXPECT_TRUE(fs::exists(first / "results.csv"));
  // Again with --resume: nothing to submit, still six.
  const auto again = run_command(sweep(first, "0.2") + " --slurm --resume --wait");
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_THAT(again.output, HasSubstr("slurm: all 6 runs are in "));
  EXPECT_EQ(records_of(first).size(), 6u);

  // A second sweep: cancel the running task and a queued one, then resume: exactly six again.
  const fs::path second = qjoule::test::temp_dir("cli_slurm_second");
  fs::remove_all(second);
  const auto submitted = run_command(sweep(second, "1.5") + " --slurm");
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  const auto at = submitted.output.find("array job ");
  ASSERT_NE(at, std::string::npos) << submitted.output;
  const std::string job = submitted.output.substr(at + 10, submitted.output.find(' ', at + 10) - at - 10);
  std::string running;
  for (int i = 0; i < 60 && running.empty(); ++i) {
    running = run_command("squeue -h -t R -o %i -j " + job).output;
    running.erase(std::remove(running.begin(), running.end(), '\n'), running.end());
    if (running.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  ASSERT_FALSE(running.empty()) << "no task of job " << job << " started";
  std::this_thread::sleep_for(std::chrono::milliseconds(700));  // into its timed runs
  EXPECT_EQ(run_command("scancel " + running).exit_code, 0);
  EXPECT_EQ(run_command("scancel " + job + "_5").exit_code, 0);
  wait_for_empty_queue(120);
  EXPECT_LT(records_of(second).size(), 6u) << "cancelled tasks left their configurations missing";
  EXPECT_THAT(run_command(qjoule() + " bench --out " + second.string() + " --status").output, HasSubstr(" missing"));
  const auto resumed = run_command(sweep(second, "0.2") + " --slurm --resume --wait");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_THAT(resumed.output, HasSubstr("slurm: 6 done, 0 failed, 0 missing of 6 runs"));
  EXPECT_EQ(records_of(second).size(), 6u);

  run_command("bash " + (repo() / "scripts/slurm-local.sh").string() + " stop");
}

}  // namespace
