#include "tokenize/bert_pre_tokenizer.h"

#include <cstddef>

#include "tokenize/unicode_classes.h"

namespace qjoule::tokenize {

void bert_pre_tokenize(std::u32string_view text, std::vector<std::u32string_view>& words) {
  words.clear();
  size_t word_start = 0;
  const auto end_word = [&](size_t end) {
    if (end > word_start) words.push_back(text.substr(word_start, end - word_start));
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char32_t c = text[i];
    if (unicode::is_whitespace(c)) {
      end_word(i);
      word_start = i + 1;
    } else if (unicode::is_punctuation(c)) {
      end_word(i);
      words.push_back(text.substr(i, 1));
      word_start = i + 1;
    }
  }
  end_word(text.size());
}

}  // namespace qjoule::tokenize
