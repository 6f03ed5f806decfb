#include "qjoule/tokenize/bpe_tokenizer.h"

#include <algorithm>
#include <initializer_list>
#include <unordered_map>
#include <utility>

#include "qjoule/error.h"
#include "qjoule/tokenize/utf8.h"
#include "tokenize/added_token_splitter.h"
#include "tokenize/bpe_decoder.h"
#include "tokenize/bpe_normalizer.h"
#include "tokenize/bpe_pre_tokenizer.h"
#include "tokenize/bpe_spec.h"

namespace qjoule::tokenize {

struct BpeTokenizer::Impl {
  explicit Impl(BpeSpec s) : spec(std::move(s)) {
    std::vector<AddedToken> raw, normalized;
    for (const auto& token : spec.added_tokens) {
      // With no normalizer the normalized text is the raw text: match everything in one pass.
      (token.normalized && !spec.normalizer.empty() ? normalized : raw).push_back(token);
    }
    raw_tokens = AddedTokenSplitter(std::move(raw));
    normalized_tokens = AddedTokenSplitter(std::move(normalized));

    int32_t size = 0;
    for (const auto& [token, id] : spec.model.vocab()) size = std::max(size, id + 1);
    for (const auto& token : spec.added_tokens) size = std::max(size, token.id + 1);
    tokens.resize(static_cast<size_t>(size));
    for (const auto& [token, id] : spec.model.vocab()) tokens[static_cast<size_t>(id)] = token;
    is_special.assign(tokens.size(), false);
    for (const auto& token : spec.added_tokens) {
      tokens[static_cast<size_t>(token.id)] = token.content;
      is_special[static_cast<size_t>(token.id)] = token.special;
    }
    for (size_t id = 0; id < tokens.size(); ++id) {
      if (!tokens[id].empty()) ids.emplace(tokens[id], static_cast<int32_t>(id));
    }
    for (const auto& token : spec.added_tokens) ids.insert_or_assign(token.content, token.id);

    bos = special_id(spec.template_prefix, spec.config_bos_token, {"<s>", "<|begin_of_text|>"});
    eos = special_id(spec.template_suffix, spec.config_eos_token, {"</s>", "<|end_of_text|>", "<|endoftext|>"});
  }

  std::optional<int32_t> id_of(std::string_view token) const {
    const auto it = ids.find(std::string(token));
    if (it == ids.end()) return std::nullopt;
    return it->second;
  }

  // The template's token on that side, else tokenizer_config.json's, else a well-known added token.
  std::optional<int32_t> special_id(const std::vector<int32_t>& template_ids, const std::optional<std::string>& config,
                                    std::initializer_list<std::string_view> known) const {
    if (!template_ids.empty()) return template_ids.front();
    if (config) {
      if (const auto id = id_of(*config)) return id;
    }
    for (const auto name : known) {
      for (const auto& token : spec.added_tokens) {
        if (token.special && token.content == name) return token.id;
      }
    }
    return std::nullopt;
  }

  void encode_stretch(std::string_view raw, bool at_text_start, std::vector<int32_t>& out) const {
    const std::string normalized = normalize_for_bpe(raw, spec.normalizer);
    for (const auto& segment : normalized_tokens.split(normalized)) {
      if (segment.token) {
        out.push_back(*segment.token);
        continue;
      }
      const bool first = at_text_start && segment.offset == 0;
      for (const auto& word : pre_tokenize_for_bpe(segment.text, spec.pre_tokenizer, first)) {
        spec.model.encode_word(word, out);
      }
    }
  }

  BpeSpec spec;
  AddedTokenSplitter raw_tokens;         // matched in the text as given
  AddedTokenSplitter normalized_tokens;  // matched after the normalizer
  std::vector<std::string> tokens;       // id -> token text ("" for unused ids)
  std::vector<bool> is_special;
  std::unordered_map<std::string, int32_t> ids;
  std::optional<int32_t> bos, eos;
};

BpeTokenizer::BpeTokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

BpeTokenizer BpeTokenizer::from_tokenizer_json(const std::filesystem::path& path) {
  std::error_code ec;
  const auto file = std::filesystem::is_directory(path, ec) ? path / "tokenizer.json" : path;
  return BpeTokenizer(std::make_shared<const Impl>(read_bpe_tokenizer_json(file)));
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  check_utf8(text, "text to encode");
  const Impl& impl = *impl_;
  std::vector<int32_t> out;
  if (add_special_tokens) out = impl.spec.template_prefix;
  for (const auto& segment : impl.raw_tokens.split(text)) {
    if (segment.token) {
      out.push_back(*segment.token);
    } else {
      impl.encode_stretch(segment.text, segment.offset == 0, out);
    }
  }
  if (add_special_tokens) out.insert(out.end(), impl.spec.template_suffix.begin(), impl.spec.template_suffix.end());
  return out;
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  const Impl& impl = *impl_;
  std::vector<std::string> pieces;
  pieces.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || static_cast<size_t>(id) >= impl.tokens.size() || impl.tokens[static_cast<size_t>(id)].empty()) {
      fail("{}: cannot decode id {} at position {}: not a token id (vocabulary size {})", impl.spec.source.string(), id,
           i, impl.tokens.size());
    }
    if (skip_special_tokens && impl.is_special[static_cast<size_t>(id)]) continue;
    pieces.push_back(impl.tokens[static_cast<size_t>(id)]);
  }
  if (!impl.spec.has_decoder) {  // tokenizers joins the tokens with spaces
    std::string text;
    for (size_t i = 0; i < pieces.size(); ++i) text += (i ? " " : "") + pieces[i];
    return text;
  }
  return decode_bpe_tokens(std::move(pieces), impl.spec.decoder);
}

int32_t BpeTokenizer::vocab_size() const { return static_cast<int32_t>(impl_->tokens.size()); }
std::optional<int32_t> BpeTokenizer::bos_id() const { return impl_->bos; }
std::optional<int32_t> BpeTokenizer::eos_id() const { return impl_->eos; }
std::optional<int32_t> BpeTokenizer::token_to_id(std::string_view token) const { return impl_->id_of(token); }
std::string BpeTokenizer::style() const { return impl_->spec.byte_level ? "byte-level" : "sentencepiece"; }

}  // namespace qjoule::tokenize
