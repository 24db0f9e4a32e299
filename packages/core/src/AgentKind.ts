/**
 * A registered kind of agent, the way workers register activities in Temporal: a name, an input,
 * output and error `Schema`, and a handler. An `Effect` closure cannot be shipped to another
 * machine; a kind's name and an encoded input can. Every process that can run a kind registers it
 * ({@link Executor.layerLocal}, a cluster runner), and an agent of a run names a kind and gives an
 * input ({@link agent}).
 *
 * Where the handler runs is chosen by the `Executor` layer provided to the run, not by the agent:
 * `Executor.layerLocal` runs it in this process, a cluster executor on whichever runner owns the
 * agent's shard. Inputs, outputs and typed errors always go through their schemas' encoded form, so
 * what runs locally also runs remotely.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Schema from "effect/Schema"
import * as Agent from "./Agent.ts"
import * as Executor from "./Executor.ts"

/**
 * @since 0.1.0
 * @category symbols
 */
export const TypeId = "~@corral/core/AgentKind" as const

/**
 * A kind whose handler takes `I`, succeeds with `O`, fails with `E` and needs `R`. The schemas'
 * encoded forms must be JSON data.
 *
 * @since 0.1.0
 * @category models
 */
export interface AgentKind<I, O, E = never, R = never> {
  readonly [TypeId]: typeof TypeId
  readonly name: string
  readonly input: Schema.Codec<I, unknown>
  readonly output: Schema.Codec<O, unknown>
  readonly error: Schema.Codec<E, unknown>
  readonly handler: (input: I) => Effect.Effect<O, E, R>
}

/**
 * Any kind.
 *
 * @since 0.1.0
 * @category models
 */
export type Any = AgentKind<any, any, any, any>

/**
 * Defines a kind. `error` defaults to `Schema.Never`: a handler without typed failures.
 *
 * @example
 * ```ts
 * import { AgentKind } from "@corral/core"
 * import { Effect, Schema } from "effect"
 *
 * const Summarize = AgentKind.make("summarize", {
 *   input: Schema.Struct({ path: Schema.String }),
 *   output: Schema.Struct({ words: Schema.Number }),
 *   handler: ({ path }) => Effect.succeed({ words: path.length })
 * })
 * ```
 * @since 0.1.0
 * @category constructors
 */
export const make = <I, O, E = never, R = never>(
  name: string,
  options: {
    readonly input: Schema.Codec<I, any>
    readonly output: Schema.Codec<O, any>
    readonly error?: Schema.Codec<E, any> | undefined
    readonly handler: (input: I) => Effect.Effect<O, E, R>
  }
): AgentKind<I, O, E, R> => ({
  [TypeId]: TypeId,
  name,
  input: options.input,
  output: options.output,
  error: (options.error ?? Schema.Never) as Schema.Codec<E, unknown>,
  handler: options.handler
})

/**
 * `true` for values built with {@link make}.
 *
 * @since 0.1.0
 * @category guards
 */
export const isAgentKind = (u: unknown): u is Any => typeof u === "object" && u !== null && TypeId in u

const invalid = (kind: Any, agentId: string, reason: Executor.ExecutionError["reason"], message: string) =>
  new Executor.ExecutionError({
    kind: kind.name,
    agentId,
    reason,
    message: `kind "${kind.name}", agent "${agentId}": ${message}`
  })

/**
 * The input given to {@link agent} does not encode with the kind's input schema (a caller outside the
 * type checker, or a schema with checks types do not express). Thrown by `agent`, before any run.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidInput extends Data.TaggedError("InvalidInput")<{
  readonly kind: string
  readonly agentId: string
  /** What the schema rejected, as `effect/Schema` words it. */
  readonly reason: string
}> {
  override get message() {
    return `agent ${JSON.stringify(this.agentId)} of kind ${JSON.stringify(this.kind)}: input does not match the kind's input schema: ${this.reason}`
  }
}

const encodeInput = <I, O, E, R>(kind: AgentKind<I, O, E, R>, agentId: string, input: I): unknown => {
  const encoded = Schema.encodeUnknownExit(kind.input)(input)
  if (Exit.isSuccess(encoded)) return encoded.value
  const error = Cause.squash(encoded.cause)
  throw new InvalidInput({ kind: kind.name, agentId, reason: error instanceof Error ? error.message : String(error) })
}

/**
 * An agent of a run that runs `kind` with `input` on the `Executor` in context. Its default
 * idempotency key covers the kind's name and the encoded input. An input the kind's schema does not
 * encode throws `InvalidInput`.
 *
 * @example
 * ```ts
 * import { AgentKind, Corral, Executor } from "@corral/core"
 * import { Effect, Schema } from "effect"
 *
 * const Summarize = AgentKind.make("summarize", {
 *   input: Schema.Struct({ path: Schema.String }),
 *   output: Schema.Struct({ words: Schema.Number }),
 *   handler: ({ path }) => Effect.succeed({ words: path.length })
 * })
 *
 * const agents = ["a.md", "b.md"].map((path) => AgentKind.agent(Summarize, path, { path }, { timeout: "1 minute" }))
 * const program = Corral.run(agents).pipe(Effect.provide(Executor.layerLocal([Summarize])))
 * ```
 * @since 0.1.0
 * @category constructors
 */
export const agent = <I, O, E, R>(
  kind: AgentKind<I, O, E, R>,
  id: string,
  input: I,
  options: Omit<Agent.Options<O, E | Executor.ExecutionError, Executor.Executor>, "run"> & {
    /** A runner label the agent needs, e.g. `gpu` (see `Executor.Request.requires`). */
    readonly requires?: string | undefined
  } = {}
): Agent.Agent<O, E | Executor.ExecutionError, Executor.Executor> => {
  const encoded = encodeInput(kind, id, input)
  const { requires, ...agentOptions } = options
  return Agent.make(id, {
    ...agentOptions,
    inputs: [`kind:${kind.name}`, JSON.stringify(encoded), ...(options.inputs ?? [])],
    labels: { kind: kind.name, ...(requires === undefined ? {} : { requires }), ...options.labels },
    run: Effect.gen(function* () {
      const executor = yield* Executor.Executor
      const me = yield* Agent.current
      const result = yield* executor.execute({
        kind: kind.name,
        input: encoded,
        runId: me?.runId ?? "",
        agentId: me?.agentId ?? id,
        attempt: me?.attempt ?? 1,
        fencingToken: me?.fencingToken,
        requires
      })
      if (result._tag === "Success") {
        return yield* Effect.mapError(Schema.decodeUnknownEffect(kind.output)(result.value), (error) =>
          invalid(kind, id, "BadOutput", `the executor's value does not match the output schema: ${error.message}`)
        )
      }
      const error = yield* Effect.mapError(Schema.decodeUnknownEffect(kind.error)(result.error), (error) =>
        invalid(kind, id, "BadOutput", `the executor's error does not match the error schema: ${error.message}`)
      )
      return yield* Effect.fail(error)
    })
  })
}
