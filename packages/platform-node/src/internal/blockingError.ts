import * as Schema from "effect/Schema"

/**
 * Worker heap and stack limits, as in `node:worker_threads`.
 *
 * @since 0.1.0
 * @category models
 */
export interface ResourceLimits {
  readonly maxOldGenerationSizeMb?: number | undefined
  readonly maxYoungGenerationSizeMb?: number | undefined
  readonly codeRangeSizeMb?: number | undefined
  readonly stackSizeMb?: number | undefined
}

/**
 * What to run: the function exported as `export` by `module` (a URL, or a path resolved from the
 * working directory), called with `input` (structured-cloned). Its return value, also cloned, is
 * the agent's result.
 *
 * @since 0.1.0
 * @category models
 */
export interface Spec {
  readonly module: URL | string
  readonly export: string
  readonly input?: unknown
  readonly resourceLimits?: ResourceLimits | undefined
}

/**
 * The function threw (`Threw`), its worker ran out of memory (`OutOfMemory`, the message names
 * the limit) or the worker died otherwise (`Crashed`).
 *
 * @since 0.1.0
 * @category errors
 */
export class BlockingFailed extends Schema.TaggedError<BlockingFailed>()("BlockingFailed", {
  reason: Schema.Literals(["Threw", "OutOfMemory", "Crashed"]),
  export: Schema.String,
  message: Schema.String
}) {}
