#include "energy/child_process.h"

#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <csignal>

#include "qjoule/io/shell_quote.h"

extern char** environ;

namespace qjoule::energy {

pid_t spawn_process(const std::vector<std::string>& argv, const SpawnOptions& options, int& error) {
  error = 0;
  if (argv.empty()) {
    error = EINVAL;
    return -1;
  }
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (options.stdout_fd >= 0) posix_spawn_file_actions_adddup2(&actions, options.stdout_fd, 1);

  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  short flags = POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK;
  if (options.new_process_group) flags |= POSIX_SPAWN_SETPGROUP;
  posix_spawnattr_setflags(&attributes, flags);
  if (options.new_process_group) posix_spawnattr_setpgroup(&attributes, 0);
  // The child starts with default handlers for the signals qjoule ignores while it waits, and with
  // nothing blocked.
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGQUIT);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attributes, &none);

  pid_t pid = -1;
  const int result = options.search_path ? posix_spawnp(&pid, args[0], &actions, &attributes, args.data(), environ)
                                         : posix_spawn(&pid, args[0], &actions, &attributes, args.data(), environ);
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  if (result != 0) {
    error = result;
    return -1;
  }
  return pid;
}

int exit_code_from_wait_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 255;
}

std::string quoted_command(const std::vector<std::string>& command) {
  std::string text;
  for (const std::string& arg : command) {
    if (!text.empty()) text += ' ';
    text += io::shell_word(arg);
  }
  return text;
}

IgnoreInterrupts::IgnoreInterrupts() {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGINT, &ignore, &old_int_);
  sigaction(SIGQUIT, &ignore, &old_quit_);
}

IgnoreInterrupts::~IgnoreInterrupts() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGQUIT, &old_quit_, nullptr);
}

}  // namespace qjoule::energy
