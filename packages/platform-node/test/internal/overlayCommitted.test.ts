import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { rememberCommit, type UpperState, unchangedSinceCommit } from "../../src/internal/overlayCommitted.ts"

const sh = (cwd: string, ...args: Array<string>) =>
  execFileSync("git", args, { cwd, encoding: "utf8", env: { ...process.env, LC_ALL: "C" } }).trim()

/**
 * A repository whose HEAD holds `a.txt` and `src/b.txt`, a worktree of it (`dir`, whose `.git` file
 * the record reads), and an upper folder holding the same two files as HEAD.
 */
const makeSetUp = Effect.acquireRelease(
  Effect.sync(() => {
    const top = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "corral-committed-")))
    const repo = path.join(top, "repo")
    fs.mkdirSync(path.join(repo, "src"), { recursive: true })
    sh(repo, "init", "--quiet", "--initial-branch=main")
    fs.writeFileSync(path.join(repo, "a.txt"), "a.txt\n")
    fs.writeFileSync(path.join(repo, "src", "b.txt"), "b.txt\n")
    sh(repo, "add", "--all")
    sh(repo, "-c", "user.name=test", "-c", "user.email=test@test", "commit", "--quiet", "-m", "initial")
    const dir = path.join(top, "worktree")
    sh(repo, "worktree", "add", "--quiet", "-b", "agent", dir)
    const upper = path.join(top, "upper")
    fs.mkdirSync(path.join(upper, "src"), { recursive: true })
    fs.writeFileSync(path.join(upper, "a.txt"), "a.txt\n")
    fs.writeFileSync(path.join(upper, "src", "b.txt"), "b.txt\n")
    const gitDir = path.resolve(dir, /^gitdir: (.+)$/m.exec(fs.readFileSync(path.join(dir, ".git"), "utf8"))![1]!)
    return { top, dir, upper, gitDir }
  }),
  ({ top }) => Effect.sync(() => fs.rmSync(top, { recursive: true, force: true }))
)

/** The upper folder's entries as `changedPaths`'s walk sees them. */
const walk = (upper: string): UpperState =>
  ["a.txt", "src", "src/b.txt"].map((relative) => [
    relative,
    fs.lstatSync(path.join(upper, relative), { bigint: true })
  ])

/** When a walk that ran right after the last write of the upper folder started: within the racy window of every entry. */
const rightAfter = (walked: UpperState) => Math.max(...walked.map(([, stat]) => Number(stat.ctimeNs / 1_000_000n)))

/** Rewrites `file` in place (same inode, same size) and sets its modification time back, to the nanosecond. */
const rewriteKeepingMtime = (file: string, text: string) => {
  const before = fs.lstatSync(file, { bigint: true })
  assert.strictEqual(BigInt(Buffer.byteLength(text)), before.size)
  fs.writeFileSync(file, text)
  const seconds = before.mtimeNs / 1_000_000_000n
  const nanos = (before.mtimeNs % 1_000_000_000n).toString().padStart(9, "0")
  execFileSync("touch", ["-m", "-d", `@${seconds}.${nanos}`, file])
  assert.strictEqual(fs.lstatSync(file, { bigint: true }).mtimeNs, before.mtimeNs)
}

describe("overlayCommitted", () => {
  // A kernel with a coarse clock gives a write in the same tick as the walk the change time the walk
  // saw; the walk is replayed to stand for that (this machine's kernel may give every write a new one).
  it.live("a same-size rewrite with the modification time restored, within the racy window, is a change", () =>
    Effect.gen(function* () {
      const { dir, upper, gitDir } = yield* makeSetUp
      const walked = walk(upper)
      yield* rememberCommit(upper, gitDir, walked, rightAfter(walked), [])
      assert.isTrue(yield* unchangedSinceCommit(upper, dir, walked, []))
      rewriteKeepingMtime(path.join(upper, "a.txt"), "A.TXT\n")
      assert.isFalse(yield* unchangedSinceCommit(upper, dir, walked, []))
      rewriteKeepingMtime(path.join(upper, "a.txt"), "a.txt\n")
      assert.isTrue(yield* unchangedSinceCommit(upper, dir, walked, []))
    })
  )

  it.live("a change through a hard link outside the upper folder, within the racy window, is a change", () =>
    Effect.gen(function* () {
      const { top, dir, upper, gitDir } = yield* makeSetUp
      const walked = walk(upper)
      yield* rememberCommit(upper, gitDir, walked, rightAfter(walked), [])
      const alias = path.join(top, "alias")
      fs.linkSync(path.join(upper, "src", "b.txt"), alias)
      rewriteKeepingMtime(alias, "B.TXT\n")
      assert.isFalse(yield* unchangedSinceCommit(upper, dir, walked, []))
    })
  )

  it.live("outside the racy window an unchanged identity is trusted; any change of it is a change", () =>
    Effect.gen(function* () {
      const { dir, upper, gitDir } = yield* makeSetUp
      const walked = walk(upper)
      yield* rememberCommit(upper, gitDir, walked, rightAfter(walked) + 60_000, [])
      assert.isTrue(yield* unchangedSinceCommit(upper, dir, walked, []))
      fs.utimesSync(path.join(upper, "a.txt"), new Date(), new Date())
      assert.isFalse(yield* unchangedSinceCommit(upper, dir, walk(upper), []))
    })
  )

  it.live("no record, other skipped paths, a moved index or a lost .git file: ask git", () =>
    Effect.gen(function* () {
      const { dir, upper, gitDir } = yield* makeSetUp
      const walked = walk(upper)
      assert.isFalse(yield* unchangedSinceCommit(upper, dir, walked, []))
      yield* rememberCommit(upper, gitDir, walked, rightAfter(walked) + 60_000, [])
      assert.isFalse(yield* unchangedSinceCommit(upper, dir, walked, ["a.txt"]))
      fs.renameSync(path.join(dir, ".git"), path.join(dir, "git-file"))
      assert.isFalse(yield* unchangedSinceCommit(upper, dir, walked, []))
      fs.renameSync(path.join(dir, "git-file"), path.join(dir, ".git"))
      assert.isTrue(yield* unchangedSinceCommit(upper, dir, walked, []))
      sh(dir, "update-index", "--refresh")
      fs.utimesSync(path.join(gitDir, "index"), new Date(0), new Date(0))
      assert.isFalse(yield* unchangedSinceCommit(upper, dir, walked, []))
    })
  )
})
