// A language model's multiple-choice task accuracy in the sweep (`qjoule bench --task FILE`): every
// decoder run scores each task exactly as `qjoule score` does (eval/task_scoring.h) and compares its
// answers with the FP32 model's on the same items.
//
// The FP32 answers are computed once per model and task, with the whole model in FP32 where it fits in the
// memory available (else its weights streamed one layer at a time, model::load_decoder_lm_streamed: the
// same answers, slower; the reference of a pre-quantized checkpoint: --reference's unquantized model), kept in the results folder as
// OUT/task-base/<model identity>-<task hash>-<items>.json (written whole, then renamed), which the sweep's
// other runs, a `--resume` and later sweeps on the same folder read; a lock file beside it keeps two
// processes (Slurm array tasks) from computing it twice.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qjoule/bench/run_config.h"
#include "qjoule/bench/run_record.h"
#include "qjoule/eval/task_file.h"
#include "qjoule/tokenize/bpe_tokenizer.h"

namespace qjoule::model {
class DecoderLM;
}

namespace qjoule::bench {

// The folder, inside a sweep's OUT, of the FP32 answers.
inline constexpr const char* kTaskBaseDirName = "task-base";

struct TaskOptions {
  std::vector<std::string> files;  // --task, in order
  int64_t limit = 0;               // --task-limit: each task's first N items (0: all)
};

// The FP32 model's answers on one task's items.
struct TaskReference {
  std::vector<int32_t> chosen;  // by acc, item by item
  double acc = 0.0, acc_norm = 0.0;
};

class TaskAccuracy {
 public:
  // `out` is the sweep's folder (its task-base/ holds the FP32 answers); `note` prints a line.
  TaskAccuracy(TaskOptions options, std::filesystem::path out, std::function<void(const std::string&)> note);

  bool enabled() const { return !options_.files.empty(); }

  // Reads every task file (a bad item is one line naming the file and line) and checks that every model of
  // the sweep is a decoder, before anything runs.
  void check(const std::vector<RunConfig>& configs);

  // Makes sure the FP32 answers of `model` exist for every task: read from OUT/task-base/, or computed now
  // from `fp32_model` (the model itself, or --reference's for a pre-quantized one; "": none, so the runs of
  // `model` get no FP32 figures and say why).
  void ensure_reference(const std::string& model, const std::string& fp32_model);

  // Scores `m` (the run's model) on every task into record.tasks.
  void score(const model::DecoderLM& m, const std::string& model, RunRecord& record);

  // The sweep identity's "tasks" entry: each file with its hash, and the limit (null without --task).
  nlohmann::json sweep_identity_entry();

 private:
  const std::vector<eval::Task>& tasks();
  std::filesystem::path reference_path(const std::string& fp32_model, std::size_t task) const;
  // Each model's tokenizer, read once for all its tasks and runs.
  const tokenize::BpeTokenizer& tokenizer_of(const std::string& model);

  TaskOptions options_;
  std::filesystem::path out_;
  std::function<void(const std::string&)> note_;
  std::vector<eval::Task> tasks_;
  std::vector<std::string> hashes_;
  bool read_ = false;
  // By model: the FP32 answers per task (empty where there is no FP32 model), or why there are none.
  std::map<std::string, std::vector<TaskReference>> references_;
  std::map<std::string, std::string> unavailable_;
  std::map<std::string, tokenize::BpeTokenizer> tokenizers_;
};

}  // namespace qjoule::bench
