import { execFileSync } from "node:child_process"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { parseIndex, settleRacyEntries } from "../../src/internal/racyIndex.ts"

const root = fs.realpathSync(fs.mkdtempSync(path.join(tmpdir(), "corral-racy-index-")))
afterAll(() => fs.rmSync(root, { recursive: true, force: true }))

const git = (cwd: string, ...args: Array<string>) =>
  execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", ...args], { cwd, encoding: "utf8" }).trim()

const FILES = 60
const fileName = (i: number) => `src/d${i % 6}/f${i}.txt`

const repo = path.join(root, "repo")
fs.mkdirSync(repo)
git(repo, "init", "--quiet", "--initial-branch=main")
for (let i = 0; i < FILES; i++) {
  fs.mkdirSync(path.join(repo, path.dirname(fileName(i))), { recursive: true })
  fs.writeFileSync(path.join(repo, fileName(i)), `file ${i}\n${"x".repeat(200 + i)}\n`)
}
git(repo, "add", ".")
git(repo, "commit", "--quiet", "-m", "init")

let worktrees = 0
/** A worktree set up as corral's is: added without a checkout, then `read-tree --reset -u`. */
const checkout = () => {
  const dir = path.join(root, `wt-${worktrees++}`)
  git(repo, "worktree", "add", "--quiet", "--detach", "--no-checkout", dir, "HEAD")
  git(dir, "read-tree", "--reset", "-u", "HEAD")
  return { dir, gitDir: git(dir, "rev-parse", "--absolute-git-dir") }
}

/**
 * A checkout whose index was written a clock tick after its files (as a large checkout's is): the
 * same `read-tree` once more, when the clock is past the first index's time, rewrites the index only.
 */
const checkoutTickLater = () => {
  const made = checkout()
  const firstIndexMs = Number(fs.statSync(path.join(made.gitDir, "index"), { bigint: true }).mtimeNs / 1_000_000n)
  while (Date.now() < firstIndexMs + 15) {
    // the clock itself is what is waited for
  }
  git(made.dir, "read-tree", "--reset", "-u", "HEAD")
  return made
}

const indexSecond = (gitDir: string) =>
  Number(fs.statSync(path.join(gitDir, "index"), { bigint: true }).mtimeNs / 1_000_000_000n)
const mtimeSecond = (file: string) => Number(fs.statSync(file, { bigint: true }).mtimeNs / 1_000_000_000n)
const staged = (dir: string) => {
  git(dir, "add", "--all")
  return git(dir, "diff", "--cached", "--name-status").split("\n").filter(Boolean).sort()
}
/** The same length, other bytes: only the time tells git that the file changed. */
const rewriteSameSize = (file: string) => {
  const text = fs.readFileSync(file, "utf8")
  fs.writeFileSync(file, text.replace("file", "FILE"))
}

describe("racyIndex", () => {
  it("reads index versions 2, 3 and 4 as git lists them", () => {
    const { dir, gitDir } = checkout()
    for (const version of ["2", "3", "4"]) {
      git(dir, "update-index", "--index-version", version)
      const entries = parseIndex(fs.readFileSync(path.join(gitDir, "index")))
      assert.deepStrictEqual(
        entries?.map((e) => e.name),
        git(dir, "ls-files").split("\n")
      )
    }
  })

  it("never hides a same-size rewrite made in the second the checkout recorded", () => {
    // The hazard: the rewrite lands in the second git recorded, with the same size, so git's
    // whole-second stat sees nothing; the file was recorded either before the index's clock tick
    // (nanoseconds decide) or in it (the content decides).
    let hazards = 0
    const ticks = new Set<string>()
    for (let attempt = 0; attempt < 12 && hazards < 4; attempt++) {
      const { dir, gitDir } = attempt % 2 === 0 ? checkoutTickLater() : checkout()
      const file = path.join(dir, fileName(7))
      rewriteSameSize(file)
      const entry = parseIndex(fs.readFileSync(path.join(gitDir, "index")))!.find((e) => e.name === fileName(7))!
      const index = fs.statSync(path.join(gitDir, "index"), { bigint: true }).mtimeNs
      const recorded = BigInt(entry.mtimeSec) * 1_000_000_000n + BigInt(entry.mtimeNsec)
      const hazard = mtimeSecond(file) === entry.mtimeSec && entry.size > 0
      if (hazard) ticks.add(recorded < index ? "before the index's tick" : "in the index's tick")
      const settled = settleRacyEntries(dir, gitDir, (indexSecond(gitDir) + 1) * 1000)
      if (hazard) {
        hazards++
        assert.isFalse(settled, "a rewrite git cannot see by whole seconds must keep the re-hash")
      }
      assert.deepStrictEqual(staged(dir), [`M\t${fileName(7)}`])
    }
    assert.isAbove(hazards, 0, "the clock never allowed the hazard in 12 attempts")
  })

  it.each(["an index written a clock tick after the files", "a checkout as it comes"])(
    "settles untouched files (%s) and stages every other change",
    (kind) => {
      const { dir, gitDir } = kind.startsWith("an index") ? checkoutTickLater() : checkout()
      fs.appendFileSync(path.join(dir, fileName(1)), "more\n")
      fs.rmSync(path.join(dir, fileName(2)))
      fs.writeFileSync(path.join(dir, "new.txt"), "new\n")
      const second = indexSecond(gitDir)
      assert.isTrue(settleRacyEntries(dir, gitDir, (second + 1) * 1000 + 300))
      assert.strictEqual(indexSecond(gitDir), second + 1)
      assert.deepStrictEqual(staged(dir), [`A\tnew.txt`, `D\t${fileName(2)}`, `M\t${fileName(1)}`])
    }
  )

  it("for files recorded in the index's own clock tick, the content decides", () => {
    // A rewrite in the very tick git recorded keeps every time; the index saying that a file holds
    // another blob while its times still match is what such a rewrite looks like.
    for (const lie of [false, true]) {
      const { dir, gitDir } = checkout()
      const indexPath = path.join(gitDir, "index")
      const buf = fs.readFileSync(indexPath)
      const entries = parseIndex(buf)!
      const target = entries.find((e) => e.name === fileName(9))!
      if (lie) entries.find((e) => e.name === fileName(10))!.oid.copy(target.oid)
      createHash("sha1")
        .update(buf.subarray(0, buf.length - 20))
        .digest()
        .copy(buf, buf.length - 20)
      fs.writeFileSync(indexPath, buf)
      fs.utimesSync(indexPath, target.mtimeSec, target.mtimeSec)
      assert.strictEqual(settleRacyEntries(dir, gitDir, (target.mtimeSec + 1) * 1000), !lie)
    }
  })

  it("leaves the index alone in the index's own second, and for intent-to-add entries", () => {
    const { dir, gitDir } = checkout()
    const second = indexSecond(gitDir)
    assert.isFalse(settleRacyEntries(dir, gitDir, second * 1000 + 999))
    fs.writeFileSync(path.join(dir, "later.txt"), "later\n")
    git(dir, "add", "--intent-to-add", "later.txt")
    assert.isUndefined(parseIndex(fs.readFileSync(path.join(gitDir, "index"))))
    const now = indexSecond(gitDir)
    assert.isFalse(settleRacyEntries(dir, gitDir, (now + 1) * 1000))
    assert.strictEqual(indexSecond(gitDir), now)
  })
})
