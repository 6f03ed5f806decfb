// A multiple-choice task for a language model (`qjoule score --task FILE`, `qjoule bench --task FILE`):
// items of a context and two or more choices, one of them right, read from JSON Lines in one of three
// shapes, told apart by the first line's fields:
//   qjoule     {"context": "The cat sat on", "choices": ["the mat.", "a idea."], "label": 0}
//   HellaSwag  {"activity_label": …, "ctx_a": …, "ctx_b": …, "ctx": …, "endings": [4 strings], "label": "0"}
//              (Hugging Face's Rowan/hellaswag rows, as lm-evaluation-harness reads them: context
//              preprocess(activity_label + ": " + ctx_a + " " + capitalize(ctx_b)) (ctx where ctx_a / ctx_b
//              are absent; no "label: " prefix without an activity_label), choices preprocess(ending);
//              preprocess strips the text, turns " [title]" into ". ", drops every "[…]" and turns double
//              spaces into single ones; capitalize upper-cases the first ASCII letter and lower-cases the rest)
//   ARC        {"question": …, "choices": {"text": […], "label": ["A", "B", …]}, "answerKey": "B"}
//              (allenai/ai2_arc rows; context "Question: " + question + "\nAnswer:", choices choices.text,
//              the right one where choices.label equals answerKey, as lm-eval's arc_easy / arc_challenge)
// Each choice continues its context after a space (lm-eval's target delimiter), scored by task_scoring.h.
// Bad input is one line naming the file and line: not JSON, an unknown shape, an empty context, fewer
// than two choices, an empty choice, a label out of range or missing.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace qjoule::eval {

enum class TaskShape { qjoule, hellaswag, arc };
std::string_view task_shape_name(TaskShape shape);  // "qjoule", "HellaSwag", "ARC"

struct TaskItem {
  int64_t line = 0;     // in the file, 1-based
  std::string context;  // as the model reads it, before the choices
  std::vector<std::string> choices;
  int32_t gold = 0;  // the right choice
};

struct Task {
  std::filesystem::path path;
  std::string name;  // the file's stem: hellaswag_val.jsonl is "hellaswag_val"
  TaskShape shape = TaskShape::qjoule;
  std::vector<TaskItem> items;  // the file's first `limit` items (all where limit is 0)
  int64_t items_in_file = 0;
};

// Reads `path` (`flag` names it in messages: "--task"); only the first `limit` items are checked and kept
// where limit > 0, as lm-eval's --limit takes the first N.
Task read_task_file(const std::filesystem::path& path, int64_t limit = 0, const std::string& flag = "--task");
// The same from the file's bytes as eval::read_text_file read them (for callers that hash them too).
Task parse_task_file(const std::filesystem::path& path, std::string_view bytes, int64_t limit = 0);

// HellaSwag's preprocess (above), for tests and the reference scorer's twin.
std::string hellaswag_preprocess(std::string_view text);

}  // namespace qjoule::eval
