// Tensor element types as safetensors names them.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace qjoule::io {

enum class DType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL, F8_E4M3, F8_E5M2 };

std::string_view dtype_name(DType dtype);                     // "F32", "BF16", "F8_E4M3", ...
std::optional<DType> dtype_from_name(std::string_view name);  // nullopt for names qjoule does not know
std::size_t dtype_size(DType dtype);                          // bytes per element

// Conversions of single values to FP32 (used when loading F16/BF16 checkpoints).
float fp16_to_f32(unsigned short bits);
float bf16_to_f32(unsigned short bits);

}  // namespace qjoule::io
