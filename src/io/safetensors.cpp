#include "qjoule/io/safetensors.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "qjoule/error.h"

namespace qjoule::io {
namespace {

using json = nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 100u * 1024u * 1024u;  // the safetensors spec's own limit

uint64_t read_u64_le(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint64_t>(p[i]);
  return v;
}

// product(shape) × element size, or nullopt on overflow.
std::optional<uint64_t> byte_size(const std::vector<int64_t>& shape, std::size_t elem) {
  uint64_t n = elem;
  for (int64_t d : shape) {
    if (d != 0 && n > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d)) return std::nullopt;
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

TensorView parse_entry(const std::string& file, const std::string& name, const json& entry, uint64_t data_size,
                       const std::byte* data_area) {
  if (!entry.is_object())
    fail("{}: tensor '{}': header entry is {}, expected an object", file, name, entry.type_name());
  const auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end() || !dtype_it->is_string())
    fail("{}: tensor '{}': missing string field 'dtype'", file, name);
  const auto dtype = dtype_from_name(dtype_it->get<std::string>());
  if (!dtype)
    fail("{}: tensor '{}': unknown dtype '{}', expected one of F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL F8_E4M3 F8_E5M2",
         file, name, dtype_it->get<std::string>());

  const auto shape_it = entry.find("shape");
  if (shape_it == entry.end() || !shape_it->is_array())
    fail("{}: tensor '{}': missing array field 'shape'", file, name);
  TensorView view;
  view.name = name;
  view.dtype = *dtype;
  for (const auto& d : *shape_it) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      fail("{}: tensor '{}': shape {} has an entry that is not a non-negative integer", file, name, shape_it->dump());
    view.shape.push_back(d.get<int64_t>());
  }

  const auto off_it = entry.find("data_offsets");
  if (off_it == entry.end() || !off_it->is_array() || off_it->size() != 2 || !(*off_it)[0].is_number_unsigned() ||
      !(*off_it)[1].is_number_unsigned())
    fail("{}: tensor '{}': 'data_offsets' is {}, expected [begin, end] with non-negative integers", file, name,
         off_it == entry.end() ? std::string("missing") : off_it->dump());
  const uint64_t begin = (*off_it)[0].get<uint64_t>();
  const uint64_t end = (*off_it)[1].get<uint64_t>();
  if (end < begin) fail("{}: tensor '{}': data_offsets [{}, {}] end before begin", file, name, begin, end);
  if (end > data_size)
    fail("{}: tensor '{}': data_offsets [{}, {}] run past the data area ({} bytes); the file is truncated or corrupt",
         file, name, begin, end, data_size);
  const auto expected = byte_size(view.shape, dtype_size(view.dtype));
  if (!expected || *expected != end - begin)
    fail("{}: tensor '{}': holds {} bytes, but shape {} of {} needs {}", file, name, end - begin, view.shape_string(),
         dtype_name(view.dtype), expected ? fmt::to_string(*expected) : std::string("more than 2^64"));
  view.data = data_area + begin;
  view.nbytes = end - begin;
  view.file = file;
  return view;
}

}  // namespace

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorView::shape_string() const { return fmt::format("[{}]", fmt::join(shape, ", ")); }

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  SafetensorsFile st;
  st.file_ = std::make_shared<MappedFile>(path);
  const std::string file = path.string();
  const std::size_t size = st.file_->size();
  if (size < 8) fail("{}: truncated: {} bytes, but a safetensors file starts with an 8-byte header length", file, size);
  const uint64_t header_len = read_u64_le(st.file_->data());
  if (header_len > size - 8)
    fail("{}: header length {} runs past the end of the file ({} bytes, so at most {})", file, header_len, size,
         size - 8);
  if (header_len > kMaxHeaderBytes)
    fail("{}: header length {} exceeds the safetensors limit of {} bytes", file, header_len, kMaxHeaderBytes);

  const char* header_begin = reinterpret_cast<const char*>(st.file_->data() + 8);
  json header = json::parse(header_begin, header_begin + header_len, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) fail("{}: header ({} bytes) is not valid JSON", file, header_len);
  if (!header.is_object()) fail("{}: header is a JSON {}, expected a JSON object", file, header.type_name());

  const std::byte* data_area = st.file_->data() + 8 + header_len;
  const uint64_t data_size = size - 8 - header_len;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail("{}: '__metadata__' is {}, expected an object of strings", file, entry.type_name());
      for (const auto& [k, v] : entry.items()) st.metadata_[k] = v.is_string() ? v.get<std::string>() : v.dump();
      continue;
    }
    st.tensors_.emplace(name, parse_entry(file, name, entry, data_size, data_area));
  }

  // No two tensors may share bytes.
  std::vector<const TensorView*> by_offset;
  for (const auto& [name, view] : st.tensors_) {
    if (view.nbytes > 0) by_offset.push_back(&view);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->data < b->data; });
  for (std::size_t i = 1; i < by_offset.size(); ++i) {
    const auto* prev = by_offset[i - 1];
    const auto* cur = by_offset[i];
    if (cur->data < prev->data + prev->nbytes)
      fail("{}: tensors '{}' (bytes {}..{}) and '{}' (bytes {}..{}) overlap", file, prev->name, prev->data - data_area,
           prev->data - data_area + static_cast<std::ptrdiff_t>(prev->nbytes), cur->name, cur->data - data_area,
           cur->data - data_area + static_cast<std::ptrdiff_t>(cur->nbytes));
  }
  return st;
}

namespace {

// A shard named by the index must be a file of the checkpoint's folder: a name that leaves it (an
// absolute path, a ".." component) is refused rather than opened. Symlinks inside the folder are
// followed: the Hugging Face cache keeps every shard as a link into its blobs folder.
void require_inside_folder(const std::filesystem::path& index_path, const std::string& tensor, const std::string& shard,
                           const std::filesystem::path& folder) {
  const std::filesystem::path named = std::filesystem::path(shard).lexically_normal();
  bool inside = !shard.empty() && !named.is_absolute() && !named.has_root_name() && named.has_filename();
  for (const auto& part : named) inside = inside && part != "..";
  if (!inside)
    fail(
        "{}: weight_map['{}'] names shard '{}', which is outside the checkpoint folder {}; expected a file name "
        "inside it",
        index_path.string(), tensor, shard, folder.string());
}

// Every weight read is checked once, at every precision: a NaN or Inf would make every output of the
// model meaningless (and an FP32 run agree with itself), so it is an error naming the tensor and the
// first bad element. Branch-free over blocks, so the check costs a fraction of the conversion.
void require_finite_tensor(const TensorView& t, const std::string& name, const std::vector<float>& values) {
  constexpr std::size_t kBlock = 4096;
  constexpr float kMax = std::numeric_limits<float>::max();
  for (std::size_t base = 0; base < values.size(); base += kBlock) {
    const std::size_t end = std::min(values.size(), base + kBlock);
    bool bad = false;
    for (std::size_t i = base; i < end; ++i) bad |= !(std::fabs(values[i]) <= kMax);
    if (!bad) continue;
    std::size_t i = base;
    while (std::fabs(values[i]) <= kMax) ++i;
    std::vector<int64_t> index(t.shape.size());
    std::size_t rest = i;
    for (std::size_t d = t.shape.size(); d-- > 0;) {
      const auto extent = static_cast<std::size_t>(std::max<int64_t>(t.shape[d], 1));
      index[d] = static_cast<int64_t>(rest % extent);
      rest /= extent;
    }
    const char* found = std::isnan(values[i]) ? "NaN" : (values[i] > 0 ? "+Inf" : "-Inf");
    fail(
        "{}: tensor '{}' {} has {} at [{}]; expected finite values (the model's outputs would be meaningless at "
        "any precision)",
        t.file.string(), name, t.shape_string(), found, fmt::join(index, ", "));
  }
}

}  // namespace

Checkpoint Checkpoint::open(const std::filesystem::path& path) {
  Checkpoint ck;
  ck.source_ = path;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail("{}: no such file or folder", path.string());
  if (!std::filesystem::is_directory(path, ec)) {
    ck.files_.push_back(SafetensorsFile::open(path));
  } else if (std::filesystem::exists(path / "model.safetensors.index.json")) {
    const auto index_path = path / "model.safetensors.index.json";
    std::ifstream in(index_path);
    json index = json::parse(in, nullptr, false);
    if (index.is_discarded() || !index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      fail("{}: not a JSON object with a 'weight_map' object", index_path.string());
    std::map<std::string, std::size_t> shard_of_file;
    for (const auto& [tensor, shard] : index["weight_map"].items()) {
      if (!shard.is_string()) fail("{}: weight_map['{}'] is not a file name", index_path.string(), tensor);
      const auto name = shard.get<std::string>();
      if (!shard_of_file.count(name)) {
        require_inside_folder(index_path, tensor, name, path);
        shard_of_file[name] = ck.files_.size();
        ck.files_.push_back(SafetensorsFile::open(path / name));
      }
      const auto& shard_tensors = ck.files_[shard_of_file[name]].tensors();
      if (!shard_tensors.count(tensor))
        fail("{}: weight_map puts tensor '{}' in {}, but that shard does not hold it", index_path.string(), tensor,
             name);
    }
  } else if (std::filesystem::exists(path / "model.safetensors")) {
    ck.files_.push_back(SafetensorsFile::open(path / "model.safetensors"));
  } else {
    fail("{}: no model.safetensors or model.safetensors.index.json in this folder", path.string());
  }
  for (const auto& f : ck.files_) {
    for (const auto& [name, view] : f.tensors()) {
      auto [it, inserted] = ck.tensors_.emplace(name, view);
      if (!inserted)
        fail("{}: tensor '{}' appears in both {} and {}", path.string(), name, it->second.file.string(),
             view.file.string());
    }
  }
  return ck;
}

const TensorView& Checkpoint::at(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) fail("{}: tensor '{}' is missing", source_.string(), name);
  read_.insert(name);
  return it->second;
}

std::vector<std::string> Checkpoint::unread_tensors() const {
  std::vector<std::string> out;
  for (const auto& [name, tensor] : tensors_)
    if (read_.count(name) == 0) out.push_back(name);
  return out;
}

void Checkpoint::release(const std::string& name) const {
  const TensorView& t = at(name);
  if (t.nbytes == 0) return;
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(t.data) / page * page;
  const auto end = reinterpret_cast<std::uintptr_t>(t.data) + t.nbytes;
  // Advisory: a failure leaves the pages resident, which changes memory use, never a result.
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

std::vector<float> Checkpoint::to_f32(const std::string& name) const {
  const TensorView& t = at(name);
  const auto n = static_cast<std::size_t>(t.numel());
  std::vector<float> out(n);
  switch (t.dtype) {
    case DType::F32: std::memcpy(out.data(), t.data, n * sizeof(float)); break;
    case DType::F64:
      for (std::size_t i = 0; i < n; ++i) {
        double v;
        std::memcpy(&v, t.data + i * 8, 8);
        out[i] = static_cast<float>(v);
      }
      break;
    case DType::F16:
    case DType::BF16:
      for (std::size_t i = 0; i < n; ++i) {
        unsigned short bits;
        std::memcpy(&bits, t.data + i * 2, 2);
        out[i] = t.dtype == DType::F16 ? fp16_to_f32(bits) : bf16_to_f32(bits);
      }
      break;
    default:
      fail("{}: tensor '{}' has dtype {}, expected a floating-point dtype (F32, F16, BF16, F64)", t.file.string(), name,
           dtype_name(t.dtype));
  }
  require_finite_tensor(t, name, out);
  return out;
}

std::size_t Checkpoint::bytes_on_disk() const {
  std::size_t total = 0;
  for (const auto& f : files_) total += f.file_size();
  return total;
}

std::vector<std::filesystem::path> Checkpoint::files() const {
  std::vector<std::filesystem::path> out;
  for (const auto& f : files_) out.push_back(f.path());
  return out;
}

void write_safetensors(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    const auto need = byte_size(t.shape, dtype_size(t.dtype));
    if (!need || *need != t.data.size())
      fail("write_safetensors: tensor '{}' has {} bytes of data, shape needs {}", t.name, t.data.size(),
           need ? *need : 0);
    header[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + *need}}};
    offset += *need;
  }
  std::string text = header.dump();
  while ((text.size() + 8) % 8 != 0) text.push_back(' ');  // align the data area to 8 bytes
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail("{}: cannot open for writing", path.string());
  unsigned char len[8];
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>((n >> (8 * i)) & 0xff);
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& t : tensors)
    out.write(reinterpret_cast<const char*>(t.data.data()), static_cast<std::streamsize>(t.data.size()));
  if (!out) fail("{}: write failed", path.string());
}

}  // namespace qjoule::io
