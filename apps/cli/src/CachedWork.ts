/**
 * Which recorded successes a run reuses. A success that merged work records the integration commit
 * that held it; a later run reuses it only when that commit is in the run's base, so an agent
 * reported `Cached` has its work in the run's integration branch. A success of a run whose
 * integration branch was never merged into the new base (or whose commit is gone) is a miss: the
 * agent runs again and its new success replaces the old.
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

const fullId = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/

const inBase = (repo: string, base: string, commit: string) =>
  Git.test(["merge-base", "--is-ancestor", commit, base], { cwd: repo }).pipe(Effect.orElseSucceed(() => false))

/**
 * Which of `commits` are ancestors of `base`, in one `git rev-list` (the commits reachable from them
 * and not from `base`: a commit listed is not in it); one `merge-base --is-ancestor` each when that
 * fails (a commit git no longer has) or a commit is not a full object id.
 */
const ancestors = (repo: string, base: string, commits: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    if (commits.length === 0) return new Set<string>()
    const listed = commits.every((commit) => fullId.test(commit))
      ? yield* Git.run(["rev-list", "--stdin"], { cwd: repo, input: `${commits.join("\n")}\n^${base}\n` }).pipe(
          Effect.map((out) => new Set(out.split("\n"))),
          Effect.option
        )
      : Option.none()
    if (Option.isSome(listed)) return new Set(commits.filter((commit) => !listed.value.has(commit)))
    const held = yield* Effect.forEach(commits, (commit) => inBase(repo, base, commit))
    return new Set(commits.filter((_, i) => held[i]))
  })

/**
 * Core's `Ledger` over the run ledger (`RunLedger.asCoreLedger`) whose lookups reuse a success that
 * merged work only when its commit is an ancestor of `base`, the commit the run's integration branch
 * starts from. The successes recorded under `keys` (the run's agents) are read once when the layer is
 * built and their commits checked in one git command; a success recorded later is checked on its
 * own. Without a `base` (no integration branch) lookups are those of the run ledger.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  repo: string,
  base: string | undefined,
  keys: ReadonlyArray<string>
): Layer.Layer<Ledger.Ledger, never, RunLedger.RunLedger> =>
  base === undefined
    ? RunLedger.asCoreLedger
    : Layer.effect(
        Ledger.Ledger,
        Effect.gen(function* () {
          const ledger = yield* Ledger.Ledger
          const recorded = yield* Effect.forEach(keys, (key) =>
            Effect.map(Effect.option(ledger.lookup(key)), (hit) =>
              Option.isSome(hit) && Option.isSome(hit.value) ? commitOf(hit.value.value.value) : undefined
            )
          )
          const checked = new Set(recorded.filter((commit) => commit !== undefined))
          const held = yield* ancestors(repo, base, [...checked])
          const isHeld = (commit: string) =>
            checked.has(commit) ? Effect.succeed(held.has(commit)) : inBase(repo, base, commit)
          return Ledger.Ledger.of({
            lookup: (key) =>
              Effect.flatMap(ledger.lookup(key), (hit) => {
                const commit = Option.isSome(hit) ? commitOf(hit.value.value) : undefined
                return commit === undefined
                  ? Effect.succeed(hit)
                  : Effect.map(isHeld(commit), (reusable) => (reusable ? hit : Option.none()))
              }),
            record: ledger.record
          })
        })
      ).pipe(Layer.provide(RunLedger.asCoreLedger))
