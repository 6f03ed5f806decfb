#include "qjoule/quant/import_mxfp4.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "qjoule/error.h"

namespace qjoule::quant {

Mxfp4Matrix import_mxfp4_tensor(std::string_view name, const uint8_t* blocks, std::span<const int64_t> blocks_shape,
                                const uint8_t* scales, std::span<const int64_t> scales_shape) {
  constexpr int64_t kBytes = kMxfp4BlockSize / 2;
  if (blocks_shape.size() < 2 || blocks_shape.back() != kBytes)
    fail("tensor '{}_blocks': shape [{}], expected [..., groups, {}] ({} bytes: {} FP4 values a block)", name,
         fmt::join(blocks_shape, ", "), kBytes, kBytes, kMxfp4BlockSize);
  const auto expected = blocks_shape.first(blocks_shape.size() - 1);
  if (!std::equal(expected.begin(), expected.end(), scales_shape.begin(), scales_shape.end()))
    fail("tensor '{}_scales': shape [{}], expected [{}] (one E8M0 scale a block of '{}_blocks' [{}])", name,
         fmt::join(scales_shape, ", "), fmt::join(expected, ", "), name, fmt::join(blocks_shape, ", "));
  int64_t rows = 1;
  for (std::size_t d = 0; d + 2 < blocks_shape.size(); ++d) rows *= blocks_shape[d];
  const int64_t groups = blocks_shape[blocks_shape.size() - 2];
  Mxfp4Matrix m;
  m.rows = rows;
  m.cols = groups * kMxfp4BlockSize;
  m.blocks.resize(static_cast<std::size_t>(rows * groups));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t b = r * groups + g;
      if (scales[b] == 0xFF)
        fail("tensor '{}_scales': NaN scale (E8M0 0xFF) at [{}, {}]; expected a power of two", name, r, g);
      BlockMxfp4& out = m.blocks[static_cast<std::size_t>(b)];
      out.scale_e8m0 = scales[b];
      for (int64_t i = 0; i < kBytes; ++i) {  // swap the nibbles: element 2i low there, high here
        const uint8_t byte = blocks[b * kBytes + i];
        out.qs[i] = static_cast<uint8_t>((byte << 4) | (byte >> 4));
      }
    }
  }
  return m;
}

}  // namespace qjoule::quant
