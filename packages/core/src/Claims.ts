/**
 * What an agent needs while it runs: shared (`read`) or exclusive (`write`) access to resource keys,
 * and amounts from counted pools.
 *
 * Keys are relative paths (`src/parser.ts`, `src/` for a whole folder) or named resources
 * (`db:users`, `file:summary.md`; `db:`, with no name, is refused). Path keys are hierarchical: a claim on `src/` covers everything
 * below it. Reads never conflict with reads.
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"
import * as Result from "effect/Result"

/**
 * Claims declared on an agent.
 *
 * @example
 * ```ts
 * import { Claims } from "@corral/core"
 *
 * const claims: Claims.Claims = { write: ["src/parser.ts"], read: ["src/types.ts"], pools: { llm: 1 } }
 * ```
 * @since 0.1.0
 * @category models
 */
export interface Claims {
  readonly read?: ReadonlyArray<string> | undefined
  readonly write?: ReadonlyArray<string> | undefined
  readonly pools?: Readonly<Record<string, number>> | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export type Mode = "read" | "write"

/**
 * A normalized key claim: `segments` locate the key in the resource tree.
 *
 * @since 0.1.0
 * @category models
 */
export interface KeyClaim {
  readonly key: string
  readonly segments: ReadonlyArray<string>
  readonly mode: Mode
}

/**
 * A counted pool claim. The capacity travels with the request so that pools can be scoped to a run.
 *
 * @since 0.1.0
 * @category models
 */
export interface PoolClaim {
  readonly pool: string
  readonly amount: number
  readonly capacity: number
}

/**
 * Claims after validation and normalization, ready for a lock layer.
 *
 * @since 0.1.0
 * @category models
 */
export interface Request {
  readonly keys: ReadonlyArray<KeyClaim>
  readonly pools: ReadonlyArray<PoolClaim>
}

/**
 * A claim that cannot be normalized: an empty key, an absolute path, a `..` escape, an unknown pool
 * or an amount larger than the pool.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidClaim extends Data.TaggedError("InvalidClaim")<{
  readonly key: string
  readonly reason: string
}> {
  override get message() {
    return `invalid claim ${JSON.stringify(this.key)}: ${this.reason}`
  }
}

const namedResource = /^[A-Za-z][A-Za-z0-9+._-]*:\S/
const unnamedResource = /^[A-Za-z][A-Za-z0-9+._-]*:$/
const windowsAbsolute = /^[A-Za-z]:[\\/]/

/**
 * Normalizes one key: `./src//a.ts` becomes `src/a.ts`, `src` and `src/` address the same folder.
 *
 * @example
 * ```ts
 * import { Claims } from "@corral/core"
 *
 * Claims.normalizeKey("./src//parser.ts") // Result.succeed({ key: "src/parser.ts", segments: ["src", "parser.ts"] })
 * ```
 * @since 0.1.0
 * @category normalization
 */
export const normalizeKey = (
  raw: string
): Result.Result<{ readonly key: string; readonly segments: ReadonlyArray<string> }, InvalidClaim> => {
  const trimmed = raw.trim()
  if (trimmed.length === 0) return Result.fail(new InvalidClaim({ key: raw, reason: "keys must not be empty" }))
  if (trimmed.startsWith("/") || trimmed.startsWith("\\") || windowsAbsolute.test(trimmed)) {
    return Result.fail(
      new InvalidClaim({ key: raw, reason: "absolute paths are not allowed; use a path relative to the repository" })
    )
  }
  if (namedResource.test(trimmed)) return Result.succeed({ key: trimmed, segments: [trimmed] })
  if (unnamedResource.test(trimmed)) {
    return Result.fail(
      new InvalidClaim({ key: raw, reason: `a named resource needs a name after ":", like "${trimmed}users"` })
    )
  }
  const segments: Array<string> = []
  for (const part of trimmed.split(/[\\/]+/)) {
    if (part === "" || part === ".") continue
    if (part === "..") {
      if (segments.length === 0) {
        return Result.fail(new InvalidClaim({ key: raw, reason: "the path escapes the repository with '..'" }))
      }
      segments.pop()
      continue
    }
    segments.push(part)
  }
  if (segments.length === 0) {
    return Result.fail(
      new InvalidClaim({ key: raw, reason: "the path names the repository root; claim a folder or file inside it" })
    )
  }
  const folder = trimmed.endsWith("/") || trimmed.endsWith("\\")
  return Result.succeed({ key: segments.join("/") + (folder ? "/" : ""), segments })
}

/**
 * Validates and normalizes declared claims against the pool capacities of a run.
 * `scope` prefixes pool names so that pools of different runs never mix.
 *
 * @since 0.1.0
 * @category normalization
 */
export const normalize = (
  claims: Claims,
  capacities: Readonly<Record<string, number>>,
  scope = ""
): Result.Result<Request, InvalidClaim> => {
  const request = toRequest(claims, capacities, scope)
  return request instanceof InvalidClaim ? Result.fail(request) : Result.succeed(request)
}

/**
 * `normalize`'s answer without its `Result`, for a run that normalizes the claims of every agent.
 *
 * @internal
 */
export const toRequest = (
  claims: Claims,
  capacities: Readonly<Record<string, number>>,
  scope = ""
): Request | InvalidClaim => {
  const keys = keyClaims(claims.write, claims.read)
  if (keys instanceof InvalidClaim) return keys
  if (claims.pools === undefined) return { keys, pools: noPools }
  const pools = poolClaims(claims.pools, capacities, scope)
  return pools instanceof InvalidClaim ? pools : { keys, pools }
}

/**
 * The claims of the keys written, then read, in a list made at its final length, each key once. A
 * hole in a list is skipped, as a run's check of the claims' shape skips it.
 */
const keyClaims = (
  write: ReadonlyArray<string> | undefined,
  read: ReadonlyArray<string> | undefined
): ReadonlyArray<KeyClaim> | InvalidClaim => {
  const writes = write === undefined ? 0 : write.length
  const total = writes + (read === undefined ? 0 : read.length)
  if (total === 0) return noKeys
  const keys: Array<KeyClaim> = new Array(total)
  let count = 0
  for (let i = 0; i < total; i++) {
    const raw = i < writes ? write![i] : read![i - writes]
    if (raw === undefined) continue
    const claim = keyClaim(raw, i < writes ? "write" : "read")
    if (claim instanceof InvalidClaim) return claim
    keys[count++] = claim
  }
  if (count < total) keys.length = count
  return dedupe(keys)
}

const poolClaims = (
  given: Readonly<Record<string, number>>,
  capacities: Readonly<Record<string, number>>,
  scope: string
): ReadonlyArray<PoolClaim> | InvalidClaim => {
  const pools: Array<PoolClaim> = []
  for (const [pool, amount] of Object.entries(given)) {
    const capacity = capacities[pool]
    if (capacity === undefined) {
      const known = Object.keys(capacities)
      return new InvalidClaim({
        key: pool,
        reason: `unknown pool; the run configures ${known.length ? known.map((k) => `"${k}"`).join(", ") : "no pools"}`
      })
    }
    if (!Number.isInteger(amount) || amount < 1) {
      return new InvalidClaim({ key: pool, reason: `pool amounts must be positive integers, got ${amount}` })
    }
    if (amount > capacity) {
      return new InvalidClaim({ key: pool, reason: `asks for ${amount} but the pool holds ${capacity}` })
    }
    pools.push({ pool: scope + pool, amount, capacity })
  }
  return pools
}

/** The pools of a request that claims none: one shared list, never written. */
const noPools: ReadonlyArray<PoolClaim> = []

/** The keys of a request that claims none: one shared list, never written. */
const noKeys: ReadonlyArray<KeyClaim> = []

/**
 * The claim of `raw` in `mode`, with `normalizeKey`'s successes kept (at most `keyCacheSize` keys,
 * then the cache starts over): every run normalizes the claims of all its agents, and agents of a
 * run name the same keys again and again. The kept claims, and their segments, are shared by the
 * requests that name the key; nothing writes them.
 */
const keyClaim = (raw: string, mode: Mode): KeyClaim | InvalidClaim => {
  let hit = keyCache.get(raw)
  if (hit === undefined) {
    const normalized = normalizeKey(raw)
    if (Result.isFailure(normalized)) return normalized.failure
    if (keyCache.size >= keyCacheSize) keyCache.clear()
    hit = { key: normalized.success.key, segments: normalized.success.segments, write: undefined, read: undefined }
    keyCache.set(raw, hit)
  }
  return mode === "write"
    ? (hit.write ??= { key: hit.key, segments: hit.segments, mode })
    : (hit.read ??= { key: hit.key, segments: hit.segments, mode })
}

interface CachedKey {
  readonly key: string
  readonly segments: ReadonlyArray<string>
  write: KeyClaim | undefined
  read: KeyClaim | undefined
}

const keyCache = new Map<string, CachedKey>()
const keyCacheSize = 4096

/**
 * One claim per key (a write wins over a read), in the order each key was first named: `keys` itself
 * when every key is named once (the usual request), else a new list.
 */
const dedupe = (keys: Array<KeyClaim>): ReadonlyArray<KeyClaim> => {
  if (keys.length <= 1) return keys
  if (keys.length <= 16) {
    if (distinct(keys)) return keys
    const out: Array<KeyClaim> = []
    for (const claim of keys) {
      let i = 0
      while (i < out.length && !sameSegments(out[i]!.segments, claim.segments)) i++
      if (i === out.length) out.push(claim)
      else if (out[i]!.mode === "read" && claim.mode === "write") out[i] = claim
    }
    return out
  }
  const byKey = new Map<string, KeyClaim>()
  for (const claim of keys) {
    const id = claim.segments.join("\u0000")
    const seen = byKey.get(id)
    if (seen === undefined || (seen.mode === "read" && claim.mode === "write")) byKey.set(id, claim)
  }
  return [...byKey.values()]
}

/** Whether no two of a few claims name the same key (then `dedupe` keeps them as they are). */
const distinct = (keys: ReadonlyArray<KeyClaim>): boolean => {
  for (let i = 1; i < keys.length; i++) {
    const segments = keys[i]!.segments
    for (let j = 0; j < i; j++) if (sameSegments(keys[j]!.segments, segments)) return false
  }
  return true
}

/**
 * `true` when the request asks for nothing.
 *
 * @since 0.1.0
 * @category predicates
 */
export const isEmpty = (request: Request): boolean => request.keys.length === 0 && request.pools.length === 0

const sameSegments = (a: ReadonlyArray<string>, b: ReadonlyArray<string>): boolean =>
  a.length === b.length && overlaps(a, b)

const overlaps = (a: ReadonlyArray<string>, b: ReadonlyArray<string>): boolean => {
  const n = Math.min(a.length, b.length)
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return false
  return true
}

/**
 * Whether two requests can never hold at the same time: overlapping keys where at least one writes.
 * Pools are ignored (they conflict only by capacity).
 *
 * @since 0.1.0
 * @category predicates
 */
export const conflicts = (a: Request, b: Request): ReadonlyArray<string> => {
  const found: Array<string> = []
  for (const x of a.keys) {
    for (const y of b.keys) {
      if ((x.mode === "write" || y.mode === "write") && overlaps(x.segments, y.segments)) {
        found.push(x.segments.length >= y.segments.length ? x.key : y.key)
      }
    }
  }
  return found
}
