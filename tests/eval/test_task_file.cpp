// Task files (eval/task_file.h): the three shapes read as lm-evaluation-harness reads them (HellaSwag's
// preprocessing, ARC's "Question: …\nAnswer:"), --task-limit's first N, and every bad item as one line
// naming the file and line; and lm-eval's pair encoding (eval/task_scoring.h): the context's trailing
// whitespace moves to the continuation.
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_of.h"
#include "qjoule/eval/task_file.h"
#include "qjoule/eval/task_scoring.h"
#include "test_paths.h"

namespace {

namespace fs = std::filesystem;
using namespace qjoule;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

fs::path tasks() { return test::fixtures_dir() / "tasks"; }

TEST(TaskFile, QjoulesShapeIsReadAsWritten) {
  const auto t = eval::read_task_file(tasks() / "tiny_qjoule.jsonl");
  EXPECT_EQ(t.name, "tiny_qjoule");
  EXPECT_EQ(t.shape, eval::TaskShape::qjoule);
  ASSERT_EQ(t.items.size(), 8u);
  EXPECT_EQ(t.items_in_file, 8);
  EXPECT_EQ(t.items[1].context, "She opened the door and ");
  EXPECT_THAT(t.items[1].choices, ElementsAre("walked in.", "the door."));
  EXPECT_EQ(t.items[5].gold, 1);
  EXPECT_EQ(t.items[5].line, 6);
}

TEST(TaskFile, HellaSwagRowsArePreprocessedAsLmEvalDoes) {
  const auto t = eval::read_task_file(tasks() / "tiny_hellaswag.jsonl");
  EXPECT_EQ(t.shape, eval::TaskShape::hellaswag);
  ASSERT_EQ(t.items.size(), 4u);
  EXPECT_EQ(t.items[0].context, "Roof shingle removal: A man is sitting on a roof. He");
  EXPECT_EQ(t.items[0].gold, 3);  // "3", a string, as Hugging Face's rows have it
  // ctx_b capitalized (the rest lower-cased), " [title]" to ". ", every "[…]" dropped, double spaces single;
  // a bracket at the start leaves its space, as Python's preprocess does.
  EXPECT_EQ(t.items[2].context, "Home and Garden: How to grow a. plant Choose a pot. Fill it with soil");
  EXPECT_THAT(t.items[2].choices,
              ElementsAre(" and water it well.", "and eat the pot.", " Then plant the seed.", "and sing loudly."));
  EXPECT_EQ(t.items[3].context, "A boy is running down a track. The boy");  // ctx alone, no activity_label
  EXPECT_EQ(eval::hellaswag_preprocess("  a [b] c [title]d  e [unclosed "), "a c. d e [unclosed");
}

TEST(TaskFile, ArcRowsReadAsQuestionAndAnswer) {
  const auto t = eval::read_task_file(tasks() / "tiny_arc.jsonl");
  EXPECT_EQ(t.shape, eval::TaskShape::arc);
  ASSERT_EQ(t.items.size(), 4u);
  EXPECT_EQ(t.items[3].context, "Question: Which of these is a mammal?\nAnswer:");
  EXPECT_THAT(t.items[3].choices, ElementsAre("whale", "shark"));
  EXPECT_EQ(t.items[0].gold, 2);  // answerKey "C"
  EXPECT_EQ(t.items[2].gold, 3);  // answerKey "4" among labels "1" .. "4"
}

TEST(TaskFile, ALimitKeepsTheFirstItems) {
  const auto t = eval::read_task_file(tasks() / "tiny_qjoule.jsonl", 3);
  ASSERT_EQ(t.items.size(), 3u);
  EXPECT_EQ(t.items_in_file, 8);
  EXPECT_EQ(t.items[2].context, "Water boils at one hundred degrees");
}

TEST(TaskFile, EveryBadItemIsOneLineNamingTheFileAndLine) {
  const auto dir = test::temp_dir("task_file_bad");
  const auto message = [&](const std::string& second_line) {
    std::ofstream(dir / "t.jsonl") << R"({"context": "a b", "choices": ["c", "d"], "label": 0})"
                                   << "\n"
                                   << second_line << "\n";
    return test::error_of([&] { eval::read_task_file(dir / "t.jsonl"); });
  };
  const std::string at = (dir / "t.jsonl").string() + ":2: ";
  EXPECT_THAT(message(R"({"context": " ", "choices": ["c", "d"], "label": 0})"),
              HasSubstr(at + "the context is empty, expected the text the choices continue"));
  EXPECT_THAT(message(R"({"context": "a", "choices": ["c"], "label": 0})"),
              HasSubstr(at + "1 choice in 'choices', expected at least two"));
  EXPECT_THAT(message(R"({"context": "a", "choices": ["c", ""], "label": 0})"),
              HasSubstr(at + "choices[1] is empty, expected a continuation"));
  EXPECT_THAT(message(R"({"context": "a", "choices": ["c", "d"], "label": 2})"),
              HasSubstr(at + "label 2 is out of range for 2 choices, expected 0 to 1"));
  EXPECT_THAT(message(R"({"context": "a", "choices": ["c", "d"]})"),
              HasSubstr(at + "no 'label' field (found fields: choices, context), expected the right choice's index"));
  EXPECT_THAT(message(R"({"context": "a", "choices": ["c", 4], "label": 0})"),
              HasSubstr(at + "choices[1] is 4 (a JSON number), expected a string"));
  EXPECT_THAT(message(R"({"context": "a", "choices": "cd", "label": 0})"),
              HasSubstr(at + "'choices' is \"cd\" (a JSON string), expected an array of strings"));
  EXPECT_THAT(message("{\"context\": "), HasSubstr(at + "malformed JSON ("));
  EXPECT_THAT(message("[1, 2]"), HasSubstr(at + "found a JSON array, expected one task item, a JSON object"));

  std::ofstream(dir / "u.jsonl") << R"({"prompt": "a", "answers": ["c", "d"]})"
                                 << "\n";
  EXPECT_THAT(test::error_of([&] { eval::read_task_file(dir / "u.jsonl"); }),
              HasSubstr(":1: a task item of unknown shape (found fields: answers, prompt), expected context / choices "
                        "/ label (qjoule), ctx / endings / label (HellaSwag) or question / choices / answerKey (ARC)"));
  std::ofstream(dir / "arc.jsonl")
      << R"({"question": "q", "choices": {"text": ["a", "b"], "label": ["A", "B"]}, "answerKey": "E"})"
      << "\n";
  EXPECT_THAT(test::error_of([&] { eval::read_task_file(dir / "arc.jsonl"); }),
              HasSubstr(":1: answerKey \"E\" is none of choices.label (A, B), expected one of them"));
  std::ofstream(dir / "hs.jsonl") << R"({"ctx": "q", "endings": ["a", "b"], "label": ""})"
                                  << "\n";
  EXPECT_THAT(test::error_of([&] { eval::read_task_file(dir / "hs.jsonl"); }),
              HasSubstr(":1: 'label' is \"\" (a JSON string), expected the right choice's index (an integer)"));
  std::ofstream(dir / "empty.jsonl") << "\n \n";
  EXPECT_THAT(test::error_of([&] { eval::read_task_file(dir / "empty.jsonl"); }),
              HasSubstr("--task " + (dir / "empty.jsonl").string() + ": the text is empty"));
}

TEST(TaskScoring, ThePairEncodingMovesTheContextsTrailingSpaceToTheContinuation) {
  const auto tok =
      tokenize::BpeTokenizer::from_tokenizer_json(test::fixtures_dir() / "decoders" / "tiny-gpt2" / "tokenizer.json");
  const auto moved = eval::encode_pair(tok, "She opened the door and ", " walked in.");
  const auto plain = eval::encode_pair(tok, "She opened the door and", "  walked in.");
  EXPECT_EQ(moved.context, plain.context);
  EXPECT_EQ(moved.continuation, plain.continuation);
  EXPECT_EQ(moved.context, tok.encode("She opened the door and"));
  auto whole = tok.encode("She opened the door and  walked in.");
  EXPECT_EQ(std::vector<int32_t>(whole.begin() + std::ptrdiff_t(moved.context.size()), whole.end()),
            moved.continuation);
  EXPECT_EQ(eval::proportion_stderr(0.5, 5), 0.25);
}

}  // namespace
