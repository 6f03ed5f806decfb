// The Linears of a pre-quantized checkpoint (model/prequantized/checkpoint_quantization.h): their packed tensors
// read, checked and repacked into qjoule's own blocks (quant/formats.h) without passing through FP32,
// so that an imported model runs exactly the arithmetic of qjoule's own format on the same codes.
//
// GPTQ (AutoGPTQ / GPTQModel / Hugging Face optimum layout), for Linear NAME of [out, in]:
//   NAME.qweight  I32 [in / 8, out]  code of input i, output o: (qweight[i / 8, o] >> 4·(i % 8)) & 15
//   NAME.qzeros   I32 [groups, out / 8]  zero of group g, output o: (qzeros[g, o / 8] >> 4·(o % 8)) & 15,
//                 plus 1 in the classic format (checkpoint_format "gptq" stores z − 1), as is in gptq_v2
//   NAME.scales   F16 [groups, out]
//   NAME.g_idx    I32 [in] (optional without act-order): the group of input i, i / group_size in order;
//                 with desc_act (act-order) any order, each group holding group_size inputs
//   NAME.bias     [out] (optional)
//   W[o, i] = (code − zero[g(i), o]) · scale[g(i), o];  groups = ceil(in / group_size), 1 for group_size −1.
// AWQ (version gemm): NAME.qweight I32 [in, out / 8] and NAME.qzeros I32 [groups, out / 8] packed along
// the outputs, word nibble k holding output 8·w + (0, 2, 4, 6, 1, 3, 5, 7)[k]; NAME.scales F16
// [groups, out]; zeros as stored; W as GPTQ's.
//
// Both are qjoule's int4 blocks: the scale is the block's FP16 `d`, the zero its zero byte (asym) or
// the implicit 8 (GPTQ sym, whose zeros must all be 8), the codes its nibbles (high nibble first). A
// group of 32, 64 or 128 is one block; group_size −1 (one group per row) or a multiple of 128 is held
// as blocks of 128 that repeat their group's scale and zero. Act-order: the inputs are sorted by group
// once at load (stable), which makes each group contiguous, and the activations are gathered into that
// order on each call (kernels/linear_input_permuted.h). Anything else (8 bits, other
// group sizes, a zero of 16 from a classic-format zero stored as 15) is refused in one line.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "qjoule/io/safetensors.h"
#include "qjoule/kernels/linear.h"
#include "qjoule/model/prequantized/checkpoint_quantization.h"
#include "qjoule/quant/format_spec.h"

namespace qjoule::model {

// bitsandbytes NF4 checkpoints: model/prequantized/bnb_nf4_linear.h; the functions below dispatch to it.
//
// The precision spec the checkpoint's Linears run as (`int4:g=128:asym`, `int4:g=32:sym`, `nf4`,
// `nf4:dq`): what --precision must name.
quant::FormatSpec prequantized_spec(const CheckpointQuantization& quantization);

// Checks every packed tensor of Linear `name` against [out, in] (dtype, shape, group count, g_idx)
// in one line naming the tensor, found and expected.
void check_prequantized_linear(const io::Checkpoint& checkpoint, const CheckpointQuantization& quantization,
                               const std::string& name, int64_t out, int64_t in);

// Reads, checks (codes, zeros, finite scales) and repacks Linear `name` into the Linear of
// prequantized_spec(); its bias, when the checkpoint has NAME.bias, in FP32. Each tensor's mapped
// pages are released once read.
std::unique_ptr<kernels::Linear> load_prequantized_linear(const io::Checkpoint& checkpoint,
                                                          const CheckpointQuantization& quantization,
                                                          const std::string& name, int64_t out, int64_t in);

// Marks every tensor of pre-quantized Linear `name` (NAME.qweight, .qzeros, .scales, .g_idx, .bias,
// bitsandbytes' .weight.*) as read in `ck`: the Linear reads them when it is built, from a copy of the
// checkpoint that outlives the loader's, so the loader's unused-tensor warning must not list them.
void mark_prequantized_tensors_read(const io::Checkpoint& ck, const std::string& name);

}  // namespace qjoule::model
