// Starting this program again as a child: mem_scan's ranks (--spawn, where
// the launcher starts one process) and p2p_pingpong's run under an NVBit
// tool (LD_PRELOAD). /proc/self/exe is the running binary whatever the path
// or the working directory it was started with.
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "suite.hpp"

extern char **environ;

namespace suite {

// This process's environment, without the variables whose "NAME=" starts
// with `drop` (none when empty).
inline std::vector<std::string> environment_without(const std::string &drop = "") {
    std::vector<std::string> env;
    for (char **e = environ; *e; ++e)
        if (drop.empty() || std::string(*e).rfind(drop, 0) != 0) env.push_back(*e);
    return env;
}

// Starts /proc/self/exe with `args` (argv[0] first) and `env`; `what` names
// the child in the error that ends the program when it cannot start.
inline pid_t spawn_self(std::vector<std::string> args, std::vector<std::string> env, const char *what) {
    std::vector<char *> cargv, cenv;
    for (auto &s : args) cargv.push_back(&s[0]);
    for (auto &s : env) cenv.push_back(&s[0]);
    cargv.push_back(nullptr);
    cenv.push_back(nullptr);
    std::fflush(stdout);  // the child's lines come after ours
    pid_t pid = 0;
    const int err = posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, cargv.data(), cenv.data());
    if (err) die("cannot start %s: %s", what, std::strerror(err));
    return pid;
}

// Whether a child's wait status says it exited with status 0.
inline bool exited_ok(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

}  // namespace suite
