import { Executor } from "@corral/core"
import { Effect, Layer } from "effect"
import * as Cluster from "../../src/Cluster.ts"
import { Probe } from "./kinds.ts"

const [url, port, capacity, labels] = process.argv.slice(2)

const labelList = labels === undefined || labels === "" ? [] : labels.split(",")

const runner = Cluster.layerRunner({
  url: url!,
  port: Number(port),
  capacity: Number(capacity ?? 8),
  labels: labelList,
  shardLockExpiration: "3 seconds"
}).pipe(Layer.provide(Executor.layerKinds([Probe])))

Effect.runPromise(
  Effect.scoped(
    Effect.gen(function* () {
      const context = yield* Layer.build(runner)
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
