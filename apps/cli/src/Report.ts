/**
 * Reports people can look at: a recorded run rendered as one self-contained HTML page (header,
 * timeline, outcome table) or as a Chrome trace-event file for Perfetto / chrome://tracing.
 *
 * @since 0.1.0
 */
import type { RunRecord } from "@corral/platform-node/RunRecord"
import { page } from "./internal/reportHtml.ts"
import { traceOf } from "./internal/reportTrace.ts"

/**
 * One event of the Chrome Trace Event Format: a complete slice (`X`), an instant (`i`) or
 * metadata naming a process or thread (`M`). Times are microseconds since the run started.
 *
 * @since 0.1.0
 * @category models
 */
export type TraceEvent =
  | {
      readonly ph: "X"
      readonly name: string
      readonly cat: string
      readonly pid: number
      readonly tid: number
      readonly ts: number
      readonly dur: number
      readonly args: Record<string, unknown>
    }
  | {
      readonly ph: "i"
      readonly s: "t" | "p" | "g"
      readonly name: string
      readonly cat: string
      readonly pid: number
      readonly tid: number
      readonly ts: number
      readonly args: Record<string, unknown>
    }
  | {
      readonly ph: "M"
      readonly name: "process_name" | "thread_name" | "thread_sort_index"
      readonly pid: number
      readonly tid: number
      readonly args: Record<string, unknown>
    }

/**
 * A trace file in the JSON object form of the Trace Event Format.
 *
 * @since 0.1.0
 * @category models
 */
export interface TraceFile {
  readonly traceEvents: ReadonlyArray<TraceEvent>
  readonly displayTimeUnit: "ms"
  readonly otherData: Record<string, string | number>
}

/**
 * Renders a run as one self-contained HTML page (inline CSS, no scripts, no external assets):
 * a header, a timeline with one `.bar[data-agent]` per agent showing waits, running time,
 * failed attempts, the outcome and the critical path, and an outcome table.
 *
 * Use it for `corral report` or to attach a run to an issue; open the file in any browser.
 *
 * @example
 * ```ts
 * import type { RunRecord } from "@corral/platform-node/RunRecord"
 * import { writeFileSync } from "node:fs"
 * import * as Report from "./Report.ts"
 *
 * declare const run: RunRecord // from RunLedger's getRun
 * writeFileSync("run.html", Report.html(run))
 * ```
 *
 * @since 0.1.0
 * @category rendering
 */
export const html = (run: RunRecord): string => page(run)

/**
 * Converts a run to Chrome trace-event JSON: one thread per agent (named by `M` events), one
 * `X` slice for the agent with its spans nested inside (`cat` = span kind) and an `i` instant
 * at every failed attempt. Load it in https://ui.perfetto.dev or chrome://tracing.
 *
 * @example
 * ```ts
 * import type { RunRecord } from "@corral/platform-node/RunRecord"
 * import { writeFileSync } from "node:fs"
 * import * as Report from "./Report.ts"
 *
 * declare const run: RunRecord // from RunLedger's getRun
 * writeFileSync("run.trace.json", JSON.stringify(Report.trace(run)))
 * ```
 *
 * @since 0.1.0
 * @category rendering
 */
export const trace = (run: RunRecord): TraceFile => traceOf(run)
