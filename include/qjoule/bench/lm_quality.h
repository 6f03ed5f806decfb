// A language model's quality in the sweep (`qjoule bench --text FILE`): every decoder run scores the
// text exactly as `qjoule ppl` does (same tokens, same windows: eval/perplexity.h) and compares its
// next-token distributions with the FP32 model's, kept as a KL base (eval/kl_base.h).
//
// The FP32 reference is computed once per model, text and window settings, with the checkpoint's
// weights streamed to FP32 one layer at a time (model::load_decoder_lm_streamed, whose outputs equal
// the FP32 model's), and kept in the results folder as OUT/kl-base/<model identity>-<settings>.qjkl;
// a later run, a `--resume` or a sweep naming it with `--kl-base FILE` reuses it. It is written one
// window at a time (KlBaseWriter), so a sweep killed during it resumes where it stopped; a lock file
// beside it keeps two processes (Slurm array tasks) from computing it twice.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qjoule/bench/run_config.h"
#include "qjoule/bench/run_record.h"

namespace qjoule::model {
class DecoderLM;
}

namespace qjoule::bench {

// Tokens of the text scored unless --max-tokens says otherwise: enough for a perplexity to two
// significant digits, and a reference of 4,095 × vocab × 2 bytes (32 MiB at vocab 4,096; 250 MiB at 32,000).
inline constexpr int64_t kDefaultLmMaxTokens = 4096;

// The folder, inside a sweep's OUT, of its FP32 references.
inline constexpr const char* kKlBaseDirName = "kl-base";

struct LmTextOptions {
  std::string text;                          // "" = no text: decoder runs keep the pseudo-random-prompt fidelity
  int64_t ctx = 0;                           // 0 = min(512, max_position_embeddings)
  int64_t stride = 0;                        // 0 = ctx / 2
  int64_t max_tokens = kDefaultLmMaxTokens;  // 0 = the whole text
  std::vector<std::string> kl_bases;         // --kl-base: FP32 references to use instead of computing them
  double max_ppl_increase_pct = 5.0;         // --max-ppl-increase: flag runs above it (paper table, report)
  // --reference DIR: the unquantized model of the sweep's pre-quantized checkpoints, whose FP32 runs are
  // their references (the text's KL base, encoder and decoder fidelity); "" = none.
  std::string reference;
};

// What one model scores: the tokens, the windows and where its FP32 reference is.
struct LmText {
  std::string model;
  std::vector<int32_t> ids;
  int64_t text_tokens = 0;  // before --max-tokens
  int64_t ctx = 0, stride = 0, windows = 0, scored = 0;
  nlohmann::json identity;          // what a matching KL base says it was computed from
  std::filesystem::path base_path;  // a --kl-base file, or OUT/kl-base/<...>.qjkl
  std::string fp32_model;           // the model the reference is computed from: `model`, or --reference's
  bool base_given = false;          // base_path is a --kl-base file
};

class LmQuality {
 public:
  // `out` is the sweep's folder (its kl-base/ holds the computed references); `note` prints a line.
  LmQuality(LmTextOptions options, std::filesystem::path out, std::function<void(const std::string&)> note);
  ~LmQuality();

  bool enabled() const { return !options_.text.empty(); }
  const LmTextOptions& options() const { return options_; }

  // Checks the options against every configuration before anything runs, each failure one line:
  // --text with an encoder model, a text that cannot be read or is empty, one shorter than a window,
  // a --kl-base of another model, text or window settings, or one that matches no model of the sweep.
  void check(const std::vector<RunConfig>& configs);

  // The tokens and windows of `model` (tokenized once).
  const LmText& text_of(const std::string& model);

  // Makes sure `model`'s FP32 reference exists: a --kl-base file, one computed before, or computed
  // now (progress on stderr, resumed from a partial one) under the reference's lock.
  const LmText& ensure_reference(const std::string& model);

  // Scores `m` (the run's model) over the text against the reference and fills the record's lm_* keys.
  void score(const model::DecoderLM& m, const std::string& model, RunRecord& record);

  // The sweep identity's "text" entry: text, max tokens, ctx, stride (null without --text).
  nlohmann::json sweep_identity_entry() const;

 private:
  LmTextOptions options_;
  std::filesystem::path out_;
  std::function<void(const std::string&)> note_;
  std::optional<std::string> text_bytes_;
  std::map<std::string, LmText> texts_;
  std::set<std::string> announced_;  // models whose reference was named once
};

}  // namespace qjoule::bench
