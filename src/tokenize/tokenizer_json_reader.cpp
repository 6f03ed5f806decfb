// Reads the WordPiece parts of a Hugging Face tokenizer.json: model (vocab, unk_token,
// continuing_subword_prefix, max_input_chars_per_word), BertNormalizer flags, added tokens.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "qjoule/error.h"
#include "qjoule/io/json_error_text.h"
#include "tokenize/file_bytes.h"
#include "tokenize/tokenizer_spec.h"

namespace qjoule::tokenize {
namespace {

using nlohmann::json;

class JsonFile {
 public:
  explicit JsonFile(std::string file) : file_(std::move(file)) {}
  const std::string& name() const { return file_; }

  // A field that must be present and an object.
  const json& object(const json& parent, const std::string& key, std::string_view where) const {
    const auto it = parent.find(key);
    if (it == parent.end()) fail("{}: no '{}{}' field, expected a JSON object there", file_, where, key);
    if (!it->is_object()) {
      fail("{}: '{}{}' is a JSON {}, expected an object", file_, where, key, it->type_name());
    }
    return *it;
  }
  std::string string_or(const json& parent, const std::string& key, std::string_view where,
                        std::string fallback) const {
    const auto it = parent.find(key);
    if (it == parent.end() || it->is_null()) return fallback;
    if (!it->is_string()) {
      fail("{}: '{}{}' is a JSON {}, expected a string", file_, where, key, it->type_name());
    }
    return it->get<std::string>();
  }
  std::optional<bool> optional_bool(const json& parent, const std::string& key, std::string_view where) const {
    const auto it = parent.find(key);
    if (it == parent.end() || it->is_null()) return std::nullopt;
    if (!it->is_boolean()) {
      fail("{}: '{}{}' is a JSON {}, expected true, false or null", file_, where, key, it->type_name());
    }
    return it->get<bool>();
  }
  // An integer field in min..max (min >= 0).
  int64_t integer(const json& value, std::string_view field, int64_t min, int64_t max) const {
    if (!in_range(value, min, max)) {
      fail("{}: {} is {} (a JSON {}), expected an integer in {}..{}", file_, field, value.dump(), value.type_name(),
           min, max);
    }
    return value.get<int64_t>();
  }
  static bool in_range(const json& value, int64_t min, int64_t max) {
    if (value.is_number_unsigned()) {
      const auto v = value.get<uint64_t>();
      return v >= static_cast<uint64_t>(min) && v <= static_cast<uint64_t>(max);
    }
    return value.is_number_integer() && value.get<int64_t>() >= min && value.get<int64_t>() <= max;
  }

 private:
  std::string file_;
};

WordPieceOptions read_normalizer(const JsonFile& file, const json& doc) {
  const auto it = doc.find("normalizer");
  if (it == doc.end() || it->is_null()) {  // no normalizer: Hugging Face leaves the text as is
    return WordPieceOptions{
        .lowercase = false, .strip_accents = false, .tokenize_chinese_chars = false, .clean_text = false};
  }
  if (!it->is_object()) {
    fail("{}: 'normalizer' is a JSON {}, expected an object or null", file.name(), it->type_name());
  }
  const std::string type = file.string_or(*it, "type", "normalizer.", "");
  if (type != "BertNormalizer") {
    fail("{}: normalizer.type is '{}', expected 'BertNormalizer' (or no normalizer)", file.name(), type);
  }
  WordPieceOptions options;
  options.clean_text = file.optional_bool(*it, "clean_text", "normalizer.").value_or(true);
  options.tokenize_chinese_chars = file.optional_bool(*it, "handle_chinese_chars", "normalizer.").value_or(true);
  options.lowercase = file.optional_bool(*it, "lowercase", "normalizer.").value_or(true);
  // strip_accents: null means "same as lowercase", as in tokenizers' BertNormalizer.
  options.strip_accents = file.optional_bool(*it, "strip_accents", "normalizer.").value_or(options.lowercase);
  return options;
}

void check_pre_tokenizer(const JsonFile& file, const json& doc) {
  const auto it = doc.find("pre_tokenizer");
  const std::string type = it == doc.end() || it->is_null() ? std::string("null")
                           : it->is_object()                ? file.string_or(*it, "type", "pre_tokenizer.", "")
                                                            : std::string(it->type_name());
  if (type != "BertPreTokenizer") {
    fail("{}: pre_tokenizer is '{}', expected 'BertPreTokenizer'", file.name(), type);
  }
}

// One element of a TemplateProcessing template: "[CLS]" for a special token, "$A" for a sequence.
std::string template_piece(const json& piece) {
  if (piece.is_object()) {
    if (const auto special = piece.find("SpecialToken"); special != piece.end() && special->is_object()) {
      if (const auto id = special->find("id"); id != special->end() && id->is_string()) {
        return id->get<std::string>();
      }
    }
    if (const auto sequence = piece.find("Sequence"); sequence != piece.end() && sequence->is_object()) {
      if (const auto id = sequence->find("id"); id != sequence->end() && id->is_string()) {
        return "$" + id->get<std::string>();
      }
    }
  }
  return piece.dump();
}

// The post-processor, when there is one, must produce `[CLS] $A [SEP]` for single texts.
void check_post_processor(const JsonFile& file, const json& doc) {
  const auto it = doc.find("post_processor");
  if (it == doc.end() || it->is_null()) return;
  if (!it->is_object()) {
    fail("{}: 'post_processor' is a JSON {}, expected an object", file.name(), it->type_name());
  }
  const std::string type = file.string_or(*it, "type", "post_processor.", "");
  std::vector<std::string> single;
  if (type == "BertProcessing") {
    const auto token = [&](const char* key) {
      const auto f = it->find(key);
      return f != it->end() && f->is_array() && !f->empty() && (*f)[0].is_string() ? (*f)[0].get<std::string>()
                                                                                   : std::string("?");
    };
    single = {token("cls"), "$A", token("sep")};
  } else if (type == "TemplateProcessing") {
    if (const auto f = it->find("single"); f != it->end() && f->is_array()) {
      for (const json& piece : *f) single.push_back(template_piece(piece));
    }
  } else {
    fail("{}: post_processor.type is '{}', expected 'TemplateProcessing' or 'BertProcessing'", file.name(), type);
  }
  if (single != std::vector<std::string>{"[CLS]", "$A", "[SEP]"}) {
    std::string found;
    for (const auto& s : single) found += (found.empty() ? "" : " ") + s;
    fail("{}: post_processor makes '{}' for a single text, expected '[CLS] $A [SEP]'", file.name(), found);
  }
}

}  // namespace

TokenizerSpec read_tokenizer_json(const std::filesystem::path& path) {
  const JsonFile file(path.string());
  json doc;
  try {
    doc = json::parse(read_file_bytes(path, "tokenizer.json"));
  } catch (const json::exception& e) {
    fail("{}: malformed JSON ({}), expected a Hugging Face tokenizer.json", file.name(), io::json_error_text(e));
  }
  if (!doc.is_object()) {
    fail("{}: found a JSON {}, expected a Hugging Face tokenizer.json object", file.name(), doc.type_name());
  }
  const json& model = file.object(doc, "model", "");
  const std::string type = file.string_or(model, "type", "model.", "");
  if (type != "WordPiece") {
    fail("{}: model.type is '{}', expected 'WordPiece' (a BERT-style tokenizer)", file.name(), type);
  }
  TokenizerSpec spec;
  spec.source = path;
  spec.unk_token = file.string_or(model, "unk_token", "model.", "[UNK]");
  spec.continuing_subword_prefix = file.string_or(model, "continuing_subword_prefix", "model.", "##");
  if (const auto it = model.find("max_input_chars_per_word"); it != model.end() && !it->is_null()) {
    spec.max_input_chars_per_word =
        static_cast<size_t>(file.integer(*it, "model.max_input_chars_per_word", 1, 1'000'000));
  }
  spec.options = read_normalizer(file, doc);
  check_pre_tokenizer(file, doc);
  check_post_processor(file, doc);

  // model.vocab: ids must be exactly 0..N-1.
  const json& vocab = file.object(model, "vocab", "model.");
  if (vocab.empty()) fail("{}: model.vocab is empty, expected token -> id entries", file.name());
  const auto count = static_cast<int64_t>(vocab.size());
  std::vector<std::string> tokens(vocab.size());
  std::vector<bool> seen(vocab.size(), false);
  for (const auto& [token, id_json] : vocab.items()) {
    const auto id =
        static_cast<size_t>(JsonFile::in_range(id_json, 0, count - 1)
                                ? id_json.get<int64_t>()
                                : file.integer(id_json, fmt::format("model.vocab[\"{}\"]", token), 0, count - 1));
    if (seen[id]) {
      fail("{}: model.vocab gives id {} to both \"{}\" and \"{}\", expected unique ids", file.name(), id, tokens[id],
           token);
    }
    seen[id] = true;
    tokens[id] = token;
  }

  // added_tokens: present in model.vocab with the same id, or appended right after it.
  std::vector<std::pair<int64_t, std::string>> added;
  std::vector<std::string> literal;
  if (const auto it = doc.find("added_tokens"); it != doc.end() && !it->is_null()) {
    if (!it->is_array()) {
      fail("{}: 'added_tokens' is a JSON {}, expected an array", file.name(), it->type_name());
    }
    for (size_t i = 0; i < it->size(); ++i) {
      const json& entry = (*it)[i];
      const std::string where = fmt::format("added_tokens[{}].", i);
      if (!entry.is_object())
        fail("{}: {} is a JSON {}, expected an object", file.name(), where.substr(0, where.size() - 1),
             entry.type_name());
      const std::string content = file.string_or(entry, "content", where, "");
      const auto id_it = entry.find("id");
      if (id_it == entry.end()) fail("{}: no '{}id' field, expected the token's id", file.name(), where);
      const int64_t id = file.integer(*id_it, where + "id", 0, std::numeric_limits<int32_t>::max() - 1);
      if (content.empty()) fail("{}: {}content is empty, expected the token text", file.name(), where);
      added.emplace_back(id, content);
      if (!file.optional_bool(entry, "normalized", where).value_or(false)) literal.push_back(content);
    }
  }
  std::sort(added.begin(), added.end());
  for (const auto& [id, content] : added) {
    const auto index = static_cast<size_t>(id);
    if (index < tokens.size()) {
      if (tokens[index] != content) {
        fail("{}: added token \"{}\" has id {}, but model.vocab gives that id to \"{}\"", file.name(), content, id,
             tokens[index]);
      }
    } else if (index == tokens.size()) {
      tokens.push_back(content);
    } else {
      fail("{}: added token \"{}\" has id {}, expected an id of model.vocab or the next free id {}", file.name(),
           content, id, tokens.size());
    }
  }
  spec.vocabulary = Vocabulary(std::move(tokens));
  spec.literal_tokens = std::move(literal);
  return spec;
}

}  // namespace qjoule::tokenize
