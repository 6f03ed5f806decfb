#include "qjoule/bench/slurm_sweep.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "io/atomic_file.h"
#include "qjoule/error.h"
#include "qjoule/io/shell_quote.h"

namespace qjoule::bench {
namespace fs = std::filesystem;
namespace {

std::string joined_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out.push_back(' ');
    out.append(io::shell_quoted(a));
  }
  return out;
}

// Runs `argv` through the shell with stderr joined to stdout; returns the exit status (-1: did not run).
int run_capture(const std::vector<std::string>& argv, std::string& output) {
  output.clear();
  FILE* pipe = ::popen((joined_command(argv) + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
  const int status = ::pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string first_line(const std::string& text) {
  const auto end = text.find('\n');
  return end == std::string::npos ? text : text.substr(0, end);
}

std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

fs::path slurm_dir(const fs::path& out) { return out / "slurm"; }

// Run name -> status of each line of a results.jsonl that reads as JSON, without taking its lock or
// repairing it: --status only looks (a running task may be appending to its shard).
std::map<std::string, std::string> statuses_in(const fs::path& file) {
  std::map<std::string, std::string> out;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    const auto record = nlohmann::json::parse(line, nullptr, false);
    if (!record.is_object() || !record.contains("run_name") || !record["run_name"].is_string()) continue;
    out.emplace(record["run_name"].get<std::string>(), record.value("status", ""));
  }
  return out;
}

}  // namespace

std::vector<std::vector<std::string>> plan_slurm_tasks(const std::vector<RunConfig>& pending, std::size_t chunk) {
  if (chunk == 0) fail("--slurm-chunk 0, expected at least 1 configuration per array task");
  std::vector<std::vector<std::string>> tasks;
  for (std::size_t i = 0; i < pending.size(); ++i) {
    if (i % chunk == 0) tasks.emplace_back();
    tasks.back().push_back(run_name(pending[i]));
  }
  return tasks;
}

SlurmScripts slurm_scripts(const fs::path& out, const std::vector<std::string>& command, const fs::path& workdir,
                           std::size_t tasks, int cpus_per_task, const std::vector<std::string>& sbatch_options) {
  if (tasks == 0) fail("slurm: no array task to submit");
  const fs::path logs = fs::absolute(slurm_dir(out));
  SlurmScripts s;
  s.array = fmt::format(
      "#!/bin/bash\n"
      "# qjoule bench on Slurm: array task k runs the configurations of task k in {}/tasks.json and\n"
      "# appends their records to its own shard; the merge job gathers the shards.\n"
      "#SBATCH --job-name=qjoule-sweep\n"
      "#SBATCH --array=0-{}\n"
      "#SBATCH --ntasks=1\n"
      "#SBATCH --cpus-per-task={}\n"
      "# The node alone: another task beside it would change its speed and its node-wide energy counters.\n"
      "#SBATCH --exclusive\n"
      "#SBATCH --chdir={}\n"
      "#SBATCH --output={}/job%A-task%a.log\n",
      logs.string(), tasks - 1, cpus_per_task, workdir.string(), logs.string());
  for (const auto& option : sbatch_options) s.array += "#SBATCH " + option + "\n";
  s.array += "exec " + joined_command(command) + " --slurm-task\n";
  s.merge = fmt::format(
      "#!/bin/bash\n"
      "# qjoule bench on Slurm: merges the array tasks' shards into {}/results.jsonl (each run once) and\n"
      "# writes results.csv, summary.md and report.html. Submitted with --dependency=afterany:<array job>.\n"
      "#SBATCH --job-name=qjoule-merge\n"
      "#SBATCH --ntasks=1\n"
      "#SBATCH --cpus-per-task=1\n"
      "#SBATCH --chdir={}\n"
      "#SBATCH --output={}/merge-job%j.log\n"
      "exec {} --slurm-merge\n",
      fs::absolute(out).string(), workdir.string(), logs.string(), joined_command(command));
  return s;
}

std::vector<std::string> slurm_command_of_this_process() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> argv;
  std::string arg;
  while (std::getline(in, arg, '\0')) argv.push_back(arg);
  if (argv.empty()) fail("slurm: cannot read this process's command line from /proc/self/cmdline");
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  argv.front() = ec ? fs::absolute(argv.front()).string() : exe.string();
  static const std::vector<std::string> flags = {"--slurm", "--slurm-dry-run", "--wait", "--resume"};
  static const std::vector<std::string> with_value = {"--slurm-chunk", "--slurm-opt"};
  std::vector<std::string> out;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (std::find(flags.begin(), flags.end(), a) != flags.end()) continue;
    bool skip = false;
    for (const auto& option : with_value) {
      if (a == option) {
        ++i;  // and its value
        skip = true;
      } else if (a.rfind(option + "=", 0) == 0) {
        skip = true;
      }
    }
    if (!skip) out.push_back(a);
  }
  return out;
}

SlurmSubmission submit_slurm_jobs(const fs::path& out, const std::vector<std::vector<std::string>>& tasks,
                                  const SlurmScripts& scripts) {
  const fs::path dir = slurm_dir(out);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("slurm: cannot create {}: {}", dir.string(), ec.message());
  io::write_file_atomically(dir / "tasks.json", nlohmann::json(tasks).dump(1) + "\n");
  io::write_file_atomically(dir / "array.sbatch", scripts.array);
  io::write_file_atomically(dir / "merge.sbatch", scripts.merge);

  SlurmSubmission submission;
  std::string output;
  if (run_capture({"sbatch", "--parsable", (dir / "array.sbatch").string()}, output) != 0)
    fail("slurm: sbatch {} failed: {}", (dir / "array.sbatch").string(), first_line(output));
  submission.array_job_id = first_line(output).substr(0, first_line(output).find(';'));
  if (run_capture(
          {"sbatch", "--parsable", "--dependency=afterany:" + submission.array_job_id, (dir / "merge.sbatch").string()},
          output) != 0)
    fail("slurm: sbatch {} (after job {}) failed: {}", (dir / "merge.sbatch").string(), submission.array_job_id,
         first_line(output));
  submission.merge_job_id = first_line(output).substr(0, first_line(output).find(';'));
  return submission;
}

std::size_t slurm_array_task_id() {
  const std::string id = env_or_empty("SLURM_ARRAY_TASK_ID");
  if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos)
    fail(
        "--slurm-task runs inside a Slurm array task (SLURM_ARRAY_TASK_ID is '{}'); qjoule bench --slurm submits "
        "those",
        id);
  return static_cast<std::size_t>(std::stoull(id));
}

std::vector<std::string> slurm_task_run_names(const fs::path& out, std::size_t task) {
  const fs::path path = slurm_dir(out) / "tasks.json";
  std::ifstream in(path);
  if (!in) fail("{}: cannot read the Slurm task list (was this sweep submitted with --slurm?)", path.string());
  std::stringstream text;
  text << in.rdbuf();
  const auto tasks = nlohmann::json::parse(text.str(), nullptr, false);
  if (!tasks.is_array() || task >= tasks.size() || !tasks[task].is_array())
    fail("{}: no task {} (the file lists {} tasks)", path.string(), task, tasks.is_array() ? tasks.size() : 0);
  std::vector<std::string> names;
  for (const auto& name : tasks[task]) {
    if (!name.is_string()) fail("{}: task {} holds {}, expected run names", path.string(), task, name.dump());
    names.push_back(name.get<std::string>());
  }
  return names;
}

fs::path slurm_shard_dir(const fs::path& out) {
  const std::string job = env_or_empty("SLURM_ARRAY_JOB_ID");
  return out / "shards" / fmt::format("job{}-task{}", job.empty() ? "0" : job, slurm_array_task_id());
}

ShardMerge merge_slurm_shards(ResultsStore& store, const fs::path& out) {
  ShardMerge merge;
  std::vector<fs::path> shards;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(out / "shards", ec)) {
    if (entry.is_directory() && fs::exists(entry.path() / kResultsFileName)) shards.push_back(entry.path());
  }
  std::sort(shards.begin(), shards.end());
  for (const auto& dir : shards) {
    const auto shard = ResultsStore::open(dir);  // cuts a torn last line left by a killed task
    ++merge.shards;
    for (const auto& note : shard.notes()) merge.notes.push_back(note);
    for (const auto& record : shard.records()) {
      if (store.has(record.run_name)) {
        ++merge.already;
        continue;
      }
      store.append(record);
      ++merge.added;
    }
  }
  return merge;
}

std::optional<nlohmann::json> slurm_place() {
  if (env_or_empty("SLURM_JOB_ID").empty()) return std::nullopt;
  nlohmann::json place = nlohmann::json::object();
  const auto put = [&place](const char* key, const char* variable) {
    const std::string value = env_or_empty(variable);
    place[key] = value.empty() ? nlohmann::json(nullptr) : nlohmann::json(value);
  };
  put("job_id", "SLURM_JOB_ID");
  put("array_job_id", "SLURM_ARRAY_JOB_ID");
  put("array_task_id", "SLURM_ARRAY_TASK_ID");
  put("node", "SLURMD_NODENAME");
  put("cpus_on_node", "SLURM_CPUS_ON_NODE");
  put("job_gpus", "SLURM_JOB_GPUS");
  put("cuda_visible_devices", "CUDA_VISIBLE_DEVICES");
  return place;
}

void record_slurm_submission(const fs::path& out, const std::vector<std::string>& sweep_run_names,
                             const SlurmSubmission& submission, const std::vector<std::vector<std::string>>& tasks) {
  const fs::path path = slurm_dir(out) / "sweep.json";
  nlohmann::json sweep = {{"runs", sweep_run_names}, {"submissions", nlohmann::json::array()}};
  std::ifstream in(path);
  if (in) {
    std::stringstream text;
    text << in.rdbuf();
    const auto old = nlohmann::json::parse(text.str(), nullptr, false);
    if (old.is_object() && old.contains("submissions") && old["submissions"].is_array())
      sweep["submissions"] = old["submissions"];
  }
  sweep["submissions"].push_back(
      {{"array_job_id", submission.array_job_id}, {"merge_job_id", submission.merge_job_id}, {"tasks", tasks}});
  io::write_file_atomically(path, sweep.dump(1) + "\n");
}

std::vector<SlurmRunState> slurm_sweep_status(const fs::path& out) {
  const fs::path path = slurm_dir(out) / "sweep.json";
  std::ifstream in(path);
  if (!in) fail("{}: no Slurm submission here (qjoule bench --slurm --out {} writes it)", path.string(), out.string());
  std::stringstream text;
  text << in.rdbuf();
  const auto sweep = nlohmann::json::parse(text.str(), nullptr, false);
  if (!sweep.is_object() || !sweep.contains("runs") || !sweep["runs"].is_array() || !sweep.contains("submissions"))
    fail("{}: not a qjoule Slurm sweep file (expected \"runs\" and \"submissions\")", path.string());

  std::map<std::string, std::string> state;  // run name -> state, from the records
  for (const auto& [name, status] : statuses_in(out / kResultsFileName))
    state[name] = status == "ok" ? "done" : "failed";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(out / "shards", ec)) {
    for (const auto& [name, status] : statuses_in(entry.path() / kResultsFileName))
      if (!state.count(name)) state[name] = status == "ok" ? "done, not merged" : "failed, not merged";
  }
  // Runs without a record: the latest submission that holds each, its array task and what squeue says.
  std::set<std::string> settled;
  for (const auto& [name, st] : state) settled.insert(name);
  std::map<std::string, std::string> job_of;
  for (const auto& submission : sweep["submissions"]) {
    const std::string array = submission.value("array_job_id", "");
    std::map<std::string, std::string> listed;  // array task id -> squeue state
    std::string output;
    if (run_capture({"squeue", "-h", "-r", "-j", array, "-o", "%K %T"}, output) == 0) {
      std::istringstream lines(output);
      std::string task, job_state;
      while (lines >> task >> job_state) listed[task] = job_state;
    }
    const auto& tasks = submission.value("tasks", nlohmann::json::array());
    for (std::size_t k = 0; k < tasks.size(); ++k) {
      for (const auto& name : tasks[k]) {
        if (!name.is_string()) continue;
        const std::string n = name.get<std::string>();
        job_of[n] = fmt::format("{}_{}", array, k);
        if (settled.count(n)) continue;  // a record says how it ended
        const auto it = listed.find(std::to_string(k));
        state[n] = it == listed.end() ? "missing" : it->second == "RUNNING" ? "running" : "queued";
      }
    }
  }
  std::vector<SlurmRunState> out_states;
  for (const auto& name : sweep["runs"]) {
    if (!name.is_string()) continue;
    const std::string n = name.get<std::string>();
    out_states.push_back({n, state.count(n) ? state[n] : "missing", job_of.count(n) ? job_of[n] : ""});
  }
  return out_states;
}

void wait_for_slurm_jobs(const std::vector<std::string>& job_ids, double poll_s) {
  std::string ids;
  for (const auto& id : job_ids) ids += (ids.empty() ? "" : ",") + id;
  while (true) {
    std::string output;
    const int status = run_capture({"squeue", "-h", "-o", "%i", "-j", ids}, output);
    // squeue fails with "Invalid job id" once the jobs are gone from the controller: done too.
    if (status != 0 || output.find_first_not_of(" \n") == std::string::npos) return;
    std::this_thread::sleep_for(std::chrono::duration<double>(poll_s));
  }
}

}  // namespace qjoule::bench
