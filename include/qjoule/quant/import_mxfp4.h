// An MXFP4 tensor as a checkpoint stores it (gpt-oss; transformers' Mxfp4 integration): `<name>_blocks`,
// uint8 [..., groups, 16] (16 bytes, 32 E2M1 codes a block; element 2i in the LOW nibble of byte i), and
// `<name>_scales`, uint8 [..., groups] (E8M0, 2^(s − 127)); the weight is [prod(...), groups · 32]. Read
// into qjoule's layout (formats.h "mxfp4": the same codes and scales, the first element in the HIGH nibble),
// which decodes to exactly the values transformers' convert_moe_packed_tensors gives.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "qjoule/quant/formats.h"

namespace qjoule::quant {

// One line naming the tensor where the shapes disagree (blocks not [..., groups, 16], scales not the
// blocks' shape without its last dimension) or a scale is E8M0's NaN (0xFF) at [row, group].
Mxfp4Matrix import_mxfp4_tensor(std::string_view name, const uint8_t* blocks, std::span<const int64_t> blocks_shape,
                                const uint8_t* scales, std::span<const int64_t> scales_shape);

}  // namespace qjoule::quant
