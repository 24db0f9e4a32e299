/**
 * The runner side of `./runnerProcess.ts`, for runner scripts of the cluster's tests and of `pnpm
 * bench cluster`: reads `<url> <port> <capacity> ...extra` from the command line, builds the runner,
 * prints `runner <pid> ready`, then `shards <n>` whenever the number of shards it holds changes.
 */
import { Effect, Layer, type Scope } from "effect"
import type { Sharding } from "effect/cluster"
import * as Cluster from "../../src/Cluster.ts"

export interface RunnerArgs {
  readonly url: string
  readonly port: number
  readonly capacity: number
  readonly extra: ReadonlyArray<string>
}

export const runnerArgs = (): RunnerArgs => {
  const [url, port, capacity, ...extra] = process.argv.slice(2)
  return { url: url!, port: Number(port), capacity: Number(capacity), extra }
}

/** Serves `runner` (after `setup`, e.g. a registration) until the process is killed; exits 1 on a failure. */
export const serveRunner = <ROut, E, E2>(
  runner: Layer.Layer<ROut | Sharding.Sharding, E>,
  setup: Effect.Effect<void, E2, Scope.Scope> = Effect.void
): void => {
  Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const context = yield* Layer.build(runner)
        yield* setup
        console.log(`runner ${process.pid} ready`)
        let last = -1
        return yield* Effect.forever(
          Effect.gen(function* () {
            const held = yield* Effect.provideContext(Cluster.ownedShards, context)
            if (held !== last) console.log(`shards ${held}`)
            last = held
            yield* Effect.sleep("100 millis")
          })
        )
      })
    )
  ).catch((error) => {
    console.error(String(error))
    process.exit(1)
  })
}
