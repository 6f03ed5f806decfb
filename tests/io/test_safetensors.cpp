// safetensors reader: round trips, sharded checkpoints, and one test per bad-input message.
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qjoule/error.h"
#include "qjoule/io/safetensors.h"
#include "test_paths.h"

namespace {

using qjoule::io::Checkpoint;
using qjoule::io::DType;
using qjoule::io::SafetensorsFile;
using ::testing::AllOf;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::span<const std::byte> bytes_of(const std::vector<float>& v) { return std::as_bytes(std::span(v)); }

void write_raw(const fs::path& path, const std::string& header, size_t data_bytes, int64_t header_len_override = -1) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  uint64_t n = header_len_override >= 0 ? uint64_t(header_len_override) : header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
  out << header;
  out << std::string(data_bytes, '\0');
}

std::string error_of(const fs::path& path) {
  try {
    SafetensorsFile::open(path);
  } catch (const qjoule::Error& e) {
    return e.what();
  }
  return "(no error)";
}

class SafetensorsTest : public ::testing::Test {
 protected:
  fs::path dir = qjoule::test::temp_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
};

TEST_F(SafetensorsTest, RoundTripsTensorsAndMetadata) {
  std::vector<float> a{1, 2, 3, 4, 5, 6}, b{-1.5f};
  std::vector<uint16_t> h{0x3c00, 0xc000};  // fp16 1.0, -2.0
  qjoule::io::write_safetensors(dir / "m.safetensors",
                                {{"a", DType::F32, {2, 3}, bytes_of(a)},
                                 {"b", DType::F32, {1}, bytes_of(b)},
                                 {"h", DType::F16, {2}, std::as_bytes(std::span(h))}},
                                {{"format", "pt"}});
  auto ck = Checkpoint::open(dir / "m.safetensors");
  ASSERT_EQ(ck.tensors().size(), 3u);
  EXPECT_EQ(ck.at("a").shape_string(), "[2, 3]");
  EXPECT_EQ(ck.to_f32("a"), a);
  EXPECT_EQ(ck.to_f32("h"), (std::vector<float>{1.0f, -2.0f}));
  EXPECT_EQ(SafetensorsFile::open(dir / "m.safetensors").metadata().at("format"), "pt");
}

// release() drops a tensor's pages from memory, never its values: the tensor and its neighbours (which
// share its first and last pages) read back unchanged, and releasing twice is harmless.
TEST_F(SafetensorsTest, ReleasedTensorsReadBackUnchanged) {
  std::vector<float> before{1, 2, 3}, big(20000), after{4, 5};
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i) * 0.5f;
  qjoule::io::write_safetensors(dir / "m.safetensors", {{"before", DType::F32, {3}, bytes_of(before)},
                                                        {"big", DType::F32, {20000}, bytes_of(big)},
                                                        {"after", DType::F32, {2}, bytes_of(after)}});
  const auto ck = Checkpoint::open(dir / "m.safetensors");
  EXPECT_EQ(ck.unread_tensors(), (std::vector<std::string>{"after", "before", "big"}));
  EXPECT_EQ(ck.to_f32("big"), big);
  EXPECT_EQ(ck.unread_tensors(), (std::vector<std::string>{"after", "before"}));
  ck.release("big");
  ck.release("big");
  ck.release("before");
  EXPECT_EQ(ck.to_f32("before"), before);
  EXPECT_EQ(ck.to_f32("big"), big);
  EXPECT_EQ(ck.to_f32("after"), after);
}

TEST_F(SafetensorsTest, LoadsShardedCheckpoints) {
  std::vector<float> a{1, 2}, b{3};
  qjoule::io::write_safetensors(dir / "model-00001-of-00002.safetensors", {{"a", DType::F32, {2}, bytes_of(a)}});
  qjoule::io::write_safetensors(dir / "model-00002-of-00002.safetensors", {{"b", DType::F32, {1}, bytes_of(b)}});
  std::ofstream(dir / "model.safetensors.index.json")
      << R"({"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}})";
  auto ck = Checkpoint::open(dir);
  EXPECT_EQ(ck.files().size(), 2u);
  EXPECT_EQ(ck.to_f32("b"), b);
}

TEST_F(SafetensorsTest, TruncatedFile) {
  std::ofstream(dir / "t.safetensors") << "abc";
  EXPECT_THAT(error_of(dir / "t.safetensors"), AllOf(HasSubstr("t.safetensors"), HasSubstr("truncated: 3 bytes")));
}

TEST_F(SafetensorsTest, TruncatedDataArea) {
  write_raw(dir / "t.safetensors", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8);
  EXPECT_THAT(error_of(dir / "t.safetensors"),
              AllOf(HasSubstr("tensor 'w'"), HasSubstr("[0, 16] run past the data area (8 bytes)")));
}

TEST_F(SafetensorsTest, HeaderLengthPastEnd) {
  write_raw(dir / "h.safetensors", "{}", 0, 1000);
  EXPECT_THAT(error_of(dir / "h.safetensors"),
              AllOf(HasSubstr("h.safetensors"),
                    HasSubstr("header length 1000 runs past the end of the file (10 bytes, so at most 2)")));
}

TEST_F(SafetensorsTest, HeaderNotJson) {
  write_raw(dir / "j.safetensors", "{not json", 0);
  EXPECT_THAT(error_of(dir / "j.safetensors"), HasSubstr("j.safetensors: header (9 bytes) is not valid JSON"));
  write_raw(dir / "k.safetensors", "[1,2]", 0);
  EXPECT_THAT(error_of(dir / "k.safetensors"), HasSubstr("header is a JSON array, expected a JSON object"));
}

TEST_F(SafetensorsTest, OffsetsOutOfRange) {
  write_raw(dir / "o.safetensors", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", 8);
  EXPECT_THAT(error_of(dir / "o.safetensors"),
              HasSubstr("tensor 'w': data_offsets [8, 16] run past the data area (8 bytes)"));
  write_raw(dir / "r.safetensors", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8);
  EXPECT_THAT(error_of(dir / "r.safetensors"), HasSubstr("tensor 'w': data_offsets [8, 0] end before begin"));
}

TEST_F(SafetensorsTest, OverlappingTensors) {
  write_raw(
      dir / "v.safetensors",
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
      12);
  EXPECT_THAT(error_of(dir / "v.safetensors"), HasSubstr("tensors 'a' (bytes 0..8) and 'b' (bytes 4..12) overlap"));
}

TEST_F(SafetensorsTest, DtypeShapeSizeMismatch) {
  write_raw(dir / "s.safetensors", R"({"w":{"dtype":"F16","shape":[3,2],"data_offsets":[0,8]}})", 8);
  EXPECT_THAT(error_of(dir / "s.safetensors"),
              HasSubstr("tensor 'w': holds 8 bytes, but shape [3, 2] of F16 needs 12"));
}

TEST_F(SafetensorsTest, UnknownDtype) {
  write_raw(dir / "d.safetensors", R"({"w":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}})", 1);
  EXPECT_THAT(error_of(dir / "d.safetensors"), HasSubstr("tensor 'w': unknown dtype 'F4', expected one of F64 F32"));
}

TEST_F(SafetensorsTest, RecognisesFp8Dtypes) {
  write_raw(dir / "f8.safetensors", R"({"w":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,4]}})", 4);
  auto ck = Checkpoint::open(dir / "f8.safetensors");
  EXPECT_EQ(ck.at("w").dtype, DType::F8_E4M3);
  try {
    ck.to_f32("w");
    FAIL() << "expected an error";
  } catch (const qjoule::Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("tensor 'w' has dtype F8_E4M3, expected a floating-point dtype"));
  }
}

TEST_F(SafetensorsTest, MissingTensorAndMissingFile) {
  std::vector<float> a{1};
  qjoule::io::write_safetensors(dir / "model.safetensors", {{"a", DType::F32, {1}, bytes_of(a)}});
  auto ck = Checkpoint::open(dir);
  try {
    ck.at("classifier.weight");
    FAIL() << "expected an error";
  } catch (const qjoule::Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("tensor 'classifier.weight' is missing"));
  }
  try {
    Checkpoint::open(dir / "nope");
    FAIL() << "expected an error";
  } catch (const qjoule::Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("nope: no such file or folder"));
  }
}

// An index whose shard path leaves the checkpoint folder (through "..", or absolute) is one line naming
// the index, the tensor and the path; nothing outside is opened. A symlink inside the folder is
// followed (the Hugging Face cache's layout: every shard a link into its blobs folder).
TEST_F(SafetensorsTest, ShardPathsMustStayInsideTheCheckpointFolder) {
  std::vector<float> a{1};
  const fs::path outside = dir / "outside";
  fs::create_directories(outside);
  qjoule::io::write_safetensors(outside / "s1.safetensors", {{"a", DType::F32, {1}, bytes_of(a)}});
  const fs::path model = dir / "model";
  fs::create_directories(model);
  fs::create_symlink(outside, model / "link");
  const std::vector<std::string> escaping = {"../outside/s1.safetensors", (outside / "s1.safetensors").string(),
                                             "link/../../outside/s1.safetensors"};
  for (const std::string& shard : escaping) {
    std::ofstream(model / "model.safetensors.index.json") << R"({"weight_map": {"a": ")" + shard + R"("}})";
    try {
      Checkpoint::open(model);
      FAIL() << "expected an error for " << shard;
    } catch (const qjoule::Error& e) {
      EXPECT_THAT(std::string(e.what()), AllOf(HasSubstr("model.safetensors.index.json: weight_map['a'] names shard '" +
                                                         shard + "', which is outside the checkpoint folder"),
                                               HasSubstr("expected a file name inside it")));
    }
  }
  std::ofstream(model / "model.safetensors.index.json") << R"({"weight_map": {"a": "link/s1.safetensors"}})";
  EXPECT_EQ(Checkpoint::open(model).to_f32("a"), a);
}

// A NaN or Inf in a weight is an error at load, at every precision (FP32 included), naming the file, the
// tensor, its shape and the first bad element's index; F16 and BF16 infinities too.
TEST_F(SafetensorsTest, NonFiniteWeightsAreAnErrorNamingTheTensorAndIndex) {
  std::vector<float> w(2 * 5, 0.5f);
  w[7] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> v{1.0f, -std::numeric_limits<float>::infinity()};
  std::vector<uint16_t> h{0x3c00, 0x7c00};  // fp16 1.0, +Inf
  qjoule::io::write_safetensors(dir / "m.safetensors", {{"layer.weight", DType::F32, {2, 5}, bytes_of(w)},
                                                        {"v", DType::F32, {2}, bytes_of(v)},
                                                        {"h", DType::F16, {2}, std::as_bytes(std::span(h))}});
  const auto ck = Checkpoint::open(dir / "m.safetensors");
  const auto message = [&](const std::string& name) {
    try {
      (void)ck.to_f32(name);
    } catch (const qjoule::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(message("layer.weight"), AllOf(HasSubstr("m.safetensors: tensor 'layer.weight' [2, 5] has NaN at [1, 2]"),
                                             HasSubstr("expected finite values")));
  EXPECT_THAT(message("v"), HasSubstr("tensor 'v' [2] has -Inf at [1]"));
  EXPECT_THAT(message("h"), HasSubstr("tensor 'h' [2] has +Inf at [1]"));
}

TEST_F(SafetensorsTest, ShardIndexNamingAbsentTensor) {
  std::vector<float> a{1};
  qjoule::io::write_safetensors(dir / "s1.safetensors", {{"a", DType::F32, {1}, bytes_of(a)}});
  std::ofstream(dir / "model.safetensors.index.json") << R"({"weight_map": {"b": "s1.safetensors"}})";
  try {
    Checkpoint::open(dir);
    FAIL() << "expected an error";
  } catch (const qjoule::Error& e) {
    EXPECT_THAT(std::string(e.what()),
                HasSubstr("weight_map puts tensor 'b' in s1.safetensors, but that shard does not hold it"));
  }
}

}  // namespace
