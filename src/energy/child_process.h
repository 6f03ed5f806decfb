// Starting and reaping child processes (posix_spawn): the measured command of `qjoule energy` and
// the `cmd:` power-meter command.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace qjoule::energy {

struct SpawnOptions {
  int stdout_fd = -1;              // dup'ed onto the child's stdout when >= 0
  bool new_process_group = false;  // the child leads its own group (kill(-pid) reaches all of it)
  bool search_path = true;         // resolve argv[0] through $PATH
};

// Starts argv (argv[0] is the program). Returns the pid, or -1 with `error` set to the errno
// (including the exec failure, which glibc's posix_spawn reports).
pid_t spawn_process(const std::vector<std::string>& argv, const SpawnOptions& options, int& error);

// The shell's convention for a wait status: the exit code, or 128 + signal number.
int exit_code_from_wait_status(int status);

// The command as a shell would read it back: arguments with spaces or shell characters in quotes.
std::string quoted_command(const std::vector<std::string>& command);

// Ignores SIGINT and SIGQUIT while alive (like time(1)): Ctrl-C reaches the measured command, and
// qjoule still reports what it measured.
class IgnoreInterrupts {
 public:
  IgnoreInterrupts();
  ~IgnoreInterrupts();
  IgnoreInterrupts(const IgnoreInterrupts&) = delete;
  IgnoreInterrupts& operator=(const IgnoreInterrupts&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_quit_ {};
};

}  // namespace qjoule::energy
