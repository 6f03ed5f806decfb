// The Linears of a model on one GPU (qjoule/model/cuda_linear_factory.h). No CUDA here: make_linear_cuda
// says why in one line when there is no GPU.
#include "qjoule/model/cuda_linear_factory.h"

#include <variant>

#include "qjoule/error.h"
#include "qjoule/kernels/linear_cuda.h"

namespace qjoule::model {

CudaLinearFormats cuda_linear_formats(const quant::LayerPolicy& policy) {
  return [policy](const LinearParams& p, bool in_block) {
    const auto format = policy.resolve(p.name, in_block, p.head_stored).spec;
    kernels::check_cuda_format(format, "tensor '" + p.name + "'");
    return format;
  };
}

bool cuda_fuses(const quant::FormatSpec& first, const quant::FormatSpec& part) {
  if (part != first) return false;
  return first.format != quant::Format::fp8 && !(first.format == quant::Format::nf4 && first.nf4_double_quant);
}

bool cuda_fuses_qkv(const quant::FormatSpec& q, const quant::FormatSpec& k, const quant::FormatSpec& v) {
  return cuda_fuses(q, k) && cuda_fuses(q, v);
}

LinearFactory cuda_linear_factory(CudaLinearFormats formats, int device) {
  return
      [formats = std::move(formats), device](const LinearParams& p, bool in_block) -> std::unique_ptr<kernels::Linear> {
        if (p.build_prequantized)
          fail("{}: a pre-quantized checkpoint's Linears ({}) run on the CPU only, for now; use --device cpu", p.name,
               p.prequantized_from);
        quant::FormatSpec format;
        if (p.fused_from.empty()) {
          format = formats(p, in_block);
        } else {
          // The format each part would get on its own (the policy matches names, not shapes).
          std::vector<quant::FormatSpec> parts;
          for (const auto& name : p.fused_from) {
            LinearParams part;
            part.name = name;
            part.in_features = p.in_features;
            parts.push_back(formats(part, in_block));
          }
          for (const auto& part : parts)
            if (!cuda_fuses(parts[0], part)) return nullptr;
          format = parts[0];
        }
        return kernels::make_linear_cuda(format, p.weight.data(), p.bias.empty() ? nullptr : p.bias.data(),
                                         p.out_features, p.in_features, p.name, device);
      };
}

Int4CodesLinear cuda_int4_codes_linear(int device) {
  return [device](Int4Codes codes, const float* bias, const std::string& name,
                  bool int8_activations) -> std::unique_ptr<kernels::Linear> {
    if (int8_activations)
      fail("{}: int4 with INT8 activations (a8) has no CUDA kernel; use int4 (FP32 activations) or --device cpu", name);
    return std::visit(
        [&](const auto& m) -> std::unique_ptr<kernels::Linear> {
          return kernels::make_linear_cuda_int4_packed(m, bias, name, device);
        },
        codes);
  };
}

}  // namespace qjoule::model
