/**
 * What a run reads from its caller's context: the clock, `Random`, the tracer, the rate limiter,
 * the lock services, the log annotations, the ledger and the enclosing agent.
 *
 * A context never changes, so these are read once per context for runs outside any agent and kept
 * beside it (a `WeakMap`, dropped with the context): a program's runs usually share one context
 * (every `Effect.runPromise` of the default one does), and each such run then does one lookup
 * instead of nine. The runs of a 3 × 100 ms case start after an idle wait, when every distinct read
 * is a cache miss: the run's steps before validation took ≈ 0.035 ms with the nine lookups, ≈ 0.015
 * ms with one (of ≈ 0.15 ms before the first agent's timer). Runs nested in an agent read theirs
 * every time: each agent's context is its own.
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import type * as Fiber from "effect/Fiber"
import * as Random from "effect/Random"
import * as References from "effect/References"
import * as Tracer from "effect/Tracer"
import * as AgentModule from "../Agent.ts"
import * as Ledger from "../Ledger.ts"
import * as RateLimiter from "../RateLimiter.ts"
import * as ResourceLocks from "../ResourceLocks.ts"
import { logAnnotations } from "./annotations.ts"

export interface Caller {
  readonly clock: Clock.Clock
  readonly random: Random.Random
  readonly tracing: boolean
  /** The rate limiter in the caller's context (the run's own `rateLimits` are added over it). */
  readonly limiter: RateLimiter.Service | undefined
  /** The enclosing agent: a run nested in one never comes from the cache. */
  readonly parent: AgentModule.Frame | undefined
  /** The lock service in context, or `DefaultLocks` (read only for a run outside any agent). */
  readonly locks: ResourceLocks.ResourceLocks["Service"] | undefined
  readonly annotations: Readonly<Record<string, unknown>>
  /** The annotations the run's agents log with (`logAnnotations` of `annotations`). */
  readonly logAnnotations: Readonly<Record<string, unknown>>
  readonly ledger: Ledger.Service | undefined
}

const cache = new WeakMap<Context.Context<never>, Caller>()

/** What a run started on `fiber` reads from its context. */
export const callerOf = (fiber: Fiber.Fiber<unknown, unknown>): Caller => {
  const context = fiber.context
  const cached = cache.get(context)
  if (cached !== undefined) return cached
  const caller = read(fiber, context)
  if (caller.parent === undefined) cache.set(context, caller)
  return caller
}

const read = (fiber: Fiber.Fiber<unknown, unknown>, context: Context.Context<never>): Caller => {
  const parent = fiber.getRef(AgentModule.CurrentRef)
  const locks = Context.getOrUndefined(context, ResourceLocks.ResourceLocks)
  const annotations = fiber.getRef(References.CurrentLogAnnotations)
  return {
    clock: fiber.getRef(Clock.Clock),
    random: fiber.getRef(Random.Random),
    tracing: fiber.getRef(Tracer.Tracer) !== Tracer.nativeTracer,
    limiter: Context.getOrUndefined(context, RateLimiter.RateLimiter),
    parent,
    locks: parent === undefined ? (locks ?? fiber.getRef(ResourceLocks.DefaultLocks)) : locks,
    annotations,
    logAnnotations: logAnnotations(annotations),
    ledger: Context.getOrUndefined(context, Ledger.Ledger)
  }
}
