import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Corral, Usage } from "@corral/core"
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import * as ProcessAgent from "../src/ProcessAgent.ts"
import * as ProcessRunner from "../src/ProcessRunner.ts"

const tempDir = () => fs.mkdtempSync(path.join(os.tmpdir(), "corral-protocol-"))

describe("ProcessAgent usage and result files", () => {
  it.live("usage lines become the agent's usage, a malformed line is a warning naming agent and line", () =>
    Effect.gen(function* () {
      const warnings: Array<string> = []
      const writer = ProcessAgent.make("writer", {
        command: [
          `echo '{"inputTokens":100,"outputTokens":20,"costUsd":0.01}' >> "$CORRAL_USAGE_FILE"`,
          `echo 'oops not json' >> "$CORRAL_USAGE_FILE"`,
          `echo '{"inputTokens":50,"costUsd":0.005}' >> "$CORRAL_USAGE_FILE"`,
          `printf '{"outputTokens":7}' >> "$CORRAL_USAGE_FILE"`,
          `echo '{"summary":"done","files":3}' > "$CORRAL_RESULT_FILE"`
        ].join("; "),
        shell: true,
        onWarning: (message) => warnings.push(message)
      })
      const reader = ProcessAgent.make("reader", {
        command: `cat "$CORRAL_DEPS_DIR/writer.json" > "$CORRAL_RESULT_FILE"; ls "$CORRAL_DEPS_DIR"`,
        shell: true,
        dependsOn: ["writer"]
      })
      const result = yield* Corral.run([writer, reader])
      const wrote = result.get("writer")!
      assert.strictEqual(wrote._tag, "Succeeded")
      assert.deepStrictEqual(wrote.usage, { inputTokens: 150, outputTokens: 27, costUsd: 0.015 })
      assert.deepStrictEqual(wrote._tag === "Succeeded" && wrote.value.result, { summary: "done", files: 3 })
      assert.strictEqual(warnings.length, 1)
      assert.match(warnings[0]!, /^agent "writer": .*usage\.jsonl line 2: not JSON: oops not json$/)
      const read = result.get("reader")!
      assert.deepStrictEqual(read._tag === "Succeeded" && read.value.result, { summary: "done", files: 3 })
      assert.deepStrictEqual(read._tag === "Succeeded" && read.value.tail, ["writer.json"])
      assert.deepStrictEqual(result.usage, { inputTokens: 150, outputTokens: 27, costUsd: 0.015 })
    }).pipe(Effect.provide(NodeServices.layer))
  )

  it.live("usage is read while the process runs, not only after it exits", () =>
    Effect.gen(function* () {
      const dir = tempDir()
      const seen = yield* Deferred.make<Partial<Usage.Usage>>()
      const fiber = yield* ProcessRunner.run({
        command: `echo '{"inputTokens":5,"outputTokens":1}' >> "$CORRAL_USAGE_FILE"; while [ ! -f go ]; do sleep 0.02; done`,
        shell: true,
        cwd: dir
      }).pipe(
        Effect.provideService(Usage.Reporter, (usage) => Deferred.doneUnsafe(seen, Effect.succeed(usage))),
        Effect.forkChild({ startImmediately: true })
      )
      const usage = yield* Deferred.await(seen)
      assert.deepStrictEqual(usage, { inputTokens: 5, outputTokens: 1, costUsd: 0 })
      assert.isUndefined(fiber.pollUnsafe())
      fs.writeFileSync(path.join(dir, "go"), "")
      yield* Fiber.join(fiber)
      fs.rmSync(dir, { recursive: true, force: true })
    }).pipe(Effect.provide(NodeServices.layer))
  )

  it.live("invalid JSON in the result file fails the agent with a message naming the file", () =>
    Effect.gen(function* () {
      const error = yield* ProcessRunner.run({
        name: "bad",
        command: `echo '{"half":' > "$CORRAL_RESULT_FILE"`,
        shell: true
      }).pipe(Effect.flip)
      assert.strictEqual(error.reason, "result")
      assert.match(error.message, /result\.json: the result file is not valid JSON/)
    }).pipe(Effect.provide(NodeServices.layer))
  )

  it.live("no result file means no result; protocolDir keeps the files where the caller asked", () =>
    Effect.gen(function* () {
      const dir = tempDir()
      const done = yield* ProcessRunner.run({
        command: `echo '{"costUsd":0.5}' >> "$CORRAL_USAGE_FILE"; echo "$CORRAL_USAGE_FILE"`,
        shell: true,
        cwd: dir,
        protocolDir: "agent-files"
      })
      assert.isUndefined(done.result)
      assert.deepStrictEqual(done.tail, [path.join(dir, "agent-files", "usage.jsonl")])
      assert.strictEqual(fs.readFileSync(path.join(dir, "agent-files", "usage.jsonl"), "utf8"), '{"costUsd":0.5}\n')
      fs.rmSync(dir, { recursive: true, force: true })
    }).pipe(Effect.provide(NodeServices.layer))
  )

  it.live("a budget stops the run once the usage a process wrote exceeds it", () =>
    Effect.gen(function* () {
      const result = yield* Corral.run(
        [
          ProcessAgent.make("spender", {
            command: `echo '{"inputTokens":10,"costUsd":2}' >> "$CORRAL_USAGE_FILE"; sleep 1000`,
            shell: true
          }),
          ProcessAgent.make("later", { command: "true", dependsOn: ["spender"] })
        ],
        { budget: { costUsd: 1 } }
      )
      assert.strictEqual(result.stopped?._tag, "BudgetExceeded")
      assert.strictEqual(result.get("spender")?._tag, "Interrupted")
      assert.strictEqual(result.get("later")?._tag, "Cancelled")
    }).pipe(Effect.provide(NodeServices.layer))
  )
})
