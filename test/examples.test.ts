/**
 * Every `@example` in the JSDoc of the packages and the command, and every TypeScript block of the
 * READMEs and `docs/`, is type-checked, and every YAML plan block of them is decoded as `corral run`
 * decodes a plan file: each block is written to its own module under
 * `test/node_modules/.cache/examples` (where `@corral/*` and `effect` resolve as in the tests) and the
 * lot is compiled with the repository's settings. Relative imports in a JSDoc example resolve against
 * the file that holds it.
 */
import { execFile } from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { expect, it } from "vitest"
import * as PlanFile from "../apps/cli/src/PlanFile.ts"
import { root } from "./helpers.ts"

interface Example {
  readonly origin: string
  readonly line: number
  readonly code: string
}

const sourceFiles = (dir: string): Array<string> =>
  NodeFs.existsSync(dir)
    ? NodeFs.readdirSync(dir, { recursive: true, encoding: "utf8" })
        .filter((file) => file.endsWith(".ts"))
        .map((file) => NodePath.join(dir, file))
    : []

const workspaceDirs = (): Array<string> =>
  ["packages", "apps"].flatMap((group) =>
    NodeFs.readdirSync(NodePath.join(root, group)).map((name) => NodePath.join(root, group, name))
  )

const lineOf = (text: string, index: number): number => text.slice(0, index).split("\n").length

const fromJsDoc = (file: string): Array<Example> => {
  const text = NodeFs.readFileSync(file, "utf8")
  const examples: Array<Example> = []
  for (const match of text.matchAll(/@example[^\n]*\n\s*\*\s*```ts\n([\s\S]*?)\n\s*\*\s*```/g)) {
    const code = match[1]!
      .split("\n")
      .map((line) => line.replace(/^\s*\* ?/, ""))
      .join("\n")
      .replace(
        /from "(\.\.?\/[^"]+)"/g,
        (_, path: string) => `from "${NodePath.resolve(NodePath.dirname(file), path)}"`
      )
    examples.push({ origin: NodePath.relative(root, file), line: lineOf(text, match.index) + 2, code })
  }
  return examples
}

const fromMarkdown = (file: string): Array<Example> => {
  const text = NodeFs.readFileSync(file, "utf8")
  return [...text.matchAll(/^```ts\n([\s\S]*?)^```/gm)].map((match) => ({
    origin: NodePath.relative(root, file),
    line: lineOf(text, match.index) + 1,
    code: match[1]!
  }))
}

const markdownFiles = (dirs: ReadonlyArray<string>): Array<string> =>
  [
    NodePath.join(root, "README.md"),
    ...NodeFs.readdirSync(NodePath.join(root, "docs")).map((name) => NodePath.join(root, "docs", name)),
    ...dirs.map((dir) => NodePath.join(dir, "README.md"))
  ].filter((file) => file.endsWith(".md") && NodeFs.existsSync(file))

const collect = (): Array<Example> => {
  const dirs = workspaceDirs()
  const markdown = markdownFiles(dirs)
  return [
    ...dirs.flatMap((dir) => sourceFiles(NodePath.join(dir, "src"))).flatMap(fromJsDoc),
    ...markdown.flatMap(fromMarkdown)
  ]
}

const compile = (dir: string): Promise<string> =>
  new Promise((resolve) => {
    execFile(
      process.execPath,
      [NodePath.join(root, "node_modules/typescript/bin/tsc"), "-p", dir],
      { cwd: dir, encoding: "utf8", maxBuffer: 16 * 1024 * 1024 },
      (_, stdout, stderr) => resolve(stdout + stderr)
    )
  })

it("every @example and every TypeScript block in the docs type-checks; a duplicate plan id gets a readable error", async () => {
  const examples = collect()
  expect(examples.length).toBeGreaterThan(50)
  const dir = NodePath.join(root, "test/node_modules/.cache/examples")
  NodeFs.rmSync(dir, { recursive: true, force: true })
  NodeFs.mkdirSync(dir, { recursive: true })
  const names = examples.map((example, i) => {
    const name = `${String(i).padStart(3, "0")}-${example.origin.replace(/[^A-Za-z0-9]+/g, "_")}.ts`
    NodeFs.writeFileSync(NodePath.join(dir, name), `${example.code}\nexport {}\n`)
    return name
  })
  NodeFs.writeFileSync(
    NodePath.join(dir, "tsconfig.json"),
    JSON.stringify({
      extends: NodePath.join(root, "tsconfig.base.json"),
      compilerOptions: { noUnusedLocals: false, noUnusedParameters: false, lib: ["ES2024", "DOM"] },
      include: ["*.ts"]
    })
  )
  NodeFs.writeFileSync(
    NodePath.join(dir, "duplicate-id.ts"),
    'import { Plan } from "@corral/core"\nimport { Effect } from "effect"\n' +
      'Plan.make().agent("a", { run: Effect.void }).agent("a", { run: Effect.void })\n'
  )
  const output = await compile(dir)
  // The one expected error: a duplicate plan id is named in the message, not reduced to `never`.
  expect(output).toContain(
    `duplicate-id.ts(3,52): error TS2345: Argument of type '"a"' is not assignable to parameter of type '"a" & DuplicateId<"a">'`
  )
  const errors = output
    .split("\n")
    .filter((line) => /error TS\d+/.test(line) && !line.startsWith("duplicate-id.ts"))
    .map((line) => {
      const index = names.findIndex((name) => line.startsWith(name))
      const example = examples[index]
      return example === undefined ? line : `${example.origin} (example at line ${example.line}): ${line}`
    })
  expect(errors, output).toEqual([])
})

it("every YAML plan in the READMEs and docs/ decodes as a plan file", async () => {
  const plans = markdownFiles(workspaceDirs()).flatMap((file) => {
    const text = NodeFs.readFileSync(file, "utf8")
    return [...text.matchAll(/^```yaml\n([\s\S]*?)^```/gm)]
      .filter((match) => /^agents:/m.test(match[1]!))
      .map((match) => ({
        origin: `${NodePath.relative(root, file)}:${lineOf(text, match.index) + 1}`,
        code: match[1]!
      }))
  })
  expect(plans.map((plan) => plan.origin.split(":")[0])).toEqual(
    expect.arrayContaining(["README.md", "docs/cli.md", "docs/workspaces.md"])
  )
  const failures: Array<string> = []
  for (const plan of plans) {
    const exit = await Effect.runPromiseExit(PlanFile.decode(plan.code, { path: `${plan.origin}.yaml` }))
    if (Exit.isFailure(exit)) failures.push(String(exit.cause))
  }
  expect(failures).toEqual([])
})
