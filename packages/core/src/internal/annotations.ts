/**
 * The log annotations a run adds for its agents: `corral.run.id` and `corral.agent.id`, both
 * getters that read the fiber that logs (or a fiber the agent forked), so one annotations object
 * serves every run whose caller has the same annotations: the run id from the run that `RunIdRef`
 * holds, which the run sets in its workers' context beside the annotations, the agent id from the agent bound to the
 * fiber (`Agent.CurrentRef`). Loggers read annotations while they run on the logging fiber, and
 * `Effect.annotateLogs` copies them there.
 *
 * A run whose caller has no annotations of its own (effect's default) uses one object made when
 * the module loads, and a run nested in an agent reuses its caller's object: only a caller with
 * annotations of its own gets an object per run. Defining the getter per run
 * (`Object.defineProperty`) was ≈ 0.65 µs of every run in a warm loop, a tenth of a small run's
 * cost; a getter written in an object literal is a new function per run and leaves the object in
 * dictionary mode.
 */
import * as Context from "effect/Context"
import * as Fiber from "effect/Fiber"
import * as References from "effect/References"
import * as AgentModule from "../Agent.ts"

/** The id of the run whose worker (or agent, or a fiber an agent forked) is the current fiber. */
export const RunIdRef = Context.Reference<Named | undefined>("@corral/core/internal/RunId", {
  defaultValue: () => undefined
})

/** A run, whose id is read when a log asks for it (a generated one is formatted after the run's first agents start). */
export interface Named {
  readonly runId: string
}

const runId = (): string | undefined => Fiber.getCurrent()?.getRef(RunIdRef)?.runId

const agentId = (): string | undefined => Fiber.getCurrent()?.getRef(AgentModule.CurrentRef)?.current().agentId

/**
 * What `util.inspect` shows of the object (effect's default logger hands it to `console.log`): its
 * values read now, on the logging fiber, instead of `[Getter]`.
 */
function resolved(this: Readonly<Record<string, unknown>>): Record<string, unknown> {
  return { ...this }
}

const descriptors: PropertyDescriptorMap = {
  "corral.run.id": { get: runId, enumerable: true, configurable: true },
  "corral.agent.id": { get: agentId, enumerable: true, configurable: true },
  [Symbol.for("nodejs.util.inspect.custom")]: { value: resolved, configurable: true }
}

const withRun = (outer: Readonly<Record<string, unknown>>): Readonly<Record<string, unknown>> =>
  Object.defineProperties({ ...outer }, descriptors)

const isRunAnnotations = (annotations: Readonly<Record<string, unknown>>): boolean =>
  Object.getOwnPropertyDescriptor(annotations, "corral.agent.id")?.get === agentId &&
  Object.getOwnPropertyDescriptor(annotations, "corral.run.id")?.get === runId

/** effect's default annotations (`{}`, made once), what a caller that never annotated has. */
const noAnnotations = Context.get(Context.empty(), References.CurrentLogAnnotations)

const plainRun = withRun(noAnnotations)

/** The annotations of a run whose caller has `outer`. */
export const logAnnotations = (outer: Readonly<Record<string, unknown>>): Readonly<Record<string, unknown>> =>
  outer === noAnnotations ? plainRun : isRunAnnotations(outer) ? outer : withRun(outer)

/**
 * `context`, whose log annotations are `outer`, with the run (for its id) and its `annotations`, as
 * its workers run.
 */
export const annotate = (
  context: Context.Context<never>,
  outer: Readonly<Record<string, unknown>>,
  run: Named,
  annotations: Readonly<Record<string, unknown>>
): Context.Context<never> => {
  const withId = Context.addUnsafe<never, never, Named>(context, RunIdRef.key, run)
  return outer === annotations
    ? withId
    : Context.addUnsafe<never, never, Readonly<Record<string, unknown>>>(
        withId,
        References.CurrentLogAnnotations.key,
        annotations
      )
}
