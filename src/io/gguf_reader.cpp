#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "qjoule/error.h"
#include "qjoule/io/gguf.h"

namespace qjoule::io {
namespace {

// A cursor over the mapped file: every read checked against its end, failing with one line that names
// the file, the item being read and its offset.
class Cursor {
 public:
  Cursor(const std::byte* data, uint64_t size, std::string file) : data_(data), size_(size), file_(std::move(file)) {}

  template <class T>
  T get(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  std::string string(const std::string& what) {
    const auto n = get<uint64_t>(what + " length");
    need(n, what);
    std::string s(reinterpret_cast<const char*>(data_ + at_), n);
    at_ += n;
    return s;
  }
  void need(uint64_t n, const std::string& what) const {
    if (n > size_ - at_) fail("{}: {} at byte {} needs {} bytes, but the file ends at {}", file_, what, at_, n, size_);
  }
  uint64_t at() const { return at_; }
  const std::string& file() const { return file_; }

 private:
  const std::byte* data_;
  uint64_t size_;
  uint64_t at_ = 0;
  std::string file_;
};

nlohmann::json value(Cursor& c, uint32_t type, const std::string& what, int depth) {
  switch (static_cast<GgufValueType>(type)) {
    case GgufValueType::u8: return c.get<uint8_t>(what);
    case GgufValueType::i8: return c.get<int8_t>(what);
    case GgufValueType::u16: return c.get<uint16_t>(what);
    case GgufValueType::i16: return c.get<int16_t>(what);
    case GgufValueType::u32: return c.get<uint32_t>(what);
    case GgufValueType::i32: return c.get<int32_t>(what);
    case GgufValueType::f32: return c.get<float>(what);
    case GgufValueType::boolean: {
      const auto b = c.get<uint8_t>(what);
      if (b > 1) fail("{}: {} is a boolean of value {}, expected 0 or 1", c.file(), what, b);
      return b == 1;
    }
    case GgufValueType::string: return c.string(what);
    case GgufValueType::u64: return c.get<uint64_t>(what);
    case GgufValueType::i64: return c.get<int64_t>(what);
    case GgufValueType::f64: return c.get<double>(what);
    case GgufValueType::array: {
      if (depth > 0) fail("{}: {} is an array of arrays, which qjoule does not read", c.file(), what);
      const auto element = c.get<uint32_t>(what + " element type");
      const auto count = c.get<uint64_t>(what + " count");
      c.need(count, what + fmt::format(" ({} elements)", count));  // at least a byte each
      nlohmann::json a = nlohmann::json::array();
      for (uint64_t i = 0; i < count; ++i) a.push_back(value(c, element, what, depth + 1));
      return a;
    }
  }
  fail("{}: {} has value type {}, expected 0 to 12", c.file(), what, type);
}

}  // namespace

GgufFile read_gguf(const std::filesystem::path& path) {
  GgufFile g;
  g.file = std::make_shared<MappedFile>(path);
  Cursor c(g.file->data(), g.file->size(), path.string());
  const auto magic = c.get<uint32_t>("the magic");
  if (magic != kGgufMagic)
    fail("{}: not a GGUF file (magic {:#010x}, expected 0x46554747 \"GGUF\")", path.string(), magic);
  g.version = c.get<uint32_t>("the version");
  if (g.version != 2 && g.version != 3) fail("{}: GGUF version {}, expected 2 or 3", path.string(), g.version);
  const auto tensor_count = c.get<uint64_t>("the tensor count");
  const auto metadata_count = c.get<uint64_t>("the metadata count");
  c.need(metadata_count, fmt::format("{} metadata entries", metadata_count));
  for (uint64_t i = 0; i < metadata_count; ++i) {
    const std::string key = c.string(fmt::format("metadata key {}", i));
    const auto type = c.get<uint32_t>("metadata '" + key + "' type");
    if (g.metadata.count(key) != 0) fail("{}: metadata '{}' appears twice", path.string(), key);
    g.metadata[key] = value(c, type, "metadata '" + key + "'", 0);
  }
  uint64_t alignment = kGgufAlignment;
  if (const auto it = g.metadata.find("general.alignment"); it != g.metadata.end()) {
    if (!it->second.is_number_unsigned() || it->second.get<uint64_t>() == 0 ||
        (it->second.get<uint64_t>() & (it->second.get<uint64_t>() - 1)) != 0)
      fail("{}: general.alignment = {}, expected a power of two", path.string(), it->second.dump());
    alignment = it->second.get<uint64_t>();
  }
  c.need(tensor_count, fmt::format("{} tensor infos", tensor_count));
  std::vector<GgufTensor> infos;
  std::vector<uint64_t> offsets;
  for (uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensor t;
    t.name = c.string(fmt::format("tensor {} name", i));
    const auto dims = c.get<uint32_t>("tensor '" + t.name + "' dimensions");
    if (dims == 0 || dims > 4) fail("{}: tensor '{}' has {} dimensions, expected 1 to 4", path.string(), t.name, dims);
    int64_t rows = 1;
    for (uint32_t d = 0; d < dims; ++d) {
      const auto n = c.get<uint64_t>("tensor '" + t.name + "' shape");
      if (n == 0 || n > (uint64_t{1} << 40))
        fail("{}: tensor '{}' has dimension {} = {}, expected 1 to 2^40", path.string(), t.name, d, n);
      t.ne.push_back(static_cast<int64_t>(n));
      if (d > 0) {
        if (rows > (int64_t{1} << 40) / static_cast<int64_t>(n))
          fail("{}: tensor '{}' has more than 2^40 rows", path.string(), t.name);
        rows *= static_cast<int64_t>(n);
      }
    }
    // At most 2^48 weights (ggml_tensor_bytes' products stay far below 2^64).
    if (t.ne[0] > (int64_t{1} << 48) / rows)
      fail("{}: tensor '{}' has {} × {} weights, more than 2^48", path.string(), t.name, t.ne[0], rows);
    const auto type = c.get<uint32_t>("tensor '" + t.name + "' type");
    t.type = static_cast<GgmlType>(type);
    if (t.type != GgmlType::f32 && t.type != GgmlType::f16 && t.type != GgmlType::bf16 && t.type != GgmlType::q4_0 &&
        t.type != GgmlType::mxfp4 && t.type != GgmlType::nvfp4)
      fail(
          "{}: tensor '{}' has ggml type {}; qjoule reads F32 (0), F16 (1), Q4_0 (2), BF16 (30), MXFP4 (39) and NVFP4 "
          "(40)",
          path.string(), t.name, type);
    t.nbytes = ggml_tensor_bytes(t.type, t.ne[0], rows, t.name);
    offsets.push_back(c.get<uint64_t>("tensor '" + t.name + "' offset"));
    infos.push_back(std::move(t));
  }
  const uint64_t data_start = (c.at() + alignment - 1) / alignment * alignment;
  if (data_start > g.file->size() && tensor_count > 0)
    fail("{}: the tensor data would start at byte {}, past the end of the file ({})", path.string(), data_start,
         g.file->size());
  const uint64_t data_size = g.file->size() - std::min<uint64_t>(data_start, g.file->size());
  std::vector<std::size_t> by_offset(infos.size());
  for (std::size_t i = 0; i < infos.size(); ++i) {
    auto& t = infos[i];
    const uint64_t off = offsets[i];
    if (off % alignment != 0)
      fail("{}: tensor '{}' at offset {}, expected a multiple of the alignment {}", path.string(), t.name, off,
           alignment);
    if (off > data_size || t.nbytes > data_size - off)
      fail("{}: tensor '{}' ({} bytes at offset {}) runs past the end of the data ({} bytes)", path.string(), t.name,
           t.nbytes, off, data_size);
    t.data = g.file->data() + data_start + off;
    by_offset[i] = i;
  }
  std::sort(by_offset.begin(), by_offset.end(), [&](std::size_t a, std::size_t b) { return offsets[a] < offsets[b]; });
  for (std::size_t k = 1; k < by_offset.size(); ++k) {
    const auto& before = infos[by_offset[k - 1]];
    if (offsets[by_offset[k]] < offsets[by_offset[k - 1]] + before.nbytes)
      fail("{}: tensor '{}' at offset {} overlaps tensor '{}' ({} bytes at offset {})", path.string(),
           infos[by_offset[k]].name, offsets[by_offset[k]], before.name, before.nbytes, offsets[by_offset[k - 1]]);
  }
  for (auto& t : infos) {
    if (g.tensors.count(t.name) != 0) fail("{}: tensor '{}' appears twice", path.string(), t.name);
    const std::string name = t.name;
    g.tensors.emplace(name, std::move(t));
  }
  return g;
}

}  // namespace qjoule::io
