/**
 * Before a resumed run decides what to run again, the integration branch of the run it resumes is
 * read back as the durable log of merges: every commit corral writes onto an integration branch (an
 * agent's commit that was fast-forwarded, or a merge commit) carries the trailers
 * `Corral-Run: <run id>` and `Corral-Agent: <agent id>`. The ref update is atomic, so an agent
 * whose commit is on the branch has its work applied, whatever the ledger managed to record before
 * the crash. Such an agent is recorded as a success under the key the resumed run looks up, so the
 * resumed run reports it `Cached` instead of applying its work a second time.
 *
 * @since 0.1.0
 */
import * as Git from "@corral/platform-node/Git"
import type * as RunLedger from "@corral/platform-node/RunLedger"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { Plan } from "./PlanFile.ts"
import * as RunPlan from "./RunPlan.ts"

/**
 * An agent whose work is on the integration branch although the ledger did not record it.
 *
 * @since 0.1.0
 * @category models
 */
export interface Reconciled {
  readonly agentId: string
  readonly runId: string
  readonly commit: string
}

const field = "%x1f"
const record = "%x1e"
const format = `--format=%H${field}%(trailers:key=Corral-Run,valueonly,separator=%x2C)${field}%(trailers:key=Corral-Agent,valueonly,separator=%x2C)${record}`

/**
 * The agents merged onto `branch` by any of `runIds`, newest merge first, by agent id.
 *
 * @since 0.1.0
 * @category reading
 */
export const mergedAgents = (
  repo: string,
  branch: string,
  runIds: ReadonlySet<string>
): Effect.Effect<ReadonlyMap<string, Reconciled>, Git.GitFailure> =>
  Effect.map(Git.run(["log", format, `refs/heads/${branch}`, "--"], { cwd: repo }), (out) => {
    const merged = new Map<string, Reconciled>()
    for (const entry of out.split("\x1e")) {
      const [commit, run, agent] = entry.trim().split("\x1f")
      if (commit === undefined || run === undefined || agent === undefined) continue
      const runId = run.trim()
      const agentId = agent.trim()
      if (!runIds.has(runId) || agentId === "" || merged.has(agentId)) continue
      merged.set(agentId, { agentId, runId, commit })
    }
    return merged
  })

/**
 * Records as successes the agents of `plan` whose work is on the resumed run's integration branch
 * (`base`) but whose success the ledger has not recorded under the key the new run will look up.
 * Returns them. The records are committed before it returns.
 *
 * @since 0.1.0
 * @category reconciling
 */
export const reconcile = (options: {
  readonly ledger: RunLedger.Service
  readonly repo: string
  readonly plan: Plan
  readonly base: string
  readonly lineage: string
  readonly runId: string
  readonly inputsHash: Readonly<Record<string, string>>
  /** The key the new run looks the agent's success up under. @default `RunPlan.idempotencyKeyOf` */
  readonly keyOf?: ((agent: Plan["agents"][number]) => string) | undefined
}): Effect.Effect<ReadonlyArray<Reconciled>, RunLedger.RunLedgerError | Git.GitFailure> =>
  Effect.gen(function* () {
    const { ledger } = options
    const runs = yield* ledger.listRuns()
    const lineage = new Set(
      runs
        .filter((run) => ((run.options as { lineage?: string } | null)?.lineage ?? run.runId) === options.lineage)
        .map((run) => run.runId)
    )
    lineage.add(options.lineage)
    const merged = yield* mergedAgents(options.repo, options.base, lineage)
    const found: Array<Reconciled> = []
    for (const agent of options.plan.agents) {
      const done = merged.get(agent.id)
      if (done === undefined) continue
      const key =
        options.keyOf?.(agent) ??
        RunPlan.idempotencyKeyOf(
          { lineage: options.lineage, runId: options.runId, inputsHash: options.inputsHash },
          agent
        )
      if (Option.isSome(yield* ledger.cachedSuccess(key))) continue
      const value: RunPlan.ReconciledResult = { merge: "merged", commit: done.commit, mergedBy: done.runId }
      yield* ledger.recordSuccess(key, agent.id, value, Date.now())
      found.push(done)
    }
    if (found.length > 0) yield* ledger.flush
    return found
  })
