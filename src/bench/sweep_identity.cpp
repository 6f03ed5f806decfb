#include "qjoule/bench/sweep_identity.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "bench/atomic_file.h"
#include "qjoule/bench/bench_runner.h"
#include "qjoule/error.h"

namespace qjoule::bench {
namespace {

void fnv1a(std::uint64_t& h, const char* data, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 0x100000001b3ull;
  }
}

// The first bytes of a safetensors file: its 8-byte header length and the JSON header.
std::string safetensors_header(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  char length_bytes[8] = {};
  if (!in.read(length_bytes, 8))
    fail("{}: cannot read its header (a safetensors file starts with 8 bytes)", path.string());
  std::uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<unsigned char>(length_bytes[i]);
  length = std::min<std::uint64_t>(length, std::uint64_t{100} << 20);  // the reader refuses larger anyway
  std::string header(8 + length, '\0');
  std::copy(length_bytes, length_bytes + 8, header.begin());
  in.read(header.data() + 8, static_cast<std::streamsize>(length));
  header.resize(8 + static_cast<std::size_t>(in.gcount()));
  return header;
}

}  // namespace

std::string model_identity(const std::string& model) {
  if (model == kSyntheticModelName) return "embedded";
  const std::filesystem::path dir(model);
  std::uint64_t h = 0xcbf29ce484222325ull;
  std::ifstream config(dir / "config.json", std::ios::binary);
  if (!config) fail("{}: cannot read config.json to identify the model", model);
  std::stringstream text;
  text << config.rdbuf();
  const std::string config_text = text.str();
  fnv1a(h, config_text.data(), config_text.size());
  std::vector<std::filesystem::path> shards;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (entry.path().extension() == ".safetensors") shards.push_back(entry.path());
  std::sort(shards.begin(), shards.end());
  for (const auto& shard : shards) {
    const std::string name = shard.filename().string();
    fnv1a(h, name.data(), name.size());
    const std::string header = safetensors_header(shard);
    fnv1a(h, header.data(), header.size());
  }
  return fmt::format("{:016x}", h);
}

nlohmann::json sweep_identity(const std::vector<RunConfig>& configs, const std::string& dataset) {
  nlohmann::json models = nlohmann::json::object();
  for (const auto& c : configs)
    if (!models.contains(c.model)) models[c.model] = model_identity(c.model);
  return {{"models", models}, {"dataset", dataset}};
}

void check_sweep_identity(const std::filesystem::path& out_dir, const nlohmann::json& identity) {
  const auto path = out_dir / kSweepIdentityFileName;
  std::error_code ec;
  nlohmann::json stored;
  if (std::filesystem::exists(path, ec)) {
    std::ifstream in(path);
    stored = nlohmann::json::parse(in, nullptr, false);
    if (stored.is_discarded() || !stored.is_object() || !stored.contains("models") || !stored["models"].is_object())
      fail("{}: not a sweep identity (a JSON object with 'models'); remove it or choose another --out", path.string());
    const std::string dataset = stored.value("dataset", std::string());
    if (dataset != identity["dataset"].get<std::string>())
      fail("{}: this sweep scored dataset '{}', this bench '{}'; resume with the same --dataset, or choose another "
           "--out",
           path.string(), dataset, identity["dataset"].get<std::string>());
    std::vector<std::string> then, now;
    for (const auto& [model, id] : stored["models"].items()) then.push_back(model);
    for (const auto& [model, id] : identity["models"].items()) now.push_back(model);
    if (then != now)
      fail("{}: this sweep measured model(s) {}, this bench runs {}; resume with the same models, or choose another "
           "--out",
           path.string(), nlohmann::json(then).dump(), nlohmann::json(now).dump());
    for (const auto& [model, id] : identity["models"].items()) {
      if (stored["models"][model] != id)
        fail("{}: model '{}' has changed since this sweep measured it (config.json and safetensors headers: identity "
             "{} then, {} now); resume with the same checkpoint, or choose another --out",
             path.string(), model, stored["models"][model].is_string() ? stored["models"][model].get<std::string>()
                                                                       : stored["models"][model].dump(),
             id.get<std::string>());
    }
    return;
  }
  detail::write_file_atomically(path, identity.dump(2) + "\n");
}

}  // namespace qjoule::bench
