import { Agent, Claims, Corral, CorralError } from "@corral/core"
import { assert, describe, it } from "@effect/vitest"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"

describe("validate", () => {
  it.effect(
    "rejects durations effect would read as something else, naming the agent and the field; nothing starts",
    () =>
      Effect.gen(function* () {
        let started = 0
        const work = Effect.sync(() => {
          started++
        })
        const bad: ReadonlyArray<readonly [string, unknown]> = [
          ["timeout", {}],
          ["timeout", { second: 5 }],
          ["timeout", { seconds: Number.NaN }],
          ["claimTimeout", { milliseconds: "5" }],
          ["claimTimeout", { seconds: null }],
          ["estimate", [1, Number.NaN]],
          ["timeout", Number.NaN],
          ["timeout", -5n]
        ]
        const error = yield* Effect.flip(
          Corral.run(
            [
              Agent.make("fine", { run: work, timeout: { seconds: 30 }, estimate: [1, 500], claimTimeout: "1 second" }),
              ...bad.map(([field, input], i) => Agent.make(`a${i}`, { run: work, [field]: input as Duration.Input }))
            ],
            { claimTimeout: {} as Duration.Input, rateLimits: { api: { limit: 1, interval: { minute: 1 } as never } } }
          )
        )
        assert.instanceOf(error, CorralError.InvalidRun)
        assert.strictEqual(started, 0)
        const got = error.issues.map((issue) => `${issue.agentId ?? "-"}|${issue.field}|${issue.message}`)
        const expected = [
          `-|claimTimeout|expected a duration such as "30 seconds", a number of milliseconds or { seconds: 30 }, got {}`,
          `-|rateLimits.api.interval|unknown duration field "minute" (known: weeks, days, hours, minutes, seconds, milliseconds, microseconds, nanoseconds)`,
          `a0|timeout|expected a duration such as "30 seconds", a number of milliseconds or { seconds: 30 }, got {}`,
          `a1|timeout|unknown duration field "second" (known: weeks, days, hours, minutes, seconds, milliseconds, microseconds, nanoseconds)`,
          "a2|timeout|duration field seconds must be a number, got NaN",
          "a3|claimTimeout|duration field milliseconds must be a number, got string",
          "a4|claimTimeout|duration field seconds must be a number, got null",
          "a5|estimate|expected [seconds, nanoseconds] as two numbers, got [1,NaN]",
          "a6|timeout|must be a number of milliseconds, got NaN",
          "a7|timeout|must not be negative, got -5n"
        ]
        assert.deepStrictEqual([...got].sort(), [...expected].sort())
      })
  )

  it.effect("names each dependency once however often it is listed, below and above the pairwise limit", () =>
    Effect.gen(function* () {
      const ids = Array.from({ length: 10 }, (_, i) => `d${i}`)
      const seen: Array<ReadonlyArray<string>> = []
      const record = (deps: Readonly<Record<string, unknown>>) =>
        Effect.sync(() => {
          seen.push(Object.keys(deps))
        })
      const result = yield* Corral.run([
        ...ids.map((id) => Agent.make(id, { run: Effect.succeed(id) })),
        Agent.make("few", { dependsOn: ["d1", "d0", "d1", "d1"], run: record }),
        Agent.make("many", { dependsOn: [...ids, "d3", ...ids], run: record })
      ])
      assert.isTrue(result.allSucceeded)
      assert.deepStrictEqual(
        seen.map((keys) => [...keys].sort()),
        [["d0", "d1"], [...ids].sort()]
      )
      const error = yield* Effect.flip(
        Corral.run([
          Agent.make("self", { run: Effect.void, dependsOn: ["self", "ghost", "self", "ghost"] }),
          Agent.make("wide", { run: Effect.void, dependsOn: [...ids, ...ids].map((id) => `${id}x`) })
        ])
      )
      assert.instanceOf(error, CorralError.InvalidRun)
      const messages = error.issues.map((issue) => `${issue.agentId}|${issue.message}`)
      assert.deepStrictEqual(messages, [
        "self|an agent cannot depend on itself",
        'self|unknown agent "ghost"',
        ...ids.map((id) => `wide|unknown agent "${id}x"`)
      ])
    })
  )

  it.effect(
    "gives an agent whose run is an effect nothing to read, and one whose run is a function its dependencies",
    () =>
      Effect.gen(function* () {
        let given: Readonly<Record<string, unknown>> | undefined
        const result = yield* Corral.run([
          Agent.make("a", { run: Effect.succeed(1) }),
          Agent.make("b", { dependsOn: ["a"], run: Effect.succeed(2) }),
          Agent.make("c", {
            dependsOn: ["a", "b"],
            run: (deps: Readonly<Record<string, unknown>>) =>
              Effect.sync(() => {
                given = deps
              })
          })
        ])
        assert.isTrue(result.allSucceeded)
        assert.deepStrictEqual(given, { a: 1, b: 2 })
      })
  )

  it.effect("reports every misshapen part of a claim set in order: write keys, read keys, then pools", () =>
    Effect.gen(function* () {
      const untyped = <T>(value: unknown): T => value as T
      const error = yield* Effect.flip(
        Corral.run([
          Agent.make("a", {
            run: Effect.void,
            claims: untyped({ write: ["src/a.ts", 5, "src/b.ts", null], read: "docs", pools: [1] })
          })
        ])
      )
      assert.instanceOf(error, CorralError.InvalidRun)
      assert.deepStrictEqual(
        error.issues.map((issue) => `${issue.agentId}|${issue.index}|${issue.field}|${issue.message}`),
        [
          "a|0|claims.write[1]|expected a string key, got number",
          "a|0|claims.write[3]|expected a string key, got null",
          "a|0|claims.read|expected an array of keys, got string",
          "a|0|claims.pools|expected an object of pool amounts, got an array"
        ]
      )
    })
  )

  it.effect("keeps one claim per key, a write over a read, in the order each key was first named", () =>
    Effect.gen(function* () {
      const request = Claims.normalize(
        { write: ["src/b.ts", "./src/a.ts"], read: ["src/a.ts", "src//b.ts", "lib"] },
        {}
      )
      assert.isTrue(Result.isSuccess(request))
      if (Result.isFailure(request)) return
      assert.deepStrictEqual(
        request.success.keys.map((claim) => `${claim.mode} ${claim.key}`),
        ["write src/b.ts", "write src/a.ts", "read lib"]
      )
      const again = Claims.normalize({ read: ["src/b.ts"], write: ["src/b.ts"] }, {})
      assert.deepStrictEqual(Result.isSuccess(again) && again.success.keys.map((claim) => claim.mode), ["write"])
    })
  )

  it.effect("names id faults before the agents' other issues, in input order, in a run above the pairwise size", () =>
    Effect.gen(function* () {
      const untyped = <T>(value: unknown): T => value as T
      const agents = [
        Agent.make("early", { run: Effect.void, timeout: untyped({}) }),
        ...Array.from({ length: 20 }, (_, i) => Agent.make(`a${i}`, { run: Effect.void })),
        Agent.make("a3", { run: Effect.void }),
        Agent.make(" ", { run: Effect.void }),
        untyped<Agent.Agent<void>>(5),
        Agent.make("late", { run: Effect.void, dependsOn: ["ghost"] }),
        Agent.make("a7", { run: Effect.void })
      ]
      const error = yield* Effect.flip(Corral.run(agents, { concurrency: 0 }))
      assert.deepStrictEqual(
        error.issues.map((issue) => `${issue.agentId ?? "-"}|${issue.index ?? "-"}|${issue.field}|${issue.message}`),
        [
          "-|-|concurrency|must be an integer of at least 1, got 0",
          "a3|21|id|duplicate id: agents[4] already uses it",
          "-|22|id|agent ids must not be blank",
          "-|23||expected an agent built with Agent.make, got number",
          "a7|25|id|duplicate id: agents[8] already uses it",
          'early|0|timeout|expected a duration such as "30 seconds", a number of milliseconds or { seconds: 30 }, got {}',
          'late|24|dependsOn|unknown agent "ghost"'
        ]
      )
    })
  )

  it.effect(
    "names a duplicate id in a run with dependencies above the pairwise size, and runs such a run once it is fixed",
    () =>
      Effect.gen(function* () {
        const chain = (ids: ReadonlyArray<string>, order: Array<string>) =>
          ids.map((id, i) =>
            Agent.make(id, {
              run: Effect.sync(() => order.push(id)),
              dependsOn: i === 0 ? [] : [ids[i - 1]!, ids[0]!]
            })
          )
        const ids = Array.from({ length: 20 }, (_, i) => `n${i}`)
        const error = yield* Effect.flip(Corral.run(chain([...ids, "n5"], []), { concurrency: 4 }))
        assert.deepStrictEqual(
          error.issues.map((issue) => `${issue.agentId ?? "-"}|${issue.index ?? "-"}|${issue.field}|${issue.message}`),
          ["n5|20|id|duplicate id: agents[5] already uses it"]
        )
        const order: Array<string> = []
        const result = yield* Corral.run(chain([...ids].reverse(), order), { concurrency: 4 })
        assert.isTrue(result.allSucceeded)
        assert.deepStrictEqual(order, [...ids].reverse())
      })
  )
})
