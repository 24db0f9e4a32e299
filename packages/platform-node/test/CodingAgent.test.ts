import { assert, describe, it } from "@effect/vitest"
import * as CodingAgent from "../src/CodingAgent.ts"

describe("CodingAgent", () => {
  it("builds each tool's command line with the prompt left to stdin", () => {
    assert.deepStrictEqual(
      CodingAgent.argv({ kind: "claude-code", model: "claude-opus-4-1", args: ["--max-turns", "9"] }),
      ["claude", "-p", "--output-format", "stream-json", "--verbose", "--model", "claude-opus-4-1", "--max-turns", "9"]
    )
    assert.deepStrictEqual(CodingAgent.argv({ kind: "codex", executable: "/opt/codex" }), [
      "/opt/codex",
      "exec",
      "--json",
      "-"
    ])
  })

  it("reads Claude Code's result message: cost from total_cost_usd (or 1.0's cost_usd), input including cache", () => {
    const line = JSON.stringify({
      type: "result",
      subtype: "success",
      result: "done",
      total_cost_usd: 0.25,
      usage: { input_tokens: 5, cache_creation_input_tokens: 10, cache_read_input_tokens: 100, output_tokens: 7 }
    })
    assert.deepStrictEqual(CodingAgent.parseLine("claude-code", line), {
      usage: { inputTokens: 115, outputTokens: 7, costUsd: 0.25 },
      text: "done"
    })
    assert.deepStrictEqual(
      CodingAgent.parseLine(
        "claude-code",
        '{"type":"result","cost_usd":0.1,"usage":{"input_tokens":1,"output_tokens":1}}'
      )?.usage,
      { inputTokens: 1, outputTokens: 1, costUsd: 0.1 }
    )
    assert.isUndefined(CodingAgent.parseLine("claude-code", '{"type":"assistant","message":{}}'))
    assert.isUndefined(CodingAgent.parseLine("claude-code", "plain text"))
    assert.isUndefined(CodingAgent.parseLine("claude-code", "{broken"))
  })

  it("reads Codex's turn.completed usage, priced by model, and its agent message", () => {
    const usage =
      '{"type":"turn.completed","usage":{"input_tokens":1000,"cached_input_tokens":400,"output_tokens":100}}'
    assert.deepStrictEqual(
      CodingAgent.parseLine("codex", usage, "mine", {
        mine: { inputPerMillion: 1, outputPerMillion: 10, cachedInputPerMillion: 0.5 }
      }),
      { usage: { inputTokens: 1000, outputTokens: 100, costUsd: (600 * 1 + 400 * 0.5 + 100 * 10) / 1e6 } }
    )
    assert.strictEqual(CodingAgent.parseLine("codex", usage)?.usage?.costUsd, 0)
    assert.deepStrictEqual(
      CodingAgent.parseLine("codex", '{"type":"item.completed","item":{"type":"agent_message","text":"ok"}}'),
      { text: "ok" }
    )
  })
})
