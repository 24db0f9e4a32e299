/**
 * Where a command works: the target repository (`--repo`, default the current directory) and the
 * state directory (`--state-dir`, `CORRAL_HOME`, default `<repo>/.corral`).
 *
 * @since 0.1.0
 */
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { invalidInput } from "./CliExit.ts"
import * as Folder from "./Folder.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Paths {
  readonly repo: string
  readonly stateDir: string
}

/**
 * Resolves and checks the repository folder and the state directory.
 *
 * @since 0.1.0
 * @category resolving
 */
export const resolve = (repo: Option.Option<string>, stateDir: Option.Option<string>) =>
  Effect.gen(function* () {
    const root = NodePath.resolve(Option.getOrElse(repo, () => process.cwd()))
    if (!NodeFs.existsSync(root) || !NodeFs.statSync(root).isDirectory()) {
      return yield* invalidInput(`--repo ${root}: not a directory`)
    }
    const state = Option.match(stateDir, {
      onNone: () => process.env.CORRAL_HOME ?? NodePath.join(root, ".corral"),
      onSome: (dir) => dir
    })
    return { repo: root, stateDir: NodePath.resolve(state) } satisfies Paths
  })

/**
 * Creates the state directory, or says why it cannot be (a file in the way, no permission, a folder
 * that takes no new folders such as `/proc/self`).
 *
 * @since 0.1.0
 * @category resolving
 */
export const makeStateDir = (stateDir: string) =>
  Folder.make(stateDir).pipe(
    Effect.catch((error) =>
      invalidInput(
        `cannot create the state folder ${stateDir}: ${error.path === stateDir ? error.reason : error.message}; choose another with --state-dir or CORRAL_HOME`
      )
    )
  )

/**
 * A run id that sorts by start time: `20261125-231816-k3f9`.
 *
 * @since 0.1.0
 * @category resolving
 */
export const newRunId = (): string => {
  const iso = new Date().toISOString().replace(/[-:]/g, "").replace("T", "-").slice(0, 15)
  return `${iso}-${Math.random().toString(36).slice(2, 6)}`
}
