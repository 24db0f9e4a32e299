import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Executor } from "@corral/core"
import { PostgresLocks } from "@corral/postgres"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer, type Scope } from "effect"
import { readOnlyRole } from "../../postgres/test/support/readOnlyRole.ts"
import { sharedServer } from "../../postgres/test/support/server.ts"
import { PostgresClient } from "@corral/postgres"
import * as Cluster from "../src/Cluster.ts"
import * as Runner from "../src/Runner.ts"
import * as AgentOutput from "../src/AgentOutput.ts"
import * as RunnerRegistry from "../src/RunnerRegistry.ts"
import { Probe } from "./support/kinds.ts"
import { freePort } from "./support/runnerProcess.ts"

const server = await sharedServer()

const repo = mkdtempSync(join(tmpdir(), "corral-permissions-"))
afterAll(() => rmSync(repo, { recursive: true, force: true }))

/** The message of the failure or defect `effect` ended with. */
const failure = <A, E>(effect: Effect.Effect<A, E, Scope.Scope>) =>
  Effect.map(Effect.exit(Effect.scoped(effect)), (exit) => {
    if (Exit.isSuccess(exit)) return "succeeded"
    const reason = exit.cause.reasons.find((r) => Cause.isFailReason(r) || Cause.isDieReason(r))
    const error =
      reason === undefined ? undefined : Cause.isFailReason(reason) ? reason.error : (reason as Cause.Die).defect
    return error instanceof Error ? `${(error as { _tag?: string })._tag}: ${error.message}` : String(error)
  })

describe.skipIf(server === undefined)("a role without CREATE on schema public", () => {
  it.live("every layer that creates its tables at start says the server's answer and names itself", () =>
    Effect.gen(function* () {
      const url = yield* readOnlyRole(server!)
      const port = yield* freePort
      const messages = {
        locks: yield* failure(Layer.build(PostgresLocks.layer(url))),
        registry: yield* failure(
          RunnerRegistry.register({ address: "127.0.0.1:1", capacity: 1, labels: [], running: () => 0 }).pipe(
            Effect.provide(PostgresClient.layer(url))
          )
        ),
        executor: yield* failure(Layer.build(Cluster.layerExecutor({ url }))),
        runner: yield* failure(
          Layer.build(Cluster.layerRunner({ url, port }).pipe(Layer.provide(Executor.layerKinds([Probe]))))
        ),
        serve: yield* failure(Runner.serve({ url, port, repo }, () => Effect.void))
      }
      const answer = "PgConnection: Query failed (permission denied for schema public)"
      assert.deepStrictEqual(messages, {
        locks: `StartFailed: PostgresLocks could not start: ${answer}`,
        registry: `StartFailed: RunnerRegistry could not start: ${answer}`,
        executor: `StartFailed: Cluster.layerExecutor could not start: ${answer}`,
        runner: `StartFailed: Cluster.layerRunner could not start: ${answer}`,
        serve: `StartFailed: Runner.serve could not start: ${answer}`
      })
    })
  )

  it.live("the registry's and the output table's queries keep their error types and say the server's answer", () =>
    Effect.gen(function* () {
      const url = yield* readOnlyRole(server!)
      const client = PostgresClient.layer(url)
      const messages = {
        list: yield* failure(RunnerRegistry.list().pipe(Effect.provide(client))),
        placements: yield* failure(RunnerRegistry.placements().pipe(Effect.provide(client))),
        make: yield* failure(AgentOutput.make("127.0.0.1:1").pipe(Effect.provide(client))),
        read: yield* failure(AgentOutput.read(["r"], "a").pipe(Effect.provide(client)))
      }
      const answer = "SqlError: PgConnection: Query failed (permission denied for schema public)"
      assert.deepStrictEqual(messages, { list: answer, placements: answer, make: answer, read: answer })
    })
  )
})
