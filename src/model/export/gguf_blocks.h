// qjoule's 4-bit matrices as the GGML block types that hold them bit for bit (io/gguf.h): the same codes and
// scales, only the nibble order and the grouping of scales differ. Rows stay rows (a tensor's ne[1]).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qjoule/quant/formats.h"

namespace qjoule::model {

// Q4_0 from int4:g=32:sym blocks (round-to-nearest's or calibration's): the same FP16 scale and codes u = q + 8.
std::vector<uint8_t> ggml_q4_0_of(const quant::BlockMatrix<quant::BlockInt4Sym<32>>& m);
// MXFP4 from mxfp4 blocks: the same E8M0 scale and E2M1 codes.
std::vector<uint8_t> ggml_mxfp4_of(const quant::Mxfp4Matrix& m);
// NVFP4 from nvfp4 blocks: four of qjoule's 16-blocks a GGML block of 64 (their E4M3 scales as its UE4M3 ones,
// never negative or NaN here); the tensor scale goes beside it (io/gguf.h). One line when a row is not whole
// blocks of 64.
std::vector<uint8_t> ggml_nvfp4_of(const quant::Nvfp4Matrix& m, const std::string& tensor);

}  // namespace qjoule::model
