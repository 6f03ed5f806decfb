#include "qjoule/bench/results_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <map>
#include <optional>
#include <utility>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "qjoule/error.h"
#include "qjoule/io/json_error_text.h"

namespace qjoule::bench {
namespace {

using io::errno_text;

bool is_blank(std::string_view line) { return line.find_first_not_of(" \t\r") == std::string_view::npos; }

// Fails naming the directory unless a file can be created in it (the CSV and summary need that too).
void require_writable_directory(const std::filesystem::path& out_dir) {
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) fail("output directory '{}' is not writable: {}", out_dir.string(), ec.message());
  if (!std::filesystem::is_directory(out_dir, ec))
    fail("output directory '{}' is not writable: {}", out_dir.string(), errno_text(ENOTDIR));
  std::string probe = (out_dir / ".qjoule-write-probe-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) fail("output directory '{}' is not writable: {}", out_dir.string(), errno_text(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

std::string read_all(int fd, const std::filesystem::path& path) {
  std::string text;
  char buffer[1 << 16];
  off_t offset = 0;
  while (true) {
    const ssize_t n = ::pread(fd, buffer, sizeof buffer, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("cannot read '{}': {}", path.string(), errno_text(errno));
    if (n == 0) return text;
    text.append(buffer, static_cast<std::size_t>(n));
    offset += n;
  }
}

// The pid holding a flock on the file behind `fd`, from /proc/locks ("" when it cannot be told).
std::string flock_holder(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return "";
  const std::string device_inode =
      fmt::format("{:02x}:{:02x}:{}", major(st.st_dev), minor(st.st_dev), static_cast<unsigned long>(st.st_ino));
  std::ifstream locks("/proc/locks");
  std::string line;
  while (std::getline(locks, line)) {
    std::istringstream fields(line);
    std::string index, kind, mode, access, pid, where;
    if (!(fields >> index >> kind >> mode >> access >> pid >> where)) continue;
    if (kind == "FLOCK" && where == device_inode) return pid;
  }
  return "";
}

}  // namespace

ResultsStore ResultsStore::open(const std::filesystem::path& out_dir) {
  require_writable_directory(out_dir);
  const auto path = out_dir / kResultsFileName;
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) fail("'{}' is not writable: {}", path.string(), errno_text(errno));
  // One writer per results file for the store's whole life: a second bench on the same --out (a
  // concurrent --resume, say) would run and record every configuration again.
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string holder = flock_holder(fd);
    ::close(fd);
    if (err == EWOULDBLOCK)
      fail("'{}' is in use by another qjoule bench{}; wait for it to finish, or choose another --out", path.string(),
           holder.empty() ? "" : " (pid " + holder + ")");
    fail("cannot lock '{}': {}", path.string(), errno_text(err));
  }
  ResultsStore store(out_dir, fd);
  store.load();
  return store;
}

ResultsStore::ResultsStore(ResultsStore&& other) noexcept
    : out_dir_(std::move(other.out_dir_)),
      fd_(std::exchange(other.fd_, -1)),
      records_(std::move(other.records_)),
      names_(std::move(other.names_)),
      notes_(std::move(other.notes_)) {}

ResultsStore& ResultsStore::operator=(ResultsStore&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    out_dir_ = std::move(other.out_dir_);
    fd_ = std::exchange(other.fd_, -1);
    records_ = std::move(other.records_);
    names_ = std::move(other.names_);
    notes_ = std::move(other.notes_);
  }
  return *this;
}

ResultsStore::~ResultsStore() {
  if (fd_ >= 0) ::close(fd_);
}

void ResultsStore::load() {
  const auto path = results_path();
  const std::string text = read_all(fd_, path);

  struct Line {
    std::size_t number, offset;  // 1-based line number, byte offset of its start
    std::string_view text;
    bool terminated;  // ends with '\n'
  };
  std::vector<Line> lines;
  for (std::size_t offset = 0, number = 1; offset < text.size(); ++number) {
    const auto newline = text.find('\n', offset);
    const auto end = newline == std::string::npos ? text.size() : newline;
    lines.push_back(
        {number, offset, std::string_view(text).substr(offset, end - offset), newline != std::string::npos});
    offset = end + 1;
  }
  std::size_t last = lines.size();  // index of the last non-blank line
  while (last > 0 && is_blank(lines[last - 1].text) && lines[last - 1].terminated) --last;

  std::map<std::string, std::size_t> line_of;  // run name -> line number, for duplicate messages
  std::optional<std::size_t> cut_at;           // byte offset where a torn last line starts
  for (std::size_t i = 0; i < last; ++i) {
    const Line& line = lines[i];
    const bool is_last = i + 1 == last;
    if (!line.terminated) {  // only the file's final line can lack '\n'
      cut_at = line.offset;
      break;
    }
    if (is_blank(line.text)) continue;
    nlohmann::json json;
    try {
      json = nlohmann::json::parse(line.text);
    } catch (const nlohmann::json::exception& e) {
      if (is_last) {
        cut_at = line.offset;
        break;
      }
      fail("{}:{}: not a JSON line ({}); only the last line may be torn, so this file was edited or corrupted",
           path.string(), line.number, io::json_error_text(e));
    }
    RunRecord record;
    try {
      record = run_record_from_json(json);
    } catch (const Error& e) {
      fail("{}:{}: {}", path.string(), line.number, e.what());
    }
    if (const auto [it, inserted] = line_of.emplace(record.run_name, line.number); !inserted)
      fail("{}:{}: run '{}' is recorded twice (also on line {})", path.string(), line.number, record.run_name,
           it->second);
    names_.insert(record.run_name);
    records_.push_back(std::move(record));
  }

  if (cut_at) {
    const std::size_t bytes = text.size() - *cut_at;
    if (::ftruncate(fd_, static_cast<off_t>(*cut_at)) != 0 || ::fsync(fd_) != 0)
      fail("cannot cut the torn last line off '{}': {}", path.string(), errno_text(errno));
    notes_.push_back(
        fmt::format("{}: cut off a torn last line ({} bytes) left by an interrupted run", path.string(), bytes));
  }
}

void ResultsStore::append(const RunRecord& record) {
  const auto path = results_path();
  if (record.run_name.empty()) fail("{}: cannot append a run record with no run_name", path.string());
  if (has(record.run_name))
    fail("{}: run '{}' is already recorded (a resumed bench skips recorded runs)", path.string(), record.run_name);
  // Invalid UTF-8 (say, from an error message quoting a file name) becomes U+FFFD rather than throwing.
  std::string line = to_json(record).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  // What a reopen will read back, checked before the line reaches the file.
  RunRecord stored = run_record_from_json(nlohmann::json::parse(line));
  line += '\n';

  // One write(2) of the whole line: O_APPEND puts it at the end in one piece. A short write (disk
  // full) is continued; if that fails too, the torn line is cut off by the next open().
  std::size_t written = 0;
  while (written < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + written, line.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("cannot append to '{}': {}", path.string(), errno_text(n < 0 ? errno : EIO));
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(fd_) != 0) fail("cannot sync '{}': {}", path.string(), errno_text(errno));
  names_.insert(stored.run_name);
  records_.push_back(std::move(stored));
}

}  // namespace qjoule::bench
