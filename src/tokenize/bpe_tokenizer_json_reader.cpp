// Reads the BPE parts of a Hugging Face tokenizer.json (see bpe_spec.h for what is supported).
#include <limits>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "qjoule/error.h"
#include "qjoule/io/json_error_text.h"
#include "qjoule/tokenize/utf8.h"
#include "tokenize/bpe_spec.h"
#include "tokenize/file_bytes.h"

namespace qjoule::tokenize {
namespace {

using nlohmann::json;

const std::string kMetaspace = "\xE2\x96\x81";  // ▁

// Field access with one-line errors naming the file and the field's dotted path.
class Fields {
 public:
  explicit Fields(std::string file) : file_(std::move(file)) {}
  const std::string& file() const { return file_; }

  const json* find(const json& parent, const std::string& key) const {
    const auto it = parent.find(key);
    return it == parent.end() || it->is_null() ? nullptr : &*it;
  }
  const json& required(const json& parent, const std::string& key, const std::string& where,
                       std::string_view expected) const {
    const json* value = find(parent, key);
    if (!value) fail("{}: no '{}' field, expected {}", file_, where, expected);
    return *value;
  }
  std::string string(const json& parent, const std::string& key, const std::string& where,
                     std::optional<std::string> fallback = std::nullopt) const {
    const json* value = find(parent, key);
    if (!value) {
      if (fallback) return *fallback;
      fail("{}: no '{}' field, expected a string", file_, where);
    }
    if (!value->is_string()) fail("{}: '{}' is a JSON {}, expected a string", file_, where, value->type_name());
    return value->get<std::string>();
  }
  std::optional<std::string> optional_string(const json& parent, const std::string& key,
                                             const std::string& where) const {
    if (!find(parent, key)) return std::nullopt;
    return string(parent, key, where);
  }
  bool boolean(const json& parent, const std::string& key, const std::string& where, bool fallback) const {
    const json* value = find(parent, key);
    if (!value) return fallback;
    if (!value->is_boolean()) fail("{}: '{}' is a JSON {}, expected true or false", file_, where, value->type_name());
    return value->get<bool>();
  }
  int32_t id(const json& value, const std::string& where) const {
    if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
        value.get<int64_t>() >= std::numeric_limits<int32_t>::max()) {
      fail("{}: '{}' is {}, expected a token id (an integer >= 0)", file_, where, value.dump());
    }
    return static_cast<int32_t>(value.get<int64_t>());
  }
  const json& object(const json& value, const std::string& where) const {
    if (!value.is_object()) fail("{}: '{}' is a JSON {}, expected an object", file_, where, value.type_name());
    return value;
  }
  const json& array(const json& value, const std::string& where) const {
    if (!value.is_array()) fail("{}: '{}' is a JSON {}, expected an array", file_, where, value.type_name());
    return value;
  }
  // A {"String": s} pattern (Replace normalizer / decoder); a Regex pattern is not supported.
  std::string string_pattern(const json& step, const std::string& where) const {
    const json& pattern =
        object(required(step, "pattern", where + ".pattern", "a {\"String\": ...} pattern"), where + ".pattern");
    if (!find(pattern, "String")) {
      fail("{}: '{}.pattern' is {}, expected a {{\"String\": ...}} pattern (Regex replacements are not supported)",
           file_, where, pattern.dump());
    }
    return string(pattern, "String", where + ".pattern.String");
  }

 private:
  std::string file_;
};

// A step's list of children when it is a Sequence, else the step itself.
std::vector<std::pair<const json*, std::string>> steps_of(const Fields& f, const json& node, const std::string& where,
                                                          const char* list_key) {
  f.object(node, where);
  if (f.string(node, "type", where + ".type") != "Sequence") return {{&node, where}};
  const json& list = f.array(f.required(node, list_key, where + "." + list_key, "an array"), where + "." + list_key);
  std::vector<std::pair<const json*, std::string>> steps;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string child = fmt::format("{}.{}[{}]", where, list_key, i);
    f.object(list[i], child);
    steps.emplace_back(&list[i], child);
  }
  return steps;
}

std::vector<NormalizerStep> read_normalizer(const Fields& f, const json& doc) {
  std::vector<NormalizerStep> out;
  const json* node = f.find(doc, "normalizer");
  if (!node) return out;
  for (const auto& [step, where] : steps_of(f, *node, "normalizer", "normalizers")) {
    const std::string type = f.string(*step, "type", where + ".type");
    if (type == "Prepend") {
      out.emplace_back(PrependNormalizer{f.string(*step, "prepend", where + ".prepend")});
    } else if (type == "Replace") {
      out.emplace_back(
          ReplaceNormalizer{f.string_pattern(*step, where), f.string(*step, "content", where + ".content")});
    } else if (type == "NFC") {
      out.emplace_back(NfcNormalizer{});
    } else {
      fail("{}: {}.type is '{}', expected 'Prepend', 'Replace', 'NFC' or a Sequence of them", f.file(), where, type);
    }
  }
  return out;
}

PrependScheme read_prepend_scheme(const Fields& f, const json& step, const std::string& where) {
  if (const auto scheme = f.optional_string(step, "prepend_scheme", where + ".prepend_scheme")) {
    if (*scheme == "always") return PrependScheme::kAlways;
    if (*scheme == "first") return PrependScheme::kFirst;
    if (*scheme == "never") return PrependScheme::kNever;
    fail("{}: {}.prepend_scheme is '{}', expected 'always', 'first' or 'never'", f.file(), where, *scheme);
  }
  // tokenizers < 0.14 wrote add_prefix_space instead.
  return f.boolean(step, "add_prefix_space", where + ".add_prefix_space", true) ? PrependScheme::kAlways
                                                                                : PrependScheme::kNever;
}

std::vector<PreTokenizerStep> read_pre_tokenizer(const Fields& f, const json& doc) {
  std::vector<PreTokenizerStep> out;
  const json* node = f.find(doc, "pre_tokenizer");
  if (!node) return out;
  for (const auto& [step, where] : steps_of(f, *node, "pre_tokenizer", "pretokenizers")) {
    const std::string type = f.string(*step, "type", where + ".type");
    if (type == "ByteLevel") {
      out.emplace_back(ByteLevelPreTokenizer{
          .add_prefix_space = f.boolean(*step, "add_prefix_space", where + ".add_prefix_space", true),
          .use_regex = f.boolean(*step, "use_regex", where + ".use_regex", true)});
    } else if (type == "Split") {
      const json& pattern =
          f.object(f.required(*step, "pattern", where + ".pattern", "a {\"Regex\": ...} pattern"), where + ".pattern");
      const std::string regex = f.string(pattern, "Regex", where + ".pattern.Regex", std::string("?"));
      const auto known = split_pattern_of_regex(regex);
      if (!known) {
        fail("{}: {}.pattern is {}, expected the exact GPT-2, Llama-3 or Qwen2 pre-tokenizer regex", f.file(), where,
             pattern.dump());
      }
      const std::string behavior = f.string(*step, "behavior", where + ".behavior", std::string("Isolated"));
      if (behavior != "Isolated") {
        fail("{}: {}.behavior is '{}', expected 'Isolated'", f.file(), where, behavior);
      }
      if (f.boolean(*step, "invert", where + ".invert", false)) {
        fail("{}: {}.invert is true, expected false", f.file(), where);
      }
      out.emplace_back(SplitPreTokenizer{*known});
    } else if (type == "Metaspace") {
      out.emplace_back(
          MetaspacePreTokenizer{.replacement = f.string(*step, "replacement", where + ".replacement", kMetaspace),
                                .prepend_scheme = read_prepend_scheme(f, *step, where),
                                .split = f.boolean(*step, "split", where + ".split", true)});
    } else {
      fail("{}: {}.type is '{}', expected 'ByteLevel', 'Split', 'Metaspace' or a Sequence of them", f.file(), where,
           type);
    }
  }
  return out;
}

std::vector<DecoderStep> read_decoder(const Fields& f, const json& node) {
  std::vector<DecoderStep> out;
  for (const auto& [step, where] : steps_of(f, node, "decoder", "decoders")) {
    const std::string type = f.string(*step, "type", where + ".type");
    if (type == "ByteLevel") {
      out.emplace_back(ByteLevelDecoder{});
    } else if (type == "Replace") {
      out.emplace_back(ReplaceDecoder{f.string_pattern(*step, where), f.string(*step, "content", where + ".content")});
    } else if (type == "ByteFallback") {
      out.emplace_back(ByteFallbackDecoder{});
    } else if (type == "Fuse") {
      out.emplace_back(FuseDecoder{});
    } else if (type == "Strip") {
      const std::u32string content = decode_utf8(f.string(*step, "content", where + ".content"), f.file());
      if (content.size() != 1) fail("{}: {}.content must be one character", f.file(), where);
      // Init-captures: clang before 16 cannot capture structured bindings (the fuzz build uses clang 14).
      const auto count = [&f, &node_of_step = *step, &path = where](const char* key) {
        const json* v = f.find(node_of_step, key);
        return v ? static_cast<size_t>(f.id(*v, path + "." + key)) : size_t{0};
      };
      out.emplace_back(StripDecoder{content[0], count("start"), count("stop")});
    } else if (type == "Metaspace") {
      out.emplace_back(MetaspaceDecoder{f.string(*step, "replacement", where + ".replacement", kMetaspace),
                                        read_prepend_scheme(f, *step, where)});
    } else {
      fail(
          "{}: {}.type is '{}', expected 'ByteLevel', 'Replace', 'ByteFallback', 'Fuse', 'Strip', 'Metaspace' or a "
          "Sequence of them",
          f.file(), where, type);
    }
  }
  return out;
}

void read_post_processor(const Fields& f, const json& doc, BpeSpec& spec) {
  const json* node = f.find(doc, "post_processor");
  if (!node) return;
  for (const auto& [step, where] : steps_of(f, *node, "post_processor", "processors")) {
    const std::string type = f.string(*step, "type", where + ".type");
    if (type == "ByteLevel") continue;  // only adjusts offsets
    if (type != "TemplateProcessing") {
      fail("{}: {}.type is '{}', expected 'TemplateProcessing', 'ByteLevel' or a Sequence of them", f.file(), where,
           type);
    }
    const json& single =
        f.array(f.required(*step, "single", where + ".single", "the single-text template"), where + ".single");
    const json* specials = f.find(*step, "special_tokens");
    bool after_sequence = false;
    spec.has_post_processor_template = true;
    for (size_t i = 0; i < single.size(); ++i) {
      const std::string piece_where = fmt::format("{}.single[{}]", where, i);
      const json& piece = f.object(single[i], piece_where);
      if (f.find(piece, "Sequence")) {
        after_sequence = true;
        continue;
      }
      const json& special =
          f.object(f.required(piece, "SpecialToken", piece_where + ".SpecialToken", "a Sequence or SpecialToken entry"),
                   piece_where + ".SpecialToken");
      const std::string name = f.string(special, "id", piece_where + ".SpecialToken.id");
      const json* entry = specials ? f.find(*specials, name) : nullptr;
      if (!entry) {
        fail("{}: {}.special_tokens has no \"{}\", expected an entry for every template token", f.file(), where, name);
      }
      const std::string ids_where = fmt::format("{}.special_tokens[\"{}\"].ids", where, name);
      for (const json& id : f.array(f.required(*entry, "ids", ids_where, "an array of ids"), ids_where)) {
        (after_sequence ? spec.template_suffix : spec.template_prefix).push_back(f.id(id, ids_where));
      }
    }
  }
}

std::vector<AddedToken> read_added_tokens(const Fields& f, const json& doc) {
  std::vector<AddedToken> out;
  const json* list = f.find(doc, "added_tokens");
  if (!list) return out;
  f.array(*list, "added_tokens");
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string where = fmt::format("added_tokens[{}]", i);
    const json& entry = f.object((*list)[i], where);
    AddedToken token;
    token.content = f.string(entry, "content", where + ".content");
    if (token.content.empty()) fail("{}: {}.content is empty, expected the token text", f.file(), where);
    check_utf8(token.content, f.file() + ": " + where + ".content");
    token.id = f.id(f.required(entry, "id", where + ".id", "the token's id"), where + ".id");
    token.special = f.boolean(entry, "special", where + ".special", false);
    token.normalized = f.boolean(entry, "normalized", where + ".normalized", !token.special);
    token.lstrip = f.boolean(entry, "lstrip", where + ".lstrip", false);
    token.rstrip = f.boolean(entry, "rstrip", where + ".rstrip", false);
    if (f.boolean(entry, "single_word", where + ".single_word", false)) {
      fail("{}: {}.single_word is true, expected false (single_word added tokens are not supported)", f.file(), where);
    }
    out.push_back(std::move(token));
  }
  return out;
}

BpeModel read_model(const Fields& f, const json& doc) {
  const json& model = f.object(f.required(doc, "model", "model", "a JSON object"), "model");
  const std::string type = f.string(model, "type", "model.type", std::string("BPE"));
  if (type != "BPE") {
    fail("{}: model.type is '{}', expected 'BPE' (byte-level or SentencePiece-style BPE)", f.file(), type);
  }
  const json* dropout = f.find(model, "dropout");
  if (dropout && !(dropout->is_number() && dropout->get<double>() == 0)) {
    fail("{}: model.dropout is {}, expected null (BPE dropout is not supported)", f.file(), dropout->dump());
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const std::string where = std::string("model.") + key;
    if (!f.string(model, key, where, std::string()).empty()) {
      fail("{}: {} is set, expected null (not supported)", f.file(), where);
    }
  }
  const json& vocab = f.object(f.required(model, "vocab", "model.vocab", "a token -> id object"), "model.vocab");
  if (vocab.empty()) fail("{}: model.vocab is empty, expected token -> id entries", f.file());
  std::unordered_map<std::string, int32_t> ids;
  ids.reserve(vocab.size());
  for (const auto& [token, id] : vocab.items()) {
    check_utf8(token, f.file() + ": model.vocab");
    ids.emplace(token, f.id(id, fmt::format("model.vocab[\"{}\"]", token)));
  }
  const json& merges = f.array(f.required(model, "merges", "model.merges", "an array of merges"), "model.merges");
  std::vector<std::pair<std::string, std::string>> pairs;
  pairs.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& merge = merges[i];
    if (merge.is_string()) {  // "a b", the format of tokenizers < 0.20
      const std::string text = merge.get<std::string>();
      const auto space = text.find(' ');
      if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
        fail("{}: model.merges[{}] is \"{}\", expected two tokens separated by one space", f.file(), i, text);
      }
      pairs.emplace_back(text.substr(0, space), text.substr(space + 1));
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      pairs.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
    } else {
      fail("{}: model.merges[{}] is {}, expected \"a b\" or [\"a\", \"b\"]", f.file(), i, merge.dump());
    }
  }
  BpeModelOptions options;
  options.unk_token = f.optional_string(model, "unk_token", "model.unk_token");
  options.byte_fallback = f.boolean(model, "byte_fallback", "model.byte_fallback", false);
  options.fuse_unk = f.boolean(model, "fuse_unk", "model.fuse_unk", false);
  options.ignore_merges = f.boolean(model, "ignore_merges", "model.ignore_merges", false);
  return BpeModel(std::move(ids), pairs, std::move(options), f.file());
}

// tokenizer_config.json's bos_token / eos_token: a string or {"content": ...}.
void read_tokenizer_config(const std::filesystem::path& tokenizer_json, BpeSpec& spec) {
  const auto path = tokenizer_json.parent_path() / "tokenizer_config.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return;
  const json doc = json::parse(read_file_bytes(path, "tokenizer_config.json"), nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) fail("{}: not a JSON object, expected a Hugging Face tokenizer_config.json", path.string());
  const auto token = [&](const char* key) -> std::optional<std::string> {
    const auto it = doc.find(key);
    if (it == doc.end()) return std::nullopt;
    if (it->is_string()) return it->get<std::string>();
    if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
      return (*it)["content"].get<std::string>();
    }
    return std::nullopt;
  };
  spec.config_bos_token = token("bos_token");
  spec.config_eos_token = token("eos_token");
}

}  // namespace

BpeSpec read_bpe_tokenizer_json(const std::filesystem::path& path) {
  const Fields f(path.string());
  json doc;
  try {
    doc = json::parse(read_file_bytes(path, "tokenizer.json"));
  } catch (const json::exception& e) {
    fail("{}: malformed JSON ({}), expected a Hugging Face tokenizer.json", f.file(), io::json_error_text(e));
  }
  if (!doc.is_object()) {
    fail("{}: found a JSON {}, expected a Hugging Face tokenizer.json object", f.file(), doc.type_name());
  }
  BpeSpec spec;
  spec.source = path;
  spec.model = read_model(f, doc);
  spec.normalizer = read_normalizer(f, doc);
  spec.pre_tokenizer = read_pre_tokenizer(f, doc);
  spec.added_tokens = read_added_tokens(f, doc);
  read_post_processor(f, doc, spec);
  if (const json* decoder = f.find(doc, "decoder")) {
    spec.decoder = read_decoder(f, *decoder);
    spec.has_decoder = true;
  }
  for (const auto& step : spec.pre_tokenizer) {
    spec.byte_level = spec.byte_level || std::holds_alternative<ByteLevelPreTokenizer>(step);
  }
  bool metaspace = false;
  for (const auto& step : spec.pre_tokenizer) {
    metaspace = metaspace || std::holds_alternative<MetaspacePreTokenizer>(step);
  }
  bool prepend = false;
  for (const auto& step : spec.normalizer) prepend = prepend || std::holds_alternative<PrependNormalizer>(step);
  if (!spec.byte_level && !metaspace && !prepend) {
    fail(
        "{}: pre_tokenizer has no ByteLevel or Metaspace step and normalizer no Prepend, expected a byte-level or "
        "SentencePiece-style BPE tokenizer",
        f.file());
  }
  read_tokenizer_config(path, spec);
  return spec;
}

}  // namespace qjoule::tokenize
