#include "qjoule/eval/text_file.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "qjoule/error.h"
#include "qjoule/tokenize/utf8.h"

namespace qjoule::eval {

std::string read_text_file(const std::string& path, const std::string& flag) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail("{} {}: is a folder, expected a UTF-8 text file", flag, path);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{} {}: cannot open the file", flag, path);
  std::ostringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    fail("{} {}: the text is empty ({} bytes of whitespace at most), expected text", flag, path, text.size());
  tokenize::check_utf8(text, flag + " " + path);  // the error names the file, not the tokenizer's input
  return text;
}

}  // namespace qjoule::eval
