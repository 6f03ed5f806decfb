// Scale-out on Slurm: a sweep as one `sbatch --array` job and a dependent merge job.
//
//   qjoule bench ... --out OUT --slurm      writes OUT/slurm/tasks.json (the run names of each array
//                                           task), OUT/slurm/array.sbatch and OUT/slurm/merge.sbatch,
//                                           and submits both (merge: --dependency=afterany:<array>).
//   array task k                            runs the same qjoule command with --slurm-task: the run
//                                           names of task k, through the ordinary sweep loop, into its
//                                           own shard store OUT/shards/job<J>-task<k>/results.jsonl.
//   merge job                               the same command with --slurm-merge: every shard's records
//                                           that OUT/results.jsonl does not hold yet are appended to it
//                                           (under its lock), then results.csv, summary.md, report.html.
//
// Exactly once: a run name enters OUT/results.jsonl once (the store refuses a second); a task killed
// mid-run leaves at most a torn last line in its shard, which the merge cuts with a note, and its
// configuration stays missing; `--resume --slurm` merges what the shards hold first and submits only
// the configurations recorded nowhere. Merging again changes nothing.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qjoule/bench/results_store.h"
#include "qjoule/bench/run_config.h"

namespace qjoule::bench {

// The run names of each array task: the configurations in order, `chunk` (>= 1) per task.
[[nodiscard]] std::vector<std::vector<std::string>> plan_slurm_tasks(const std::vector<RunConfig>& pending,
                                                                     std::size_t chunk);

struct SlurmScripts {
  std::string array;  // the array job's batch script
  std::string merge;  // the merge job's batch script
};

// The batch scripts for `tasks` array tasks of `command` (the qjoule command line as given, argv[0]
// absolute), run in `workdir`, logging to OUT/slurm/. Each array task asks for the node alone
// (--exclusive: a neighbour would change its speed and the node's energy counters) and
// --cpus-per-task = the sweep's most threads. `sbatch_options` (--slurm-opt) become #SBATCH lines of
// the array job after those defaults, so they win. Each argument is single-quoted for bash.
SlurmScripts slurm_scripts(const std::filesystem::path& out, const std::vector<std::string>& command,
                           const std::filesystem::path& workdir, std::size_t tasks, int cpus_per_task,
                           const std::vector<std::string>& sbatch_options);

// The command line of this process (/proc/self/cmdline, argv[0] made absolute) without the
// submit-only flags (--slurm, --slurm-dry-run, --wait, --slurm-chunk N, --slurm-opt ARG, --resume),
// for the scripts to run again with --slurm-task / --slurm-merge.
std::vector<std::string> slurm_command_of_this_process();

struct SlurmSubmission {
  std::string array_job_id, merge_job_id;
};

// Writes OUT/slurm/{tasks.json,array.sbatch,merge.sbatch} and submits them with sbatch; a failing
// sbatch is one line with its message.
SlurmSubmission submit_slurm_jobs(const std::filesystem::path& out, const std::vector<std::vector<std::string>>& tasks,
                                  const SlurmScripts& scripts);

// Inside an array task: the run names of task SLURM_ARRAY_TASK_ID (from OUT/slurm/tasks.json) and
// the folder of its shard store. Outside a Slurm array task, one line saying so.
std::vector<std::string> slurm_task_run_names(const std::filesystem::path& out, std::size_t task);
std::size_t slurm_array_task_id();
std::filesystem::path slurm_shard_dir(const std::filesystem::path& out);

struct ShardMerge {
  std::size_t shards = 0;          // shard stores read
  std::size_t added = 0;           // records appended to the main store
  std::size_t already = 0;         // records the main store held already (merging again adds nothing)
  std::vector<std::string> notes;  // what reading the shards repaired (a torn last line, ...)
};

// Appends every record of OUT/shards/*/results.jsonl that `store` does not hold, shards in name order.
ShardMerge merge_slurm_shards(ResultsStore& store, const std::filesystem::path& out);

// Where a record was made inside Slurm: {"job_id", "array_job_id", "array_task_id", "node",
// "cpus_on_node", "job_gpus", "cuda_visible_devices"} from the job's environment (a missing variable
// is null); nullopt outside Slurm (no SLURM_JOB_ID).
[[nodiscard]] std::optional<nlohmann::json> slurm_place();

// OUT/slurm/sweep.json: the run names of the whole sweep and, appended at each submission, its
// array and merge job ids with the run names of each array task; what --status reads.
void record_slurm_submission(const std::filesystem::path& out, const std::vector<std::string>& sweep_run_names,
                             const SlurmSubmission& submission, const std::vector<std::vector<std::string>>& tasks);

// The state of each run of a submitted sweep, from OUT/results.jsonl, the shards and squeue:
// "done" / "failed" (merged), "done, not merged" / "failed, not merged" (in a shard only), "running" /
// "queued" (its array task, as squeue lists it), or "missing" (none of these: cancelled, killed, or
// its job ended without a record). `job` names the array task ("42_3") where there is one.
struct SlurmRunState {
  std::string run_name, state, job;
};
std::vector<SlurmRunState> slurm_sweep_status(const std::filesystem::path& out);

// Blocks until squeue lists none of `job_ids`, polling every `poll_s` seconds.
void wait_for_slurm_jobs(const std::vector<std::string>& job_ids, double poll_s = 2.0);

}  // namespace qjoule::bench
