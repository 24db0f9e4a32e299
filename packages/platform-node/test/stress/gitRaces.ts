/**
 * Not a test of the suite: stress runs, with the real git, of the races between git processes that
 * share one repository (several corral processes, or corral and the user). Each scenario makes a
 * throwaway repository, runs a loop of git commands in a background shell while this process runs
 * one command `trials` times, and prints one JSON line: scenario, trials, failures, the distinct
 * error messages (object ids and numbers masked) and /proc/loadavg.
 *
 * - `beside-add <command>`: `worktree add --no-checkout -b` and `worktree remove` of a worktree
 *   without end beside `<command>`, one of {@link besideAdd} (git writes a new worktree's
 *   administrative files one by one, `HEAD` a placeholder first).
 * - `prune`: `worktree prune` without end beside `worktree add`; a failure is an add that failed or
 *   whose worktree git no longer knows afterwards.
 * - `kill`: `worktree add` killed (SIGKILL, its process group) 0–5 ms after its start; a failure is
 *   a kill that left a worktree with the placeholder `HEAD` (`rev-list --all` fails from then on).
 * - `gc-default`, `gc-now`: the user's `git gc` (what `gc --auto` runs: loose objects pruned after
 *   `gc.pruneExpire`, 2 weeks by default) or `git gc --prune=now` without end
 *   beside an agent's commit written the way corral writes one (objects, then `commit-tree`, then
 *   `update-ref`, 20 ms apart); a failure is a write that failed or a commit that lost an object
 *   before its ref held it.
 *
 * Run from the package folder: `node test/stress/gitRaces.ts <scenario> [command] <trials>` (Node 24).
 */
import { execFileSync, spawn, spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

const [scenario = "", ...rest] = process.argv.slice(2)
const trials = Number(rest.at(-1))
const command = rest.length > 1 ? rest[0]! : undefined

const scenarioNames = ["beside-add", "prune", "kill", "gc-default", "gc-now"]
if (!scenarioNames.includes(scenario) || !Number.isInteger(trials) || trials < 1) {
  throw new Error(
    `usage: gitRaces.ts <${scenarioNames.join("|")}> [command] <trials: a positive integer>; got ${process.argv.slice(2)}`
  )
}

const dir = mkdtempSync(join(tmpdir(), "corral-git-races-"))
const repo = join(dir, "repo")
const env = { ...process.env, LC_ALL: "C", GIT_CONFIG_NOSYSTEM: "1" }
const identity = ["-c", "user.name=stress", "-c", "user.email=stress@localhost", "-c", "gc.auto=0"]

/** Runs git in `cwd`; its exit code and standard error. */
const run = (cwd: string, args: ReadonlyArray<string>, input?: string) => {
  const out = spawnSync("git", [...identity, ...args], { cwd, env, input, encoding: "utf8" })
  return { ok: out.status === 0, stdout: out.stdout.trim(), stderr: out.stderr.trim() }
}

const must = (cwd: string, args: ReadonlyArray<string>, input?: string) => {
  const out = run(cwd, args, input)
  if (!out.ok) throw new Error(`git ${args.join(" ")} failed in ${cwd}: ${out.stderr}`)
  return out.stdout
}

/** Starts `script` in a background shell (`$repo`, `$dir` and `$base` set) until the file `stop` exists. */
const background = (script: string, base: string) => {
  const loop = `while [ ! -e "$dir/stop" ] && kill -0 ${process.pid} 2>/dev/null; do ${script}; done`
  const child = spawn("sh", ["-c", loop], {
    env: { ...env, repo, dir, base },
    stdio: "ignore"
  })
  return () =>
    new Promise<void>((resolve) => {
      writeFileSync(join(dir, "stop"), "")
      child.on("exit", () => resolve())
    })
}

const masked = (message: string) =>
  message
    .split("\n")[0]!
    .replace(/[0-9a-f]{40}/g, "<oid>")
    .replace(/\d+/g, "N")

/** The error of the first of `steps` that fails, or `undefined` when all succeed. */
const steps = (...commands: ReadonlyArray<() => { readonly ok: boolean; readonly stderr: string }>) => {
  for (const command of commands) {
    const out = command()
    if (!out.ok) return out.stderr || "failed without a message"
  }
  return undefined
}

/** The commands of `beside-add`: what corral runs in a repository where another process adds worktrees. */
const besideAdd: Record<string, (i: number, base: string) => string | undefined> = {
  "rev-list-all": () => steps(() => run(repo, ["rev-list", "--all"])),
  "worktree-list": () => steps(() => run(repo, ["worktree", "list", "--porcelain"])),
  "branch-delete": (i, base) =>
    steps(
      () => run(repo, ["branch", `x${i}`, base]),
      () => run(repo, ["branch", "-D", `x${i}`])
    ),
  "update-ref-delete": (i, base) =>
    steps(
      () => run(repo, ["update-ref", `refs/heads/u${i}`, base]),
      () => run(repo, ["update-ref", "-d", `refs/heads/u${i}`])
    ),
  "worktree-add": (i, base) =>
    steps(
      () => run(repo, ["worktree", "add", "--quiet", "--no-checkout", "-b", `s${i}`, "--", join(dir, `s${i}`), base]),
      () => ({ ok: existsSync(join(dir, `s${i}`, ".git")), stderr: "no .git file" }),
      () => run(repo, ["worktree", "remove", "--force", join(dir, `s${i}`)])
    ),
  "checkout-b": (i, base) =>
    steps(() => run(join(dir, "mine"), ["checkout", "--quiet", "--force", "-b", `c${i}`, base, "--"])),
  "merge-tree": () => steps(() => run(repo, ["merge-tree", "--write-tree", "mine", "main"])),
  commit: () => steps(() => run(join(dir, "mine"), ["commit", "--quiet", "--allow-empty", "-m", "x"])),
  "worktree-prune": () => steps(() => run(repo, ["worktree", "prune"]))
}

const setUp = () => {
  must(dir, ["init", "--quiet", "--initial-branch=main", repo])
  for (let i = 0; i < 50; i++) writeFileSync(join(repo, `f${i}.txt`), `file ${i}\n`)
  must(repo, ["add", "."])
  must(repo, ["commit", "--quiet", "-m", "base"])
  const base = must(repo, ["rev-parse", "HEAD"])
  must(repo, ["worktree", "add", "--quiet", "-b", "mine", join(dir, "mine"), base])
  return base
}

const adderLoop =
  'i=$((i+1)); git -C "$repo" worktree add --quiet --no-checkout -b "a$i" -- "$dir/adds/a$i" "$base" 2>/dev/null; ' +
  'git -C "$repo" worktree remove --force "$dir/adds/a$i" 2>/dev/null; git -C "$repo" branch -q -D "a$i" 2>/dev/null'

/** Runs `step` `trials` times beside `loop`; the error messages of the failed ones. */
const beside = async (loop: string, base: string, step: (i: number) => string | undefined) => {
  const stop = background(loop, base)
  const errors: Array<string> = []
  for (let i = 0; i < trials; i++) {
    const error = step(i)
    if (error !== undefined) errors.push(masked(error))
  }
  await stop()
  return errors
}

const besideAddScenario = (base: string) => {
  const step = command === undefined ? undefined : besideAdd[command]
  if (step === undefined)
    throw new Error(`beside-add needs one of ${Object.keys(besideAdd).join(", ")}; got ${command}`)
  return beside(adderLoop, base, (i) => step(i, base))
}

const pruneScenario = (base: string) =>
  beside('git -C "$repo" worktree prune', base, (i) => {
    const at = join(dir, "w", `a${i}`)
    const add = run(repo, ["worktree", "add", "--quiet", "--no-checkout", "-b", `a${i}`, "--", at, base])
    if (!add.ok) return add.stderr
    const known = run(at, ["rev-parse", "--git-dir"])
    if (!known.ok) return `lost: ${known.stderr}`
    const removed = run(repo, ["worktree", "remove", "--force", at])
    return removed.ok ? undefined : removed.stderr
  })

const killScenario = async (base: string) => {
  const errors: Array<string> = []
  for (let i = 0; i < trials; i++) {
    const child = spawn(
      "git",
      ["worktree", "add", "--quiet", "--no-checkout", "-b", `k${i}`, "--", join(dir, `k${i}`), base],
      {
        cwd: repo,
        env,
        detached: true,
        stdio: "ignore"
      }
    )
    const exited = new Promise((resolve) => child.on("exit", resolve))
    await new Promise((resolve) => setTimeout(resolve, Math.floor(Math.random() * 6)))
    try {
      process.kill(-child.pid!, "SIGKILL")
    } catch {}
    await exited
    const head = join(repo, ".git", "worktrees", `k${i}`, "HEAD")
    if (existsSync(head) && readFileSync(head, "utf8").trim() === "0".repeat(40)) {
      errors.push(`placeholder HEAD left; rev-list --all: ${masked(run(repo, ["rev-list", "--all"]).stderr)}`)
      must(repo, ["worktree", "remove", "--force", "--force", join(dir, `k${i}`)])
    }
  }
  return errors
}

const gcScenario = (base: string, prune: "default" | "now") => {
  const gc =
    prune === "default" ? 'git -C "$repo" gc --quiet 2>/dev/null' : 'git -C "$repo" gc --quiet --prune=now 2>/dev/null'
  const pause = () => execFileSync("sleep", ["0.02"])
  return beside(gc, base, (i) => {
    const blob = run(repo, ["hash-object", "-w", "--stdin"], `work ${i} ${Math.random()}\n`)
    if (!blob.ok) return blob.stderr
    const made = run(repo, ["mktree"], `100644 blob ${blob.stdout}\tf${i}\n`)
    if (!made.ok) return made.stderr
    const tree = made.stdout
    pause()
    const commit = run(repo, ["commit-tree", "-p", "HEAD", "-m", `agent ${i}`, tree])
    if (!commit.ok) return commit.stderr
    pause()
    const ref = run(repo, ["update-ref", "refs/heads/agent", commit.stdout])
    if (!ref.ok) return ref.stderr
    const whole = run(repo, ["cat-file", "-e", blob.stdout]).ok && run(repo, ["cat-file", "-e", tree]).ok
    return whole ? undefined : "an object of the commit is gone"
  })
}

const scenarios: Record<string, (base: string) => Promise<Array<string>>> = {
  "beside-add": besideAddScenario,
  prune: pruneScenario,
  kill: killScenario,
  "gc-default": (base) => gcScenario(base, "default"),
  "gc-now": (base) => gcScenario(base, "now")
}

try {
  const errors = await scenarios[scenario]!(setUp())
  const messages: Record<string, number> = {}
  for (const error of errors) messages[error] = (messages[error] ?? 0) + 1
  console.log(
    JSON.stringify({
      scenario: command === undefined ? scenario : `${scenario} ${command}`,
      trials,
      failures: errors.length,
      messages,
      loadavg: readFileSync("/proc/loadavg", "utf8").trim()
    })
  )
} finally {
  rmSync(dir, { recursive: true, force: true })
}
