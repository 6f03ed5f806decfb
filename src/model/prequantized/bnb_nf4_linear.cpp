#include "qjoule/model/prequantized/bnb_nf4_linear.h"

#include <cmath>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "qjoule/error.h"
#include "qjoule/kernels/linear_weight_only.h"
#include "qjoule/quant/formats.h"

namespace qjoule::model {
namespace {

// The tensor, checked for dtype and element count (any shape: bitsandbytes stores the codes [n, 1]).
const io::TensorView& tensor_of(const io::Checkpoint& ck, const std::string& name, io::DType dtype, int64_t numel,
                                const char* what) {
  if (!ck.contains(name))
    fail("{}: tensor '{}' is missing: a bitsandbytes 4-bit Linear holds {}", ck.source().string(), name, what);
  const auto& t = ck.at(name);
  if (t.dtype != dtype || t.numel() != numel)
    fail("{}: tensor '{}' is {} {}, expected {} values of {} ({})", t.file.string(), name, io::dtype_name(t.dtype),
         t.shape_string(), numel, io::dtype_name(dtype), what);
  return t;
}

template <class T>
std::vector<T> read_values(const io::Checkpoint& ck, const io::TensorView& t) {
  std::vector<T> v(static_cast<std::size_t>(t.numel()));
  std::memcpy(v.data(), t.data, v.size() * sizeof(T));
  ck.release(t.name);
  return v;
}

// The table tensor equals `expected` bit for bit, or one line naming the first entry that differs.
template <std::size_t N>
void expect_table(const io::Checkpoint& ck, const std::string& name, const std::array<float, N>& expected,
                  const char* what) {
  const auto& t = tensor_of(ck, name, io::DType::F32, static_cast<int64_t>(N), what);
  const auto v = read_values<float>(ck, t);
  for (std::size_t k = 0; k < N; ++k)
    if (std::memcmp(&v[k], &expected[k], sizeof(float)) != 0)
      fail("{}: tensor '{}' holds {} at [{}], expected {} ({}, bit for bit: qjoule's kernels decode with that table)",
           t.file.string(), name, v[k], k, expected[k], what);
}

void expect_finite(const io::TensorView& t, const std::vector<float>& v, bool non_negative) {
  for (std::size_t k = 0; k < v.size(); ++k)
    if (!std::isfinite(v[k]) || (non_negative && v[k] < 0.0f))
      fail("{}: tensor '{}' holds {} at [{}], expected a finite{} scale", t.file.string(), t.name, v[k], k,
           non_negative ? " non-negative" : "");
}

int64_t block_count(int64_t out, int64_t in) { return out * in / quant::kNf4BlockSize; }

}  // namespace

void check_bnb_nf4_linear(const io::Checkpoint& ck, const std::string& name, int64_t out, int64_t in,
                          bool double_quant) {
  const BnbQuantState s = read_bnb_quant_state(ck, name);
  const std::string state = bnb_quant_state_tensor(ck, name);
  const std::string file = ck.at(state).file.string();
  if (s.out != out || s.in != in)
    fail("{}: tensor '{}' gives shape [{}, {}], expected [{}, {}] from config.json", file, state, s.out, s.in, out, in);
  if (s.blocksize != quant::kNf4BlockSize)
    fail("{}: tensor '{}' has blocksize {}: qjoule's nf4 blocks hold 64 weights (bitsandbytes' default)", file, state,
         s.blocksize);
  if (in % quant::kNf4BlockSize != 0)
    fail(
        "{}: Linear '{}' is [{}, {}]: bitsandbytes' blocks of 64 run over the flattened weight and would straddle "
        "rows; qjoule reads in_features that are multiples of 64",
        file, name, out, in);
  if (s.nested != double_quant)
    fail("{}: tensor '{}' is {} double quantization, but config.json says bnb_4bit_use_double_quant = {}", file, state,
         s.nested ? "with" : "without", double_quant ? "true" : "false");
  if (s.nested && s.nested_blocksize != quant::kNf4DoubleQuantGroup)
    fail("{}: tensor '{}' has nested_blocksize {}: qjoule's nf4:dq quantizes absmax in groups of 256", file, state,
         s.nested_blocksize);
  const int64_t blocks = block_count(out, in);
  tensor_of(ck, name + ".weight", io::DType::U8, out * in / 2, "the 4-bit codes, two per byte");
  tensor_of(ck, name + ".weight.absmax", s.nested ? io::DType::U8 : io::DType::F32, blocks,
            s.nested ? "one 8-bit absmax code per block of 64" : "one FP32 absmax per block of 64");
  expect_table(ck, name + ".weight.quant_map", quant::kNf4Table, "the NF4 table");
  if (s.nested) {
    tensor_of(ck, name + ".weight.nested_absmax", io::DType::F32,
              (blocks + quant::kNf4DoubleQuantGroup - 1) / quant::kNf4DoubleQuantGroup,
              "one FP32 scale per 256 absmax codes");
    expect_table(ck, name + ".weight.nested_quant_map", quant::dynamic_map_signed(), "the signed dynamic map");
  }
}

std::unique_ptr<kernels::Linear> load_bnb_nf4_linear(const io::Checkpoint& ck, const std::string& name, int64_t out,
                                                     int64_t in, bool double_quant, const std::vector<float>& bias) {
  check_bnb_nf4_linear(ck, name, out, in, double_quant);
  const BnbQuantState s = read_bnb_quant_state(ck, name);
  ck.release(bnb_quant_state_tensor(ck, name));
  const auto codes = read_values<uint8_t>(ck, ck.at(name + ".weight"));
  const int64_t blocks = block_count(out, in);
  constexpr std::size_t kBytes = quant::kNf4BlockSize / 2;
  const float* b = bias.empty() ? nullptr : bias.data();
  if (!s.nested) {
    const auto& t = ck.at(name + ".weight.absmax");
    const auto absmax = read_values<float>(ck, t);
    expect_finite(t, absmax, true);
    quant::Nf4Matrix m;
    m.rows = out;
    m.cols = in;
    m.blocks.resize(static_cast<std::size_t>(blocks));
    for (std::size_t k = 0; k < m.blocks.size(); ++k) {
      m.blocks[k].absmax = absmax[k];
      std::memcpy(m.blocks[k].qs, codes.data() + k * kBytes, kBytes);
    }
    return kernels::make_linear_nf4_packed(std::move(m), b, name);
  }
  const auto absmax_codes = read_values<uint8_t>(ck, ck.at(name + ".weight.absmax"));
  const auto& nested = ck.at(name + ".weight.nested_absmax");
  quant::Nf4DqMatrix m;
  m.rows = out;
  m.cols = in;
  m.absmax_scales = read_values<float>(ck, nested);
  expect_finite(nested, m.absmax_scales, true);
  m.absmax_mean = s.nested_offset;
  m.blocks.resize(static_cast<std::size_t>(blocks));
  for (std::size_t k = 0; k < m.blocks.size(); ++k) {
    m.blocks[k].absmax_code = absmax_codes[k];
    std::memcpy(m.blocks[k].qs, codes.data() + k * kBytes, kBytes);
  }
  return kernels::make_linear_nf4_packed(std::move(m), b, name);
}

}  // namespace qjoule::model
