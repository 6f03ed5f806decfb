// Number formatting for terminal output, and writing an output file a user named.
#pragma once

#include <cstdint>
#include <string>

namespace qjoule::cli {

std::string thousands(int64_t value);   // 11170562 -> "11,170,562"
std::string human_count(double value);  // 11170562 -> "11.2 M"
std::string human_bytes(double bytes);  // 44690728 -> "42.6 MiB"

// Writes `text` to `path`, or to stdout when path is "-". A file that cannot be written is an error
// naming the option: "--json out/x.json: cannot open the file for writing".
void write_output(const std::string& option, const std::string& path, const std::string& text);

}  // namespace qjoule::cli
