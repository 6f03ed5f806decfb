// safetensors checkpoints: memory-mapped, zero-copy, validated before use.
//
// File layout: 8-byte little-endian header length N, N bytes of JSON header, then the data area.
// The header maps tensor names to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative
// to the data area) plus an optional "__metadata__" string map. Before any tensor is used the reader
// checks: N within the file, header a JSON object, known dtype, every range inside the data area,
// end >= begin, no two tensors overlapping, and byte size == product(shape) × dtype size.
// A checkpoint folder may hold one `model.safetensors` or shards listed by
// `model.safetensors.index.json` ({"weight_map": {tensor: shard file}}).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "qjoule/io/dtype.h"
#include "qjoule/io/mapped_file.h"

namespace qjoule::io {

struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;  // points into the memory map
  std::size_t nbytes = 0;
  std::filesystem::path file;  // the file it lives in (for messages)

  int64_t numel() const;
  std::string shape_string() const;  // "[768, 3072]"
};

class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return file_->path(); }
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  std::size_t file_size() const { return file_->size(); }

 private:
  std::shared_ptr<MappedFile> file_;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// All tensors of a checkpoint, from one file or from shards.
class Checkpoint {
 public:
  // `path` is a folder (model.safetensors or model.safetensors.index.json inside) or one file.
  static Checkpoint open(const std::filesystem::path& path);

  const std::filesystem::path& source() const { return source_; }
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  // The tensor, or an error naming it and the checkpoint.
  const TensorView& at(const std::string& name) const;
  // A copy of the tensor as FP32 (from F32, F16, BF16 or F64), or an error naming its dtype.
  std::vector<float> to_f32(const std::string& name) const;
  // Drops the pages of the tensor's bytes from this process's resident memory (madvise DONTNEED on the
  // read-only map; the file stays in the page cache and a later read faults them back in): a model
  // converted tensor by tensor holds at most the tensor being converted, not the whole mapped file.
  void release(const std::string& name) const;
  // The tensors never asked for through at() or to_f32() (in name order): once a model is built, the
  // checkpoint's tensors it does not use.
  std::vector<std::string> unread_tensors() const;
  std::size_t bytes_on_disk() const;  // sum of file sizes
  std::vector<std::filesystem::path> files() const;

 private:
  std::filesystem::path source_;
  std::vector<SafetensorsFile> files_;
  std::map<std::string, TensorView> tensors_;
  mutable std::set<std::string> read_;  // names asked for through at()
};

// Writes a safetensors file (used by fixture generators and tests). Tensors are laid out in the
// order given; `data` must hold product(shape) × dtype size bytes.
struct TensorToWrite {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::span<const std::byte> data;
};
void write_safetensors(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace qjoule::io
