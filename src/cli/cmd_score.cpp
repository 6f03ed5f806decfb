// `qjoule score`: multiple-choice task accuracy of a decoder language model in one format (acc and
// acc_norm with their standard errors, as lm-evaluation-harness scores log-likelihood tasks).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/checkpoint_precision.h"
#include "cli/commands.h"
#include "cli/decoder_command.h"
#include "cli/flag_ranges.h"
#include "cli/format_util.h"
#include "qjoule/bench/console_reporter.h"
#include "qjoule/bench/sweep_identity.h"
#include "qjoule/eval/task_file.h"
#include "qjoule/eval/task_scoring.h"
#include "qjoule/eval/text_file.h"
#include "qjoule/kernels/threads.h"

namespace qjoule::cli {
namespace {

struct ScoreArgs {
  std::string model;
  std::vector<std::string> tasks;
  int64_t limit = 0;
  QuantArgs quant;
  CalibrationArgs calib;
  std::string json;
  int threads = 0;
  std::string device = "cpu";
  bool special_tokens = false;
};

nlohmann::json task_json(const eval::Task& task, const std::string& hash, const eval::TaskScore& s) {
  nlohmann::json items = nlohmann::json::array();
  for (std::size_t i = 0; i < s.items.size(); ++i) {
    const auto& item = s.items[i];
    std::vector<double> ll;
    std::vector<int64_t> tokens;
    for (const auto& c : item.choices) ll.push_back(c.loglik), tokens.push_back(c.tokens);
    items.push_back({{"line", task.items[i].line},
                     {"gold", task.items[i].gold},
                     {"chosen", item.chosen},
                     {"chosen_norm", item.chosen_norm},
                     {"loglik", ll},
                     {"tokens", tokens},
                     {"context_tokens", item.context_tokens},
                     {"truncated", item.truncated}});
  }
  return {{"task", task.name},
          {"file", task.path.string()},
          {"shape", std::string(eval::task_shape_name(task.shape))},
          {"hash", hash},
          {"items", s.items.size()},
          {"items_in_file", task.items_in_file},
          {"acc", s.acc()},
          {"acc_stderr", s.acc_stderr()},
          {"acc_norm", s.acc_norm()},
          {"acc_norm_stderr", s.acc_norm_stderr()},
          {"truncated", s.truncated},
          {"tokens_forwarded", s.tokens},
          {"seconds", s.seconds},
          {"per_item", items}};
}

void run_score(const ScoreArgs& a) {
  use_threads(a.threads);
  std::vector<eval::Task> tasks;  // every file read and checked before the model loads
  std::vector<std::string> hashes;
  for (const auto& path : a.tasks) {
    const std::string bytes = eval::read_text_file(path, "--task");
    tasks.push_back(eval::parse_task_file(path, bytes, a.limit));
    hashes.push_back(bench::content_hash(bytes));
  }
  auto d = load_decoder_for(a.model, a.quant, a.device, a.calib);
  print_decoder_header(a.model, d, a.quant);
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  nlohmann::json results = nlohmann::json::array();
  for (std::size_t t = 0; t < tasks.size(); ++t) {
    const auto& task = tasks[t];
    std::size_t fewest = task.items.front().choices.size(), most = fewest;
    for (const auto& item : task.items) {
      fewest = std::min(fewest, item.choices.size());
      most = std::max(most, item.choices.size());
    }
    fmt::print("task       {} ({} rows, {}): {} items{}, {} choices each\n", task.name,
               eval::task_shape_name(task.shape), task.path.string(), thousands(int64_t(task.items.size())),
               int64_t(task.items.size()) < task.items_in_file
                   ? fmt::format(" of {} (--task-limit)", thousands(task.items_in_file))
                   : "",
               fewest == most ? fmt::format("{}", most) : fmt::format("{} to {}", fewest, most));
    std::fflush(stdout);
    eval::TaskScoringOptions options;
    options.special_tokens = a.special_tokens;
    const auto started = std::chrono::steady_clock::now();
    options.progress = [tty, started](int64_t done, int64_t total) {
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      if (tty)
        fmt::print(stderr, "\r\033[K  item {}/{}, {}, ETA {}", done, total, bench::format_duration(elapsed),
                   bench::format_duration(elapsed / double(done) * double(total - done)));
    };
    const auto s = eval::score_task(d.model, d.tokenizer, task, options);
    if (tty) fmt::print(stderr, "\r\033[K");
    const auto n = int64_t(s.items.size());
    fmt::print("acc        {:.4f} ± {:.4f} ({}/{})\n", s.acc(), s.acc_stderr(), s.correct, n);
    fmt::print("acc_norm   {:.4f} ± {:.4f} ({}/{}; log-likelihood per character of the choice)\n", s.acc_norm(),
               s.acc_norm_stderr(), s.correct_norm, n);
    if (s.truncated > 0)
      fmt::print("truncated  {} {} tokens from the left to fit the model's {} positions (as lm-eval cuts)\n",
                 s.truncated, s.truncated == 1 ? "item's context lost" : "items' contexts lost",
                 d.model.config().max_positions);
    const int threads = kernels::num_threads();
    fmt::print("time       {:.2f} s ({} tokens forwarded, {} tokens/s, {} thread{})\n", s.seconds, thousands(s.tokens),
               s.seconds > 0 ? fmt::format("{:.0f}", double(s.tokens) / s.seconds) : std::string("n/a"), threads,
               threads == 1 ? "" : "s");
    results.push_back(task_json(task, hashes[t], s));
  }
  if (!a.json.empty()) {
    nlohmann::json j = {{"model", a.model},
                        {"architecture", d.model.config().architecture},
                        {"precision", a.quant.precision},
                        {"kernels", d.model.kernel_path_counts()},
                        {"threads", kernels::num_threads()},
                        {"special_tokens", a.special_tokens},
                        {"tasks", results}};
    if (!d.calibration.empty()) j["calibration"] = d.calibration;
    write_output("--json", a.json, j.dump(2) + "\n");
  }
}

}  // namespace

void add_score_command(CLI::App& app, CommandContext& /*ctx*/) {
  auto* cmd = app.add_subcommand(
      "score", "Multiple-choice task accuracy of a decoder language model (acc, acc_norm), as lm-eval scores it.");
  cmd->footer(
      "A task file is JSON Lines, one item a line, in one of three shapes (told by the first line's fields):\n"
      "  {\"context\": \"The cat sat on\", \"choices\": [\"the mat.\", \"the idea.\"], \"label\": 0}\n"
      "  HellaSwag rows (ctx_a, ctx_b, activity_label, endings, label), preprocessed as lm-eval does\n"
      "  ARC rows (question, choices {text, label}, answerKey): context \"Question: ...\\nAnswer:\"\n"
      "Each choice continues its context after a space; its log-likelihood is the sum over its tokens, without\n"
      "a BOS (lm-eval's default). acc picks the highest; acc_norm divides each by its choice's characters.\n"
      "Examples:\n"
      "  qjoule score --model MODEL --task hellaswag_val.jsonl --task-limit 500\n"
      "  qjoule score --model MODEL --task arc_easy.jsonl --precision int4:g=32 --json arc-int4.json");
  auto a = std::make_shared<ScoreArgs>();
  cmd->add_option("--model", a->model, "Model folder (config.json, safetensors, tokenizer.json)")
      ->required()
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--task", a->tasks, "Task file (JSON Lines; repeat for several tasks)")->required();
  cmd->add_option("--task-limit", a->limit, "Score only each task's first N items (0, the default: all)")
      ->check(zero_or_range(1, 1e12, "every item"));
  add_quant_options(cmd, a->quant, "*.mlp.*=int4,*.layers.0.*=bf16");
  add_calibration_options(cmd, a->calib.settings);
  cmd->add_option("--json", a->json, "Also write the results, item by item, as JSON to this file ('-' for stdout)");
  cmd->add_option("--device", a->device, kDecoderDeviceHelp)->capture_default_str();
  cmd->add_option("--threads", a->threads, "CPU threads (default: all cores)")->check(in_range(1, kMaxThreads));
  cmd->add_flag("--special-tokens", a->special_tokens,
                "Encode with the tokenizer's special tokens (the BOS its template adds), as lm-eval from 0.4.10 "
                "does by default; without (the default, and bench's task records): as lm-eval's add_bos_token=False");
  cmd->callback([a] {
    default_to_checkpoint_precision(a->quant, a->model);
    run_score(*a);
  });
}

}  // namespace qjoule::cli
