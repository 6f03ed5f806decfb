// The character classes BERT's tokenizers use (Hugging Face `tokenizers` bert normalizer /
// pre-tokenizer, and transformers' `_is_control` / `_is_whitespace` / `_is_punctuation` /
// `_is_chinese_char`), with Unicode categories from utf8proc (Unicode 15).
//
// Known differences from Hugging Face `tokenizers` (BertTokenizerFast), found by comparing every
// code point: its tables predate Unicode 10-ish, so about 570 characters assigned or
// re-categorised since (e.g. U+061D ARABIC END OF TEXT MARK, U+2E55..U+2E5D brackets, new Mn
// marks) are ordinary letters to it but punctuation / marks / format characters here.
#pragma once

namespace qjoule::tokenize::unicode {

// Unicode White_Space (tab, newline, CR, Zs, U+2028/9, and the C0/C1 spacing controls).
bool is_whitespace(char32_t c);
// Category Cc, Cf, Cs or Co, except tab, newline and carriage return. Unassigned code points (Cn)
// are kept, as BertTokenizerFast does (the Python BertTokenizer drops them).
bool is_control(char32_t c);
// ASCII 33-47, 58-64, 91-96, 123-126, or Unicode category P*.
bool is_punctuation(char32_t c);
// CJK Unified Ideographs blocks, as in transformers' `_is_chinese_char` (BertTokenizer). Note:
// tokenizers' BertNormalizer starts its Extension E range at U+2B920 instead of U+2B820, so
// BertTokenizerFast does not space out U+2B820..U+2B91F; we follow the Python ranges.
bool is_chinese_char(char32_t c);
// Category Mn (nonspacing mark).
bool is_nonspacing_mark(char32_t c);

}  // namespace qjoule::tokenize::unicode
