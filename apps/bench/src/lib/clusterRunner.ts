import { Cluster } from "@corral/cluster"
import { Executor } from "@corral/core"
import { Effect, Layer } from "effect"
import { Mark, Sleep } from "./clusterKinds.ts"

const [url, port, capacity] = process.argv.slice(2)

const runner = Cluster.layerRunner({ url: url!, port: Number(port), capacity: Number(capacity) }).pipe(
  Layer.provide(Executor.layerKinds([Sleep, Mark]))
)

/** Prints `ready`, then `shards <n>` whenever the number of shards it holds changes. */
Effect.runPromise(
  Effect.scoped(
    Effect.gen(function* () {
      const context = yield* Layer.build(runner)
      console.log(`runner 127.0.0.1:${port} ready`)
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
