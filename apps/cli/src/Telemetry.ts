/**
 * Optional OpenTelemetry export for a run: traces (and, on request, logs) sent over OTLP/HTTP JSON
 * with effect's native `Otlp` exporters, no OpenTelemetry SDK. Off unless an endpoint is given; the
 * exporters' modules are loaded only then.
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as NodeNet from "node:net"

/**
 * What the exported telemetry describes: the `service.name` and the run it belongs to.
 *
 * @since 0.1.0
 * @category models
 */
export interface Resource {
  readonly serviceName: "corral"
  readonly runId: string
  readonly serviceVersion?: string | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Also export log records to `<endpoint>/v1/logs`. Default `false`. */
  readonly logs?: boolean | undefined
  /** Told once when an export fails (the collector is down or refuses the data). */
  readonly onExportError?: ((message: string) => void) | undefined
}

/**
 * The longest corral waits at exit for the last spans to reach the collector.
 *
 * @since 0.1.0
 * @category constants
 */
export const shutdownTimeout = Duration.seconds(2)

/**
 * The standard OpenTelemetry environment variable naming the collector's base URL.
 *
 * @since 0.1.0
 * @category constants
 */
export const endpointEnv = "OTEL_EXPORTER_OTLP_ENDPOINT"

/**
 * The OTLP endpoint to export to: the flag, else `OTEL_EXPORTER_OTLP_ENDPOINT`, else none.
 * Blank values count as absent.
 *
 * @example
 * ```ts
 * import { Option } from "effect"
 * import * as Telemetry from "./Telemetry.ts"
 *
 * Telemetry.endpointFrom(Option.none(), { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318" })
 * // "http://127.0.0.1:4318"
 * ```
 * @since 0.1.0
 * @category resolving
 */
export const endpointFrom = (
  flag: Option.Option<string>,
  env: Readonly<Record<string, string | undefined>>
): string | undefined => nonBlank(Option.getOrUndefined(flag)) ?? nonBlank(env[endpointEnv])

const nonBlank = (value: string | undefined): string | undefined => {
  const trimmed = value?.trim()
  return trimmed === undefined || trimmed === "" ? undefined : trimmed
}

/**
 * Exports the spans of everything it is provided to (`corral.run`, `corral.agent`, ...) to
 * `<endpoint>/v1/traces` as OTLP/HTTP JSON, and flushes them when the layer closes. With
 * `{ logs: true }` it also exports log records to `<endpoint>/v1/logs`. When `endpoint` is
 * `undefined` it is `Layer.empty`: nothing is built and spans stay on the native tracer.
 *
 * @example
 * ```ts
 * import { Agent, Corral } from "@corral/core"
 * import { Effect, Option } from "effect"
 * import * as Telemetry from "./Telemetry.ts"
 *
 * const agents = [Agent.make("a", { run: Effect.succeed(1) })]
 * const runId = "r1"
 * const endpoint = Telemetry.endpointFrom(Option.none(), process.env)
 * const program = Corral.run(agents, { runId }).pipe(
 *   Effect.provide(Telemetry.layer(endpoint, { serviceName: "corral", runId }))
 * )
 * ```
 * @since 0.1.0
 * @category layers
 */
export const layer = (endpoint: string | undefined, resource: Resource, options: Options = {}): Layer.Layer<never> =>
  endpoint === undefined
    ? Layer.empty
    : Layer.unwrap(
        Effect.map(
          Effect.promise(() => import("./internal/telemetryOtlp.ts")),
          (otlp) => otlp.otlpLayer(endpoint, resource, options)
        )
      )

const reachable = (endpoint: string, timeoutMs: number): Effect.Effect<string | undefined> =>
  Effect.callback<string | undefined>((resume) => {
    let url: URL
    try {
      url = new URL(endpoint)
    } catch {
      resume(Effect.succeed("not a URL"))
      return
    }
    const port = Number(url.port || (url.protocol === "https:" ? 443 : 80))
    const socket = NodeNet.connect({ host: url.hostname.replace(/^\[|\]$/g, ""), port })
    const done = (problem: string | undefined) => {
      socket.destroy()
      resume(Effect.succeed(problem))
    }
    socket.setTimeout(timeoutMs, () => done(`no answer within ${timeoutMs} ms`))
    socket.once("connect", () => done(undefined))
    socket.once("error", (error: NodeJS.ErrnoException) => done(error.code ?? error.message))
    return Effect.sync(() => socket.destroy())
  })

/**
 * {@link layer}, after checking that the collector accepts connections (within one second): when
 * it does not, `onExportError` is told once and nothing is exported, so an unreachable collector
 * costs neither retries during the run nor a flush at exit.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerChecked = (
  endpoint: string | undefined,
  resource: Resource,
  options: Options = {}
): Layer.Layer<never> =>
  endpoint === undefined
    ? Layer.empty
    : Layer.unwrap(
        Effect.map(reachable(endpoint, 1000), (problem) => {
          if (problem === undefined) return layer(endpoint, resource, options)
          options.onExportError?.(
            `cannot reach the OTLP collector at ${endpoint} (${problem}); this run's spans are not exported`
          )
          return Layer.empty
        })
      )
