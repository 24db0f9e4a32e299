/**
 * Coding-agent CLIs as process agents: Claude Code (`claude -p --output-format stream-json`) and
 * Codex (`codex exec --json`). Each runs under a small launcher (`corral-coding-agent`, a Node
 * script in this package) that
 *
 * - feeds the prompt from `$CORRAL_PROMPT_FILE` to the tool's stdin (never through a shell),
 * - passes the tool's output lines through unchanged (live progress in corral's view and log),
 * - turns the tool's usage report into `$CORRAL_USAGE_FILE` lines: Claude Code's final `result`
 *   object (`total_cost_usd`, `usage`), Codex's `turn.completed` events (`usage`, priced with
 *   `Pricing` by model),
 * - writes the tool's final answer to `$CORRAL_RESULT_FILE` as `{ "text": … }`,
 * - exits with the tool's exit code and forwards SIGTERM/SIGINT to it.
 *
 * Formats followed: Claude Code 2.0's `stream-json` output (its `result` message; 1.0's
 * `cost_usd` is read too) and the `codex exec --json` events of Codex CLI 0.5x
 * (`thread.started`, `item.completed`, `turn.completed`, `turn.failed`).
 *
 * @since 0.1.0
 */
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { fileURLToPath } from "node:url"
import * as Pricing from "@corral/core/Pricing"
import type * as Usage from "@corral/core/Usage"

/**
 * @since 0.1.0
 * @category models
 */
export type Kind = "claude-code" | "codex"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly kind: Kind
  /** The model (`--model`); also the key into `Pricing` for Codex's cost. */
  readonly model?: string | undefined
  /** Extra arguments for the tool, e.g. `["--max-turns", "30"]`. */
  readonly args?: ReadonlyArray<string> | undefined
  /** The executable. Default `claude` or `codex`, looked up in PATH. */
  readonly executable?: string | undefined
}

/**
 * The tool's command line: the prompt comes on stdin.
 *
 * @example
 * ```ts
 * import * as CodingAgent from "@corral/platform-node/CodingAgent"
 *
 * CodingAgent.argv({ kind: "codex", model: "gpt-5" })
 * // ["codex", "exec", "--json", "--model", "gpt-5", "-"]
 * ```
 * @since 0.1.0
 * @category commands
 */
export const argv = (options: Options): ReadonlyArray<string> => {
  const model = options.model === undefined ? [] : ["--model", options.model]
  const args = options.args ?? []
  return options.kind === "claude-code"
    ? [options.executable ?? "claude", "-p", "--output-format", "stream-json", "--verbose", ...model, ...args]
    : [options.executable ?? "codex", "exec", "--json", ...model, ...args, "-"]
}

/**
 * What one output line of the tool reports: usage, the final answer, or nothing.
 *
 * @since 0.1.0
 * @category models
 */
export interface LineReport {
  readonly usage?: Partial<Usage.Usage> | undefined
  readonly text?: string | undefined
}

const num = (value: unknown): number => (typeof value === "number" && Number.isFinite(value) ? value : 0)

const claudeLine = (event: Record<string, any>): LineReport | undefined => {
  if (event.type !== "result") return undefined
  const usage = event.usage ?? {}
  const inputTokens =
    num(usage.input_tokens) + num(usage.cache_creation_input_tokens) + num(usage.cache_read_input_tokens)
  return {
    usage: {
      inputTokens,
      outputTokens: num(usage.output_tokens),
      costUsd: num(event.total_cost_usd ?? event.cost_usd)
    },
    text: typeof event.result === "string" ? event.result : undefined
  }
}

const codexLine = (
  event: Record<string, any>,
  model: string | undefined,
  prices: Pricing.Table
): LineReport | undefined => {
  if (event.type === "turn.completed") {
    const usage = event.usage ?? {}
    const tokens: Pricing.Tokens = {
      inputTokens: num(usage.input_tokens),
      outputTokens: num(usage.output_tokens),
      cachedInputTokens: num(usage.cached_input_tokens)
    }
    const costUsd = model === undefined ? 0 : Pricing.usage(prices, model, tokens).costUsd
    return { usage: { inputTokens: tokens.inputTokens, outputTokens: tokens.outputTokens, costUsd } }
  }
  if (event.type === "item.completed" && event.item?.type === "agent_message" && typeof event.item.text === "string")
    return { text: event.item.text }
  return undefined
}

/**
 * Reads one line of the tool's JSON output. Lines that are not JSON objects report nothing.
 *
 * @example
 * ```ts
 * import * as CodingAgent from "@corral/platform-node/CodingAgent"
 *
 * CodingAgent.parseLine("codex", '{"type":"turn.completed","usage":{"input_tokens":10,"output_tokens":2}}')
 * // { usage: { inputTokens: 10, outputTokens: 2, costUsd: 0 } }
 * ```
 * @since 0.1.0
 * @category parsing
 */
export const parseLine = (
  kind: Kind,
  line: string,
  model?: string | undefined,
  prices: Pricing.Table = Pricing.defaults
): LineReport | undefined => {
  const trimmed = line.trim()
  if (!trimmed.startsWith("{")) return undefined
  let event: unknown
  try {
    event = JSON.parse(trimmed)
  } catch {
    return undefined
  }
  if (typeof event !== "object" || event === null) return undefined
  return kind === "claude-code"
    ? claudeLine(event as Record<string, any>)
    : codexLine(event as Record<string, any>, model, prices)
}

/**
 * The launcher script's path (`.ts` when running from source, `.js` when compiled).
 *
 * @since 0.1.0
 * @category commands
 */
export const launcherPath: string = NodePath.join(
  NodePath.dirname(fileURLToPath(import.meta.url)),
  "internal",
  `codingAgentLauncher${NodePath.extname(fileURLToPath(import.meta.url))}`
)

/**
 * Folders a sandboxed coding agent must be able to read to start the launcher: this Node binary's
 * folder and the folder holding corral's packages.
 *
 * @since 0.1.0
 * @category commands
 */
export const launcherReadPaths = (): ReadonlyArray<string> => [
  NodePath.dirname(NodeFs.realpathSync(process.execPath)),
  NodePath.resolve(NodePath.dirname(launcherPath), "..", "..", "..")
]

const quote = (arg: string): string => (/^[A-Za-z0-9_./=:@%+-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`)

/**
 * A shell command line that runs the tool under the launcher with this Node executable. The prompt
 * is not part of it: the launcher reads `$CORRAL_PROMPT_FILE`.
 *
 * @since 0.1.0
 * @category commands
 */
export const commandLine = (options: Options): string =>
  [
    process.execPath,
    launcherPath,
    options.kind,
    ...(options.model === undefined ? [] : [`--model=${options.model}`]),
    "--",
    ...argv(options)
  ]
    .map(quote)
    .join(" ")
