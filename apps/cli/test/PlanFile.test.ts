import { readdirSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { NodeServices } from "@effect/platform-node"
import { assert, describe, expect, it } from "@effect/vitest"
import { Claims } from "@corral/core"
import { Effect, FileSystem, Result } from "effect"
import * as PlanFile from "../src/PlanFile.ts"

const here = dirname(fileURLToPath(import.meta.url))
const fixture = (name: string) => join(here, "fixtures", name)
const examplesDir = join(here, "..", "examples")

const load = (path: string) => PlanFile.load(path).pipe(Effect.provide(NodeServices.layer))

const decodeYaml = (text: string) => PlanFile.decode(text, { path: "plan.yaml" })

const failure = <R>(effect: Effect.Effect<PlanFile.Plan, PlanFile.PlanFileError, R>) =>
  Effect.flip(effect).pipe(Effect.tap((error) => Effect.sync(() => assert.strictEqual(error._tag, "PlanFileError"))))

const issueAt = (error: PlanFile.PlanFileError, path: string): PlanFile.PlanFileIssue => {
  const issue = error.issues.find((i) => i.path === path)
  assert.isDefined(issue, `no issue at ${path}; got ${error.message}`)
  return issue!
}

const agentsYaml = (...agents: ReadonlyArray<string>) => `agents:\n${agents.map((a) => `  - ${a}\n`).join("")}`

describe("PlanFile.decode: valid plans", () => {
  it.effect("decodes the full YAML plan with durations in ms and normalized claims", () =>
    Effect.gen(function* () {
      const plan = yield* load(fixture("full.yaml"))
      expect(plan).toMatchObject({
        version: 1,
        concurrency: 4,
        mode: "settle",
        isolation: "worktree",
        merge: "auto",
        pools: { llm: 3, memoryMb: 8192 },
        rateLimits: { "llm-api": { limit: 60, intervalMs: 60_000, burst: 10 } },
        defaults: { timeoutMs: 600_000, claimTimeoutMs: 300_000, retries: 0 }
      })
      const [parser, tests] = plan.agents
      expect(parser).toMatchObject({
        id: "parser",
        run: "./scripts/fix-parser.sh",
        claims: { write: ["src/parser.ts"], read: ["src/types.ts", "db:users"], pools: { llm: 1 } },
        timeoutMs: 900_000,
        claimTimeoutMs: 300_000,
        retries: 2,
        limits: { memoryMb: 1024, cpuSeconds: 600, maxOutputBytes: 10_000_000 },
        env: { MODE: "strict", PORT: "8080" },
        inputs: ["src/**/*.ts"],
        rateLimit: "llm-api",
        estimateMs: 120_000,
        labels: { team: "core" },
        dependsOn: []
      })
      expect(tests).toMatchObject({
        id: "tests",
        dependsOn: ["parser"],
        timeoutMs: 600_000,
        claimTimeoutMs: 300_000,
        retries: 0,
        claims: { read: [], write: [], pools: {} },
        rateLimit: undefined
      })
      assert.match(plan.hash, /^[0-9a-f]{64}$/)
      assert.match(parser!.hash, /^[0-9a-f]{64}$/)
      assert.notStrictEqual(parser!.hash, tests!.hash)
    })
  )

  it.effect("decodes the same plan written as JSON to the same hashes", () =>
    Effect.gen(function* () {
      const yaml = yield* load(fixture("full.yaml"))
      const json = yield* load(fixture("full.json"))
      assert.strictEqual(json.file, fixture("full.json"))
      assert.strictEqual(json.hash, yaml.hash)
      assert.deepStrictEqual({ ...json, file: "" }, { ...yaml, file: "" })
    })
  )

  it.effect("applies defaults to a minimal plan", () =>
    Effect.gen(function* () {
      const plan = yield* decodeYaml(agentsYaml("{ id: a, run: echo a }"))
      expect(plan).toMatchObject({
        concurrency: 4,
        mode: "settle",
        isolation: "worktree",
        merge: "auto",
        history: "merge",
        author: undefined,
        committer: undefined,
        pools: {}
      })
      expect(plan.agents[0]).toMatchObject({ timeoutMs: undefined, claimTimeoutMs: undefined, retries: 0, env: {} })
    })
  )

  it.effect("accepts durations as strings or milliseconds", () =>
    Effect.gen(function* () {
      const cases: ReadonlyArray<readonly [string, number]> = [
        ["10m", 600_000],
        ["1 minute", 60_000],
        ["90s", 90_000],
        ["2h", 7_200_000],
        ["500ms", 500],
        ["1h 30m", 5_400_000],
        ["1.5s", 1_500],
        ["1500", 1_500],
        ["2500", 2_500]
      ]
      for (const [text, ms] of cases) {
        const value = /^\d+$/.test(text) ? text : JSON.stringify(text)
        const plan = yield* decodeYaml(agentsYaml(`{ id: a, run: echo a, timeout: ${value} }`))
        assert.strictEqual(plan.agents[0]!.timeoutMs, ms, text)
      }
    })
  )

  it.effect("supports YAML anchors and merge keys", () =>
    Effect.gen(function* () {
      const plan = yield* decodeYaml(
        agentsYaml("&base { id: a, run: echo a, timeout: 1m, retries: 1 }", "{ <<: *base, id: b, run: echo b }")
      )
      expect(plan.agents[1]).toMatchObject({ id: "b", run: "echo b", timeoutMs: 60_000, retries: 1 })
    })
  )

  it.effect("an agent's hash is the one earlier versions recorded unless it sets a newer field", () =>
    Effect.gen(function* () {
      const text = agentsYaml(
        "{ id: a, run: echo hi, claims: { write: [src/] } }",
        "{ id: b, use: claude-code, prompt: hi, args: [x], dependsOn: [a] }"
      )
      const plan = yield* decodeYaml(text)
      assert.deepStrictEqual(
        plan.agents.map((agent) => agent.hash),
        [
          "7546dc07f7af0ebce9212a06d3435573d35baafb6973098780c9dd871d6b160f",
          "c7897db8a961b9f9107181bc3d49db79b51b8b184d31795700a0a363437eddb8"
        ]
      )
      const overlay = yield* decodeYaml(text.replace("echo hi,", "echo hi, overlay: true,"))
      assert.notStrictEqual(overlay.agents[0]!.hash, plan.agents[0]!.hash)
    })
  )

  it.effect("hashes depend on the definition, not on key order or formatting", () =>
    Effect.gen(function* () {
      const a = yield* decodeYaml(agentsYaml("{ id: a, run: echo a, timeout: 1m }", "{ id: b, run: echo b }"))
      const b = yield* decodeYaml(agentsYaml("{ timeout: 60s, run: echo a, id: a }", "{ id: b, run: echo b }"))
      const c = yield* decodeYaml(agentsYaml("{ id: a, run: echo A, timeout: 1m }", "{ id: b, run: echo b }"))
      assert.strictEqual(a.hash, b.hash)
      assert.strictEqual(a.agents[0]!.hash, b.agents[0]!.hash)
      assert.notStrictEqual(a.agents[0]!.hash, c.agents[0]!.hash)
      assert.strictEqual(a.agents[1]!.hash, c.agents[1]!.hash)
      assert.notStrictEqual(a.hash, c.hash)
    })
  )
})

describe("PlanFile errors", () => {
  it.effect("bad YAML reports the line and column", () =>
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const file = join(yield* fs.makeTempDirectoryScoped(), "broken.yaml")
      yield* fs.writeFileString(file, "version: 1\nagents:\n  - id: a\n    run: [echo hi\n  - id: b\n")
      const error = yield* failure(PlanFile.load(file))
      assert.strictEqual(error.file, file)
      assert.match(error.issues[0]!.path, /^line \d+, column \d+$/)
      assert.include(error.message, `${file}: line `)
    }).pipe(Effect.provide(NodeServices.layer))
  )

  it.effect("a second YAML document is an error in the plan's words, not the YAML library's", () =>
    Effect.gen(function* () {
      const error = yield* failure(decodeYaml(`${agentsYaml("{ id: a, run: echo a }")}---\nagents: []\n`))
      expect(error.issues).toEqual([
        {
          path: "line 3, column 1",
          message: "a plan file holds one YAML document; remove the `---` and what follows, or put it in its own file"
        }
      ])
    })
  )

  it.effect("bad JSON reports the line and column", () =>
    Effect.gen(function* () {
      const error = yield* failure(PlanFile.decode('{\n  "agents": [\n    { "id": "a", }\n  ]\n}', { path: "p.json" }))
      expect(error.issues).toEqual([{ path: "line 3, column 18", message: "Expected double-quoted property name" }])
    })
  )

  it.effect("duplicate keys are errors in YAML and JSON", () =>
    Effect.gen(function* () {
      const yaml = yield* failure(decodeYaml(`concurrency: 1\nconcurrency: 2\n${agentsYaml("{ id: a, run: echo a }")}`))
      expect(yaml.issues).toEqual([{ path: "line 2, column 1", message: "Map keys must be unique" }])
      const json = yield* failure(
        PlanFile.decode('{ "agents": [{ "id": "a", "run": "x", "run": "y" }] }', { path: "p.json" })
      )
      expect(json.issues).toEqual([{ path: "line 1, column 39", message: "Map keys must be unique" }])
    })
  )

  it.effect("an issue inside an agent names the agent by its id, when the agent has a string id", () =>
    Effect.gen(function* () {
      const error = yield* failure(
        decodeYaml(agentsYaml("id: ok\n    run: echo", "id: parser\n    run: echo\n    tmeout: 5m", "run: 5"))
      )
      assert.strictEqual(issueAt(error, "agents[1].tmeout").agentId, "parser")
      assert.isUndefined(issueAt(error, "agents[2].run").agentId)
      assert.include(error.message, "plan.yaml: agents[1].tmeout: unknown field; expected one of: id, run")
      assert.include(error.message, '(agent "parser", line 6)')
      assert.include(error.message, "plan.yaml: agents[2].run: expected string, got 5 (line 7)")
      const cycle = yield* failure(decodeYaml(agentsYaml("id: a\n    run: x\n    dependsOn: [a]")))
      assert.include(cycle.message, 'agents[0].dependsOn[0]: agent "a" depends on itself (agent "a", line 4)')
    })
  )

  it.effect(
    "a claimed path with * or ? is an error: a claim is a path, not a pattern; named resources may hold them",
    () =>
      Effect.gen(function* () {
        const error = yield* failure(
          decodeYaml(agentsYaml('id: a\n    run: echo\n    claims: { write: ["src/*.ts"], read: ["docs/?.md"] }'))
        )
        assert.strictEqual(
          issueAt(error, "agents[0].claims.write[0]").message,
          'expected a relative path or a named resource like "db:users", got "src/*.ts"; a claim is a path, not a pattern: "*" and "?" are taken literally, so it would not cover the files the pattern matches; claim their folder ("src/") instead'
        )
        assert.include(issueAt(error, "agents[0].claims.read[0]").message, 'claim their folder ("docs/") instead')
        const dotted = yield* failure(
          decodeYaml(agentsYaml('id: a\n    run: echo\n    claims: { write: ["./db:users*"] }'))
        )
        assert.include(issueAt(dotted, "agents[0].claims.write[0]").message, "a claim is a path, not a pattern")
        const plan = yield* decodeYaml(
          agentsYaml('id: a\n    run: echo\n    claims: { write: ["db:users*", "app/[slug]/page.tsx"] }')
        )
        assert.deepStrictEqual(plan.agents[0]!.claims.write, ["db:users*", "app/[slug]/page.tsx"])
      })
  )

  it.effect(
    "a claim that reads as a named resource and holds / or \\ is an error naming both spellings; ./ makes it a path",
    () =>
      Effect.gen(function* () {
        const error = yield* failure(
          decodeYaml(agentsYaml('id: a\n    run: echo\n    claims: { write: ["a:b/"], read: ["db:users/orders"] }'))
        )
        assert.strictEqual(
          issueAt(error, "agents[0].claims.write[0]").message,
          'expected a relative path or a named resource like "db:users", got "a:b/"; it is ambiguous: a named resource holds no "/" or "\\" in a plan file, so write "./a:b/" for the path, or a resource name without them'
        )
        assert.include(issueAt(error, "agents[0].claims.read[0]").message, 'write "./db:users/orders" for the path')
        const plan = yield* decodeYaml(
          agentsYaml(
            'id: a\n    run: echo\n    claims: { write: ["./a:b/", "db:users"], read: ["./db:x//y.ts", "src/a:b"] }'
          )
        )
        assert.deepStrictEqual(plan.agents[0]!.claims.write, ["./a:b/", "db:users"])
        assert.deepStrictEqual(plan.agents[0]!.claims.read, ["./db:x/y.ts", "src/a:b"])
        const folder = Result.getOrThrow(Claims.normalizeKey(plan.agents[0]!.claims.write[0]!))
        assert.deepStrictEqual(folder.segments, ["a:b"], "the library reads the plan's key as the folder a:b")
      })
  )

  it.effect("a file named db: is ./db:, kept a path; db: x is an error naming both spellings", () =>
    Effect.gen(function* () {
      const plan = yield* decodeYaml(
        agentsYaml('id: a\n    run: echo\n    claims: { write: ["./db:", "./db: x"], read: [" ./cache:/"] }')
      )
      assert.deepStrictEqual(plan.agents[0]!.claims.write, ["./db:", "./db: x"])
      assert.deepStrictEqual(plan.agents[0]!.claims.read, ["./cache:/"])
      const file = Result.getOrThrow(Claims.normalizeKey(plan.agents[0]!.claims.write[0]!))
      assert.deepStrictEqual(file.segments, ["db:"], "the library reads the plan's key as the file db:")
      const error = yield* failure(
        decodeYaml(agentsYaml('id: a\n    run: echo\n    claims: { write: ["db: x"], read: ["cache:\\tusers"] }'))
      )
      assert.strictEqual(
        issueAt(error, "agents[0].claims.write[0]").message,
        'expected a relative path or a named resource like "db:users", got "db: x"; a named resource has no space after ":", so write "db:x" for the resource, or "./db: x" for the path'
      )
      assert.include(issueAt(error, "agents[0].claims.read[0]").message, 'write "cache:users" for the resource')
    })
  )

  it.effect("an unknown field is an error naming the field and its line", () =>
    Effect.gen(function* () {
      const error = yield* failure(decodeYaml("agents:\n  - id: a\n    run: echo a\n    tmeout: 5m\n"))
      const issue = issueAt(error, "agents[0].tmeout")
      assert.include(issue.message, "unknown field; expected one of: id, run")
      assert.strictEqual(issue.line, 4)
      assert.include(error.message, "plan.yaml: agents[0].tmeout: unknown field")
      assert.include(error.message, '(agent "a", line 4)')
    })
  )

  it.effect("an unknown top-level field is an error", () =>
    Effect.gen(function* () {
      const error = yield* failure(decodeYaml(`concurency: 2\n${agentsYaml("{ id: a, run: echo a }")}`))
      assert.include(issueAt(error, "concurency").message, "unknown field")
    })
  )

  it.effect("history, author and committer are checked", () =>
    Effect.gen(function* () {
      const agents = agentsYaml("{ id: a, run: echo a }")
      const plan = yield* decodeYaml(`history: squash\nauthor: { name: Bot, email: bot@x }\n${agents}`)
      expect(plan).toMatchObject({ history: "squash", author: { name: "Bot", email: "bot@x" } })
      const history = yield* failure(decodeYaml(`history: rebase\n${agents}`))
      assert.include(issueAt(history, "history").message, "squash")
      const author = yield* failure(decodeYaml(`author: { name: Bot }\n${agents}`))
      assert.isDefined(
        author.issues.find((i) => i.path.startsWith("author")),
        author.message
      )
    })
  )

  it.effect("an unknown dependency names the dependency", () =>
    Effect.gen(function* () {
      const error = yield* failure(
        decodeYaml(agentsYaml("{ id: a, run: echo a }", "{ id: b, run: echo b, dependsOn: [a, c] }"))
      )
      const issue = issueAt(error, "agents[1].dependsOn[1]")
      assert.include(issue.message, 'unknown agent "c"')
      assert.strictEqual(issue.line, 3)
    })
  )

  it.effect("a self-dependency is an error", () =>
    Effect.gen(function* () {
      const error = yield* failure(decodeYaml(agentsYaml("{ id: a, run: echo a, dependsOn: [a] }")))
      assert.include(issueAt(error, "agents[0].dependsOn[0]").message, 'agent "a" depends on itself')
    })
  )

  it.effect("a dependency cycle names the cycle path", () =>
    Effect.gen(function* () {
      const error = yield* failure(
        decodeYaml(
          agentsYaml(
            "{ id: a, run: echo a, dependsOn: [b] }",
            "{ id: b, run: echo b, dependsOn: [c] }",
            "{ id: c, run: echo c, dependsOn: [a] }",
            "{ id: d, run: echo d, dependsOn: [a] }"
          )
        )
      )
      expect(error.issues).toEqual([
        { path: "agents[0].dependsOn", message: "dependency cycle: a -> b -> c -> a", line: 2, agentId: "a" }
      ])
    })
  )

  it.effect("invalid claims: absolute, '..' escapes and empty keys", () =>
    Effect.gen(function* () {
      const error = yield* failure(
        decodeYaml(
          agentsYaml('{ id: a, run: echo a, claims: { write: [/etc/passwd, ../outside.ts, ""], read: [src/../../x] } }')
        )
      )
      assert.include(
        issueAt(error, "agents[0].claims.write[0]").message,
        'expected a relative path or a named resource like "db:users", got "/etc/passwd"'
      )
      assert.include(issueAt(error, "agents[0].claims.write[1]").message, 'got "../outside.ts"')
      assert.include(issueAt(error, "agents[0].claims.write[2]").message, 'got ""')
      assert.include(issueAt(error, "agents[0].claims.read[0]").message, 'got "src/../../x"')
      assert.include(
        error.message,
        'plan.yaml: agents[0].claims.write[0]: expected a relative path or a named resource like "db:users", got "/etc/passwd"'
      )
    })
  )

  it.effect("invalid claims in JSON", () =>
    Effect.gen(function* () {
      const error = yield* failure(load(fixture("invalid.json")))
      const issue = issueAt(error, "agents[0].claims.write[0]")
      assert.include(issue.message, 'got "/etc/passwd"')
      assert.strictEqual(issue.line, 3)
    })
  )

  it.effect("a negative timeout is an error", () =>
    Effect.gen(function* () {
      const error = yield* failure(decodeYaml(agentsYaml("{ id: a, run: echo a, timeout: -5 }")))
      assert.include(issueAt(error, "agents[0].timeout").message, "expected a duration that is not negative, got -5")
    })
  )

  it.effect("an invalid duration string is an error", () =>
    Effect.gen(function* () {
      const error = yield* failure(
        decodeYaml(`defaults: { timeout: 10 parsecs }\n${agentsYaml("{ id: a, run: echo a, estimate: soon }")}`)
      )
      assert.include(issueAt(error, "defaults.timeout").message, 'expected a duration like "90s"')
      assert.include(issueAt(error, "defaults.timeout").message, 'got "10 parsecs"')
      assert.include(issueAt(error, "agents[0].estimate").message, 'got "soon"')
    })
  )

  it.effect("duplicate, blank and malformed ids", () =>
    Effect.gen(function* () {
      const error = yield* failure(
        decodeYaml(
          agentsYaml(
            "{ id: a, run: echo a }",
            "{ id: a, run: echo again }",
            '{ id: " ", run: echo b }',
            "{ id: -x, run: echo c }"
          )
        )
      )
      assert.include(issueAt(error, "agents[2].id").message, "must not be blank")
      assert.include(issueAt(error, "agents[3].id").message, "git branch names")
      const gitRules = yield* failure(
        decodeYaml(agentsYaml("{ id: a..b, run: echo a }", "{ id: x.lock, run: echo b }", "{ id: c., run: echo c }"))
      )
      for (const index of [0, 1, 2]) {
        assert.include(issueAt(gitRules, `agents[${index}].id`).message, `no "..", not ending in "." or ".lock"`)
      }
      const again = yield* failure(decodeYaml(agentsYaml("{ id: a, run: echo a }", "{ id: a, run: echo again }")))
      assert.include(issueAt(again, "agents[1].id").message, 'duplicate id "a"; agents[0] already uses it')
    })
  )

  it.effect("a missing file is 'file not found'", () =>
    Effect.gen(function* () {
      const error = yield* failure(load(fixture("missing.yaml")))
      expect(error.issues).toEqual([{ path: "", message: "file not found" }])
      assert.strictEqual(error.message, `${fixture("missing.yaml")}: file not found`)
    })
  )

  it.effect("an unsupported extension is an error", () =>
    Effect.gen(function* () {
      const error = yield* failure(load(fixture("notes.txt")))
      assert.include(error.message, "unsupported file extension")
    })
  )

  it.effect("pools: over capacity and not configured", () =>
    Effect.gen(function* () {
      const error = yield* failure(
        decodeYaml(
          `pools: { llm: 2 }\n${agentsYaml("{ id: a, run: echo a, claims: { pools: { llm: 3 } } }", "{ id: b, run: echo b, claims: { pools: { gpu: 1 } } }")}`
        )
      )
      assert.include(issueAt(error, "agents[0].claims.pools.llm").message, 'asks for 3 but pool "llm" holds 2')
      assert.include(
        issueAt(error, "agents[1].claims.pools.gpu").message,
        'pool "gpu" is not configured; configured pools: "llm"'
      )
    })
  )

  it.effect("a rate limit naming an unknown bucket is an error", () =>
    Effect.gen(function* () {
      const error = yield* failure(
        decodeYaml(
          `rateLimits: { llm-api: { limit: 1, interval: 1s } }\n${agentsYaml("{ id: a, run: echo a, rateLimit: llm }")}`
        )
      )
      assert.include(
        issueAt(error, "agents[0].rateLimit").message,
        'unknown rate limit "llm"; configured rate limits: "llm-api"'
      )
    })
  )

  it.effect("wrong types are reported all at once", () =>
    Effect.gen(function* () {
      const error = yield* failure(
        decodeYaml(
          `concurrency: four\nmode: fast\n${agentsYaml("{ id: 7, run: echo a, retries: -1, env: { A: [1] } }", "{ id: b }", "just a string")}`
        )
      )
      assert.include(issueAt(error, "concurrency").message, 'expected number, got "four"')
      assert.include(issueAt(error, "mode").message, 'expected "settle" | "fail-fast", got "fast"')
      assert.include(issueAt(error, "agents[0].id").message, "expected string, got 7")
      assert.include(issueAt(error, "agents[0].retries").message, "greater than or equal to 0")
      assert.include(issueAt(error, "agents[0].env.A").message, "expected")
      assert.strictEqual(
        issueAt(error, "agents[1].run").message,
        "expected `run` (a command) or `use` (claude-code or codex)"
      )
      assert.include(issueAt(error, "agents[2]").message, "expected object")
      assert.strictEqual(error.message.split("\n").length, error.issues.length)
    })
  )

  it.effect("env names must be variable names; numbers and booleans become strings", () =>
    Effect.gen(function* () {
      const error = yield* failure(decodeYaml(agentsYaml("{ id: a, run: echo a, env: { OK: 1, B C: x } }")))
      expect(error.issues).toEqual([
        {
          path: 'agents[0].env["B C"]',
          message: 'expected an environment variable name of letters, digits and "_", got "B C"',
          line: 2,
          agentId: "a"
        }
      ])
      const plan = yield* decodeYaml(agentsYaml("{ id: a, run: echo a, env: { N: 1, B: true } }"))
      assert.deepStrictEqual(plan.agents[0]!.env, { N: "1", B: "true" })
    })
  )

  it.effect("a number in env is passed as written in YAML: 3.10 stays 3.10, not 3.1", () =>
    Effect.gen(function* () {
      const plan = yield* decodeYaml(
        agentsYaml("{ id: a, run: echo a, env: { PYTHON: 3.10, V: 2.0, HEX: 0x1F, E: 1e3, N: -7 } }")
      )
      assert.deepStrictEqual(plan.agents[0]!.env, { PYTHON: "3.10", V: "2.0", HEX: "0x1F", E: "1e3", N: "-7" })
    })
  )

  it.effect("concurrency must be an integer of at least 1", () =>
    Effect.gen(function* () {
      const zero = yield* failure(decodeYaml(`concurrency: 0\n${agentsYaml("{ id: a, run: echo a }")}`))
      assert.include(issueAt(zero, "concurrency").message, "greater than or equal to 1")
      const fraction = yield* failure(decodeYaml(`concurrency: 1.5\n${agentsYaml("{ id: a, run: echo a }")}`))
      assert.include(issueAt(fraction, "concurrency").message, "integer")
    })
  )

  it.effect("an empty document and an empty agent list are errors", () =>
    Effect.gen(function* () {
      const empty = yield* failure(decodeYaml(""))
      assert.include(issueAt(empty, "").message, "expected object")
      const none = yield* failure(decodeYaml("agents: []"))
      assert.strictEqual(issueAt(none, "agents").message, "a plan needs at least one agent")
    })
  )
})

describe("examples", () => {
  const files = readdirSync(examplesDir).filter((name) => name.endsWith(".yaml"))

  it("has the documented examples", () => {
    expect(files).toEqual(
      expect.arrayContaining([
        "independent.yaml",
        "claims.yaml",
        "pipeline.yaml",
        "fan-out-fan-in.yaml",
        "llm-rate-limited.yaml"
      ])
    )
  })

  it.effect.each(files)("%s loads", (name) =>
    Effect.gen(function* () {
      const plan = yield* load(join(examplesDir, name))
      assert.isAbove(plan.agents.length, 0)
    })
  )
})

describe("reserved ids", () => {
  it.effect("rejects the id of the integration branch", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(
        PlanFile.decode("version: 1\nagents:\n  - id: integration\n    run: echo hi\n", { path: "plan.yaml" })
      )
      assert.include(error.message, "plan.yaml: agents[0].id")
      assert.include(error.message, '"integration" is reserved')
    })
  )
})
