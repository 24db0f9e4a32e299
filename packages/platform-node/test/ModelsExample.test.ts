import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"

const example = fileURLToPath(new URL("../examples/models.ts", import.meta.url))

describe("examples/models.ts", () => {
  it("without keys, runs three agents against the local fake server and prints each one's cost", async () => {
    const env = { ...process.env }
    for (const name of ["OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"])
      delete env[name]
    const stdout = await new Promise<string>((resolve, reject) =>
      execFile(process.execPath, [example], { env }, (error, out, err) =>
        error === null ? resolve(out) : reject(new Error(`${error.message}\n${err}`))
      )
    )
    expect(stdout).toMatch(/^model: local fake server at http:\/\/127\.0\.0\.1:\d+$/m)
    expect(stdout).toMatch(
      /^capital: echo: What is the capital of Norway\? One word\. {2}\[18 in, 12 out, \$0\.000010\]$/m
    )
    expect(stdout).toMatch(/^total: \$0\.000026$/m)
  })
})
