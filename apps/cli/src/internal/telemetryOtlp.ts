/**
 * The OTLP exporters behind `Telemetry.layer`, in their own module so that a run without an endpoint
 * does not load effect's HTTP client and OTLP modules at start-up.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as FetchHttpClient from "effect/http/FetchHttpClient"
import * as HttpClient from "effect/http/HttpClient"
import * as OtlpLogger from "effect/observability/OtlpLogger"
import * as OtlpSerialization from "effect/observability/OtlpSerialization"
import * as OtlpTracer from "effect/observability/OtlpTracer"
import type { Options, Resource } from "../Telemetry.ts"
import { shutdownTimeout } from "../Telemetry.ts"

const signalUrl = (endpoint: string, signal: "traces" | "logs"): string =>
  `${endpoint.replace(/\/+$/, "")}/v1/${signal}`

const otlpResource = (resource: Resource) => ({
  serviceName: resource.serviceName,
  serviceVersion: resource.serviceVersion,
  attributes: { "corral.run.id": resource.runId }
})

const tracesLayer = (endpoint: string, resource: Resource) =>
  OtlpTracer.layer({ url: signalUrl(endpoint, "traces"), resource: otlpResource(resource), shutdownTimeout })

const logsLayer = (endpoint: string, resource: Resource) =>
  OtlpLogger.layer({
    url: signalUrl(endpoint, "logs"),
    resource: otlpResource(resource),
    mergeWithExisting: true,
    shutdownTimeout
  })

const once = (warn: ((message: string) => void) | undefined) => {
  let told = false
  return (message: string) => {
    if (told || warn === undefined) return
    told = true
    warn(message)
  }
}

/** The fetch client, telling `warn` (once) about the first failed export. */
const httpLayer = (endpoint: string, warn: (message: string) => void) =>
  Layer.effect(
    HttpClient.HttpClient,
    Effect.map(Effect.service(HttpClient.HttpClient), (client) =>
      client.pipe(
        HttpClient.tap((response) =>
          Effect.sync(() => {
            if (response.status >= 400)
              warn(`exporting telemetry to ${endpoint} failed (HTTP ${response.status}); spans may be lost`)
          })
        ),
        HttpClient.tapError((error) =>
          Effect.sync(() => warn(`exporting telemetry to ${endpoint} failed (${error.message}); spans may be lost`))
        )
      )
    )
  ).pipe(Layer.provide(FetchHttpClient.layer))

/** The exporters for `endpoint`, sending through a fetch client that reports failed exports. */
export const otlpLayer = (endpoint: string, resource: Resource, options: Options): Layer.Layer<never> =>
  Layer.mergeAll(
    tracesLayer(endpoint, resource),
    options.logs === true ? logsLayer(endpoint, resource) : Layer.empty
  ).pipe(Layer.provide([httpLayer(endpoint, once(options.onExportError)), OtlpSerialization.layerJson]))
