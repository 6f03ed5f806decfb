#include "qjoule/eval/kl_base.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "qjoule/error.h"
#include "qjoule/io/mapped_file.h"

namespace qjoule::eval {
namespace {

constexpr char kMagicV1[8] = {'Q', 'J', 'K', 'L', 'B', 'A', 'S', '1'};
constexpr char kMagicV2[8] = {'Q', 'J', 'K', 'L', 'B', 'A', 'S', '2'};
constexpr std::size_t kHeaderBytes = 8 + 4 + 4 + 4 * 8 + 8;
constexpr std::size_t kNllOffset = kHeaderBytes - 8;

template <typename T>
void put(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

template <typename T>
T get(const std::byte* bytes, std::size_t& at) {
  T value;
  std::memcpy(&value, bytes + at, sizeof(T));
  at += sizeof(T);
  return value;
}

// The identity padded with spaces to a multiple of 4 bytes, so the rows after it stay aligned.
std::string padded_identity(const std::string& identity) {
  std::string out = identity;
  out.append((4 - out.size() % 4) % 4, ' ');
  return out;
}

// Everything before the log-probabilities: header (with `nll_sum`), token ids, identity.
std::string prefix_bytes(const KlBase& base, double nll_sum) {
  const std::string identity = padded_identity(base.identity);
  std::string out(kMagicV2, sizeof(kMagicV2));
  put(out, base.vocab_size);
  put(out, static_cast<int32_t>(identity.size()));
  put(out, base.ctx);
  put(out, base.stride);
  put(out, static_cast<int64_t>(base.token_ids.size()));
  put(out, base.scored);
  put(out, nll_sum);
  out.append(reinterpret_cast<const char*>(base.token_ids.data()), base.token_ids.size() * sizeof(int32_t));
  out += identity;
  return out;
}

std::string system_error(const std::string& flag, const std::filesystem::path& path, const char* what) {
  return fmt::format("{} {}: {}: {}", flag, path.string(), what, std::strerror(errno));
}

void write_all(int fd, const void* data, std::size_t size, const std::string& flag, const std::filesystem::path& path) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(system_error(flag, path, "writing failed (disk full?)"));
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

void sync(int fd, const std::string& flag, const std::filesystem::path& path) {
  if (::fsync(fd) != 0) throw Error(system_error(flag, path, "fsync failed"));
}

std::string file_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

double KlBase::ppl() const { return scored > 0 ? std::exp(nll_sum / static_cast<double>(scored)) : 0.0; }

void write_kl_base(const std::filesystem::path& path, const KlBase& base) {
  KlBaseWriter writer(path, base, "--save-kl-base", /*resume=*/false);
  // One "window" of every row: the journal is for resuming computations, not needed here.
  writer.append_window(0, base.rows(), base.scored, base.nll_sum);
  writer.finish();
}

KlBase read_kl_base(const std::filesystem::path& path, const std::string& flag) {
  const auto name = path.string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) fail("{} {}: cannot open the file (not a regular file)", flag, name);
  auto mapped = std::make_shared<const io::MappedFile>(path);
  const std::byte* bytes = mapped->data();
  const std::size_t size = mapped->size();
  const bool v1 = size >= kHeaderBytes && std::memcmp(bytes, kMagicV1, sizeof(kMagicV1)) == 0;
  const bool v2 = size >= kHeaderBytes && std::memcmp(bytes, kMagicV2, sizeof(kMagicV2)) == 0;
  if (!v1 && !v2)
    fail(
        "{} {}: not a qjoule KL base (expected a file written by qjoule ppl --save-kl-base or qjoule bench --text, "
        "magic QJKLBAS1 or QJKLBAS2)",
        flag, name);
  std::size_t at = sizeof(kMagicV2);
  KlBase base;
  base.vocab_size = get<int32_t>(bytes, at);
  const auto identity_bytes = get<int32_t>(bytes, at);
  base.ctx = get<int64_t>(bytes, at);
  base.stride = get<int64_t>(bytes, at);
  const auto n_tokens = get<int64_t>(bytes, at);
  base.scored = get<int64_t>(bytes, at);
  base.nll_sum = get<double>(bytes, at);
  if (base.vocab_size <= 0 || n_tokens < 2 || n_tokens > (int64_t{1} << 40) || base.scored < 1 ||
      base.scored >= n_tokens || base.ctx < 2 || base.stride < 1 || identity_bytes < 0 || identity_bytes % 4 != 0 ||
      (v1 && identity_bytes != 0))
    fail("{} {}: header is inconsistent (vocab {}, {} tokens, {} scored, ctx {}, stride {}, identity {} bytes)", flag,
         name, base.vocab_size, n_tokens, base.scored, base.ctx, base.stride, identity_bytes);
  const auto expected = kHeaderBytes + static_cast<std::size_t>(n_tokens) * 4 +
                        static_cast<std::size_t>(identity_bytes) +
                        static_cast<std::size_t>(base.scored) * static_cast<std::size_t>(base.vocab_size) * 2;
  if (size != expected)
    fail("{} {}: {} bytes, expected {} for {} tokens and {} scored × vocab {} (truncated or not a KL base)", flag, name,
         size, expected, n_tokens, base.scored, base.vocab_size);
  if (!std::isfinite(base.nll_sum) || base.nll_sum < 0)
    fail("{} {}: its NLL sum is {}, expected a finite number ≥ 0 (an unfinished base?)", flag, name, base.nll_sum);
  base.token_ids.resize(static_cast<size_t>(n_tokens));
  std::memcpy(base.token_ids.data(), bytes + at, base.token_ids.size() * sizeof(int32_t));
  at += base.token_ids.size() * sizeof(int32_t);
  for (std::size_t i = 0; i < base.token_ids.size(); ++i)
    if (base.token_ids[i] < 0 || base.token_ids[i] >= base.vocab_size)
      fail("{} {}: token id {} at index {} is outside the vocabulary of {} tokens", flag, name, base.token_ids[i], i,
           base.vocab_size);
  std::string identity(reinterpret_cast<const char*>(bytes + at), static_cast<std::size_t>(identity_bytes));
  at += static_cast<std::size_t>(identity_bytes);
  identity.erase(identity.find_last_not_of(' ') + 1);
  if (!identity.empty()) {
    const auto j = nlohmann::json::parse(identity, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      fail("{} {}: its identity is not a JSON object ({} bytes), expected what the base was computed from", flag, name,
           identity.size());
  }
  base.identity = std::move(identity);
  base.mapped_log_probs = reinterpret_cast<const uint16_t*>(bytes + at);
  base.mapped = std::move(mapped);
  return base;
}

KlBaseWriter::KlBaseWriter(std::filesystem::path path, const KlBase& header, std::string flag, bool resume)
    : path_(std::move(path)), flag_(std::move(flag)), vocab_(header.vocab_size), scored_(header.scored) {
  partial_ = path_.string() + ".partial";
  journal_ = path_.string() + ".partial.windows";
  const std::string prefix = prefix_bytes(header, 0.0);
  std::error_code ec;

  // A partial file of the same computation: keep the windows its journal lists.
  if (resume && std::filesystem::is_regular_file(partial_, ec) && std::filesystem::is_regular_file(journal_, ec)) {
    const auto size = std::filesystem::file_size(partial_, ec);
    std::string head;
    if (!ec && size >= prefix.size()) {
      std::ifstream in(partial_, std::ios::binary);
      head.resize(prefix.size());
      in.read(head.data(), static_cast<std::streamsize>(head.size()));
      if (!in) head.clear();
    }
    if (head == prefix) {
      const std::string journal = file_text(journal_);
      std::size_t kept_bytes = 0, line_start = 0;
      while (true) {
        const auto newline = journal.find('\n', line_start);
        if (newline == std::string::npos) break;  // a torn last line: that window is redone
        const std::string line = journal.substr(line_start, newline - line_start);
        long long window = -1, count = -1;
        char nll_text[64] = {0};
        if (std::sscanf(line.c_str(), "%lld %lld %63s", &window, &count, nll_text) != 3 || window != windows_done_ ||
            count < 0 || scored_done_ + count > scored_)
          break;
        const double nll = std::strtod(nll_text, nullptr);
        const auto needed = prefix.size() + static_cast<std::size_t>((scored_done_ + count) * vocab_ * 2);
        if (!std::isfinite(nll) || needed > size) break;
        ++windows_done_;
        scored_done_ += count;
        nll_done_ += nll;
        kept_bytes = newline + 1;
        line_start = newline + 1;
      }
      fd_ = ::open(partial_.c_str(), O_WRONLY | O_CLOEXEC);
      journal_fd_ = ::open(journal_.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd_ < 0 || journal_fd_ < 0) throw Error(system_error(flag_, partial_, "cannot reopen the partial file"));
      const auto keep = static_cast<off_t>(prefix.size() + static_cast<std::size_t>(scored_done_ * vocab_ * 2));
      if (::ftruncate(fd_, keep) != 0 || ::ftruncate(journal_fd_, static_cast<off_t>(kept_bytes)) != 0)
        throw Error(system_error(flag_, partial_, "cannot cut the partial file to its finished windows"));
      ::lseek(fd_, 0, SEEK_END);
      ::lseek(journal_fd_, 0, SEEK_END);
      return;
    }
  }
  windows_done_ = scored_done_ = 0;
  nll_done_ = 0.0;
  fd_ = ::open(partial_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(system_error(flag_, partial_, "cannot open the file for writing"));
  write_all(fd_, prefix.data(), prefix.size(), flag_, partial_);
  sync(fd_, flag_, partial_);
  journal_fd_ = ::open(journal_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (journal_fd_ < 0) throw Error(system_error(flag_, journal_, "cannot open the file for writing"));
  sync(journal_fd_, flag_, journal_);
}

KlBaseWriter::~KlBaseWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (journal_fd_ >= 0) ::close(journal_fd_);
}

void KlBaseWriter::append_window(int64_t window, const uint16_t* rows, int64_t count, double nll) {
  if (window != windows_done_)
    fail("{} {}: window {} written after {} windows (internal order error)", flag_, path_.string(), window,
         windows_done_);
  if (count < 0 || scored_done_ + count > scored_)
    fail("{} {}: {} more scored tokens would exceed the {} the base holds", flag_, path_.string(), count, scored_);
  write_all(fd_, rows, static_cast<std::size_t>(count * vocab_) * sizeof(uint16_t), flag_, partial_);
  sync(fd_, flag_, partial_);
  const std::string line = fmt::format("{} {} {}\n", window, count, [&] {
    char text[64];
    std::snprintf(text, sizeof text, "%a", nll);
    return std::string(text);
  }());
  write_all(journal_fd_, line.data(), line.size(), flag_, journal_);
  sync(journal_fd_, flag_, journal_);
  ++windows_done_;
  scored_done_ += count;
  nll_done_ += nll;
}

void KlBaseWriter::finish() {
  if (scored_done_ != scored_)
    fail("{} {}: {} of {} scored tokens written, expected all", flag_, path_.string(), scored_done_, scored_);
  const double nll = nll_done_;
  if (::pwrite(fd_, &nll, sizeof nll, static_cast<off_t>(kNllOffset)) != static_cast<ssize_t>(sizeof nll))
    throw Error(system_error(flag_, partial_, "writing failed"));
  sync(fd_, flag_, partial_);
  ::close(fd_);
  fd_ = -1;
  std::error_code ec;
  std::filesystem::rename(partial_, path_, ec);
  if (ec) fail("{} {}: cannot move {} into place: {}", flag_, path_.string(), partial_.string(), ec.message());
  ::close(journal_fd_);
  journal_fd_ = -1;
  std::filesystem::remove(journal_, ec);
  // The rename itself is durable once the folder is synced.
  const auto dir = path_.has_parent_path() ? path_.parent_path() : std::filesystem::path(".");
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

}  // namespace qjoule::eval
