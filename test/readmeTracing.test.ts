/**
 * The README's span-reading example runs as written: its block is copied into a temporary folder of
 * this repository (so `@corral/core` and the OpenTelemetry packages resolve) and run with `node`; what
 * it prints must be what the README says it prints.
 */
import { execFile } from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { expect, it } from "vitest"
import { root } from "./helpers.ts"

it("the README's in-memory span exporter example prints the run's spans", async () => {
  const readme = NodeFs.readFileSync(NodePath.join(root, "README.md"), "utf8")
  const block = [...readme.matchAll(/^```ts\n([\s\S]*?)^```/gm)]
    .map((match) => match[1]!)
    .find((code) => code.includes("InMemorySpanExporter"))!
  const printed = block
    .split("\n")
    .filter((line) => line.startsWith("// "))
    .map((line) => line.slice(3))
  expect(printed.length).toBeGreaterThan(0)
  const dir = NodeFs.mkdtempSync(NodePath.join(root, "test", ".tmp-readme-"))
  try {
    NodeFs.writeFileSync(NodePath.join(dir, "tracing.ts"), block)
    const stdout = await new Promise<string>((resolve, reject) =>
      execFile(
        process.execPath,
        [NodePath.join(dir, "tracing.ts")],
        { cwd: dir, encoding: "utf8" },
        (error, out, err) => (error ? reject(new Error(`${error.message}\n${out}\n${err}`)) : resolve(out))
      )
    )
    expect(stdout.trim().split("\n")).toEqual(printed)
  } finally {
    NodeFs.rmSync(dir, { recursive: true, force: true })
  }
})
