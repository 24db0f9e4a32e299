import { Executor } from "@corral/core"
import { Layer } from "effect"
import * as Cluster from "../../src/Cluster.ts"
import { Probe } from "./kinds.ts"
import { runnerArgs, serveRunner } from "./serveRunner.ts"

const { url, port, capacity, extra } = runnerArgs()

const labelList = extra[0] === undefined || extra[0] === "" ? [] : extra[0].split(",")

const runner = Cluster.layerRunner({
  url,
  port,
  capacity,
  labels: labelList,
  // Short enough for failover tests, long enough that a runner starved for a few seconds on a loaded
  // machine keeps its shards and leases (at 3 s an agent was re-run on the surviving runner too).
  // Cluster.test.ts gives the executors the same value.
  shardLockExpiration: "6 seconds"
}).pipe(Layer.provide(Executor.layerKinds([Probe])))

// Cluster.layerRunner registers the runner in the runner registry itself
serveRunner(runner)
