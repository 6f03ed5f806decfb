// What each backend runs (qjoule/kernels/backend_registry.h): the rows, the names and sweeps read from
// them, every CPU format's kernel path at every ISA this CPU has matched against its row, and the README's
// format table checked against the registry.
#include "qjoule/kernels/backend_registry.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <cctype>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_of.h"
#include "qjoule/kernels/linear_weight_only.h"
#include "qjoule/kernels/make_linear.h"
#include "random_data.h"
#include "test_paths.h"

namespace {

using namespace qjoule::kernels;
namespace quant = qjoule::quant;
using ::testing::HasSubstr;

TEST(BackendRegistry, NamesAndSweepsComeFromTheRows) {
  EXPECT_EQ(backend_format_names(Backend::cpu), "fp32, bf16, fp16, int8, w8, int4, nf4, mxfp4, nvfp4");
  EXPECT_EQ(backend_format_names(Backend::cuda), "fp32, bf16, fp16, int8, int4, nf4, tf32, fp8, mxfp4, nvfp4");
  EXPECT_EQ(default_sweep_precisions(Backend::cpu), "fp32,bf16,int8,w8,int4,nf4");
  EXPECT_EQ(default_sweep_precisions(Backend::cuda), "fp32,bf16,int8,int4,nf4");  // w8 has no CUDA kernel
  EXPECT_FALSE(runs_on(Backend::cpu, quant::Format::fp8));
  EXPECT_TRUE(runs_on(Backend::cuda, quant::Format::fp8));
  for (const auto backend : {Backend::cpu, Backend::cuda}) {
    for (const BackendFormat* row : backend_formats(backend)) {
      EXPECT_FALSE(row->kernels.empty()) << quant::name(row->format);
      EXPECT_EQ(static_cast<bool>(row->build_cpu), backend == Backend::cpu) << quant::name(row->format);
      for (const auto& k : row->kernels) {
        EXPECT_FALSE(k.isa.empty()) << quant::name(row->format);
        EXPECT_FALSE(k.kernel_path.empty()) << quant::name(row->format);
      }
    }
  }
}

TEST(BackendRegistry, KernelPathPatternsMatchWithStars) {
  EXPECT_TRUE(kernel_path_matches("onednn:*:f32", "onednn:brg:avx512_core:f32"));
  EXPECT_TRUE(kernel_path_matches("qjoule:avx2:int4_f32", "qjoule:avx2:int4_f32"));
  EXPECT_TRUE(kernel_path_matches("onednn:*:u8s8s32*", "onednn:gemm:jit:u8s8s32:w7bit:smoothed"));
  EXPECT_TRUE(kernel_path_matches("a*b*c", "aXbYbZc"));
  EXPECT_FALSE(kernel_path_matches("qjoule:avx2:int4_f32", "qjoule:avx2:int4_f32x"));
  EXPECT_FALSE(kernel_path_matches("onednn:*:f32", "onednn:brg:avx512_core:bf16bf16f32x"));
  EXPECT_FALSE(kernel_path_matches("a*b", "ac"));
}

// The kernel path of `spec` built now matches one of its row's patterns.
void expect_registered(const std::string& spec, const std::string& when) {
  const int64_t out = 16, in = 256;
  const auto w = qjoule::test::random_vector(std::size_t(out * in), 7, 0.05f);
  const quant::FormatSpec f = quant::parse_format_spec(spec);
  const std::string path = make_linear(f, w.data(), nullptr, out, in, "t")->kernel_path();
  const BackendFormat* row = find_backend_format(Backend::cpu, f.format);
  ASSERT_NE(row, nullptr) << spec;
  bool found = false;
  for (const auto& k : row->kernels) found = found || kernel_path_matches(k.kernel_path, path);
  EXPECT_TRUE(found) << spec << " (" << when << ") ran '" << path << "', which its CPU row does not name";
}

TEST(BackendRegistry, EveryCpuKernelPathIsOneItsRowNames) {
  const std::vector<std::string> specs = {
      "fp32", "bf16", "fp16", "int8", "w8", "int4", "int4:g=32:asym", "int4:a8", "int4:g=64:asym:a8", "nf4", "nf4:dq"};
  const char* before = std::getenv("QJOULE_WEIGHT_ONLY_DECODE");
  const std::string saved = before != nullptr ? before : "";
  for (const WeightOnlyIsa isa :
       {WeightOnlyIsa::scalar, WeightOnlyIsa::avx2, WeightOnlyIsa::avx512, WeightOnlyIsa::avx512_bf16}) {
    set_weight_only_isa_limit(isa);
    if (weight_only_isa() != isa) continue;  // this CPU has no such ISA
    for (const char* decode : {"x16", "float"}) {
      ::setenv("QJOULE_WEIGHT_ONLY_DECODE", decode, 1);
      for (const auto& spec : specs)
        expect_registered(spec, std::string("ISA ") + std::string(isa_name(isa)) + ", decode " + decode);
    }
  }
  set_weight_only_isa_limit(WeightOnlyIsa::avx512_bf16);
  if (before != nullptr) {
    ::setenv("QJOULE_WEIGHT_ONLY_DECODE", saved.c_str(), 1);
  } else {
    ::unsetenv("QJOULE_WEIGHT_ONLY_DECODE");
  }
  const std::vector<float> s(256, 1.0f);
  const auto w = qjoule::test::random_vector(16 * 256, 7, 0.05f);
  const std::string smoothed =
      make_linear(quant::parse_format_spec("int8"), w.data(), nullptr, 16, 256, "t", s.data())->kernel_path();
  EXPECT_TRUE(kernel_path_matches("*:u8s8s32*", smoothed)) << smoothed;
}

TEST(BackendRegistry, FormatsWithoutACpuRowAreOneLineNamingWhereTheyRun) {
  const std::vector<float> w(4 * 32, 0.1f);
  EXPECT_THAT(
      qjoule::test::error_of(
          [&] { make_linear(quant::parse_format_spec("fp8"), w.data(), nullptr, 4, 32, "layer.0.q"); }),
      HasSubstr("layer.0.q: fp8 runs on CUDA only; on the CPU expected one of fp32, bf16, fp16, int8, w8, int4, "
                "nf4"));
}

// "| `int4[:g=...]` | cpu, cuda (`:a8`: cpu) | ..." -> {"int4", "cpu, cuda"}: every row of README.md's format
// table, its format and the backends its "runs on" cell names before any parenthesis.
std::vector<std::pair<std::string, std::string>> readme_format_rows() {
  std::ifstream in(qjoule::test::fixtures_dir().parent_path().parent_path() / "README.md");
  std::vector<std::pair<std::string, std::string>> rows;
  std::string line;
  bool in_table = false;
  while (std::getline(in, line)) {
    if (line.starts_with("| format | runs on |")) {
      in_table = true;
      continue;
    }
    if (!in_table) continue;
    if (!line.starts_with("|")) break;
    if (!line.starts_with("| `")) continue;  // the separator row
    std::size_t end = 3;
    while (end < line.size() && (std::islower(static_cast<unsigned char>(line[end])) != 0 ||
                                 std::isdigit(static_cast<unsigned char>(line[end])) != 0))
      ++end;
    const std::size_t cell = line.find(" | ");  // cells are " | "-separated (an escaped pipe has no spaces)
    if (cell == std::string::npos) continue;
    std::string runs = line.substr(cell + 3, line.find(" | ", cell + 3) - cell - 3);
    if (const auto paren = runs.find(" ("); paren != std::string::npos) runs.resize(paren);
    rows.emplace_back(line.substr(3, end - 3), runs);
  }
  return rows;
}

TEST(BackendRegistry, TheReadmeFormatTableSaysWhereEachFormatRunsAsTheRegistryDoes) {
  const auto rows = readme_format_rows();
  ASSERT_GE(rows.size(), 9u) << "README.md: no format table with a 'runs on' column";
  std::set<std::string> listed;
  for (const auto& [name, runs] : rows) {
    const auto f = quant::find_format(name);
    ASSERT_TRUE(f.has_value()) << "README.md lists '" << name << "', which is no format";
    const bool cpu = runs_on(Backend::cpu, *f), cuda = runs_on(Backend::cuda, *f);
    EXPECT_EQ(runs, cpu && cuda ? "cpu, cuda" : cpu ? "cpu" : "cuda") << "README.md's row of " << name;
    listed.insert(name);
  }
  for (const auto& t : quant::all_formats()) {
    if (runs_on(Backend::cpu, t.format) || runs_on(Backend::cuda, t.format)) {
      EXPECT_EQ(listed.count(std::string(t.name)), 1u) << "README.md's format table has no row for " << t.name;
    }
  }
}

}  // namespace
