#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "qjoule/error.h"
#include "qjoule/io/gguf.h"

namespace qjoule::io {
namespace {

void put_bytes(std::vector<std::byte>& out, const void* p, std::size_t n) {
  const std::size_t at = out.size();
  out.resize(at + n);
  if (n > 0) std::memcpy(out.data() + at, p, n);
}

template <class T>
void put(std::vector<std::byte>& out, T value) {
  put_bytes(out, &value, sizeof(T));
}

void put_string(std::vector<std::byte>& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  put_bytes(out, s.data(), s.size());
}

uint64_t aligned(uint64_t offset) { return (offset + kGgufAlignment - 1) / kGgufAlignment * kGgufAlignment; }

// Writes all of `bytes` to fd, or one line naming the file.
void write_all(int fd, const std::byte* bytes, std::size_t n, const std::filesystem::path& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, bytes, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail("{}: write failed: {}", path.string(), std::strerror(errno));
    bytes += w;
    n -= static_cast<std::size_t>(w);
  }
}

}  // namespace

const char* ggml_type_name(GgmlType type) {
  switch (type) {
    case GgmlType::f32: return "F32";
    case GgmlType::f16: return "F16";
    case GgmlType::q4_0: return "Q4_0";
    case GgmlType::bf16: return "BF16";
    case GgmlType::mxfp4: return "MXFP4";
    case GgmlType::nvfp4: return "NVFP4";
  }
  return "?";
}

int64_t ggml_block_size(GgmlType type) {
  switch (type) {
    case GgmlType::q4_0: return kQ4_0Block;
    case GgmlType::mxfp4: return kGgmlMxfp4Block;
    case GgmlType::nvfp4: return kGgmlNvfp4Block;
    default: return 1;
  }
}

uint64_t ggml_tensor_bytes(GgmlType type, int64_t ne0, int64_t rows, const std::string& name) {
  const auto n = static_cast<uint64_t>(ne0) * static_cast<uint64_t>(rows);
  switch (type) {
    case GgmlType::f32: return n * 4;
    case GgmlType::f16:
    case GgmlType::bf16: return n * 2;
    case GgmlType::q4_0:
    case GgmlType::mxfp4:
    case GgmlType::nvfp4: {
      const int64_t block = ggml_block_size(type);
      const int64_t bytes = type == GgmlType::q4_0    ? kQ4_0BlockBytes
                            : type == GgmlType::mxfp4 ? kGgmlMxfp4BlockBytes
                                                      : kGgmlNvfp4BlockBytes;
      if (ne0 % block != 0)
        fail("tensor '{}': {} weights per row do not fill {} blocks of {}", name, ne0, ggml_type_name(type), block);
      return static_cast<uint64_t>(ne0 / block) * static_cast<uint64_t>(bytes) * static_cast<uint64_t>(rows);
    }
  }
  fail("tensor '{}': unknown ggml type {}", name, static_cast<uint32_t>(type));
}

void GgufWriter::key(const std::string& k, GgufValueType type) {
  put_string(metadata_, k);
  put<uint32_t>(metadata_, static_cast<uint32_t>(type));
  ++metadata_count_;
}

void GgufWriter::add_u32(const std::string& k, uint32_t value) {
  key(k, GgufValueType::u32);
  put(metadata_, value);
}

void GgufWriter::add_f32(const std::string& k, float value) {
  key(k, GgufValueType::f32);
  put(metadata_, value);
}

void GgufWriter::add_bool(const std::string& k, bool value) {
  key(k, GgufValueType::boolean);
  put<uint8_t>(metadata_, value ? 1 : 0);
}

void GgufWriter::add_string(const std::string& k, const std::string& value) {
  key(k, GgufValueType::string);
  put_string(metadata_, value);
}

void GgufWriter::add_strings(const std::string& k, const std::vector<std::string>& values) {
  key(k, GgufValueType::array);
  put<uint32_t>(metadata_, static_cast<uint32_t>(GgufValueType::string));
  put<uint64_t>(metadata_, values.size());
  for (const auto& v : values) put_string(metadata_, v);
}

void GgufWriter::add_f32s(const std::string& k, const std::vector<float>& values) {
  key(k, GgufValueType::array);
  put<uint32_t>(metadata_, static_cast<uint32_t>(GgufValueType::f32));
  put<uint64_t>(metadata_, values.size());
  for (const float v : values) put(metadata_, v);
}

void GgufWriter::add_i32s(const std::string& k, const std::vector<int32_t>& values) {
  key(k, GgufValueType::array);
  put<uint32_t>(metadata_, static_cast<uint32_t>(GgufValueType::i32));
  put<uint64_t>(metadata_, values.size());
  for (const int32_t v : values) put(metadata_, v);
}

void GgufWriter::add_bools(const std::string& k, const std::vector<bool>& values) {
  key(k, GgufValueType::array);
  put<uint32_t>(metadata_, static_cast<uint32_t>(GgufValueType::boolean));
  put<uint64_t>(metadata_, values.size());
  for (const bool v : values) put<uint8_t>(metadata_, v ? 1 : 0);
}

void GgufWriter::add_tensor(const std::string& name, std::vector<int64_t> ne, GgmlType type,
                            std::span<const std::byte> data) {
  int64_t rows = 1;
  for (std::size_t d = 1; d < ne.size(); ++d) rows *= ne[d];
  const uint64_t expected = ggml_tensor_bytes(type, ne.at(0), rows, name);
  if (data.size() != expected)
    fail("tensor '{}': {} bytes of {} data, expected {}", name, data.size(), ggml_type_name(type), expected);
  tensors_.push_back({name, std::move(ne), type, data});
}

void GgufWriter::write(const std::filesystem::path& path) const {
  std::vector<std::byte> head;
  put<uint32_t>(head, kGgufMagic);
  put<uint32_t>(head, kGgufVersion);
  put<uint64_t>(head, tensors_.size());
  put<uint64_t>(head, metadata_count_ + 1);
  put_bytes(head, metadata_.data(), metadata_.size());
  put_string(head, "general.alignment");
  put<uint32_t>(head, static_cast<uint32_t>(GgufValueType::u32));
  put<uint32_t>(head, static_cast<uint32_t>(kGgufAlignment));
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    put_string(head, t.name);
    put<uint32_t>(head, static_cast<uint32_t>(t.ne.size()));
    for (const int64_t d : t.ne) put<uint64_t>(head, static_cast<uint64_t>(d));
    put<uint32_t>(head, static_cast<uint32_t>(t.type));
    put<uint64_t>(head, offset);
    offset = aligned(offset + t.data.size());
  }
  head.resize(aligned(head.size()), std::byte{0});

  const auto tmp = std::filesystem::path(path.string() + ".partial");
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("{}: cannot open for writing: {}", tmp.string(), std::strerror(errno));
  try {
    write_all(fd, head.data(), head.size(), tmp);
    const std::byte zeros[kGgufAlignment] = {};
    for (const auto& t : tensors_) {
      write_all(fd, t.data.data(), t.data.size(), tmp);
      write_all(fd, zeros, aligned(t.data.size()) - t.data.size(), tmp);
    }
    if (::fsync(fd) != 0) fail("{}: fsync failed: {}", tmp.string(), std::strerror(errno));
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) fail("{}: cannot rename to {}: {}", tmp.string(), path.string(), ec.message());
}

}  // namespace qjoule::io
