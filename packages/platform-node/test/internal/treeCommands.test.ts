import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { linkTree, removeTrees } from "../../src/internal/treeCommands.ts"

const scratch = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "corral-tree-"))),
  (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
)

const write = (file: string, text: string) => {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, text)
}

describe("treeCommands", () => {
  it.effect("linkTree copies a folder as hard links to the same files, and the source stays as it was", () =>
    Effect.gen(function* () {
      const dir = yield* scratch
      const from = path.join(dir, "from")
      write(path.join(from, "a.txt"), "a")
      write(path.join(from, "deep", "er", "b.txt"), "b")
      fs.symlinkSync("a.txt", path.join(from, "link"))
      yield* linkTree(from, path.join(dir, "to"))
      for (const file of ["a.txt", "deep/er/b.txt"]) {
        assert.strictEqual(fs.statSync(path.join(dir, "to", file)).ino, fs.statSync(path.join(from, file)).ino, file)
      }
      assert.strictEqual(fs.readlinkSync(path.join(dir, "to", "link")), "a.txt")
      fs.rmSync(path.join(dir, "to", "a.txt"))
      assert.strictEqual(fs.readFileSync(path.join(from, "a.txt"), "utf8"), "a")
    }).pipe(Effect.scoped)
  )

  it.effect("linkTree of a missing folder fails with a WorkspaceIoError naming the destination", () =>
    Effect.gen(function* () {
      const dir = yield* scratch
      const error = yield* Effect.flip(linkTree(path.join(dir, "missing"), path.join(dir, "to")))
      assert.strictEqual(error._tag, "WorkspaceIoError")
      assert.strictEqual(error._tag === "WorkspaceIoError" && error.path, path.join(dir, "to"))
      assert.isFalse(fs.existsSync(path.join(dir, "to")))
    }).pipe(Effect.scoped)
  )

  it.effect("removeTrees removes every target with all below it, a missing one and none at all included", () =>
    Effect.gen(function* () {
      const dir = yield* scratch
      write(path.join(dir, "one", "x", "y", "z.txt"), "z")
      write(path.join(dir, "two.index"), "i")
      fs.mkdirSync(path.join(dir, "kept"))
      fs.linkSync(path.join(dir, "one", "x", "y", "z.txt"), path.join(dir, "kept", "z.txt"))
      yield* removeTrees()
      yield* removeTrees(path.join(dir, "one"), path.join(dir, "two.index"), path.join(dir, "missing"))
      assert.deepStrictEqual(fs.readdirSync(dir), ["kept"])
      assert.strictEqual(fs.readFileSync(path.join(dir, "kept", "z.txt"), "utf8"), "z")
    }).pipe(Effect.scoped)
  )
})
