#include "qjoule/model/calibration/calibrated_int4_file.h"

#include <cstring>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "qjoule/error.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/quant/format_spec.h"

namespace qjoule::model {
namespace {

constexpr const char* kKind = "qjoule calibrated int4";

template <class Block>
std::string layout_of() {
  return fmt::format("int4:g={}:{}", Block::kSize,
                     std::is_same_v<Block, quant::BlockInt4Asym<Block::kSize>> ? "asym" : "sym");
}

std::span<const std::byte> bytes_of(const std::vector<float>& v) { return std::as_bytes(std::span<const float>(v)); }

// Int4Codes for `layout` with `rows` × `cols` from the block bytes `data`; empty where no alternative fits.
template <std::size_t I = 0>
bool codes_from(const std::string& layout, int64_t rows, int64_t cols, const io::TensorView& t, Int4Codes& out) {
  if constexpr (I < std::variant_size_v<Int4Codes>) {
    using Matrix = std::variant_alternative_t<I, Int4Codes>;
    using Block = typename decltype(Matrix::blocks)::value_type;
    if (layout == layout_of<Block>()) {
      Matrix m;
      m.rows = rows, m.cols = cols;
      m.blocks.resize(static_cast<std::size_t>(rows * m.blocks_per_row()));
      if (t.nbytes != m.bytes()) return false;
      std::memcpy(m.blocks.data(), t.data, t.nbytes);
      out = std::move(m);
      return true;
    }
    return codes_from<I + 1>(layout, rows, cols, t, out);
  } else {
    return false;
  }
}

std::vector<float> floats_of(const io::TensorView& t) {
  std::vector<float> v(t.nbytes / sizeof(float));
  std::memcpy(v.data(), t.data, v.size() * sizeof(float));
  return v;
}

}  // namespace

void write_calibrated_int4(const std::filesystem::path& path, const CalibratedInt4& c, const std::string& identity) {
  nlohmann::json linears = nlohmann::json::object(), norms = nlohmann::json::array(),
                 fp32_linears = nlohmann::json::array();
  std::vector<io::TensorToWrite> tensors;
  for (const auto& [name, codes] : c.codes) {
    std::visit(
        [&](const auto& m) {
          using Block = typename std::decay_t<decltype(m.blocks)>::value_type;
          linears[name] = {{"layout", layout_of<Block>()},
                           {"rows", m.rows},
                           {"cols", m.cols},
                           {"a8", c.int8_activations.count(name) != 0}};
          tensors.push_back({name + ".blocks",
                             io::DType::U8,
                             {static_cast<int64_t>(m.bytes())},
                             std::as_bytes(std::span<const Block>(m.blocks))});
        },
        codes);
  }
  for (const auto& [name, bias] : c.biases)
    tensors.push_back({name + ".bias", io::DType::F32, {static_cast<int64_t>(bias.size())}, bytes_of(bias)});
  for (const auto& [name, norm] : c.norms) {
    norms.push_back(name);
    tensors.push_back(
        {name + ".weight", io::DType::F32, {static_cast<int64_t>(norm.gamma.size())}, bytes_of(norm.gamma)});
    if (!norm.beta.empty())
      tensors.push_back(
          {name + ".bias", io::DType::F32, {static_cast<int64_t>(norm.beta.size())}, bytes_of(norm.beta)});
  }
  for (const auto& [name, w] : c.fp32_weights) {  // a mixture's router with AWQ's scales
    fp32_linears.push_back(name);
    tensors.push_back({name + ".weight", io::DType::F32, {static_cast<int64_t>(w.size())}, bytes_of(w)});
  }
  const nlohmann::json meta = {{"method", c.method},
                               {"sequences", c.sequences},
                               {"tokens", c.tokens},
                               {"tokens_per_sequence", c.tokens_per_sequence},
                               {"damp", c.damp},
                               {"bf16_products", c.bf16_products},
                               {"seconds", c.seconds},
                               {"linears", linears},
                               {"norms", norms},
                               {"round_to_nearest", c.round_to_nearest},
                               {"fp32_linears", fp32_linears}};
  std::filesystem::create_directories(path.parent_path());
  const auto tmp = path.string() + ".tmp";
  io::write_safetensors(tmp, tensors, {{"kind", kKind}, {"identity", identity}, {"calibration", meta.dump()}});
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) fail("{}: cannot rename to {}: {}", tmp, path.string(), ec.message());
}

CalibratedInt4 read_calibrated_int4(const std::filesystem::path& path, const std::string& identity) {
  const auto file = io::SafetensorsFile::open(path);
  const auto& md = file.metadata();
  const auto field = [&](const char* key) -> const std::string& {
    const auto it = md.find(key);
    if (it == md.end())
      fail("{}: no '{}' in its metadata; expected a file qjoule's calibration wrote", path.string(), key);
    return it->second;
  };
  if (field("kind") != kKind) fail("{}: kind '{}'; expected '{}'", path.string(), field("kind"), kKind);
  if (field("identity") != identity)
    fail("{}: calibrated from {}; expected {}", path.string(), field("identity"), identity);
  const auto meta = nlohmann::json::parse(field("calibration"), nullptr, false);
  CalibratedInt4 c;
  try {
    c.method = meta.at("method").get<std::string>();
    c.sequences = meta.at("sequences").get<int64_t>();
    c.tokens_per_sequence = meta.at("tokens_per_sequence").get<int64_t>();
    c.tokens = meta.value("tokens", c.sequences * c.tokens_per_sequence);  // files before encoders: windows
    c.damp = meta.at("damp").get<double>();
    c.bf16_products = meta.value("bf16_products", false);
    c.seconds = meta.at("seconds").get<double>();
    c.round_to_nearest = meta.value("round_to_nearest", std::set<std::string>{});  // files before mixtures: none
    const auto tensor = [&](const std::string& name) -> const io::TensorView& {
      const auto it = file.tensors().find(name);
      if (it == file.tensors().end()) fail("{}: tensor '{}' is missing", path.string(), name);
      return it->second;
    };
    for (const auto& [name, l] : meta.at("linears").items()) {
      Int4Codes codes;
      if (!codes_from(l.at("layout").get<std::string>(), l.at("rows").get<int64_t>(), l.at("cols").get<int64_t>(),
                      tensor(name + ".blocks"), codes))
        fail("{}: '{}.blocks' does not hold {} × {} blocks of {}", path.string(), name, l.at("rows").dump(),
             l.at("cols").dump(), l.at("layout").dump());
      c.codes.emplace(name, std::move(codes));
      if (l.at("a8").get<bool>()) c.int8_activations.insert(name);
      if (file.tensors().count(name + ".bias") != 0) c.biases.emplace(name, floats_of(tensor(name + ".bias")));
    }
    for (const auto& n : meta.at("norms")) {
      const auto name = n.get<std::string>();
      LayerNormParams p{name, floats_of(tensor(name + ".weight")), {}};
      if (file.tensors().count(name + ".bias") != 0) p.beta = floats_of(tensor(name + ".bias"));
      c.norms.emplace(name, std::move(p));
    }
    for (const auto& n : meta.value("fp32_linears", nlohmann::json::array()))  // files before AWQ on mixtures: none
      c.fp32_weights.emplace(n.get<std::string>(), floats_of(tensor(n.get<std::string>() + ".weight")));
  } catch (const nlohmann::json::exception& e) {
    fail("{}: calibration metadata: {}; expected the fields qjoule's calibration writes", path.string(), e.what());
  }
  return c;
}

}  // namespace qjoule::model
