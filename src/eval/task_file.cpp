#include "qjoule/eval/task_file.h"

#include <nlohmann/json.hpp>

#include "eval/dataset_readers.h"
#include "qjoule/error.h"
#include "qjoule/eval/text_file.h"
#include "qjoule/io/json_error_text.h"

namespace qjoule::eval {
namespace {

using nlohmann::json;

std::string fields_of(const json& object) { return join_names(field_names(object)); }

// Python's str.replace: every non-overlapping `from`, left to right.
std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  std::size_t at = 0;
  for (std::size_t found; (found = text.find(from, at)) != std::string_view::npos; at = found + from.size()) {
    out.append(text.substr(at, found - at));
    out.append(to);
  }
  out.append(text.substr(at));
  return out;
}

// Python's str.capitalize on ASCII letters: the first upper-cased, the rest lower-cased.
std::string capitalize(std::string_view text) {
  std::string out(text);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const char c = out[i];
    if (i == 0 && c >= 'a' && c <= 'z') out[i] = static_cast<char>(c - 'a' + 'A');
    if (i > 0 && c >= 'A' && c <= 'Z') out[i] = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// The string field `name` of `object`, or one line naming it.
std::string text_field(const json& object, const char* name, const std::string& where) {
  const auto it = object.find(name);
  if (it == object.end())
    fail("{}: no '{}' field (found fields: {}), expected a string", where, name, fields_of(object));
  if (!it->is_string()) fail("{}: '{}' is {}, expected a string", where, name, describe(*it));
  return it->get<std::string>();
}

std::vector<std::string> string_array(const json& value, const std::string& field, const std::string& where) {
  if (!value.is_array()) fail("{}: '{}' is {}, expected an array of strings", where, field, describe(value));
  std::vector<std::string> out;
  for (std::size_t i = 0; i < value.size(); ++i) {
    if (!value[i].is_string()) fail("{}: {}[{}] is {}, expected a string", where, field, i, describe(value[i]));
    out.push_back(value[i].get<std::string>());
  }
  return out;
}

// The gold index: an integer, or a string of digits (Hugging Face's HellaSwag rows).
int64_t label_of(const json& object, const std::string& where) {
  const auto it = object.find("label");
  if (it == object.end())
    fail("{}: no 'label' field (found fields: {}), expected the right choice's index", where, fields_of(object));
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_string()) {
    const std::string s = it->get<std::string>();
    if (!s.empty() && s.size() < 10 && s.find_first_not_of("0123456789") == std::string::npos) return std::stoll(s);
  }
  fail("{}: 'label' is {}, expected the right choice's index (an integer)", where, describe(*it));
}

TaskItem read_item(const json& object, TaskShape shape, const std::string& where) {
  TaskItem item;
  int64_t gold = 0;
  std::string choices_field = "choices";
  switch (shape) {
    case TaskShape::qjoule:
      item.context = text_field(object, "context", where);
      if (!object.contains("choices"))
        fail("{}: no 'choices' field (found fields: {}), expected an array of strings", where, fields_of(object));
      item.choices = string_array(object["choices"], "choices", where);
      gold = label_of(object, where);
      break;
    case TaskShape::hellaswag: {
      std::string ctx;
      if (object.contains("ctx_a") && object.contains("ctx_b")) {
        ctx = text_field(object, "ctx_a", where) + " " + capitalize(text_field(object, "ctx_b", where));
      } else {
        ctx = text_field(object, "ctx", where);
      }
      const std::string label = object.contains("activity_label") ? text_field(object, "activity_label", where) : "";
      item.context = hellaswag_preprocess(label.empty() ? ctx : label + ": " + ctx);
      if (!object.contains("endings"))
        fail("{}: no 'endings' field (found fields: {}), expected an array of strings", where, fields_of(object));
      for (const auto& e : string_array(object["endings"], "endings", where))
        item.choices.push_back(hellaswag_preprocess(e));
      choices_field = "endings";
      gold = label_of(object, where);
      break;
    }
    case TaskShape::arc: {
      item.context = "Question: " + text_field(object, "question", where) + "\nAnswer:";
      const json& choices = object.contains("choices") ? object["choices"] : json();
      if (!choices.is_object() || !choices.contains("text") || !choices.contains("label"))
        fail("{}: 'choices' is {}, expected {{\"text\": [...], \"label\": [...]}} (ARC)", where, describe(choices));
      item.choices = string_array(choices["text"], "choices.text", where);
      const auto labels = string_array(choices["label"], "choices.label", where);
      if (labels.size() != item.choices.size())
        fail("{}: choices.label has {} entries for {} choices.text, expected one each", where, labels.size(),
             item.choices.size());
      const std::string key = text_field(object, "answerKey", where);
      gold = -1;
      for (std::size_t i = 0; i < labels.size(); ++i)
        if (labels[i] == key) gold = static_cast<int64_t>(i);
      if (gold < 0)
        fail("{}: answerKey \"{}\" is none of choices.label ({}), expected one of them", where, key,
             join_names(labels));
      choices_field = "choices.text";
      break;
    }
  }
  if (strip_ascii_space(item.context).empty())
    fail("{}: the context is empty, expected the text the choices continue", where);
  if (item.choices.size() < 2)
    fail("{}: {} choice{} in '{}', expected at least two", where, item.choices.size(),
         item.choices.size() == 1 ? "" : "s", choices_field);
  for (std::size_t i = 0; i < item.choices.size(); ++i)
    if (strip_ascii_space(item.choices[i]).empty())
      fail("{}: {}[{}] is empty, expected a continuation", where, choices_field, i);
  if (gold < 0 || gold >= static_cast<int64_t>(item.choices.size()))
    fail("{}: label {} is out of range for {} choices, expected 0 to {}", where, gold, item.choices.size(),
         item.choices.size() - 1);
  item.gold = static_cast<int32_t>(gold);
  return item;
}

}  // namespace

std::string_view task_shape_name(TaskShape shape) {
  switch (shape) {
    case TaskShape::hellaswag: return "HellaSwag";
    case TaskShape::arc: return "ARC";
    default: return "qjoule";
  }
}

std::string hellaswag_preprocess(std::string_view text) {
  std::string s = replace_all(strip_ascii_space(text), " [title]", ". ");
  std::string out;  // re.sub("\\[.*?\\]", "", s): each "[" up to the nearest "]" on its line
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '[') {
      const std::size_t close = s.find_first_of("]\n", i + 1);
      if (close != std::string::npos && s[close] == ']') {
        i = close;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return replace_all(out, "  ", " ");
}

Task read_task_file(const std::filesystem::path& path, int64_t limit, const std::string& flag) {
  return parse_task_file(path, read_text_file(path.string(), flag), limit);
}

Task parse_task_file(const std::filesystem::path& path, std::string_view bytes, int64_t limit) {
  const std::string file = path.string();
  const auto lines = non_blank_lines(bytes);
  Task task;
  task.path = path;
  task.name = path.stem().string();
  task.items_in_file = static_cast<int64_t>(lines.size());
  for (const SourceLine& line : lines) {
    if (limit > 0 && static_cast<int64_t>(task.items.size()) >= limit) break;
    const std::string where = fmt::format("{}:{}", file, line.number);
    json object;
    try {
      object = json::parse(line.text);
    } catch (const json::exception& e) {
      fail("{}: malformed JSON ({}); expected one task item, a JSON object, per line", where, io::json_error_text(e));
    }
    if (!object.is_object())
      fail("{}: found a JSON {}, expected one task item, a JSON object, per line (JSON Lines)", where,
           object.type_name());
    if (task.items.empty()) {  // the first line decides the shape
      if (object.contains("context")) {
        task.shape = TaskShape::qjoule;
      } else if (object.contains("endings")) {
        task.shape = TaskShape::hellaswag;
      } else if (object.contains("question") && object.contains("answerKey")) {
        task.shape = TaskShape::arc;
      } else {
        fail(
            "{}: a task item of unknown shape (found fields: {}), expected context / choices / label (qjoule), "
            "ctx / endings / label (HellaSwag) or question / choices / answerKey (ARC)",
            where, fields_of(object));
      }
    }
    TaskItem item = read_item(object, task.shape, where);
    item.line = static_cast<int64_t>(line.number);
    task.items.push_back(std::move(item));
  }
  return task;
}

}  // namespace qjoule::eval
