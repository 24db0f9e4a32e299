/**
 * Optional OpenTelemetry export for a run: traces (and, on request, logs) sent over OTLP/HTTP JSON
 * with effect's native `Otlp` exporters, no OpenTelemetry SDK. Off unless an endpoint is given.
 *
 * @since 0.1.0
 */
import { Layer, Option } from "effect"
import { FetchHttpClient } from "effect/http"
import { OtlpLogger, OtlpSerialization, OtlpTracer } from "effect/observability"

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
}

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

const signalUrl = (endpoint: string, signal: "traces" | "logs"): string =>
  `${endpoint.replace(/\/+$/, "")}/v1/${signal}`

const otlpResource = (resource: Resource) => ({
  serviceName: resource.serviceName,
  serviceVersion: resource.serviceVersion,
  attributes: { "corral.run.id": resource.runId }
})

const tracesLayer = (endpoint: string, resource: Resource) =>
  OtlpTracer.layer({ url: signalUrl(endpoint, "traces"), resource: otlpResource(resource) })

const logsLayer = (endpoint: string, resource: Resource) =>
  OtlpLogger.layer({ url: signalUrl(endpoint, "logs"), resource: otlpResource(resource), mergeWithExisting: true })

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
    : Layer.mergeAll(
        tracesLayer(endpoint, resource),
        options.logs === true ? logsLayer(endpoint, resource) : Layer.empty
      ).pipe(Layer.provide([FetchHttpClient.layer, OtlpSerialization.layerJson]))
