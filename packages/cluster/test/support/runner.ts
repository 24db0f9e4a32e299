import { Executor } from "@corral/core"
import { PostgresClient } from "@corral/postgres"
import { Effect, Layer } from "effect"
import * as Cluster from "../../src/Cluster.ts"
import * as RunnerRegistry from "../../src/RunnerRegistry.ts"
import { Probe } from "./kinds.ts"
import { runnerArgs, serveRunner } from "./serveRunner.ts"

const { url, port, capacity, extra } = runnerArgs()

const labelList = extra[0] === undefined || extra[0] === "" ? [] : extra[0].split(",")

const runner = Cluster.layerRunner({
  url,
  port,
  capacity,
  labels: labelList,
  shardLockExpiration: "3 seconds"
}).pipe(Layer.provide(Executor.layerKinds([Probe])))

serveRunner(
  runner,
  Effect.gen(function* () {
    yield* RunnerRegistry.register({
      address: `127.0.0.1:${port}`,
      capacity,
      labels: labelList,
      running: () => 0
    }).pipe(Effect.provideContext(yield* Layer.build(PostgresClient.layer(url, { maxConnections: 1 }))))
  })
)
