/**
 * The spawn helper: a small Node process (no modules but `node:child_process`) that starts this
 * process's git commands and process agents, so that none of them forks this larger process. It starts
 * with the first command, ends when this process exits (its standard input closes), and
 * `CORRAL_SPAWN_HELPER=0` turns it off (then every process is started by this one).
 *
 * A command that will run git soon calls {@link start} first, so the helper boots while the command
 * loads its modules and is ready by the first git command (which would otherwise fork this process).
 *
 * The processes it starts are its children: the kernel adds their CPU time to the helper's, and adds
 * the helper's to this process's children's (`cutime`, what `time` and a parent's `wait` report) only
 * when this process waits for it. A command that wants that accounting calls {@link stop} before it
 * exits.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import { sharedHelper } from "./internal/spawnHelper.ts"

/**
 * Starts this process's spawn helper now instead of with the first command. It does not keep this
 * process alive; nothing happens when it is started already or turned off (`CORRAL_SPAWN_HELPER=0`).
 *
 * @example
 * ```ts
 * import * as SpawnHelper from "@corral/platform-node/SpawnHelper"
 *
 * SpawnHelper.start()
 * ```
 *
 * @since 0.1.0
 * @category lifecycle
 */
export const start = (): void => sharedHelper().start()

/**
 * Ends this process's spawn helper and waits (up to 2 s) for it to exit; processes started later are
 * started by this process itself. Nothing happens when the helper never started.
 *
 * @example
 * ```ts
 * import * as SpawnHelper from "@corral/platform-node/SpawnHelper"
 * import * as Effect from "effect/Effect"
 *
 * const main = Effect.log("work").pipe(Effect.ensuring(SpawnHelper.stop))
 * ```
 *
 * @since 0.1.0
 * @category lifecycle
 */
export const stop: Effect.Effect<void> = Effect.promise(() => sharedHelper().stop())
