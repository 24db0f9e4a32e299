import { execFileSync, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Folder from "../src/Folder.ts"

const NODE = process.execPath

const gitRepo = () => {
  const repo = fs.mkdtempSync(path.join(os.tmpdir(), "corral-folder-"))
  const git = (...args: Array<string>) => execFileSync("git", args, { cwd: repo, stdio: "pipe" })
  git("init", "-q", "-b", "main")
  fs.writeFileSync(path.join(repo, "README.md"), "# test\n")
  git("add", ".")
  git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
  return repo
}

describe("Folder", () => {
  it.effect("makes a folder and its missing parents; a folder where procfs takes none fails naming it", () =>
    Effect.gen(function* () {
      const root = fs.mkdtempSync(path.join(os.tmpdir(), "corral-folder-"))
      yield* Folder.make(path.join(root, "a", "b"))
      assert.isTrue(fs.statSync(path.join(root, "a", "b")).isDirectory())
      const error = yield* Effect.flip(Folder.make("/proc/self/corral-x/y"))
      assert.strictEqual(error._tag, "FolderError")
      assert.strictEqual(error.path, "/proc/self/corral-x")
      assert.match(error.message, /does not let folders be created in it/)
      fs.rmSync(root, { recursive: true, force: true })
    })
  )

  // Node's recursive mkdir (sync or promise) never returns for such a path, so each call runs in a
  // child process that the test kills after 20 seconds.
  it("the library's folders under /proc end with its tagged error naming the folder, not a spin", () => {
    const fixture = new URL("fixtures/procFolders.ts", import.meta.url).pathname
    const repo = gitRepo()
    const expected: Record<string, RegExp> = {
      protocolDir: /^ProcessFailed: .*cannot prepare the CORRAL_\* files: \/proc\/self\/corral-protocol: /,
      logDir: /^ProcessFailed: .*cannot open log file: \/proc\/self\/corral-logs: /,
      stateDir:
        /^WorkspaceIoError: could not copy folder to \/proc\/self\/corral-state\/worktrees\/r1\/a: \/proc\/self\/corral-state: /
    }
    for (const [which, pattern] of Object.entries(expected)) {
      const child = spawnSync(NODE, [fixture, which, repo], { encoding: "utf8", timeout: 20_000 })
      assert.isNull(child.signal, `${which}: still running after 20 s (${child.stderr})`)
      assert.match(child.stdout, pattern, `${which}: ${child.stderr}`)
    }
    fs.rmSync(repo, { recursive: true, force: true })
  }, 90_000)
})
