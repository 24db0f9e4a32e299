import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Corral } from "@corral/core"
import { Effect } from "effect"
import * as ProcessAgent from "../src/ProcessAgent.ts"
import * as ProcessRunner from "../src/ProcessRunner.ts"
import { isAlive } from "./support/processes.ts"

describe("ProcessAgent", () => {
  it("passes the agent options through and names the process after the agent", () => {
    const agent = ProcessAgent.make("lint", {
      command: "true",
      timeout: "1 minute",
      dependsOn: ["build"],
      labels: { kind: "check" },
      claims: { read: ["src"] }
    })
    assert.strictEqual(agent.id, "lint")
    assert.strictEqual(agent.timeout, "1 minute")
    assert.deepStrictEqual(agent.dependsOn, ["build"])
    assert.deepStrictEqual(agent.labels, { kind: "check" })
  })

  it.live("runs processes as agents: success, crash and timeout are separate outcomes", () =>
    Effect.gen(function* () {
      const pids: Array<number> = []
      const result = yield* Corral.run([
        ProcessAgent.make("ok", { command: process.execPath, args: ["-e", "console.log('fine')"] }),
        ProcessAgent.make("crash", { command: "kill -SEGV $$", shell: true }),
        ProcessAgent.make("slow", {
          command: "sleep 1000 & echo $!; wait",
          shell: true,
          // 5 s: its pid is printed well before it at any load (1.2 s after the run began at load 8)
          timeout: "5 seconds",
          onLine: ({ text }) => pids.push(Number(text))
        })
      ])
      const [ok, crash, slow] = result.outcomes
      assert.strictEqual(ok?._tag, "Succeeded")
      assert.strictEqual(ok?._tag === "Succeeded" && (ok.value as ProcessRunner.ProcessResult).tail[0], "fine")
      assert.strictEqual(crash?._tag, "Failed")
      assert.isTrue(
        crash?._tag === "Failed" && crash.error instanceof ProcessRunner.ProcessFailed && crash.error.crashed
      )
      assert.strictEqual(slow?._tag, "TimedOut")
      assert.lengthOf(pids, 1, "the slow agent printed its pid before its timeout")
      assert.isFalse(isAlive(pids[0]!))
    }).pipe(Effect.provide(NodeServices.layer))
  )
})
