/**
 * Which recorded successes a run reuses. A success that merged work records the integration commit
 * that held it; a later run reuses it only when that commit is in the run's base (`git merge-base
 * --is-ancestor`), so an agent reported `Cached` has its work in the run's integration branch. A
 * success of a run whose integration branch was never merged into the new base (or whose commit is
 * gone) is a miss: the agent runs again and its new success replaces the old.
 *
 * Reuse is decided here rather than by merging the recorded commit: that commit is the earlier
 * run's integration head after the agent's merge, so it also holds the work of the agents merged
 * before it.
 *
 * @since 0.1.0
 */
import * as Ledger from "@corral/core/Ledger"
import * as Git from "@corral/platform-node/Git"
import * as RunLedger from "@corral/platform-node/RunLedger"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"

/** The integration commit a recorded success merged, if it merged any. */
const commitOf = (value: unknown): string | undefined => {
  const commit = typeof value === "object" && value !== null ? (value as { commit?: unknown }).commit : undefined
  return typeof commit === "string" ? commit : undefined
}

const inBase = (repo: string, base: string, commit: string) =>
  Git.test(["merge-base", "--is-ancestor", commit, base], { cwd: repo }).pipe(Effect.orElseSucceed(() => false))

/**
 * Core's `Ledger` over the run ledger (`RunLedger.asCoreLedger`) whose lookups reuse a success that
 * merged work only when its commit is an ancestor of `base`, the commit the run's integration branch
 * starts from; without a `base` (no integration branch) lookups are those of the run ledger.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  repo: string,
  base: string | undefined
): Layer.Layer<Ledger.Ledger, never, RunLedger.RunLedger> =>
  base === undefined
    ? RunLedger.asCoreLedger
    : Layer.effect(
        Ledger.Ledger,
        Effect.map(Effect.service(Ledger.Ledger), (ledger) =>
          Ledger.Ledger.of({
            lookup: (key) =>
              Effect.flatMap(ledger.lookup(key), (hit) => {
                const commit = Option.isSome(hit) ? commitOf(hit.value.value) : undefined
                return commit === undefined
                  ? Effect.succeed(hit)
                  : Effect.map(inBase(repo, base, commit), (held) => (held ? hit : Option.none()))
              }),
            record: ledger.record
          })
        )
      ).pipe(Layer.provide(RunLedger.asCoreLedger))
