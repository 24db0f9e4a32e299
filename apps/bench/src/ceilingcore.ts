/**
 * A stand-in for `@corral/core` in the probes (`CORRAL_CORE=src/ceilingcore.ts`): the least a run
 * with corral's semantics does for agents without options, written directly over `Effect.forEach`,
 * to say how much of corral's time over `Effect.forEach` in a small run (`ioseqprobe.ts`) any
 * structure could win. It checks the input (`InvalidRun` before anything starts: a bad concurrency,
 * a blank or repeated id), gives each agent its `Agent.CurrentRef` frame, runs each in its own fiber
 * (its forked children are interrupted when it ends: `Effect.forEach` forks one per element above
 * concurrency 1, and runs them in the caller's fiber at 1, where each agent gets a child fiber) and
 * returns a `RunResult` of one outcome per agent. Only what the probes use: the real `Agent` module and `Corral.run` without options other
 * than `concurrency`; no events, ledger, claims, dependencies, retries, timeouts or tracing.
 */
import { Agent, CorralError, Outcome, RunResult, Usage } from "@corral/core"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"

export { Agent }

const issuesOf = (agents: ReadonlyArray<Agent.Any>, concurrency: number): Array<CorralError.Issue> => {
  const issues: Array<CorralError.Issue> = []
  if (!Number.isInteger(concurrency) || concurrency < 1) {
    issues.push({ field: "concurrency", message: "must be a positive integer" })
  }
  const seen = new Set<string>()
  for (let index = 0; index < agents.length; index++) {
    const id = agents[index]!.id
    if (id.trim() === "" || seen.has(id)) issues.push({ agentId: id, index, field: "id", message: "blank or repeated" })
    seen.add(id)
  }
  return issues
}

const outcomeOf = (
  agent: Agent.Any,
  exit: Exit.Exit<unknown, unknown>,
  times: { readonly queuedAt: number; readonly startedAt: number; readonly endedAt: number }
): Outcome.Outcome => {
  const common = {
    agentId: agent.id,
    attempts: 1,
    usage: Usage.zero,
    waitedMs: times.startedAt - times.queuedAt,
    ...times
  }
  return Exit.isSuccess(exit)
    ? new Outcome.Succeeded({ ...common, value: exit.value, cached: false })
    : new Outcome.Failed({
        ...common,
        error: Cause.squash(exit.cause),
        defect: true,
        message: Cause.pretty(exit.cause)
      })
}

const run = (
  agents: ReadonlyArray<Agent.Any>,
  options: { readonly concurrency?: number } = {}
): Effect.Effect<RunResult.RunResult, CorralError.InvalidRun> =>
  Effect.withFiber((fiber) => {
    const concurrency = options.concurrency ?? 8
    const issues = issuesOf(agents, concurrency)
    if (issues.length > 0) return Effect.fail(new CorralError.InvalidRun({ issues }))
    const clock = Context.get(fiber.context, Clock.Clock)
    const queuedAt = clock.currentTimeMillisUnsafe()
    const runId = `ceiling-${queuedAt}`
    const outcomes: Array<Outcome.Outcome> = []
    const one = (agent: Agent.Any, index: number) =>
      Effect.suspend(() => {
        const startedAt = clock.currentTimeMillisUnsafe()
        const frame: Agent.Frame = {
          current: () => ({ runId, agentId: agent.id, attempt: 1, fencingToken: undefined }),
          report: () => false
        }
        const own = Agent.effectOf(agent, {}) as Effect.Effect<unknown, unknown>
        const bound = Effect.provideService(own, Agent.CurrentRef, frame)
        const effect = concurrency === 1 ? Effect.flatMap(Effect.forkChild(bound), Fiber.join) : bound
        return Effect.map(Effect.exit(effect), (exit) => {
          outcomes[index] = outcomeOf(agent, exit, { queuedAt, startedAt, endedAt: clock.currentTimeMillisUnsafe() })
        })
      })
    return Effect.map(
      Effect.forEach(agents, one, { concurrency, discard: true }),
      () =>
        new RunResult.RunResult({
          runId,
          outcomes,
          startedAt: queuedAt,
          endedAt: clock.currentTimeMillisUnsafe(),
          stopped: undefined
        })
    )
  })

export const Corral = { run }
