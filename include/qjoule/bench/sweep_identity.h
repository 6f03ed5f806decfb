// What a results folder was measured on, kept next to its results (OUT/sweep-identity.json) so that
// `bench --resume` never mixes runs of another checkpoint or dataset into a sweep: each model's
// identity (its path and a content hash of config.json and every safetensors header, so a checkpoint
// rewritten in place is noticed too) and the dataset scored.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "qjoule/bench/run_config.h"

namespace qjoule::bench {

inline constexpr const char* kSweepIdentityFileName = "sweep-identity.json";

// "embedded" for the embedded model; else 16 hex digits of FNV-1a over config.json and the checkpoint's
// tensors as the safetensors reader parsed them (name, file, dtype, shape, size). A folder that cannot
// be read fails naming it.
std::string model_identity(const std::string& model);

// 16 hex digits of FNV-1a over `bytes` (the identity of a text, of window settings).
std::string content_hash(std::string_view bytes);

// {"models": {model: identity, ...}, "dataset": dataset, "text": text, "reference": {DIR: identity},
// "calibration": calibration, "tasks": tasks} for these configurations; `text` is the language-model text
// scored (LmQuality::sweep_identity_entry), null without --text; `reference` the unquantized model of
// pre-quantized ones (--reference), absent without; `calibration` the calibration text and sizes
// (calibration_identity_entry), null without --calib; `tasks` the task files with their hashes and
// --task-limit (TaskAccuracy::sweep_identity_entry), null without --task.
nlohmann::json sweep_identity(const std::vector<RunConfig>& configs, const std::string& dataset,
                              const nlohmann::json& text = nullptr, const std::string& reference = "",
                              const nlohmann::json& calibration = nullptr, const nlohmann::json& tasks = nullptr);

// OUT/sweep-identity.json as written, checked (an object with 'models', a string 'dataset' if any; else
// one line naming the file), or nullopt when the folder has none.
std::optional<nlohmann::json> read_sweep_identity(const std::filesystem::path& out_dir);

// Writes `identity` to OUT/sweep-identity.json when the folder has none (a new sweep, or one started
// before this file existed); otherwise compares: other models, a model whose checkpoint changed, or
// another dataset, another language-model text or window settings, or another --reference fails with
// one line saying what differs.
void check_sweep_identity(const std::filesystem::path& out_dir, const nlohmann::json& identity);

}  // namespace qjoule::bench
