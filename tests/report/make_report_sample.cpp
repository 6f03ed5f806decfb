// Writes the report tests' sample (sample_results.h) to a folder: results.jsonl and
// traces/<run>.csv. Regenerate the committed copy with
//   build/<dir>/tests/report/make_report_sample tests/fixtures/report
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "sample_results.h"

namespace {

bool write(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_report_sample DIR\n");
    return 2;
  }
  namespace sample = qjoule::test::report_sample;
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir / "traces");
  if (!write(dir / "results.jsonl", sample::results_jsonl()) ||
      !write(dir / "traces" / (sample::int8_bs1_run() + ".csv"), sample::int8_bs1_trace_csv())) {
    std::fprintf(stderr, "make_report_sample: cannot write to %s\n", dir.c_str());
    return 1;
  }
  return 0;
}
