// load_dataset / check_labels: the four forms, and a one-line message for each kind of bad input.
#include "qjoule/dataset.h"

#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qjoule/error.h"
#include "test_paths.h"

namespace qjoule::eval {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Writes `content` to a fresh folder named after the running test; returns the file's path.
std::filesystem::path write_dataset(const std::string& filename, const std::string& content) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const auto path = test::temp_dir(std::string("dataset-") + info->test_suite_name() + "-" + info->name()) / filename;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

std::string load_error(const std::filesystem::path& path, const DatasetOptions& options = {}) {
  try {
    load_dataset(path, options);
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    return message;
  }
  return "no error";
}

// --- well-formed inputs ----------------------------------------------------------------------

TEST(DatasetTsv, ReadsGlueStyleSentenceLabel) {
  const auto path = write_dataset("dev.tsv", "sentence\tlabel\nit 's a charming journey . \t1\nbleak \t0\n");
  const Dataset d = load_dataset(path);
  EXPECT_EQ(d.path, path);
  EXPECT_FALSE(d.pretokenized);
  EXPECT_TRUE(d.labeled);
  ASSERT_EQ(d.examples.size(), 2u);
  EXPECT_EQ(d.examples[0].text, "it 's a charming journey . ");
  EXPECT_EQ(d.examples[0].label, 1);
  EXPECT_EQ(d.examples[0].line, 2u);
  EXPECT_TRUE(d.examples[0].input_ids.empty());
  EXPECT_EQ(d.examples[1].text, "bleak ");
  EXPECT_EQ(d.examples[1].label, 0);
}

TEST(DatasetTsv, FindsNamedColumnsInAnyOrder) {
  const auto path = write_dataset("data.tsv", "id\tlabels\ttext\r\n7\t2\tgood\r\n\r\n8\t0\tbad\r\n");
  const Dataset d = load_dataset(path);
  ASSERT_EQ(d.examples.size(), 2u);
  EXPECT_EQ(d.examples[0].text, "good");
  EXPECT_EQ(d.examples[0].label, 2);
  EXPECT_EQ(d.examples[1].text, "bad");
  EXPECT_EQ(d.examples[1].line, 4u);  // the blank line still counts
}

TEST(DatasetTsv, ColumnOptionsOverrideAutoDetection) {
  const auto path = write_dataset("data.tsv", "review\tsentence\tstars\tlabel\ngreat\tx\t4\t0\n");
  DatasetOptions options;
  options.text_column = "review";
  options.label_column = "stars";
  const Dataset d = load_dataset(path, options);
  EXPECT_EQ(d.examples.at(0).text, "great");
  EXPECT_EQ(d.examples.at(0).label, 4);
}

TEST(DatasetTsv, UnlabeledWhenLabelsAreNotRequired) {
  const auto path = write_dataset("test.tsv", "index\tsentence\n0\tuneasy mishmash .\n1\tfine\n");
  DatasetOptions options;
  options.require_labels = false;
  const Dataset d = load_dataset(path, options);
  ASSERT_EQ(d.examples.size(), 2u);
  EXPECT_EQ(d.examples[0].text, "uneasy mishmash .");
  EXPECT_EQ(d.examples[0].label, -1);
  EXPECT_FALSE(d.labeled);
}

TEST(DatasetJsonl, ReadsTextAndLabel) {
  const auto path = write_dataset(
      "data.jsonl", "{\"text\": \"Café naïve\", \"label\": 1}\n\n{\"label\": 0, \"text\": \"bad\", \"extra\": [1]}\n");
  const Dataset d = load_dataset(path);
  EXPECT_FALSE(d.pretokenized);
  ASSERT_EQ(d.examples.size(), 2u);
  EXPECT_EQ(d.examples[0].text, "Café naïve");
  EXPECT_EQ(d.examples[0].label, 1);
  EXPECT_EQ(d.examples[1].text, "bad");
  EXPECT_EQ(d.examples[1].line, 3u);
}

TEST(DatasetJsonl, ReadsSentenceAndLabelsFieldsFromDotJson) {
  const auto path = write_dataset("data.json", "{\"sentence\": \"ok\", \"labels\": 3}\n");
  const Dataset d = load_dataset(path);
  EXPECT_EQ(d.examples.at(0).text, "ok");
  EXPECT_EQ(d.examples.at(0).label, 3);
}

TEST(DatasetJsonl, ReadsPretokenizedIds) {
  const auto path = write_dataset("ids.jsonl",
                                  "{\"input_ids\": [101, 7592, 102], \"attention_mask\": [1, 1, 1], \"label\": 1}\n"
                                  "{\"input_ids\": [101, 102], \"label\": 0, \"text\": \"ignored\"}\n");
  const Dataset d = load_dataset(path);
  EXPECT_TRUE(d.pretokenized);
  ASSERT_EQ(d.examples.size(), 2u);
  EXPECT_EQ(d.examples[0].input_ids, (std::vector<int32_t>{101, 7592, 102}));
  EXPECT_EQ(d.examples[0].attention_mask, (std::vector<int32_t>{1, 1, 1}));
  EXPECT_TRUE(d.examples[0].text.empty());
  EXPECT_EQ(d.examples[1].attention_mask, (std::vector<int32_t>{1, 1}));  // default: all ones
  EXPECT_EQ(d.examples[1].label, 0);
}

TEST(DatasetJsonl, PretokenizedWithoutLabels) {
  const auto path = write_dataset("ids.jsonl", "{\"input_ids\": [101, 102]}\n");
  DatasetOptions options;
  options.require_labels = false;
  const Dataset d = load_dataset(path, options);
  EXPECT_EQ(d.examples.at(0).label, -1);
  EXPECT_FALSE(d.labeled);
}

// --- bad inputs ------------------------------------------------------------------------------

TEST(DatasetErrors, MissingFile) {
  const auto path = test::temp_dir("dataset-missing") / "nope.tsv";
  EXPECT_THAT(load_error(path), HasSubstr(path.string() + ": dataset file not found"));
}

TEST(DatasetErrors, UnsupportedExtension) {
  const auto path = write_dataset("data.csv", "sentence,label\nx,1\n");
  EXPECT_THAT(load_error(path),
              HasSubstr(path.string() + ": unsupported dataset format '.csv', expected .tsv, .jsonl or .json"));
}

TEST(DatasetErrors, EmptyDataset) {
  EXPECT_THAT(load_error(write_dataset("empty.tsv", "")),
              AllOf(HasSubstr("empty.tsv: empty dataset (no lines)"), HasSubstr("expected a header line")));
  EXPECT_THAT(load_error(write_dataset("header.tsv", "sentence\tlabel\n")),
              HasSubstr("header.tsv: empty dataset (only a header line), expected at least one data row"));
  EXPECT_THAT(load_error(write_dataset("empty.jsonl", "\n\n")),
              HasSubstr("empty.jsonl: empty dataset (no lines), expected one JSON object per line"));
}

TEST(DatasetErrors, RowWithoutLabel) {
  EXPECT_THAT(load_error(write_dataset("dev.tsv", "sentence\tlabel\ngood\t1\nbad\t\n")),
              HasSubstr("dev.tsv:3: row has no label (column 'label' is empty), expected an integer class id"));
  EXPECT_THAT(load_error(write_dataset("dev.jsonl", "{\"text\": \"a\", \"label\": 1}\n{\"text\": \"b\"}\n")),
              AllOf(HasSubstr("dev.jsonl:2: row has no label (no 'label' field; found fields: text)"),
                    HasSubstr("expected an integer class id")));
  EXPECT_THAT(load_error(write_dataset("nolabel.tsv", "sentence\tscore\ngood\t1\n")),
              HasSubstr("nolabel.tsv:1: header has no label column (found columns: sentence, score), "
                        "expected one named 'label' or 'labels'"));
}

TEST(DatasetErrors, NonIntegerLabel) {
  EXPECT_THAT(
      load_error(write_dataset("dev.tsv", "sentence\tlabel\ngood\tpositive\n")),
      AllOf(HasSubstr("dev.tsv:2: label 'positive' in column 'label' is not an integer"),
            HasSubstr("expected an integer class id (string labels such as id2label names are not supported)")));
  EXPECT_THAT(load_error(write_dataset("dev2.tsv", "sentence\tlabel\ngood\t1.5\n")),
              HasSubstr("dev2.tsv:2: label '1.5' in column 'label' is not an integer"));
  EXPECT_THAT(load_error(write_dataset("dev.jsonl", "{\"text\": \"a\", \"label\": \"POSITIVE\"}\n")),
              AllOf(HasSubstr("dev.jsonl:1: 'label' is \"POSITIVE\" (a JSON string), expected an integer class id"),
                    HasSubstr("string labels such as id2label names are not supported")));
  EXPECT_THAT(load_error(write_dataset("dev2.jsonl", "{\"text\": \"a\", \"label\": 1.0}\n")),
              HasSubstr("dev2.jsonl:1: 'label' is 1.0 (a JSON number), expected an integer class id"));
}

TEST(DatasetErrors, InvalidUtf8Text) {
  EXPECT_THAT(load_error(write_dataset("dev.tsv", "sentence\tlabel\nok\t1\ncaf\xC3\t0\n")),
              HasSubstr("dev.tsv:3: invalid UTF-8 at byte offset 3"));
  EXPECT_THAT(load_error(write_dataset("dev.jsonl", "{\"text\": \"caf\xE9\", \"label\": 0}\n")),
              AllOf(HasSubstr("dev.jsonl:1: invalid UTF-8 at byte offset 13"), HasSubstr("expected valid UTF-8")));
}

TEST(DatasetErrors, WrongNumberOfColumns) {
  EXPECT_THAT(load_error(write_dataset("dev.tsv", "sentence\tlabel\nok\t1\nfoo\tbar\t1\n")),
              HasSubstr("dev.tsv:3: found 3 tab-separated fields, expected 2 as in the header (sentence, label)"));
  EXPECT_THAT(load_error(write_dataset("dev2.tsv", "sentence\tlabel\nno label column\n")),
              HasSubstr("dev2.tsv:2: found 1 tab-separated fields, expected 2"));
}

TEST(DatasetErrors, MalformedJsonLine) {
  const std::string message =
      load_error(write_dataset("dev.jsonl", "{\"text\": \"a\", \"label\": 1}\n{\"text\": \"b\", label: 0}\n"));
  EXPECT_THAT(message, HasSubstr("dev.jsonl:2: malformed JSON (parse error at line 1, column"));
  EXPECT_THAT(message, HasSubstr("expected one JSON object per line"));
  // Found by fuzz_dataset in CI: a number too large for a double threw past the reader.
  EXPECT_THAT(load_error(write_dataset("big.jsonl", "{\"text\": \"a\", \"label\": 2E2222222}\n")),
              HasSubstr("big.jsonl:1: malformed JSON (number overflow parsing '2E2222222')"));
  EXPECT_THAT(load_error(write_dataset("array.json", "[\n{\"text\": \"a\", \"label\": 1}\n]\n")),
              HasSubstr("array.json:1: malformed JSON"));
  EXPECT_THAT(load_error(write_dataset("list.jsonl", "[1, 2]\n")),
              HasSubstr("list.jsonl:1: found a JSON array, expected one JSON object per line"));
}

TEST(DatasetErrors, NonIntegerInputId) {
  EXPECT_THAT(load_error(write_dataset("ids.jsonl", "{\"input_ids\": [101, \"x\", 102], \"label\": 1}\n")),
              HasSubstr("ids.jsonl:1: input_ids[1] is \"x\" (a JSON string), expected an integer in 0..2147483647"));
  EXPECT_THAT(load_error(write_dataset("neg.jsonl", "{\"input_ids\": [101, -5], \"label\": 1}\n")),
              HasSubstr("neg.jsonl:1: input_ids[1] is -5 (a JSON number), expected an integer in 0..2147483647"));
  EXPECT_THAT(load_error(write_dataset("str.jsonl", "{\"input_ids\": \"101 102\", \"label\": 1}\n")),
              HasSubstr("str.jsonl:1: input_ids is \"101 102\" (a JSON string), expected an array of integers"));
  EXPECT_THAT(
      load_error(write_dataset("mask.jsonl", "{\"input_ids\": [101, 102], \"attention_mask\": [1], \"label\": 1}\n")),
      HasSubstr("mask.jsonl:1: attention_mask has 1 entries, expected 2 (one per input id)"));
  EXPECT_THAT(load_error(write_dataset("mask2.jsonl",
                                       "{\"input_ids\": [101, 102], \"attention_mask\": [1, 2], \"label\": 1}\n")),
              HasSubstr("mask2.jsonl:1: attention_mask[1] is 2 (a JSON number), expected an integer in 0..1"));
}

TEST(DatasetErrors, MissingTextField) {
  EXPECT_THAT(
      load_error(write_dataset("dev.jsonl", "{\"review\": \"a\", \"label\": 1}\n")),
      HasSubstr(
          "dev.jsonl:1: no text field (found fields: label, review), expected 'text', 'sentence' or 'input_ids'"));
  EXPECT_THAT(load_error(write_dataset("dev2.jsonl", "{\"text\": \"a\", \"label\": 1}\n{\"text\": 5, \"label\": 1}\n")),
              HasSubstr("dev2.jsonl:2: 'text' is 5 (a JSON number), expected a string"));
  EXPECT_THAT(load_error(write_dataset("dev.tsv", "review\tlabel\na\t1\n")),
              HasSubstr("dev.tsv:1: header has no text column (found columns: review, label)"));
  DatasetOptions options;
  options.text_column = "body";
  EXPECT_THAT(
      load_error(write_dataset("dev2.tsv", "review\tlabel\na\t1\n"), options),
      HasSubstr(
          "dev2.tsv:1: header has no 'body' column (found columns: review, label), expected the --text-column name"));
}

// --- check_labels ----------------------------------------------------------------------------

TEST(CheckLabels, AcceptsLabelsInRange) {
  const Dataset d = load_dataset(write_dataset("dev.tsv", "sentence\tlabel\na\t0\nb\t1\n"));
  EXPECT_NO_THROW(check_labels(d, 2));
}

TEST(CheckLabels, LabelAtOrAboveNumLabels) {
  const auto path = write_dataset("dev.tsv", "sentence\tlabel\na\t0\nb\t1\nc\t2\n");
  const Dataset d = load_dataset(path);
  try {
    check_labels(d, 2);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(),
                HasSubstr(path.string() + ":4: label 2 is out of range, expected 0..1 (the model has 2 labels)"));
  }
}

TEST(CheckLabels, NegativeAndMissingLabels) {
  const Dataset negative = load_dataset(write_dataset("neg.tsv", "sentence\tlabel\na\t-3\n"));
  EXPECT_THROW(check_labels(negative, 2), Error);
  DatasetOptions options;
  options.require_labels = false;
  const Dataset unlabeled = load_dataset(write_dataset("unlabeled.tsv", "sentence\tlabel\na\t\n"), options);
  try {
    check_labels(unlabeled, 2);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("unlabeled.tsv:2: label -1 is out of range, expected 0..1"));
    EXPECT_THAT(e.what(), HasSubstr("-1 means the row has no label"));
  }
}

// --- the real SST-2 dev set ------------------------------------------------------------------

TEST(DatasetSst2, LoadsDevTsv) {
  QJOULE_REQUIRE_SHARED("sst2/dev.tsv");
  const Dataset d = load_dataset(test::shared_data("sst2/dev.tsv"));
  ASSERT_EQ(d.examples.size(), 872u);
  EXPECT_TRUE(d.labeled);
  size_t positives = 0;
  for (const Example& e : d.examples) positives += e.label == 1 ? 1 : 0;
  EXPECT_EQ(positives, 444u);
  EXPECT_EQ(d.examples[0].text, "it 's a charming and often affecting journey . ");
  EXPECT_NO_THROW(check_labels(d, 2));
}

TEST(DatasetSst2, LoadsUnlabeledTestTsv) {
  QJOULE_REQUIRE_SHARED("sst2/test_unlabeled.tsv");
  EXPECT_THAT(load_error(test::shared_data("sst2/test_unlabeled.tsv")), HasSubstr("header has no label column"));
  DatasetOptions options;
  options.require_labels = false;
  const Dataset d = load_dataset(test::shared_data("sst2/test_unlabeled.tsv"), options);
  EXPECT_EQ(d.examples.size(), 1821u);
  EXPECT_FALSE(d.labeled);
}

}  // namespace
}  // namespace qjoule::eval
