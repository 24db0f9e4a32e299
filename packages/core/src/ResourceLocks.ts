/**
 * The lock layer behind resource claims. An implementation grants a whole claim set at once or
 * nothing, reports who holds what, and notifies schedulers when a lease is released.
 *
 * The default implementation is in memory and shared by every run in the process; other
 * implementations (a SQLite lease table, Postgres advisory locks) provide the same service.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import type * as Claims from "./Claims.ts"
import { LockTable, memoryTables, type Waiter } from "./internal/lockTable.ts"

/**
 * Who holds a lease: one agent of one run. Two runs never share or release each other's leases.
 *
 * @since 0.1.0
 * @category models
 */
export interface Holder {
  readonly runId: string
  readonly agentId: string
}

/**
 * A granted claim set. `fencingToken` increases with every grant, so systems written to can reject
 * a holder whose lease is older than one they have already seen.
 *
 * @since 0.1.0
 * @category models
 */
export interface Lease {
  readonly id: number
  readonly holder: Holder
  readonly request: Claims.Request
  readonly fencingToken: number
}

/**
 * Why a request cannot be granted now.
 *
 * @since 0.1.0
 * @category models
 */
export type Blocker =
  | {
      readonly _tag: "Key"
      readonly key: string
      readonly mode: Claims.Mode
      readonly holder: Holder
      readonly leaseId: number
    }
  | {
      readonly _tag: "Pool"
      readonly pool: string
      readonly holders: ReadonlyArray<Holder>
      readonly leaseIds: ReadonlyArray<number>
    }

/**
 * @since 0.1.0
 * @category models
 */
export type Attempt =
  | { readonly _tag: "Acquired"; readonly lease: Lease }
  | { readonly _tag: "Blocked"; readonly blockers: ReadonlyArray<Blocker> }

/**
 * @since 0.1.0
 * @category models
 */
export interface HeldClaim {
  readonly holder: Holder
  readonly key: string
  readonly mode: Claims.Mode
  readonly amount?: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Snapshot {
  readonly held: ReadonlyArray<HeldClaim>
  readonly waiting: ReadonlyArray<{ readonly holder: Holder; readonly request: Claims.Request }>
}

/**
 * The lock service.
 *
 * @example
 * ```ts
 * import { Claims, ResourceLocks } from "@corral/core"
 * import { Effect, Result } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const locks = yield* ResourceLocks.ResourceLocks
 *   const request = Result.getOrThrow(Claims.normalize({ write: ["src/parser.ts"] }, {}))
 *   yield* locks.acquire({ runId: "r1", agentId: "parser" }, request) // released with the scope
 * }).pipe(Effect.scoped, Effect.provide(ResourceLocks.layerMemory))
 * ```
 * @since 0.1.0
 * @category services
 */
export class ResourceLocks extends Context.Service<
  ResourceLocks,
  {
    readonly tryAcquire: (holder: Holder, request: Claims.Request) => Effect.Effect<Attempt>
    readonly acquire: (holder: Holder, request: Claims.Request) => Effect.Effect<Lease, never, Scope.Scope>
    readonly release: (lease: Lease) => Effect.Effect<void>
    readonly blockers: (request: Claims.Request) => Effect.Effect<ReadonlyArray<Blocker>>
    readonly snapshot: Effect.Effect<Snapshot>
    readonly onRelease: (listener: (lease: Lease) => void) => Effect.Effect<void, never, Scope.Scope>
  }
>()("@corral/core/ResourceLocks") {}

/**
 * Builds an in-memory lock service. Every operation is one synchronous step, so a claim set, its
 * pools and every key are taken atomically.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeMemory = (): ResourceLocks["Service"] => {
  const table = new LockTable()
  const acquireWait = (holder: Holder, request: Claims.Request) =>
    Effect.callback<Lease>((resume) => {
      let granted: Lease | undefined
      const waiter: Waiter = {
        holder,
        request,
        grant: (lease) => {
          granted = lease
          resume(Effect.succeed(lease))
        }
      }
      table.enqueue(waiter)
      return Effect.sync(() => {
        if (granted === undefined) table.dequeue(waiter)
        else table.release(granted)
      })
    })
  const service = ResourceLocks.of({
    tryAcquire: (holder, request) => Effect.sync(() => table.tryAcquire(holder, request)),
    acquire: (holder, request) =>
      Effect.acquireRelease(acquireWait(holder, request), (lease) => Effect.sync(() => table.release(lease)), {
        interruptible: true
      }),
    release: (lease) => Effect.sync(() => table.release(lease)),
    blockers: (request) => Effect.sync(() => table.blockers(request)),
    snapshot: Effect.sync(() => ({ held: table.held(), waiting: table.waiting() })),
    onRelease: (listener) =>
      Effect.acquireRelease(
        Effect.sync(() => table.subscribe(listener)),
        (unsubscribe) => Effect.sync(unsubscribe)
      ).pipe(Effect.asVoid)
  })
  memoryTables.set(service, table)
  return service
}

/**
 * A fresh in-memory lock service.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory: Layer.Layer<ResourceLocks> = Layer.sync(ResourceLocks, makeMemory)

/**
 * The in-memory lock service shared by runs that are not given one, so that two runs in one
 * process that claim the same key still serialize. Its default value is built once per process;
 * provide the reference to give a part of a program its own default.
 *
 * @since 0.1.0
 * @category references
 */
export const DefaultLocks: Context.Reference<ResourceLocks["Service"]> = Context.Reference<ResourceLocks["Service"]>(
  "@corral/core/ResourceLocks/DefaultLocks",
  { defaultValue: makeMemory }
)

/**
 * The lock service in context, or `DefaultLocks`.
 *
 * @since 0.1.0
 * @category accessors
 */
export const current: Effect.Effect<ResourceLocks["Service"]> = Effect.flatMap(
  Effect.serviceOption(ResourceLocks),
  (option) => (option._tag === "Some" ? Effect.succeed(option.value) : Effect.service(DefaultLocks))
)
