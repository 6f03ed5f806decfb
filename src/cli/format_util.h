// Number formatting for terminal output.
#pragma once

#include <cstdint>
#include <string>

namespace qjoule::cli {

std::string thousands(int64_t value);       // 11170562 -> "11,170,562"
std::string human_count(double value);      // 11170562 -> "11.2 M"
std::string human_bytes(double bytes);      // 44690728 -> "42.6 MiB"

}  // namespace qjoule::cli
