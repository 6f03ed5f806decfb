#include "qjoule/tokenize/wordpiece_tokenizer.h"

#include <algorithm>
#include <array>
#include <utility>

#include "qjoule/error.h"
#include "qjoule/tokenize/utf8.h"
#include "tokenize/bert_normalizer.h"
#include "tokenize/bert_pre_tokenizer.h"
#include "tokenize/tokenizer_spec.h"
#include "tokenize/wordpiece_model.h"

namespace qjoule::tokenize {

struct WordPieceTokenizer::Impl {
  explicit Impl(TokenizerSpec s)
      : spec(std::move(s)),
        cls(required_id("[CLS]")),
        sep(required_id("[SEP]")),
        pad(required_id("[PAD]")),
        unk(required_id(spec.unk_token)),
        model(spec.vocabulary, unk, spec.continuing_subword_prefix, spec.max_input_chars_per_word) {
    for (const std::string& token : spec.literal_tokens) {
      if (const auto id = spec.vocabulary.find(token)) literals.emplace_back(token, *id);
    }
    // Longest first, so that the longest literal token starting at a position wins.
    std::stable_sort(literals.begin(), literals.end(),
                     [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
    for (const auto& literal : literals) literal_first_byte[static_cast<unsigned char>(literal.first[0])] = true;
  }

  int32_t required_id(const std::string& token) const {
    const auto id = spec.vocabulary.find(token);
    if (!id) {
      fail(
          "{}: vocabulary has no \"{}\" token, expected the BERT special tokens [CLS], [SEP], [PAD] "
          "and {} ({} tokens read)",
          spec.source.string(), token, spec.unk_token, spec.vocabulary.size());
    }
    return *id;
  }

  // Normalise, pre-tokenise and WordPiece one stretch of text without literal tokens.
  void append_segment_ids(std::string_view segment, std::string_view context, std::vector<int32_t>& ids) const {
    if (segment.empty()) return;
    const std::u32string code_points = decode_utf8(segment, context);
    std::u32string normalized;
    normalized.reserve(code_points.size() + 8);
    bert_normalize(code_points, spec.options, normalized);
    std::vector<std::u32string_view> words;
    bert_pre_tokenize(normalized, words);
    for (const std::u32string_view word : words) model.append_word_ids(word, ids);
  }

  std::vector<int32_t> piece_ids(std::string_view text, std::string_view context) const {
    check_utf8(text, context);  // reports byte offsets within the whole text
    std::vector<int32_t> ids;
    ids.reserve(text.size() / 3 + 4);
    size_t segment_start = 0;
    for (size_t pos = 0; pos < text.size();) {
      const std::pair<std::string, int32_t>* match = nullptr;
      if (literal_first_byte[static_cast<unsigned char>(text[pos])]) {
        for (const auto& literal : literals) {
          if (text.substr(pos).starts_with(literal.first)) {
            match = &literal;
            break;
          }
        }
      }
      if (match == nullptr) {
        ++pos;
        continue;
      }
      append_segment_ids(text.substr(segment_start, pos - segment_start), context, ids);
      ids.push_back(match->second);
      pos += match->first.size();
      segment_start = pos;
    }
    append_segment_ids(text.substr(segment_start), context, ids);
    return ids;
  }

  TokenizerSpec spec;
  int32_t cls, sep, pad, unk;
  WordPieceModel model;
  std::vector<std::pair<std::string, int32_t>> literals;
  std::array<bool, 256> literal_first_byte{};
};

WordPieceTokenizer::WordPieceTokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

WordPieceTokenizer WordPieceTokenizer::from_vocab_txt(const std::filesystem::path& vocab_txt,
                                                      WordPieceOptions options) {
  return WordPieceTokenizer(std::make_shared<const Impl>(read_vocab_txt(vocab_txt, options)));
}

WordPieceTokenizer WordPieceTokenizer::from_tokenizer_json(const std::filesystem::path& tokenizer_json) {
  return WordPieceTokenizer(std::make_shared<const Impl>(read_tokenizer_json(tokenizer_json)));
}

WordPieceTokenizer WordPieceTokenizer::from_model_dir(const std::filesystem::path& model_dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(model_dir, ec)) {
    fail("{}: model directory not found (expected a folder with tokenizer.json or vocab.txt)", model_dir.string());
  }
  const auto tokenizer_json = model_dir / "tokenizer.json";
  if (std::filesystem::exists(tokenizer_json, ec)) return from_tokenizer_json(tokenizer_json);
  const auto vocab_txt = model_dir / "vocab.txt";
  if (std::filesystem::exists(vocab_txt, ec)) {
    const auto config = model_dir / "tokenizer_config.json";
    const WordPieceOptions options =
        std::filesystem::exists(config, ec) ? read_tokenizer_config(config) : WordPieceOptions{};
    return from_vocab_txt(vocab_txt, options);
  }
  fail("{}: no tokenizer found, expected tokenizer.json (a WordPiece model) or vocab.txt there", model_dir.string());
}

std::vector<int32_t> WordPieceTokenizer::piece_ids(std::string_view text, std::string_view context) const {
  return impl_->piece_ids(text, context);
}

std::vector<std::string> WordPieceTokenizer::tokenize(std::string_view text, std::string_view context) const {
  const std::vector<int32_t> ids = impl_->piece_ids(text, context);
  std::vector<std::string> pieces;
  pieces.reserve(ids.size());
  for (const int32_t id : ids) pieces.push_back(impl_->spec.vocabulary.token(id));
  return pieces;
}

Encoding WordPieceTokenizer::encode(std::string_view text, size_t max_length, std::string_view context) const {
  if (max_length < 2) {
    fail("{}: max_length {} is too small, expected at least 2 (room for [CLS] and [SEP])",
         context.empty() ? std::string_view("encode") : context, max_length);
  }
  const std::vector<int32_t> pieces = impl_->piece_ids(text, context);
  Encoding encoding;
  encoding.untruncated_length = pieces.size() + 2;
  const size_t kept = std::min(pieces.size(), max_length - 2);
  encoding.truncated = kept < pieces.size();
  encoding.ids.reserve(kept + 2);
  encoding.ids.push_back(impl_->cls);
  encoding.ids.insert(encoding.ids.end(), pieces.begin(), pieces.begin() + static_cast<std::ptrdiff_t>(kept));
  encoding.ids.push_back(impl_->sep);
  return encoding;
}

int32_t WordPieceTokenizer::cls_id() const { return impl_->cls; }
int32_t WordPieceTokenizer::sep_id() const { return impl_->sep; }
int32_t WordPieceTokenizer::pad_id() const { return impl_->pad; }
int32_t WordPieceTokenizer::unk_id() const { return impl_->unk; }
size_t WordPieceTokenizer::vocab_size() const { return impl_->spec.vocabulary.size(); }

std::optional<int32_t> WordPieceTokenizer::token_to_id(std::string_view token) const {
  return impl_->spec.vocabulary.find(token);
}

const std::string& WordPieceTokenizer::id_to_token(int32_t id) const {
  if (!impl_->spec.vocabulary.contains_id(id)) {
    fail("{}: token id {} out of range, expected 0..{}", impl_->spec.source.string(), id,
         static_cast<int64_t>(impl_->spec.vocabulary.size()) - 1);
  }
  return impl_->spec.vocabulary.token(id);
}

const WordPieceOptions& WordPieceTokenizer::options() const { return impl_->spec.options; }
const std::filesystem::path& WordPieceTokenizer::source() const { return impl_->spec.source; }

}  // namespace qjoule::tokenize
