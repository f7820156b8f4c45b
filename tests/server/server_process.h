#pragma once
// Runs `specserve serve` as a child process on a free port for end-to-end tests: waits for its
// ready line, exposes the port, stops it with SIGTERM and reports the exit status.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

namespace specserve::test {

// The default model's directory (scripts/default_model.sh, creating it if needed).
inline std::string default_model_dir() {
  std::string cmd = std::string("SPECSERVE_BUILD_DIR=") + SPECSERVE_BINARY_DIR + " " + SPECSERVE_SOURCE_DIR +
                    "/scripts/default_model.sh";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("cannot run default_model.sh");
  char buf[4096];
  std::string out;
  while (fgets(buf, sizeof(buf), p)) out += buf;
  if (pclose(p) != 0) throw std::runtime_error("default_model.sh failed");
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

class ServerProcess {
 public:
  ServerProcess(const std::string& model_dir, const std::vector<std::string>& extra) {
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe");
    log_path_ = "/tmp/specserve-e2e-" + std::to_string(getpid()) + "-" + std::to_string(counter()++) + ".log";
    pid_ = fork();
    if (pid_ == 0) {
      // A test process that dies (a crash, a killed run) takes its servers with it.
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      dup2(fds[1], STDOUT_FILENO);
      FILE* log = fopen(log_path_.c_str(), "w");
      if (log) dup2(fileno(log), STDERR_FILENO);
      close(fds[0]);
      std::vector<std::string> args = {
          std::string(SPECSERVE_BINARY_DIR) + "/bin/specserve", "serve", "--model", model_dir, "--port", "0"};
      args.insert(args.end(), extra.begin(), extra.end());
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(fds[1]);
    out_ = fdopen(fds[0], "r");
    char line[4096];
    std::regex ready(R"(specserve ready: http://[^:]+:(\d+)\s+\(model '([^']+)')");
    while (fgets(line, sizeof(line), out_)) {
      std::smatch m;
      std::string s(line);
      if (std::regex_search(s, m, ready)) {
        port_ = std::stoi(m[1]);
        model_ = m[2];
        break;
      }
    }
    if (port_ == 0) throw std::runtime_error("server did not start; log: " + log_path_);
  }
  ~ServerProcess() {
    if (pid_ > 0) stop();
    if (out_) fclose(out_);
  }
  int port() const { return port_; }
  const std::string& model() const { return model_; }
  pid_t pid() const { return pid_; }
  // SIGTERM, then waits at most `limit_s` for the exit: returns the exit status, -1 when killed by
  // a signal, -2 when it had to be killed after the limit. `took_s` receives the seconds waited.
  int terminate_within(double limit_s, double* took_s) {
    if (pid_ <= 0) return exit_code_;
    const auto t0 = std::chrono::steady_clock::now();
    kill(pid_, SIGTERM);
    int status = 0;
    for (;;) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        break;
      }
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > limit_s) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        exit_code_ = -2;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    *took_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    pid_ = -1;
    if (exit_code_ == 0) unlink(log_path_.c_str());
    return exit_code_;
  }
  // SIGTERM, then the exit status (or -1 when killed by a signal).
  int stop() {
    if (pid_ <= 0) return exit_code_;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (exit_code_ == 0) unlink(log_path_.c_str());  // kept for diagnosis otherwise
    return exit_code_;
  }

 private:
  static int& counter() {
    static int c = 0;
    return c;
  }
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
  int port_ = 0;
  std::string model_;
  std::string log_path_;
  int exit_code_ = -1;
};

}  // namespace specserve::test
