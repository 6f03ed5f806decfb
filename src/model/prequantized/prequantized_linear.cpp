#include "qjoule/model/prequantized/prequantized_linear.h"

#include <algorithm>
#include <array>
#include <numeric>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "qjoule/error.h"
#include "qjoule/kernels/linear_input_permuted.h"
#include "qjoule/kernels/linear_weight_only.h"
#include "qjoule/model/prequantized/bnb_nf4_linear.h"
#include "qjoule/quant/formats.h"

namespace qjoule::model {
namespace {

// AWQ's gemm packing: word nibble k holds output 8·w + kAwqOrder[k]; output 8·w + c is in nibble kAwqNibble[c].
constexpr std::array<int, 8> kAwqNibble = {0, 4, 1, 5, 2, 6, 3, 7};

bool is_awq(const CheckpointQuantization& q) { return q.method == "awq"; }

int64_t group_count(const CheckpointQuantization& q, int64_t in) {
  return q.group_size == -1 ? 1 : (in + q.group_size - 1) / q.group_size;
}

// qjoule's block size for the checkpoint's groups (prequantized_spec's group size).
int block_size(const CheckpointQuantization& q) {
  if (q.group_size == 32 || q.group_size == 64 || q.group_size == 128) return q.group_size;
  return 128;
}

void expect_shape(const io::TensorView& t, const std::string& name, int64_t rows, int64_t cols, const char* why) {
  if (t.shape[0] != rows || t.shape[1] != cols)
    fail("{}: tensor '{}' has shape {}, expected [{}, {}] ({})", t.file.string(), name, t.shape_string(), rows, cols,
         why);
}

std::vector<int32_t> read_i32(const io::Checkpoint& ck, const io::TensorView& t, const std::string& name) {
  std::vector<int32_t> v(static_cast<std::size_t>(t.numel()));
  std::memcpy(v.data(), t.data, v.size() * sizeof(int32_t));
  ck.release(name);
  return v;
}

std::vector<uint16_t> read_f16_bits(const io::Checkpoint& ck, const io::TensorView& t, const std::string& name) {
  std::vector<uint16_t> v(static_cast<std::size_t>(t.numel()));
  std::memcpy(v.data(), t.data, v.size() * sizeof(uint16_t));
  ck.release(name);
  return v;
}

// The codes, zeros and scales of one Linear, unpacked: what both layouts mean.
struct Unpacked {
  int64_t out = 0, in = 0, groups = 0;
  std::vector<int32_t> qweight, qzeros;
  std::vector<uint16_t> scales;  // [groups, out] FP16 bits
  std::vector<int32_t> g_idx;    // act-order: the group of each input; empty: i / group_size
  std::vector<int32_t> perm;     // act-order: the inputs sorted by group (stable); empty: in order
  const CheckpointQuantization* q = nullptr;

  int code(int64_t o, int64_t i) const {
    if (is_awq(*q))
      return (qweight[static_cast<std::size_t>(i * (out / 8) + o / 8)] >>
              (4 * kAwqNibble[static_cast<std::size_t>(o % 8)])) &
             15;
    return (qweight[static_cast<std::size_t>((i / 8) * out + o)] >> (4 * (i % 8))) & 15;
  }
  int zero(int64_t g, int64_t o) const {
    const int32_t word = qzeros[static_cast<std::size_t>(g * (out / 8) + o / 8)];
    const int stored =
        (word >> (4 * (is_awq(*q) ? kAwqNibble[static_cast<std::size_t>(o % 8)] : static_cast<int>(o % 8)))) & 15;
    return stored + (q->method == "gptq" && q->checkpoint_format != "gptq_v2" ? 1 : 0);
  }
  uint16_t scale(int64_t g, int64_t o) const { return scales[static_cast<std::size_t>(g * out + o)]; }
  int64_t group_of(int64_t i) const {
    if (!g_idx.empty()) return g_idx[static_cast<std::size_t>(i)];
    return q->group_size == -1 ? 0 : i / q->group_size;
  }
  // The input at position j of the order the blocks hold (act-order: sorted by group).
  int64_t input_at(int64_t j) const { return perm.empty() ? j : perm[static_cast<std::size_t>(j)]; }
};

Unpacked read_unpacked(const io::Checkpoint& ck, const CheckpointQuantization& q, const std::string& name, int64_t out,
                       int64_t in) {
  check_prequantized_linear(ck, q, name, out, in);
  Unpacked u;
  u.out = out;
  u.in = in;
  u.groups = group_count(q, in);
  u.q = &q;
  u.qweight = read_i32(ck, ck.at(name + ".qweight"), name + ".qweight");
  u.qzeros = read_i32(ck, ck.at(name + ".qzeros"), name + ".qzeros");
  u.scales = read_f16_bits(ck, ck.at(name + ".scales"), name + ".scales");
  if (q.desc_act) {
    u.g_idx = read_i32(ck, ck.at(name + ".g_idx"), name + ".g_idx");
    u.perm.resize(static_cast<std::size_t>(in));
    std::iota(u.perm.begin(), u.perm.end(), 0);
    std::stable_sort(u.perm.begin(), u.perm.end(), [&](int32_t a, int32_t b) {
      return u.g_idx[static_cast<std::size_t>(a)] < u.g_idx[static_cast<std::size_t>(b)];
    });
    // Groups already in order (one group per row, or act-order that kept the order): no gather.
    if (std::is_sorted(u.perm.begin(), u.perm.end())) u.perm.clear();
  }
  for (int64_t g = 0; g < u.groups; ++g)
    for (int64_t o = 0; o < out; ++o) {
      const uint16_t s = u.scale(g, o);
      if ((s & 0x7C00) == 0x7C00)
        fail("{}: tensor '{}.scales' holds {} at [{}, {}], expected a finite FP16 scale",
             ck.at(name + ".scales").file.string(), name, (s & 0x3FF) != 0 ? "NaN" : "Inf", g, o);
      const int z = u.zero(g, o);
      if (q.method == "gptq" && q.sym && z != quant::kInt4SymZero)
        fail("{}: tensor '{}.qzeros' gives zero point {} at group {}, output {}; sym = true expects 8 everywhere",
             ck.source().string(), name, z, g, o);
      if (z > quant::kInt4AsymMaxCode)
        fail(
            "{}: tensor '{}.qzeros' gives zero point {} at group {}, output {} (stored {} in the classic format, which "
            "keeps z − 1), expected 0 to 15",
            ck.source().string(), name, z, g, o, z - 1);
    }
  return u;
}

template <class Block>
std::unique_ptr<kernels::Linear> repack(const Unpacked& u, const std::vector<float>& bias, const std::string& name) {
  constexpr int G = Block::kSize;
  constexpr bool asym = std::is_same_v<Block, quant::BlockInt4Asym<G>>;
  quant::BlockMatrix<Block> m;
  m.rows = u.out;
  m.cols = u.in;
  const int64_t bpr = m.blocks_per_row();
  m.blocks.resize(static_cast<std::size_t>(u.out * bpr));
  for (int64_t o = 0; o < u.out; ++o) {
    for (int64_t b = 0; b < bpr; ++b) {
      Block& block = m.blocks[static_cast<std::size_t>(o * bpr + b)];
      const int64_t g = u.group_of(u.input_at(b * G));
      block.d = u.scale(g, o);
      const int z = asym ? u.zero(g, o) : quant::kInt4SymZero;
      if constexpr (asym) {
        block.zero = static_cast<uint8_t>(z);
        block.reserved = 0;
      }
      for (int k = 0; k < G; k += 2) {
        const int64_t i = b * G + k;
        // padding decodes to 0 (formats.h, "Any width")
        const int hi = i < u.in ? u.code(o, u.input_at(i)) : z;
        const int lo = i + 1 < u.in ? u.code(o, u.input_at(i + 1)) : z;
        block.qs[k / 2] = static_cast<uint8_t>((hi << 4) | lo);
      }
    }
  }
  auto linear = kernels::make_linear_int4_packed<Block>(std::move(m), bias.empty() ? nullptr : bias.data(), name);
  if (u.perm.empty()) return linear;
  return kernels::make_linear_input_permuted(std::move(linear), u.perm, name);
}

template <int G>
std::unique_ptr<kernels::Linear> repack_group(const Unpacked& u, const std::vector<float>& bias,
                                              const std::string& name) {
  if (u.q->method == "gptq" && u.q->sym) return repack<quant::BlockInt4Sym<G>>(u, bias, name);
  return repack<quant::BlockInt4Asym<G>>(u, bias, name);
}

}  // namespace

quant::FormatSpec prequantized_spec(const CheckpointQuantization& q) {
  quant::FormatSpec spec;
  if (q.method == "bitsandbytes") {
    spec.format = quant::Format::nf4;
    spec.nf4_double_quant = q.bnb_double_quant;
    return spec;
  }
  spec.format = quant::Format::int4;
  spec.group_size = block_size(q);
  spec.int4_asymmetric = !(q.method == "gptq" && q.sym);
  return spec;
}

void check_prequantized_linear(const io::Checkpoint& ck, const CheckpointQuantization& q, const std::string& name,
                               int64_t out, int64_t in) {
  if (q.method == "bitsandbytes") return check_bnb_nf4_linear(ck, name, out, in, q.bnb_double_quant);
  if (out % 8 != 0 || in % 8 != 0)
    fail("{}: Linear '{}' is [{}, {}]: {} packs 8 codes per int32, so both must be multiples of 8",
         ck.source().string(), name, out, in, q.method);
  const auto groups = group_count(q, in);
  const auto& qweight = packed_tensor(ck, q, name + ".qweight", io::DType::I32);
  if (is_awq(q))
    expect_shape(qweight, name + ".qweight", in, out / 8, "AWQ: [in, out / 8]");
  else
    expect_shape(qweight, name + ".qweight", in / 8, out, "GPTQ: [in / 8, out]");
  expect_shape(packed_tensor(ck, q, name + ".qzeros", io::DType::I32), name + ".qzeros", groups, out / 8,
               "[groups, out / 8]");
  expect_shape(packed_tensor(ck, q, name + ".scales", io::DType::F16), name + ".scales", groups, out, "[groups, out]");
  if (q.method != "gptq") return;
  if (q.desc_act && !ck.contains(name + ".g_idx"))
    fail("{}: tensor '{}.g_idx' is missing: desc_act = true (act-order) needs each input's group", ck.source().string(),
         name);
  if (!ck.contains(name + ".g_idx")) return;
  const auto& t = ck.at(name + ".g_idx");
  if (t.dtype != io::DType::I32 || t.shape != std::vector<int64_t>{in})
    fail("{}: tensor '{}.g_idx' is {} {}, expected I32 [{}]", t.file.string(), name, io::dtype_name(t.dtype),
         t.shape_string(), in);
  std::vector<int32_t> g(static_cast<std::size_t>(in));
  std::memcpy(g.data(), t.data, g.size() * sizeof(int32_t));
  std::vector<int64_t> members(static_cast<std::size_t>(groups), 0);
  for (int64_t i = 0; i < in; ++i) {
    const int32_t gi = g[static_cast<std::size_t>(i)];
    if (!q.desc_act) {
      const int64_t expected = q.group_size == -1 ? 0 : i / q.group_size;
      if (gi != expected)
        fail("{}: tensor '{}.g_idx' puts input {} in group {}, expected {} (desc_act = false: groups in order)",
             t.file.string(), name, i, gi, expected);
    } else if (gi < 0 || gi >= groups) {
      fail("{}: tensor '{}.g_idx' puts input {} in group {}, expected 0 to {}", t.file.string(), name, i, gi,
           groups - 1);
    } else {
      ++members[static_cast<std::size_t>(gi)];
    }
  }
  // Act-order: sorted by group, each group must fill whole blocks, as the groups in order do.
  for (int64_t gi = 0; q.desc_act && gi < groups; ++gi) {
    const int64_t size = q.group_size == -1 ? in : std::min<int64_t>(q.group_size, in - gi * q.group_size);
    if (members[static_cast<std::size_t>(gi)] != size)
      fail("{}: tensor '{}.g_idx' puts {} inputs in group {}, expected {} (group_size {})", t.file.string(), name,
           members[static_cast<std::size_t>(gi)], gi, size, q.group_size);
  }
}

std::unique_ptr<kernels::Linear> load_prequantized_linear(const io::Checkpoint& ck, const CheckpointQuantization& q,
                                                          const std::string& name, int64_t out, int64_t in) {
  std::vector<float> bias;
  if (ck.contains(name + ".bias")) {
    const auto& b = ck.at(name + ".bias");
    if (b.shape != std::vector<int64_t>{out})
      fail("{}: tensor '{}.bias' has shape {}, expected [{}]", b.file.string(), name, b.shape_string(), out);
    bias = ck.to_f32(name + ".bias");
    ck.release(name + ".bias");
  }
  if (q.method == "bitsandbytes") return load_bnb_nf4_linear(ck, name, out, in, q.bnb_double_quant, bias);
  const Unpacked u = read_unpacked(ck, q, name, out, in);
  switch (block_size(q)) {
    case 32: return repack_group<32>(u, bias, name);
    case 64: return repack_group<64>(u, bias, name);
    default: return repack_group<128>(u, bias, name);
  }
}

void mark_prequantized_tensors_read(const io::Checkpoint& ck, const std::string& name) {
  const std::string prefix = name + ".";
  for (auto it = ck.tensors().lower_bound(prefix); it != ck.tensors().end() && it->first.starts_with(prefix); ++it)
    (void)ck.at(it->first);
}

}  // namespace qjoule::model
