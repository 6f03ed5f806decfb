#include "run_qjoule.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "test_paths.h"

extern char** environ;

namespace qjoule::test {

namespace {

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

ProcessResult run_qjoule(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
                         bool as_nobody) {
  static int counter = 0;
  const auto dir = binary_dir() / "test-tmp" / "run-qjoule";
  std::filesystem::create_directories(dir);
  const auto stem = dir / (std::to_string(::getpid()) + "-" + std::to_string(counter++));
  const std::string out_path = stem.string() + ".out";
  const std::string err_path = stem.string() + ".err";

  std::vector<std::string> argv{qjoule_binary().string()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> raw;
  for (auto& a : argv) raw.push_back(a.data());
  raw.push_back(nullptr);

  // The child's environment is built here: after fork() only async-signal-safe calls are allowed
  // (other test threads may hold the allocator's lock).
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    if (env.count(name) == 0) environment.push_back(entry);
  }
  for (const auto& [name, value] : env) {
    if (!value.empty()) environment.push_back(name + "=" + value);
  }
  std::vector<char*> envp;
  for (auto& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);

  const pid_t pid = ::fork();
  if (pid == 0) {
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (out < 0 || err < 0) ::_exit(200);
    ::dup2(out, 1);
    ::dup2(err, 2);
    if (as_nobody && ::geteuid() == 0) {
      if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(201);
    }
    ::execve(raw[0], raw.data(), envp.data());
    ::_exit(202);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ProcessResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = slurp(out_path);
  result.err = slurp(err_path);
  std::filesystem::remove(out_path);
  std::filesystem::remove(err_path);
  return result;
}

std::map<std::string, std::string> no_sensor_env(const std::string& scratch_dir) {
  std::filesystem::create_directories(scratch_dir + "/powercap");
  return {{"QJOULE_POWERCAP_ROOT", scratch_dir + "/powercap"},
          {"QJOULE_NVML_LIB", scratch_dir + "/no-libnvidia-ml.so.1"},
          {"QJOULE_PERF_POWER_ROOT", scratch_dir + "/no-power-pmu"}};
}

}  // namespace qjoule::test
