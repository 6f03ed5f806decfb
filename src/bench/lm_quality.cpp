#include "qjoule/bench/lm_quality.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "bench/file_lock.h"
#include "bench/progress_line.h"
#include "qjoule/bench/bench_runner.h"
#include "qjoule/bench/sweep_identity.h"
#include "qjoule/error.h"
#include "qjoule/eval/kl_base.h"
#include "qjoule/eval/perplexity.h"
#include "qjoule/eval/text_file.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/model/decoder_config.h"
#include "qjoule/model/decoder_lm.h"
#include "qjoule/tokenize/bpe_tokenizer.h"

namespace qjoule::bench {
namespace fs = std::filesystem;
namespace {

// "1 min 20 s", "35 s".
std::string duration_text(double seconds) {
  const auto s = static_cast<long long>(std::llround(std::max(0.0, seconds)));
  if (s < 60) return fmt::format("{} s", s);
  if (s < 3600) return fmt::format("{} min {} s", s / 60, s % 60);
  return fmt::format("{} h {} min", s / 3600, (s % 3600) / 60);
}

// Why `base` is not the reference of `t`, or "" when it is (`any_model`: whatever model it names, as
// for a pre-quantized checkpoint, whose reference is its unquantized model's).
std::string mismatch(const LmText& t, const eval::KlBase& base, bool any_model = false) {
  if (!base.identity.empty() && !any_model) {
    const auto id = nlohmann::json::parse(base.identity, nullptr, false);
    if (id.is_object() && id.contains("model_identity") && id["model_identity"] != t.identity["model_identity"])
      return fmt::format(
          "computed for another model (identity {}{}), not '{}' (identity {})",
          id["model_identity"].is_string() ? id["model_identity"].get<std::string>() : id["model_identity"].dump(),
          id.contains("model") && id["model"].is_string() ? ", " + id["model"].get<std::string>() : "", t.model,
          t.identity["model_identity"].get<std::string>());
  }
  if (base.vocab_size != t.identity["vocab"].get<int64_t>())
    return fmt::format("written for a vocabulary of {} tokens, but model '{}' has {}", base.vocab_size, t.model,
                       t.identity["vocab"].get<int64_t>());
  if (base.ctx != t.ctx || base.stride != t.stride)
    return fmt::format("written with --ctx {} --stride {}, but this sweep uses --ctx {} --stride {}", base.ctx,
                       base.stride, t.ctx, t.stride);
  if (base.token_ids != t.ids) {
    if (base.token_ids.size() != t.ids.size())
      return fmt::format("written over {} tokens, but this sweep's text has {} (another text or --max-tokens?)",
                         base.token_ids.size(), t.ids.size());
    const auto diff = std::mismatch(t.ids.begin(), t.ids.end(), base.token_ids.begin());
    return fmt::format("token {} differs (base id {}, this sweep's text {}): another text or tokenizer",
                       diff.first - t.ids.begin(), *diff.second, *diff.first);
  }
  if (base.scored != t.scored) return fmt::format("scores {} tokens, this sweep {}", base.scored, t.scored);
  return "";
}

}  // namespace

LmQuality::LmQuality(LmTextOptions options, fs::path out, std::function<void(const std::string&)> note)
    : options_(std::move(options)), out_(std::move(out)), note_(std::move(note)) {}
LmQuality::~LmQuality() = default;

nlohmann::json LmQuality::sweep_identity_entry() const {
  if (!enabled()) return nullptr;
  return {
      {"text", options_.text}, {"max_tokens", options_.max_tokens}, {"ctx", options_.ctx}, {"stride", options_.stride}};
}

const LmText& LmQuality::text_of(const std::string& model) {
  if (const auto found = texts_.find(model); found != texts_.end()) return found->second;
  if (!text_bytes_) text_bytes_ = eval::read_text_file(options_.text, "--text");
  const auto checkpoint = io::Checkpoint::open(model);
  const auto config = model::load_decoder_config(model, checkpoint);
  const auto tokenizer = tokenize::BpeTokenizer::from_tokenizer_json(model);
  if (tokenizer.vocab_size() > config.vocab_size)
    fail("{}: the tokenizer has {} tokens but the model's vocabulary only {}", model, tokenizer.vocab_size(),
         config.vocab_size);
  LmText t;
  t.model = model;
  // A pre-quantized checkpoint's FP32 reference is its unquantized model's (--reference), over the
  // same tokens: named after that model, so that a bench of it and this one share one file.
  const bool from_reference = config.quantization && !options_.reference.empty();
  t.fp32_model = from_reference ? options_.reference : model;
  t.ids = tokenizer.encode(*text_bytes_, /*add_special_tokens=*/true);
  t.text_tokens = static_cast<int64_t>(t.ids.size());
  if (options_.max_tokens > 0 && t.text_tokens > options_.max_tokens)
    t.ids.resize(static_cast<size_t>(options_.max_tokens));
  t.ctx = options_.ctx > 0 ? options_.ctx : std::min<int64_t>(512, config.max_positions);
  if (t.ctx > config.max_positions)
    fail("--ctx {} is beyond model '{}''s max_position_embeddings = {}", t.ctx, model, config.max_positions);
  t.stride = options_.stride > 0 ? options_.stride : std::max<int64_t>(1, t.ctx / 2);
  if (t.stride > t.ctx) fail("--stride {} is out of range, expected 1 to --ctx ({})", t.stride, t.ctx);
  const auto n = static_cast<int64_t>(t.ids.size());
  if (n < t.ctx)
    fail(
        "--text {}: {} tokens with model '{}''s tokenizer{}, shorter than one window of --ctx {} tokens; give a "
        "longer text or a smaller --ctx",
        options_.text, n, model,
        n < t.text_tokens ? fmt::format(" (--max-tokens {} of {})", options_.max_tokens, t.text_tokens) : "", t.ctx);
  const auto windows = eval::perplexity_windows(n, t.ctx, t.stride);
  t.windows = static_cast<int64_t>(windows.size());
  for (const auto& w : windows) t.scored += w.end - w.score_from;
  t.identity = {{"model", t.fp32_model},
                {"model_identity", model_identity(t.fp32_model)},
                {"vocab", config.vocab_size},
                {"text", options_.text},
                {"text_hash", content_hash(*text_bytes_)},
                {"tokens", n},
                {"ctx", t.ctx},
                {"stride", t.stride},
                {"computed_by", "qjoule bench --text: FP32, weights streamed one layer at a time"}};

  // A --kl-base of this model, else the sweep's own reference. A pre-quantized checkpoint has no FP32
  // weights: its reference is a --kl-base of its unquantized model over the same tokens.
  for (const auto& given : options_.kl_bases) {
    if (t.base_given) break;
    const auto base = eval::read_kl_base(given, "--kl-base");
    const auto id = base.identity.empty() ? nlohmann::json() : nlohmann::json::parse(base.identity, nullptr, false);
    const bool same_model = config.quantization && !from_reference ? mismatch(t, base, /*any_model=*/true).empty()
                            : id.is_object() && id.contains("model_identity")
                                ? id["model_identity"] == t.identity["model_identity"]
                                : options_.kl_bases.size() == 1;  // a base without identity: the only one given
    if (!same_model) continue;
    if (const auto why = mismatch(t, base, config.quantization && !from_reference); !why.empty())
      fail("--kl-base {}: {}", given, why);
    t.base_path = given;
    t.base_given = true;
  }
  if (config.quantization && !t.base_given && !from_reference)
    fail(
        "--text {}: model '{}' is a pre-quantized checkpoint ({}) with no FP32 weights to compute the reference "
        "from; give --reference DIR, its unquantized model, or --kl-base FILE, the FP32 reference of that model "
        "over the same text and windows (qjoule ppl --save-kl-base, or OUT/kl-base/ of a bench of that model)",
        options_.text, model, config.quantization->describe());
  if (!t.base_given) {
    const std::string settings = content_hash(fmt::format("{}|{}|{}|{}|{}", t.identity["text_hash"].get<std::string>(),
                                                          n, t.ctx, t.stride, config.vocab_size));
    t.base_path = out_ / kKlBaseDirName /
                  fmt::format("{}-{}.qjkl", t.identity["model_identity"].get<std::string>(), settings.substr(0, 8));
  }
  return texts_.emplace(model, std::move(t)).first->second;
}

void LmQuality::check(const std::vector<RunConfig>& configs) {
  if (!enabled()) return;
  std::set<std::string> models;
  for (const auto& c : configs) {
    if (!models.insert(c.model).second) continue;
    if (!is_decoder_model(c.model))
      fail(
          "--text {}: model '{}' is not a decoder language model; --text scores decoders (Llama, Qwen2, GPT-2), an "
          "encoder classifier's accuracy comes from --dataset",
          options_.text, c.model);
    text_of(c.model);
  }
  for (const auto& given : options_.kl_bases) {
    bool used = false;
    for (const auto& model : models)
      used = used || (texts_.at(model).base_given && texts_.at(model).base_path == given);
    if (!used) {
      const auto base = eval::read_kl_base(given, "--kl-base");
      const auto id = base.identity.empty() ? nlohmann::json() : nlohmann::json::parse(base.identity, nullptr, false);
      fail(
          "--kl-base {}: computed for {}, which is none of this sweep's models ({}); give the FP32 reference of "
          "the model measured",
          given,
          id.is_object() && id.contains("model_identity")
              ? fmt::format("model identity {}{}", id["model_identity"].dump(),
                            id.contains("model") ? " (" + id["model"].dump() + ")" : "")
              : std::string("a model it does not name (a version-1 base, given with others)"),
          [&] {
            std::string list;
            for (const auto& model : models)
              list += fmt::format("{}'{}' identity {}", list.empty() ? "" : ", ", model,
                                  texts_.at(model).identity["model_identity"].get<std::string>());
            return list;
          }());
    }
  }
}

const LmText& LmQuality::ensure_reference(const std::string& model) {
  const LmText& t = text_of(model);
  const auto announce = [&](const char* how) {
    if (announced_.insert(model).second)
      note_(fmt::format("FP32 reference for '{}': {} {} (not computed again)\n", model, how, t.base_path.string()));
  };
  if (t.base_given) {
    announce("--kl-base");
    return t;
  }
  const auto reuse = [&]() -> bool {
    std::error_code ec;
    if (!fs::is_regular_file(t.base_path, ec)) return false;
    try {
      const auto base = eval::read_kl_base(t.base_path, "FP32 reference");
      const auto why = mismatch(t, base);
      if (why.empty()) return true;
      note_(fmt::format("FP32 reference {}: {}; computing it again", t.base_path.string(), why));
    } catch (const Error& e) {
      note_(fmt::format("{}; computing it again", e.what()));
    }
    return false;
  };
  if (reuse()) {
    announce("computed before,");
    return t;
  }
  fs::create_directories(t.base_path.parent_path());
  const detail::FileLock lock(t.base_path.string() + ".lock", [&] {
    note_(fmt::format("FP32 reference for '{}': another process is computing {}; waiting for it", model,
                      t.base_path.string()));
  });
  if (reuse()) {  // computed while this one waited
    announce("computed by another process,");
    return t;
  }

  eval::KlBase header;
  header.vocab_size = static_cast<int32_t>(t.identity["vocab"].get<int64_t>());
  header.ctx = t.ctx;
  header.stride = t.stride;
  header.token_ids = t.ids;
  header.scored = t.scored;
  header.identity = t.identity.dump();
  eval::KlBaseWriter writer(t.base_path, header, "FP32 reference");
  const int64_t resumed_windows = writer.windows_done(), resumed_tokens = writer.scored_done();
  note_(fmt::format(
      "FP32 reference for '{}' (computed once per sweep): {} tokens of {} in {} windows of {} (stride {}), {} "
      "scored, FP32 weights streamed one layer at a time -> {}{}",
      t.fp32_model == model ? model : fmt::format("{}' from --reference '{}", model, t.fp32_model), t.ids.size(),
      options_.text, t.windows, t.ctx, t.stride, t.scored, t.base_path.string(),
      resumed_windows > 0
          ? fmt::format("; resuming after window {} ({} tokens already scored)", resumed_windows, resumed_tokens)
          : ""));
  detail::ProgressLine progress;
  eval::PerplexityOptions opts;
  opts.ctx = t.ctx;
  opts.stride = t.stride;
  opts.first_window = resumed_windows;
  opts.fp16_log_probs = true;
  opts.on_window = [&](const eval::ScoredWindow& w) {
    writer.append_window(w.index, w.fp16_log_probs, w.scored, w.nll_sum);
    const double elapsed = progress.elapsed();
    const int64_t done = w.scored_before + w.scored;
    // Every window runs ctx tokens whatever it scores: the time left goes by windows.
    const double per_window = elapsed / static_cast<double>(w.index + 1 - resumed_windows);
    progress.update(fmt::format("  FP32 reference: window {}/{}, {}/{} tokens scored, {}, ETA {}", w.index + 1,
                                w.windows, done, t.scored, duration_text(elapsed),
                                duration_text(per_window * static_cast<double>(w.windows - w.index - 1))),
                    w.index + 1 == w.windows);
  };
  const model::DecoderLM fp32 = model::load_decoder_lm_streamed(t.fp32_model);
  if (resumed_windows < t.windows) eval::evaluate_perplexity(fp32, t.ids, opts);
  writer.finish();
  const double seconds = progress.elapsed();
  note_(fmt::format("FP32 reference for '{}': done in {} (PPL {:.4f}) -> {}\n", model, duration_text(seconds),
                    std::exp(writer.nll_done() / static_cast<double>(t.scored)), t.base_path.string()));
  announced_.insert(model);
  return t;
}

void LmQuality::score(const model::DecoderLM& m, const std::string& model, RunRecord& r) {
  const LmText& t = ensure_reference(model);
  const auto base = eval::read_kl_base(t.base_path, t.base_given ? "--kl-base" : "FP32 reference");
  eval::PerplexityOptions opts;
  opts.ctx = t.ctx;
  opts.stride = t.stride;
  opts.kl_base = &base;
  const auto p = eval::evaluate_perplexity(m, t.ids, opts);
  r.lm_text = options_.text;
  r.lm_text_tokens = t.ids.size();
  r.lm_ctx = static_cast<std::size_t>(t.ctx);
  r.lm_stride = static_cast<std::size_t>(t.stride);
  r.lm_scored_tokens = static_cast<std::size_t>(p.scored);
  r.lm_ppl = p.ppl();
  r.lm_ppl_stderr = p.ppl_stderr();
  r.lm_nll_mean = p.nll_mean();
  r.lm_base_ppl = p.kl.base_ppl;
  r.lm_delta_ppl = p.kl.delta_ppl;
  r.lm_delta_ppl_stderr = p.kl.delta_ppl_stderr;
  r.lm_kl_stderr = p.kl.kl_stderr;
  r.lm_kl_mean = p.kl.mean_kl;
  r.lm_kl_median = p.kl.median_kl;
  r.lm_kl_p99 = p.kl.p99_kl;
  r.lm_kl_max = p.kl.max_kl;
  r.lm_same_top_rate = p.kl.top1_agreement;
  r.lm_rms_dp = p.kl.rms_dp;
  r.lm_kl_base = t.base_path.string();
  r.notes.push_back(fmt::format(
      "lm_*: {} tokens of {} ({} of {} with --max-tokens {}) scored in windows of {} every {} tokens as qjoule ppl "
      "does, {:.1f} s; KL against the FP32 reference {}",
      p.scored, options_.text, t.ids.size(), t.text_tokens, options_.max_tokens, t.ctx, t.stride, p.seconds,
      t.base_path.string()));
}

}  // namespace qjoule::bench
