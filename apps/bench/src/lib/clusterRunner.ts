import { Executor } from "@corral/core"
import { Layer } from "effect"
import { runnerArgs, serveRunner } from "../../../../packages/cluster/test/support/serveRunner.ts"
import { Cluster } from "@corral/cluster"
import { Mark, Sleep } from "./clusterKinds.ts"

const { url, port, capacity } = runnerArgs()

serveRunner(Cluster.layerRunner({ url, port, capacity }).pipe(Layer.provide(Executor.layerKinds([Sleep, Mark]))))
