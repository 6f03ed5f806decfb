// Writes a copy of a decoder checkpoint as a GPTQ (gptq_v2 zeros) or AWQ checkpoint whose codes are
// qjoule's own int4 quantizer's (tests/model/prequantized/prequantized_writer.h: the public layouts), so that the
// import of a real-size pre-quantized checkpoint can be timed against qjoule's own format on the same
// weights (microbench/README.md):
//   build/release/microbench/write_synthetic_decoder /tmp/tinyllama-shapes --tokenizer tests/fixtures/decoders/tiny-llama
//   build/release/microbench/write_gptq_copy /tmp/tinyllama-shapes /tmp/tinyllama-gptq --group 128
//   qjoule bench --model /tmp/tinyllama-gptq --precisions int4:g=128:asym ...   # vs the same on /tmp/tinyllama-shapes
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "../tests/model/prequantized/prequantized_writer.h"
#include "qjoule/error.h"

int main(int argc, char** argv) {
  CLI::App app{"Write a decoder checkpoint's copy as GPTQ (or AWQ) with qjoule's own int4 codes."};
  std::string src, dst, method = "gptq";
  int group = 128;
  bool sym = false;
  app.add_option("src", src, "checkpoint folder (FP32 / FP16 / BF16)")->required()->check(CLI::ExistingDirectory);
  app.add_option("dst", dst, "output folder (created)")->required();
  app.add_option("--group", group, "group size")->check(CLI::IsMember({32, 64, 128}))->capture_default_str();
  app.add_option("--method", method, "gptq or awq")->check(CLI::IsMember({"gptq", "awq"}))->capture_default_str();
  app.add_flag("--sym", sym, "GPTQ sym (zero 8) instead of asym");
  CLI11_PARSE(app, argc, argv);
  try {
    using namespace qjoule;
    const test::PrequantizedLayout layout{method, group, sym, true, method == "gptq"};
    const auto codes = [&](const std::string& name, const std::vector<float>& w, int64_t out, int64_t in) {
      if (sym) {
        if (group == 32) return test::qjoule_codes<quant::BlockInt4Sym<32>>(name, w, out, in);
        if (group == 64) return test::qjoule_codes<quant::BlockInt4Sym<64>>(name, w, out, in);
        return test::qjoule_codes<quant::BlockInt4Sym<128>>(name, w, out, in);
      }
      if (group == 32) return test::qjoule_codes<quant::BlockInt4Asym<32>>(name, w, out, in);
      if (group == 64) return test::qjoule_codes<quant::BlockInt4Asym<64>>(name, w, out, in);
      return test::qjoule_codes<quant::BlockInt4Asym<128>>(name, w, out, in);
    };
    test::write_prequantized_copy(src, dst, layout, codes);
    fmt::print("wrote {} ({} 4-bit, group {}, {})\n", dst, method, group, sym ? "sym" : "asym");
  } catch (const qjoule::Error& e) {
    fmt::print(stderr, "write_gptq_copy: {}\n", e.what());
    return 1;
  }
  return 0;
}
