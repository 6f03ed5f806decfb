#include "model/export/gguf_tokenizer.h"

#include <fstream>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "qjoule/error.h"

namespace qjoule::model {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// llama.cpp's token types (llama_token_type).
enum TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

}  // namespace

// tokenizer.json's BPE as llama.cpp's vocabulary of `vocab_size` tokens (the rows of the embeddings;
// ids the tokenizer does not name are "[PAD<id>]", unused).
GgufTokenizer read_gguf_tokenizer(const fs::path& dir, int64_t vocab_size) {
  const auto path = dir / "tokenizer.json";
  std::ifstream in(path);
  if (!in)
    fail("{}: not found; GGUF carries the tokenizer, export --to gguf reads it from tokenizer.json", path.string());
  json t;
  try {
    in >> t;
  } catch (const json::exception& e) {
    fail("{}: not JSON ({})", path.string(), e.what());
  }
  const json& model = t.value("model", json::object());
  if (model.value("type", std::string()) != "BPE" || !model.contains("vocab") || !model["vocab"].is_object())
    fail("{}: model.type is {}, expected a BPE tokenizer with a vocab (GGUF's gpt2 and llama tokenizers)",
         path.string(), model.value("type", json("absent")).dump());
  GgufTokenizer tok;
  const bool byte_fallback = model.value("byte_fallback", false);
  tok.model = byte_fallback ? "llama" : "gpt2";
  tok.tokens.assign(static_cast<std::size_t>(vocab_size), "");
  tok.types.assign(static_cast<std::size_t>(vocab_size), kUnused);
  const auto set = [&](int64_t id, const std::string& text, int32_t type) {
    if (id < 0 || id >= vocab_size)
      fail("{}: token '{}' has id {}, outside the model's vocabulary of {}", path.string(), text, id, vocab_size);
    tok.tokens[static_cast<std::size_t>(id)] = text;
    tok.types[static_cast<std::size_t>(id)] = type;
  };
  for (const auto& [text, id] : model["vocab"].items()) {
    if (!id.is_number_integer())
      fail("{}: vocab entry '{}' has id {}, expected an integer", path.string(), text, id.dump());
    const bool byte = byte_fallback && text.size() == 6 && text.starts_with("<0x") && text.ends_with(">");
    set(id.get<int64_t>(), text, byte ? kByte : kNormal);
  }
  if (model.contains("unk_token") && model["unk_token"].is_string() && model["vocab"].contains(model["unk_token"])) {
    tok.unk = model["vocab"][model["unk_token"].get<std::string>()].get<int32_t>();
    tok.types[static_cast<std::size_t>(*tok.unk)] = kUnknown;
  }
  for (const auto& added : t.value("added_tokens", json::array()))
    if (added.contains("id") && added["id"].is_number_integer() && added.contains("content"))
      set(added["id"].get<int64_t>(), added["content"].get<std::string>(),
          added.value("special", false) ? kControl : kUserDefined);
  for (int64_t id = 0; id < vocab_size; ++id)
    if (tok.tokens[static_cast<std::size_t>(id)].empty())
      tok.tokens[static_cast<std::size_t>(id)] = fmt::format("[PAD{}]", id);
  // Merges: "a b" strings, or [a, b] pairs in newer files.
  std::vector<std::string> merges;
  for (const auto& m : model.value("merges", json::array())) {
    if (m.is_string())
      merges.push_back(m.get<std::string>());
    else if (m.is_array() && m.size() == 2)
      merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
    else
      fail("{}: a merge is {}, expected \"a b\" or [a, b]", path.string(), m.dump());
  }
  if (tok.model == "gpt2") {
    tok.merges = std::move(merges);
    // The pre-tokenizer llama.cpp must split text with: GPT-2's regex (ByteLevel's own), Llama 3's (digits
    // in threes), Qwen2's (single digits); "default" otherwise (llama.cpp warns that it guessed).
    const json& pre = t.value("pre_tokenizer", json::object());
    const std::string text = pre.is_null() ? std::string() : pre.dump();
    tok.pre = "default";
    if (pre.is_object() && pre.value("type", std::string()) == "ByteLevel" && pre.value("use_regex", true))
      tok.pre = "gpt-2";
    else if (text.find("\\p{N}{1,3}") != std::string::npos)
      tok.pre = "llama3";
    else if (text.find("|\\p{N}|") != std::string::npos)
      tok.pre = "qwen2";
  } else {
    // SentencePiece scores: the token a merge makes is worth more the earlier the merge (llama.cpp's SPM
    // tokenizer merges the best-scored pair first, as BPE applies merges in rank order).
    tok.scores.assign(static_cast<std::size_t>(vocab_size), 0.0f);
    std::map<std::string, int64_t> id_of;
    for (int64_t id = 0; id < vocab_size; ++id) id_of[tok.tokens[static_cast<std::size_t>(id)]] = id;
    for (std::size_t rank = 0; rank < merges.size(); ++rank) {
      const auto space = merges[rank].find(' ');
      if (space == std::string::npos) continue;
      const auto it = id_of.find(merges[rank].substr(0, space) + merges[rank].substr(space + 1));
      if (it != id_of.end() && tok.scores[static_cast<std::size_t>(it->second)] == 0.0f)
        tok.scores[static_cast<std::size_t>(it->second)] = -static_cast<float>(rank + 1);
    }
  }
  return tok;
}

}  // namespace qjoule::model
