/**
 * `node codingAgentLauncher.ts <claude-code|codex> [--model=M] -- <argv…>`: runs a coding-agent CLI
 * with `$CORRAL_PROMPT_FILE` on its stdin, passes its output through, appends its usage to
 * `$CORRAL_USAGE_FILE`, writes its final answer to `$CORRAL_RESULT_FILE`, and exits with its code.
 * See `CodingAgent.ts`.
 *
 * @internal
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as readline from "node:readline"
import { type Kind, parseLine } from "../CodingAgent.ts"

const fail = (message: string): never => {
  process.stderr.write(`corral-coding-agent: ${message}\n`)
  process.exit(2)
}

const args = process.argv.slice(2)
const separator = args.indexOf("--")
const kind = args[0] as Kind
if (kind !== "claude-code" && kind !== "codex") fail(`expected claude-code or codex, got ${JSON.stringify(kind)}`)
if (separator < 0 || separator === args.length - 1) fail("expected -- and the command to run")
const model = args
  .slice(1, separator)
  .find((arg) => arg.startsWith("--model="))
  ?.slice("--model=".length)
const [command, ...rest] = args.slice(separator + 1) as [string, ...Array<string>]

const promptFile = process.env.CORRAL_PROMPT_FILE
const usageFile = process.env.CORRAL_USAGE_FILE
const resultFile = process.env.CORRAL_RESULT_FILE
if (promptFile === undefined) fail("CORRAL_PROMPT_FILE is not set")

const child = spawn(command, rest, { stdio: ["pipe", "pipe", "inherit"] })
child.on("error", (error) => fail(`cannot run ${command}: ${error.message}`))
fs.createReadStream(promptFile as string)
  .on("error", (error) => fail(`cannot read the prompt: ${error.message}`))
  .pipe(child.stdin)
child.stdin.on("error", () => undefined)

for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"] as const) process.on(signal, () => child.kill(signal))

let text: string | undefined
const lines = readline.createInterface({ input: child.stdout, crlfDelay: Number.POSITIVE_INFINITY })
lines.on("line", (line) => {
  process.stdout.write(`${line}\n`)
  const report = parseLine(kind, line, model)
  if (report?.usage !== undefined && usageFile !== undefined)
    fs.appendFileSync(usageFile, `${JSON.stringify(report.usage)}\n`)
  if (report?.text !== undefined) text = report.text
})

const closed = new Promise<void>((resolve) => lines.on("close", resolve))
child.on("close", (code, signal) => {
  closed.then(() => {
    if (text !== undefined && resultFile !== undefined) fs.writeFileSync(resultFile, JSON.stringify({ text }))
    process.exit(signal === null ? (code ?? 1) : 128 + (os.constants.signals[signal] ?? 0))
  })
})
