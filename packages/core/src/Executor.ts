/**
 * The seam between a run and where its registered kinds execute. An agent made with
 * `AgentKind.agent` asks the `Executor` in context to run a kind by name with an encoded input;
 * the run's scheduling (dependencies, claims, budgets, fail-fast) is unchanged.
 *
 * - {@link layerLocal}: registers kinds in this process and runs them here.
 * - A cluster executor (`@corral/cluster`) sends the request to the runner that owns the agent.
 *
 * A process that runs kinds for others registers them with {@link layerKinds} and answers requests
 * with {@link runRegistered}.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Agent from "./Agent.ts"
import type * as AgentKind from "./AgentKind.ts"

/**
 * A kind could not be executed: unknown on the executing side, its input or output did not match
 * its schema, its handler died, or the executor lost it.
 *
 * @since 0.1.0
 * @category errors
 */
export class ExecutionError extends Schema.TaggedError<ExecutionError>()("ExecutionError", {
  kind: Schema.String,
  agentId: Schema.String,
  reason: Schema.Literals(["UnknownKind", "BadInput", "BadOutput", "Defect", "Unavailable"]),
  message: Schema.String
}) {}

/**
 * What an executor is asked to run: JSON data only.
 *
 * @since 0.1.0
 * @category models
 */
export interface Request {
  readonly kind: string
  /** The input in its schema's encoded form. */
  readonly input: unknown
  readonly runId: string
  readonly agentId: string
  readonly attempt: number
  readonly fencingToken: number | undefined
  /** A runner label the agent needs (cluster executors place it on a runner with it; local ones ignore it). */
  readonly requires?: string | undefined
}

/**
 * The handler's success or typed failure, in the encoded forms of the kind's schemas.
 *
 * @since 0.1.0
 * @category models
 */
export type Result =
  | { readonly _tag: "Success"; readonly value: unknown }
  | { readonly _tag: "Failure"; readonly error: unknown }

/**
 * @since 0.1.0
 * @category services
 */
export class Executor extends Context.Service<
  Executor,
  { readonly execute: (request: Request) => Effect.Effect<Result, ExecutionError> }
>()("@corral/core/Executor") {}

/**
 * Whether the running execution still holds its execution lease. Executors that fence executions
 * (cluster runners) set it per execution; elsewhere it is always `true`.
 *
 * @since 0.1.0
 * @category references
 */
export const StillCurrentRef = Context.Reference<Effect.Effect<boolean>>("@corral/core/Executor/StillCurrent", {
  defaultValue: () => Effect.succeed(true)
})

/**
 * `true` while the running execution is still the current one for its agent: a handler checks it
 * before a write that a re-run elsewhere would repeat, and stops when it is `false`.
 *
 * @example
 * ```ts
 * import { AgentKind, Executor } from "@corral/core"
 * import { Effect, Schema } from "effect"
 *
 * const Publish = AgentKind.make("publish", {
 *   input: Schema.Struct({ path: Schema.String }),
 *   output: Schema.String,
 *   handler: ({ path }) =>
 *     Effect.gen(function*() {
 *       const summary = `summary of ${path}` // the work, which a re-run elsewhere repeats
 *       if (!(yield* Executor.stillCurrent)) return yield* Effect.interrupt // another runner took over
 *       yield* Effect.log(`publishing ${summary}`) // the write that must not happen twice
 *       return summary
 *     })
 * })
 * ```
 * @since 0.1.0
 * @category fencing
 */
export const stillCurrent: Effect.Effect<boolean> = Effect.flatten(Effect.service(StillCurrentRef))

/**
 * The kinds this process can run, by name.
 *
 * @since 0.1.0
 * @category services
 */
export class Kinds extends Context.Service<
  Kinds,
  {
    readonly names: ReadonlyArray<string>
    readonly run: (request: Request) => Effect.Effect<Result, ExecutionError>
  }
>()("@corral/core/Executor/Kinds") {}

const failWith = (request: Request, reason: ExecutionError["reason"], message: string) =>
  Effect.fail(new ExecutionError({ kind: request.kind, agentId: request.agentId, reason, message }))

/** A failure of a kind's handler or schema, its message naming the kind and the agent. */
const failKind = (request: Request, reason: ExecutionError["reason"], what: string, cause: Cause.Cause<unknown>) => {
  const typed = cause.reasons.find(Cause.isFailReason)?.error
  const detail = typed instanceof Error && reason !== "Defect" ? typed.message : Cause.pretty(cause)
  return failWith(request, reason, `kind "${request.kind}", agent "${request.agentId}": ${what}: ${detail}`)
}

const runKind = <R>(kind: AgentKind.Any, request: Request, context: Context.Context<R>) =>
  Effect.gen(function* () {
    const decoded = yield* Effect.exit(Schema.decodeUnknownEffect(kind.input)(request.input))
    if (Exit.isFailure(decoded))
      return yield* failKind(request, "BadInput", "the input does not match the input schema", decoded.cause)
    const current: Agent.Current = {
      runId: request.runId,
      agentId: request.agentId,
      attempt: request.attempt,
      fencingToken: request.fencingToken
    }
    // Usage the handler reports goes to the agent that asked in this process (a local executor);
    // on a runner there is no such agent and it is not attributed.
    const caller = yield* Agent.CurrentRef
    const frame: Agent.Frame = {
      current: () => current,
      report: (usage) => caller?.report(usage) ?? false
    }
    const exit = yield* Effect.exit(
      kind.handler(decoded.value).pipe(Effect.provideService(Agent.CurrentRef, frame), Effect.provideContext(context))
    )
    if (Exit.isSuccess(exit)) {
      const value = yield* Effect.exit(Schema.encodeUnknownEffect(kind.output)(exit.value))
      return Exit.isSuccess(value)
        ? ({ _tag: "Success", value: value.value } as const)
        : yield* failKind(request, "BadOutput", "the handler's value does not match the output schema", value.cause)
    }
    const typed = exit.cause.reasons.find(Cause.isFailReason)
    if (typed === undefined) {
      if (Cause.hasInterruptsOnly(exit.cause)) return yield* Effect.interrupt
      return yield* failKind(request, "Defect", "the handler died", exit.cause)
    }
    const error = yield* Effect.exit(Schema.encodeUnknownEffect(kind.error)(typed.error))
    return Exit.isSuccess(error)
      ? ({ _tag: "Failure", error: error.value } as const)
      : yield* failKind(request, "BadOutput", "the handler's error does not match the error schema", error.cause)
  })

/**
 * Registers `kinds` in this process; their handlers get the layer's context.
 *
 * @example
 * ```ts
 * import { AgentKind, Executor } from "@corral/core"
 * import { Effect, type Layer, Schema } from "effect"
 *
 * const Summarize = AgentKind.make("summarize", {
 *   input: Schema.Struct({ path: Schema.String }),
 *   output: Schema.Struct({ words: Schema.Number }),
 *   handler: ({ path }) => Effect.succeed({ words: path.length })
 * })
 * const Noop = AgentKind.make("noop", { input: Schema.Null, output: Schema.Null, handler: Effect.succeed })
 *
 * // what a runner provides to `Cluster.layerRunner`
 * const kinds: Layer.Layer<Executor.Kinds> = Executor.layerKinds([Summarize, Noop])
 * ```
 * @since 0.1.0
 * @category layers
 */
export const layerKinds = <const Ks extends ReadonlyArray<AgentKind.Any>>(
  kinds: Ks
): Layer.Layer<Kinds, never, Ks[number] extends AgentKind.AgentKind<any, any, any, infer R> ? R : never> =>
  Layer.effect(
    Kinds,
    Effect.map(Effect.context<any>(), (context) => {
      const byName = new Map<string, AgentKind.Any>()
      for (const kind of kinds) byName.set(kind.name, kind)
      return Kinds.of({
        names: [...byName.keys()],
        run: (request) => {
          const kind = byName.get(request.kind)
          return kind === undefined
            ? failWith(
                request,
                "UnknownKind",
                `no kind "${request.kind}" is registered here (known: ${[...byName.keys()].join(", ") || "none"})`
              )
            : runKind(kind, request, context)
        }
      })
    })
  )

/**
 * Runs a request with the kinds registered in this process.
 *
 * @since 0.1.0
 * @category execution
 */
export const runRegistered = (request: Request): Effect.Effect<Result, ExecutionError, Kinds> =>
  Effect.flatMap(Effect.service(Kinds), (kinds) => kinds.run(request))

/**
 * Runs kinds in this process: registers `kinds` and provides an executor that runs them here.
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
 * const program = Corral.run([AgentKind.agent(Summarize, "a", { path: "a.md" })]).pipe(
 *   Effect.provide(Executor.layerLocal([Summarize]))
 * )
 * ```
 * @since 0.1.0
 * @category layers
 */
export const layerLocal = <const Ks extends ReadonlyArray<AgentKind.Any>>(
  kinds: Ks
): Layer.Layer<Executor | Kinds, never, Ks[number] extends AgentKind.AgentKind<any, any, any, infer R> ? R : never> =>
  Layer.effect(
    Executor,
    Effect.map(Effect.service(Kinds), (registered) => Executor.of({ execute: registered.run }))
  ).pipe(Layer.provideMerge(layerKinds(kinds)))
