/**
 * Whole-tree file work done by `rm -rf` and `cp -al`, started by the spawn helper (`spawnHelper.ts`).
 *
 * Node's `fs.promises.rm` walks a tree in JavaScript, one threadpool request per entry (`lstat`,
 * `unlink`, `readdir`, `rmdir`): removing an overlay snapshot of 2,000 hard links costs ≈ 63 ms of
 * this process's CPU, against ≈ 2 ms here and ≈ 10 ms in `rm` (measured with `process.resourceUsage`
 * and `/proc/self/stat`, tmpfs). `fs.rmSync` is as cheap but blocks the event loop for the whole
 * walk. Starting the commands through the helper also spares this process a fork of itself.
 */
import * as fs from "node:fs/promises"
import * as Effect from "effect/Effect"
import { execCommand, sharedHelper } from "./spawnHelper.ts"
import { attempt, type FsFailure } from "./workspaceFs.ts"

/**
 * Runs `file args` through the spawn helper; the error's text when it fails. Interrupted, it completes
 * once the command has exited (`StopGrace` in `spawnHelper.ts`), so a `cp` does not go on writing
 * into a folder being cleaned up.
 */
const run = (file: string, args: ReadonlyArray<string>) =>
  Effect.suspend(() =>
    execCommand(
      sharedHelper(),
      { file, args, cwd: "/", env: { ...process.env, LC_ALL: "C" }, maxBuffer: 1024 * 1024 },
      (error, _stdout, stderr) => Effect.succeed(error === null ? undefined : stderr.trim() || error.message)
    )
  )

/**
 * Removes each target and everything below it (nothing for one that is missing). When `rm` fails,
 * `fs.rm` tries again and reports its error. An interruption waits for `rm` to finish: stopped
 * half-way it would leave a tree half removed.
 */
export const removeTrees = (...targets: ReadonlyArray<string>): Effect.Effect<void, FsFailure> =>
  targets.length === 0
    ? Effect.void
    : Effect.flatMap(Effect.uninterruptible(run("rm", ["-rf", "--", ...targets])), (problem) =>
        problem === undefined
          ? Effect.void
          : Effect.forEach(
              targets,
              (target) =>
                attempt("remove", target, () => fs.rm(target, { recursive: true, force: true, maxRetries: 3 })),
              { discard: true }
            )
      )

/** Copies the folder `from` to `to` (which must not exist) as hard links to the same files. */
export const linkTree = (from: string, to: string) =>
  Effect.flatMap(run("cp", ["-al", "--", from, to]), (problem) =>
    problem === undefined ? Effect.void : attempt("link a snapshot into", to, () => Promise.reject(new Error(problem)))
  )
