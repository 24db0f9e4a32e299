import { describe, expect, it } from "vitest"
import * as Sandbox from "../../packages/platform-node/src/Sandbox.ts"
import {
  fakeTools,
  finishedOutcome,
  git,
  integrationBranch,
  jsonEvents,
  makeRepo,
  planFile,
  runCli
} from "../helpers.ts"

// With CI=true a machine without bubblewrap runs the sandboxed test and fails it; elsewhere it is skipped.
const sandboxes = Sandbox.supportUnsafe().available || process.env.CI === "true"

// Fake CLIs printing the output formats the real tools document (Claude Code 2.0 stream-json,
// Codex CLI 0.5x `exec --json`); they record their stdin and arguments in the agent's worktree.
const fakeClaude = `#!/bin/sh
cat > claude-prompt.txt
echo "$@" > claude-args.txt
echo '{"type":"system","subtype":"init","session_id":"s1","model":"claude-sonnet-4-5","tools":["Bash","Edit"]}'
echo '{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Working on it"}]},"session_id":"s1"}'
echo '{"type":"result","subtype":"success","is_error":false,"duration_ms":5400,"num_turns":3,"result":"Fixed the parser.","session_id":"s1","total_cost_usd":0.0421,"usage":{"input_tokens":120,"cache_creation_input_tokens":1000,"cache_read_input_tokens":8000,"output_tokens":900}}'
`

const fakeCodex = `#!/bin/sh
cat > codex-prompt.txt
echo "$@" > codex-args.txt
echo '{"type":"thread.started","thread_id":"t1"}'
echo '{"type":"turn.started"}'
echo '{"type":"item.completed","item":{"id":"item_0","type":"command_execution","command":"bash -lc ls","aggregated_output":"src","exit_code":0,"status":"completed"}}'
echo '{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"Refactored the lexer."}}'
echo '{"type":"turn.completed","usage":{"input_tokens":24763,"cached_input_tokens":24448,"output_tokens":122}}'
`

const fakeBin = (): string => fakeTools({ claude: fakeClaude, codex: fakeCodex })

const hostile = `Fix it. $(touch pwned) \`touch pwned2\` 'single' "double" ; rm -rf nothing\nline two`

describe("coding agents in plans (end to end, fake CLIs)", () => {
  it("claude-code, codex and a generic CLI get the prompt verbatim on stdin/file; usage and results are recorded", async () => {
    const repo = makeRepo()
    const plan = planFile(
      JSON.stringify({
        version: 1,
        agents: [
          { id: "claude", use: "claude-code", prompt: hostile, model: "claude-sonnet-4-5", args: ["--max-turns", "5"] },
          { id: "codex", use: "codex", prompt: hostile, model: "gpt-5" },
          {
            id: "generic",
            prompt: hostile,
            run: `cp "$CORRAL_PROMPT_FILE" generic-prompt.txt && echo '{"inputTokens":10,"outputTokens":5,"costUsd":0.001}' >> "$CORRAL_USAGE_FILE"`
          }
        ]
      }),
      "plan.json"
    )
    const bin = fakeBin()
    const result = await runCli(["run", "--json", plan], {
      cwd: repo,
      env: { PATH: `${bin}:${process.env.PATH}` }
    })
    expect(result.code, result.stdout + result.stderr).toBe(0)
    const events = jsonEvents(result.stdout)
    const finished = (id: string) => finishedOutcome(events, id)
    expect(finished("claude").usage).toEqual({ inputTokens: 9120, outputTokens: 900, costUsd: 0.0421 })
    expect(finished("claude").value.process.result).toEqual({ text: "Fixed the parser." })
    expect(finished("codex").usage.inputTokens).toBe(24763)
    expect(finished("codex").usage.outputTokens).toBe(122)
    expect(finished("codex").usage.costUsd).toBeCloseTo((315 * 1.25 + 24448 * 0.125 + 122 * 10) / 1e6, 12)
    expect(finished("codex").value.process.result).toEqual({ text: "Refactored the lexer." })
    expect(finished("generic").usage).toEqual({ inputTokens: 10, outputTokens: 5, costUsd: 0.001 })
    const progress = events.find((event) => event.type === "Output" && event.agentId === "claude")
    expect(progress?.text).toContain('"type":"system"')

    const integration = integrationBranch(repo)
    const show = (file: string) => git(repo, "show", `${integration}:${file}`)
    expect(show("claude-prompt.txt")).toBe(hostile)
    expect(show("codex-prompt.txt")).toBe(hostile)
    expect(show("generic-prompt.txt")).toBe(hostile)
    expect(show("claude-args.txt")).toBe(
      "-p --output-format stream-json --verbose --model claude-sonnet-4-5 --max-turns 5\n"
    )
    expect(show("codex-args.txt")).toBe("exec --json --model gpt-5 -\n")
    expect(git(repo, "ls-tree", "-r", "--name-only", integration)).not.toMatch(/pwned/)
  })

  it("a coding agent that fails exits the agent with the tool's code; a missing CLI is a clear failure", async () => {
    const repo = makeRepo()
    const bin = fakeTools({
      claude: `#!/bin/sh\ncat >/dev/null\necho '{"type":"result","subtype":"error_max_turns","is_error":true,"total_cost_usd":0.5,"usage":{"input_tokens":1,"output_tokens":2}}'\nexit 1\n`
    })
    const plan = planFile(`version: 1
agents:
  - id: stuck
    use: claude-code
    prompt: do it
  - id: absent
    use: codex
    prompt: do it
`)
    const result = await runCli(["run", plan], { cwd: repo, env: { PATH: `${bin}:/usr/bin:/bin` } })
    expect(result.code).toBe(1)
    expect(result.stdout).toMatch(/stuck .*\$0\.500/)
    expect(result.stdout).toMatch(/process "stuck" exited with code 1/)
    expect(result.stdout + result.stderr).toMatch(/cannot run codex/)
  })

  it.skipIf(!sandboxes)(
    "in a sandbox: the coding agent, the usage/result files and the deps folder still work",
    async () => {
      const repo = makeRepo()
      const bin = fakeBin()
      const plan = planFile(`version: 1
defaults: { sandbox: { allow: { read: ["${bin}"] } } }
agents:
  - id: claude
    use: claude-code
    prompt: fix it
  - id: after
    dependsOn: [claude]
    run: cp "$CORRAL_DEPS_DIR/claude.json" from-claude.json && echo '{"costUsd":0.25}' >> "$CORRAL_USAGE_FILE" && echo '{"ok":true}' > "$CORRAL_RESULT_FILE"
`)
      const result = await runCli(["run", "--json", plan], { cwd: repo, env: { PATH: `${bin}:${process.env.PATH}` } })
      expect(result.code, result.stdout + result.stderr).toBe(0)
      const events = jsonEvents(result.stdout)
      const finished = (id: string) => finishedOutcome(events, id)
      expect(finished("claude").usage.costUsd).toBe(0.0421)
      expect(finished("after").usage.costUsd).toBe(0.25)
      expect(finished("after").value.process.result).toEqual({ ok: true })
      const integration = integrationBranch(repo)
      expect(JSON.parse(git(repo, "show", `${integration}:from-claude.json`))).toEqual({ text: "Fixed the parser." })
    }
  )

  it("rejects run together with use, use without a prompt, and model without use", async () => {
    const repo = makeRepo()
    const plan = planFile(`version: 1
agents:
  - id: both
    run: echo
    use: codex
    prompt: x
  - id: noprompt
    use: claude-code
  - id: stray
    run: echo
    model: gpt-5
`)
    const result = await runCli(["run", plan], { cwd: repo })
    expect(result.code).toBe(2)
    const output = result.stdout + result.stderr
    expect(output).toContain("agents[0].use")
    expect(output).toContain("agents[1].prompt")
    expect(output).toContain("agents[2].model")
  })
})
