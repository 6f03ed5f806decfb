#include "qjoule/bench/sweep_identity.h"

#include <cstdint>
#include <fstream>
#include <functional>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "io/atomic_file.h"
#include "qjoule/bench/bench_runner.h"
#include "qjoule/error.h"
#include "qjoule/io/dtype.h"
#include "qjoule/io/safetensors.h"
#include "tokenize/file_bytes.h"

namespace qjoule::bench {
namespace {

void fnv1a(std::uint64_t& h, std::string_view bytes) {
  for (const char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
}

}  // namespace

std::string model_identity(const std::string& model) {
  if (model == kSyntheticModelName) return "embedded";
  std::uint64_t h = 0xcbf29ce484222325ull;
  fnv1a(h, tokenize::read_file_bytes(std::filesystem::path(model) / "config.json", "model config"));
  // The safetensors headers as the reader parsed them: each tensor's name, file, dtype, shape and size.
  const auto ck = io::Checkpoint::open(model);
  for (const auto& [name, t] : ck.tensors())
    fnv1a(h, fmt::format("{}|{}|{}|{}|{};", name, t.file.filename().string(), io::dtype_name(t.dtype), t.shape_string(),
                         t.nbytes));
  return fmt::format("{:016x}", h);
}

std::string content_hash(std::string_view bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  fnv1a(h, bytes);
  return fmt::format("{:016x}", h);
}

nlohmann::json sweep_identity(const std::vector<RunConfig>& configs, const std::string& dataset,
                              const nlohmann::json& text, const std::string& reference,
                              const nlohmann::json& calibration, const nlohmann::json& tasks) {
  nlohmann::json models = nlohmann::json::object();
  for (const auto& c : configs)
    if (!models.contains(c.model)) models[c.model] = model_identity(c.model);
  nlohmann::json identity = {{"models", models}, {"dataset", dataset}};
  if (!text.is_null()) identity["text"] = text;
  if (!reference.empty()) identity["reference"] = {{reference, model_identity(reference)}};
  if (!calibration.is_null()) identity["calibration"] = calibration;
  if (!tasks.is_null()) identity["tasks"] = tasks;
  return identity;
}

std::optional<nlohmann::json> read_sweep_identity(const std::filesystem::path& out_dir) {
  const auto path = out_dir / kSweepIdentityFileName;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  std::ifstream in(path);
  nlohmann::json stored = nlohmann::json::parse(in, nullptr, false);
  if (stored.is_discarded() || !stored.is_object() || !stored.contains("models") || !stored["models"].is_object())
    fail("{}: not a sweep identity (a JSON object with 'models'); remove it or choose another --out", path.string());
  if (stored.contains("dataset") && !stored["dataset"].is_string())
    fail("{}: 'dataset' is {}, expected a string; remove the file or choose another --out", path.string(),
         stored["dataset"].dump());
  return stored;
}

void check_sweep_identity(const std::filesystem::path& out_dir, const nlohmann::json& identity) {
  const auto path = out_dir / kSweepIdentityFileName;
  if (const auto read = read_sweep_identity(out_dir)) {
    const nlohmann::json& stored = *read;
    const std::string dataset = stored.value("dataset", std::string());
    if (dataset != identity["dataset"].get<std::string>())
      fail(
          "{}: this sweep scored dataset '{}', this bench '{}'; resume with the same --dataset, or choose another "
          "--out",
          path.string(), dataset, identity["dataset"].get<std::string>());
    // Entries absent from a sweep without their flag (and from folders older than them) read as null.
    // `what`: the sweep's verb ("compared with"), its last word repeated for this bench ("with").
    const auto same = [&](const char* key, const std::string& what, const std::string& flags,
                          const std::function<std::string(const nlohmann::json&)>& describe) {
      const nlohmann::json then = stored.contains(key) ? stored[key] : nlohmann::json(nullptr);
      const nlohmann::json now = identity.contains(key) ? identity[key] : nlohmann::json(nullptr);
      const std::string with = what.ends_with(" with") ? "with " : "";
      if (then != now)
        fail("{}: this sweep {} {}, this bench {}{}; resume with the same {}, or choose another --out", path.string(),
             what, describe(then), with, describe(now), flags);
    };
    same("text", "scored", "--text, --max-tokens, --ctx and --stride",
         [](const nlohmann::json& t) { return t.is_null() ? std::string("no --text") : "--text " + t.dump(); });
    same("reference", "compared with", "--reference (and checkpoint)", [](const nlohmann::json& r) {
      return r.is_object() && !r.empty() ? "--reference " + r.begin().key() + " (identity " + r.begin()->dump() + ")"
                                         : std::string("no --reference");
    });
    same("calibration", "calibrated with", "--calib, --calib-sequences, --calib-tokens and --calib-damp",
         [](const nlohmann::json& c) { return c.is_null() ? std::string("no --calib") : "--calib " + c.dump(); });
    same("tasks", "scored", "--task and --task-limit",
         [](const nlohmann::json& t) { return t.is_null() ? std::string("no --task") : "--task " + t.dump(); });
    std::vector<std::string> then, now;
    for (const auto& [model, id] : stored["models"].items()) then.push_back(model);
    for (const auto& [model, id] : identity["models"].items()) now.push_back(model);
    if (then != now)
      fail(
          "{}: this sweep measured model(s) {}, this bench runs {}; resume with the same models, or choose another "
          "--out",
          path.string(), nlohmann::json(then).dump(), nlohmann::json(now).dump());
    for (const auto& [model, id] : identity["models"].items()) {
      if (stored["models"][model] != id)
        fail(
            "{}: model '{}' has changed since this sweep measured it (config.json and safetensors headers: identity "
            "{} then, {} now); resume with the same checkpoint, or choose another --out",
            path.string(), model,
            stored["models"][model].is_string() ? stored["models"][model].get<std::string>()
                                                : stored["models"][model].dump(),
            id.get<std::string>());
    }
    return;
  }
  io::write_file_atomically(path, identity.dump(2) + "\n");
}

}  // namespace qjoule::bench
