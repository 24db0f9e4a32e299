import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"

/**
 * CPU time of every git process a command starts, measured exactly: a `git` shim, first on that
 * command's `PATH`, starts the real git with `posix_spawn`, waits for it with `wait4` and appends
 * one line per command to a log — the user and system CPU (µs, from the `rusage` `wait4` returns,
 * which includes the processes git itself waited for), the wall time and the arguments. Written in
 * C because any interpreter would cost more to start than the git command it measures: the shim
 * costs ≈ 0.5–0.7 ms of CPU per git command (`perf stat -e task-clock`, 300 `git rev-parse HEAD`
 * with and without it), counted in the process tree's CPU but not in git's. Needs a C compiler
 * (`cc`); {@link makeGitShim} returns `undefined` without one.
 */
const source = String.raw`
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
extern char **environ;
static pid_t child;
static void forward(int sig) { if (child > 0) kill(child, sig); }
int main(int argc, char **argv) {
  const char *real = getenv("CORRAL_BENCH_REAL_GIT");
  const char *log = getenv("CORRAL_BENCH_GIT_LOG");
  if (real == NULL) { fprintf(stderr, "git shim: CORRAL_BENCH_REAL_GIT is not set\n"); return 127; }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  argv[0] = (char *)real;
  int spawned = posix_spawn(&child, real, NULL, NULL, argv, environ);
  if (spawned != 0) { fprintf(stderr, "git shim: cannot run %s: %s\n", real, strerror(spawned)); return 127; }
  signal(SIGTERM, forward); signal(SIGINT, forward); signal(SIGHUP, forward);
  int status = 0; struct rusage ru;
  while (wait4(child, &status, 0, &ru) < 0) if (errno != EINTR) { perror("git shim: wait4"); return 127; }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (log != NULL) {
    char line[1024];
    long wall = (t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_nsec - t0.tv_nsec) / 1000;
    int n = snprintf(line, sizeof line, "%ld %ld %ld", (long)ru.ru_utime.tv_sec * 1000000L + ru.ru_utime.tv_usec,
                     (long)ru.ru_stime.tv_sec * 1000000L + ru.ru_stime.tv_usec, wall);
    for (int i = 1; i < argc && n < (int)sizeof line - 2; i++) {
      if (strcmp(argv[i], "-c") == 0 && i + 1 < argc) { i++; continue; }
      n += snprintf(line + n, sizeof line - n - 1, " %.40s", argv[i]);
    }
    if (n > (int)sizeof line - 2) n = sizeof line - 2;
    for (int i = 0; i < n; i++) if (line[i] == '\n' || line[i] == '\r') line[i] = ' ';
    line[n++] = '\n';
    int fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) { (void)!write(fd, line, n); close(fd); }
  }
  if (WIFSIGNALED(status)) { signal(WTERMSIG(status), SIG_DFL); raise(WTERMSIG(status)); }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 127;
}
`

export interface GitShim {
  /** The folder holding the shim's `git`, to put first on `PATH`. */
  readonly bin: string
  /** The environment that makes a process's git commands go through the shim and log to `log`. */
  readonly env: (log: string) => Record<string, string>
}

/** One git command as the shim logged it. */
export interface GitCommand {
  readonly cpuMs: number
  readonly wallMs: number
  /** The subcommand (`add`, `commit`, …): the first argument that is not an option. */
  readonly subcommand: string
  readonly args: string
}

const whichGit = (): string | undefined => {
  try {
    return execFileSync("sh", ["-c", "command -v git"], { encoding: "utf8" }).trim() || undefined
  } catch {
    return undefined
  }
}

/** Compiles the shim into `dir`; `undefined` when there is no C compiler or no git on `PATH`. */
export const makeGitShim = (dir: string): GitShim | undefined => {
  const real = whichGit()
  if (real === undefined) return undefined
  const bin = path.join(dir, "git-shim")
  fs.mkdirSync(bin, { recursive: true })
  fs.writeFileSync(path.join(dir, "git-shim.c"), source)
  try {
    execFileSync("cc", ["-O2", "-o", path.join(bin, "git"), path.join(dir, "git-shim.c")], { stdio: "ignore" })
  } catch {
    return undefined
  }
  return {
    bin,
    env: (log) => ({
      PATH: `${bin}${path.delimiter}${process.env.PATH ?? ""}`,
      CORRAL_BENCH_REAL_GIT: real,
      CORRAL_BENCH_GIT_LOG: log
    })
  }
}

const valueOptions = new Set(["-C", "--git-dir", "--work-tree", "--namespace"])

/** The commands a shim logged to `log` (none when it is missing). */
export const readGitLog = (log: string): Array<GitCommand> => {
  let text: string
  try {
    text = fs.readFileSync(log, "utf8")
  } catch {
    return []
  }
  return text
    .split("\n")
    .filter((line) => line.length > 0)
    .map((line) => {
      const [user = "0", system = "0", wall = "0", ...args] = line.split(" ")
      let subcommand = ""
      for (let i = 0; i < args.length; i++) {
        const arg = args[i]!
        if (valueOptions.has(arg)) i++
        else if (!arg.startsWith("-")) {
          subcommand = arg
          break
        }
      }
      return {
        cpuMs: (Number(user) + Number(system)) / 1000,
        wallMs: Number(wall) / 1000,
        subcommand,
        args: args.join(" ")
      }
    })
}
