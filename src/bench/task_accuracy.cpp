#include "qjoule/bench/task_accuracy.h"

#include <cstdlib>
#include <fstream>
#include <optional>

#include <fmt/format.h>

#include "bench/file_lock.h"
#include "bench/peak_rss.h"
#include "bench/progress_line.h"
#include "qjoule/bench/bench_runner.h"
#include "qjoule/bench/console_reporter.h"
#include "qjoule/bench/sweep_identity.h"
#include "qjoule/error.h"
#include "qjoule/eval/mean_stderr.h"
#include "qjoule/eval/task_scoring.h"
#include "qjoule/eval/text_file.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/model/decoder_lm.h"
#include "qjoule/tokenize/bpe_tokenizer.h"

namespace qjoule::bench {
namespace {

namespace fs = std::filesystem;

// Scores `task` with a progress line (`who`: "FP32 answers", "this run") where it takes more than a few
// seconds.
eval::TaskScore score_on(const model::DecoderLM& m, const tokenize::BpeTokenizer& tokenizer, const eval::Task& task,
                         const std::string& who) {
  detail::ProgressLine progress(3.0);
  eval::TaskScoringOptions options;
  options.progress = [&](int64_t done, int64_t total) {
    const double elapsed = progress.elapsed();
    progress.update(
        fmt::format("  {} on {}: item {}/{}, {}, ETA {}", who, task.name, done, total, format_duration(elapsed),
                    format_duration(elapsed / double(done) * double(total - done))),
        done == total);
  };
  auto s = eval::score_task(m, tokenizer, task, options);
  progress.finish();
  return s;
}

TaskReference reference_of(const eval::TaskScore& s) {
  TaskReference r;
  for (const auto& item : s.items) r.chosen.push_back(item.chosen);
  r.acc = s.acc();
  r.acc_norm = s.acc_norm();
  return r;
}

// A saved reference, or nullopt where the file is absent or is not one for `items` items (a file cut short
// or edited by hand is computed again, never read as garbage).
std::optional<TaskReference> read_reference(const fs::path& path, std::size_t items) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return std::nullopt;
  std::ifstream in(path);
  const auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("chosen") || !j["chosen"].is_array() ||
      j["chosen"].size() != items || !j.contains("acc") || !j["acc"].is_number() || !j.contains("acc_norm") ||
      !j["acc_norm"].is_number())
    return std::nullopt;
  TaskReference r;
  for (const auto& c : j["chosen"]) {
    if (!c.is_number_integer() || c.get<int64_t>() < 0) return std::nullopt;
    r.chosen.push_back(c.get<int32_t>());
  }
  r.acc = j["acc"].get<double>();
  r.acc_norm = j["acc_norm"].get<double>();
  return r;
}

}  // namespace

TaskAccuracy::TaskAccuracy(TaskOptions options, fs::path out, std::function<void(const std::string&)> note)
    : options_(std::move(options)), out_(std::move(out)), note_(std::move(note)) {}

const std::vector<eval::Task>& TaskAccuracy::tasks() {
  if (!read_) {
    for (const auto& file : options_.files) {
      const std::string bytes = eval::read_text_file(file, "--task");
      tasks_.push_back(eval::parse_task_file(file, bytes, options_.limit));
      hashes_.push_back(content_hash(bytes));
    }
    read_ = true;
  }
  return tasks_;
}

void TaskAccuracy::check(const std::vector<RunConfig>& configs) {
  if (!enabled()) return;
  tasks();
  for (std::size_t t = 0; t < tasks_.size(); ++t)
    for (std::size_t u = 0; u < t; ++u)
      if (tasks_[t].name == tasks_[u].name)
        fail("--task {}: its name '{}' (the file's stem) is --task {}'s too; expected tasks of distinct names",
             options_.files[t], tasks_[t].name, options_.files[u]);
  for (const auto& c : configs)
    if (!is_decoder_model(c.model))
      fail(
          "--task {}: multiple-choice tasks score decoder language models; '{}' is not one (a classifier's "
          "accuracy comes from --dataset)",
          options_.files.front(), c.model);
}

const tokenize::BpeTokenizer& TaskAccuracy::tokenizer_of(const std::string& model) {
  auto it = tokenizers_.find(model);
  if (it == tokenizers_.end())
    it = tokenizers_.emplace(model, tokenize::BpeTokenizer::from_tokenizer_json(fs::path(model) / "tokenizer.json"))
             .first;
  return it->second;
}

fs::path TaskAccuracy::reference_path(const std::string& fp32_model, std::size_t task) const {
  return out_ / kTaskBaseDirName /
         fmt::format("{}-{}-{}.json", model_identity(fp32_model), hashes_[task], tasks_[task].items.size());
}

void TaskAccuracy::ensure_reference(const std::string& model, const std::string& fp32_model) {
  if (!enabled() || references_.count(model) != 0 || unavailable_.count(model) != 0) return;
  tasks();
  if (fp32_model.empty()) {
    unavailable_[model] =
        "a pre-quantized checkpoint holds no FP32 weights (--reference DIR, its unquantized model, gives the FP32 "
        "answers)";
    return;
  }
  std::vector<TaskReference> refs(tasks_.size());
  std::vector<std::size_t> missing;
  for (std::size_t t = 0; t < tasks_.size(); ++t) {
    if (auto r = read_reference(reference_path(fp32_model, t), tasks_[t].items.size())) {
      refs[t] = std::move(*r);
    } else {
      missing.push_back(t);
    }
  }
  if (!missing.empty()) {
    fs::create_directories(out_ / kTaskBaseDirName);
    const detail::FileLock lock(out_ / kTaskBaseDirName / "compute.lock", [&] {
      note_(fmt::format("FP32 task answers for '{}': another process is computing them; waiting", fp32_model));
    });
    std::optional<model::DecoderLM> fp32;  // loaded only if still missing once the lock is ours
    for (std::size_t t : missing) {
      const auto path = reference_path(fp32_model, t);
      if (auto r = read_reference(path, tasks_[t].items.size())) {
        refs[t] = std::move(*r);
        continue;
      }
      if (!fp32) {
        // The whole model in FP32 where it fits in the memory available now; else its weights streamed from
        // the checkpoint one layer at a time (the same outputs, slower), as the text's reference is.
        std::uint64_t fp32_bytes = 0;
        const auto ck = io::Checkpoint::open(fp32_model);
        for (const auto& [name, tensor] : ck.tensors()) fp32_bytes += static_cast<std::uint64_t>(tensor.numel()) * 4;
        const auto available = available_memory_bytes();
        // QJOULE_TEST_STREAM_TASK_REFERENCE=1 (tests only): as if the weights did not fit.
        const bool forced = std::getenv("QJOULE_TEST_STREAM_TASK_REFERENCE") != nullptr;
        const bool whole = !forced && (!available || fp32_bytes + fp32_bytes / 4 < *available);
        note_(fmt::format("FP32 task answers for '{}': {} (once per sweep)", fp32_model,
                          whole ? fmt::format("loading the model in FP32 ({} MiB)", fp32_bytes >> 20)
                                : fmt::format("its {} MiB of FP32 weights are more than the {} MiB available: "
                                              "streamed one layer at a time",
                                              fp32_bytes >> 20, available.value_or(0) >> 20)));
        fp32.emplace(whole ? model::load_decoder_lm(fp32_model) : model::load_decoder_lm_streamed(fp32_model));
      }
      const auto s = score_on(*fp32, tokenizer_of(fp32_model), tasks_[t], "FP32 answers");
      refs[t] = reference_of(s);
      nlohmann::json j = {{"task", tasks_[t].name},   {"file", tasks_[t].path.string()}, {"hash", hashes_[t]},
                          {"model", fp32_model},      {"items", s.items.size()},         {"acc", s.acc()},
                          {"acc_norm", s.acc_norm()}, {"chosen", refs[t].chosen},        {"seconds", s.seconds}};
      const fs::path partial = path.string() + ".partial";
      std::ofstream(partial) << j.dump() << "\n";
      fs::rename(partial, path);
      note_(fmt::format(
          "FP32 task answers for '{}' on {}: acc {:.4f}, acc_norm {:.4f} ({} items, {:.1f} s), kept in {}\n",
          fp32_model, tasks_[t].name, s.acc(), s.acc_norm(), s.items.size(), s.seconds, path.string()));
    }
  }
  references_[model] = std::move(refs);
}

void TaskAccuracy::score(const model::DecoderLM& m, const std::string& model, RunRecord& record) {
  if (!enabled()) return;
  tasks();
  record.tasks = nlohmann::json::object();
  const auto ref = references_.find(model);
  for (std::size_t t = 0; t < tasks_.size(); ++t) {
    const auto& task = tasks_[t];
    const auto s = score_on(m, tokenizer_of(model), task, "this run's answers");
    nlohmann::json j = {{"file", task.path.string()},
                        {"hash", hashes_[t]},
                        {"shape", std::string(eval::task_shape_name(task.shape))},
                        {"items", s.items.size()},
                        {"acc", s.acc()},
                        {"acc_stderr", s.acc_stderr()},
                        {"acc_norm", s.acc_norm()},
                        {"acc_norm_stderr", s.acc_norm_stderr()},
                        {"truncated", s.truncated},
                        {"tokens_per_s", s.seconds > 0 ? nlohmann::json(double(s.tokens) / s.seconds) : nullptr},
                        {"fp32_acc", nullptr},
                        {"fp32_acc_norm", nullptr},
                        {"delta_acc", nullptr},
                        {"delta_acc_stderr", nullptr},
                        {"delta_acc_norm", nullptr},
                        {"changed_share", nullptr},
                        {"reference_unavailable", nullptr}};
    if (ref != references_.end()) {
      const TaskReference& r = ref->second[t];
      std::size_t changed = 0;
      std::vector<double> gains;  // item by item: right now (1) or not (0), minus right in FP32 or not
      for (std::size_t i = 0; i < s.items.size(); ++i) {
        changed += s.items[i].chosen != r.chosen[i] ? 1 : 0;
        const int32_t gold = task.items[i].gold;
        gains.push_back(double(s.items[i].chosen == gold) - double(r.chosen[i] == gold));
      }
      j["fp32_acc"] = r.acc;
      j["fp32_acc_norm"] = r.acc_norm;
      j["delta_acc"] = s.acc() - r.acc;
      j["delta_acc_stderr"] = eval::mean_stderr(gains);
      j["delta_acc_norm"] = s.acc_norm() - r.acc_norm;
      j["changed_share"] = double(changed) / double(s.items.size());
    } else {
      const auto why = unavailable_.find(model);
      j["reference_unavailable"] = why != unavailable_.end() ? why->second : "no FP32 answers computed";
    }
    record.tasks[task.name] = j;
  }
}

nlohmann::json TaskAccuracy::sweep_identity_entry() {
  if (!enabled()) return nullptr;
  tasks();
  nlohmann::json files = nlohmann::json::array();
  for (std::size_t t = 0; t < tasks_.size(); ++t) files.push_back({{"file", options_.files[t]}, {"hash", hashes_[t]}});
  return {{"files", files}, {"limit", options_.limit}};
}

}  // namespace qjoule::bench
