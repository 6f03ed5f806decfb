#include "qjoule/io/huge_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <new>
#include <string>

namespace qjoule::io {

namespace {

std::size_t page_bytes() {
  static const std::size_t bytes = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return bytes;
}

std::size_t whole_pages(std::size_t bytes) { return (bytes + page_bytes() - 1) / page_bytes() * page_bytes(); }

}  // namespace

void* map_huge_page_aligned(std::size_t bytes) {
  const std::size_t length = whole_pages(bytes), span = length + kHugePageBytes;
  void* raw = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto at = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t begin = (at + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  const std::size_t head = begin - at, tail = span - head - length;
  if (head > 0) ::munmap(raw, head);
  if (tail > 0) ::munmap(reinterpret_cast<void*>(begin + length), tail);
  advise_huge_pages(reinterpret_cast<void*>(begin), length);
  return reinterpret_cast<void*>(begin);
}

void unmap_huge_page_aligned(void* p, std::size_t bytes) noexcept {
  if (p != nullptr) ::munmap(p, whole_pages(bytes));
}

bool advise_huge_pages(void* p, std::size_t bytes) noexcept {
  const auto begin = (reinterpret_cast<std::uintptr_t>(p) + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  const auto end = (reinterpret_cast<std::uintptr_t>(p) + bytes) / kHugePageBytes * kHugePageBytes;
  if (end <= begin) return false;
  return ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE) == 0;
}

std::string transparent_huge_pages_mode(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "unavailable: " + path + " is not readable";
  const auto open = line.find('['), close = line.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open)
    return "unavailable: " + path + " reads '" + line + "', expected the mode in brackets";
  return line.substr(open + 1, close - open - 1);
}

}  // namespace qjoule::io
