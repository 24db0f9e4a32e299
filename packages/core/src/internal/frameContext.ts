/**
 * A context with one more service, built as `Context.addUnsafe` builds it, for the per-agent binding
 * of a run (`bind` in `execute.ts`).
 *
 * `Context.addUnsafe` keeps an added service in an overlay entry made by an object literal. V8
 * tracks an object literal by its allocation site and, once most objects of a site survive a
 * collection, allocates every later object of that site in the old generation ("pretenuring"). A
 * mark-compact in the middle of a large run is enough: every running agent's entry is alive then.
 * From then on each agent's entry is born old and refers to the agent's young node, so every
 * scavenge keeps the node alive (through the old-to-new remembered set) until the next
 * mark-compact, and copies and promotes it: at 1M yielding agents ≈ 10 MB promoted and 136–212 ms
 * of single-threaded scavenging per 100k agents (docs/development.md, session 25). An object made by
 * `new` of a function has no allocation site, so the entry made here is always born young and dies
 * young with the node.
 */
import * as Context from "effect/Context"

/** The fields of effect's context (`makeImpl` in effect's `Context.js`), in its order. */
interface ContextImpl {
  cacheRoot: ContextImpl
  base: unknown
  overlay: Entry | object | undefined
  depth: number
  _flat: unknown
  baseHits: number
  maxDepth: number
}

/** An overlay entry: the fields and order of effect's literal `{ key, value, parent }`. */
class Entry {
  declare readonly key: string
  declare readonly value: unknown
  declare readonly parent: unknown

  constructor(key: string, value: unknown, parent: unknown) {
    this.key = key
    this.value = value
    this.parent = parent
  }
}

const contextProto: object = Object.getPrototypeOf(Context.empty())

const contextFields = ["cacheRoot", "base", "overlay", "depth", "_flat", "baseHits", "maxDepth"]
const entryFields = ["key", "value", "parent"]

const sameNames = (value: unknown, names: ReadonlyArray<string>): boolean =>
  typeof value === "object" && value !== null && Object.getOwnPropertyNames(value).join() === names.join()

/**
 * Whether this effect's `Context.addUnsafe` lays a context and its overlay entry out as `build`
 * does: core accepts any effect `^4.1.0`, and under a version that does otherwise `addEntry` is
 * `Context.addUnsafe` itself (pinned by `test/internal/frameContext.test.ts`).
 */
export const laidOutAsEntry: boolean = (() => {
  const probe = Context.addUnsafe(Context.empty(), "@corral/core/frameContext/probe", 0) as unknown as Record<
    string,
    unknown
  >
  return (
    Object.getPrototypeOf(probe) === contextProto &&
    sameNames(probe, contextFields) &&
    sameNames(probe.overlay, entryFields) &&
    probe.depth === 1
  )
})()

/**
 * `Context.addUnsafe(context, key, value)` for a `key` that is not fiber-cached (an added service of
 * such a key keeps the context's cache root), with the entry made by `Entry`. A context that already
 * holds `maxDepth` overlays is flattened by `Context.addUnsafe` itself.
 */
export const addEntry = <Services, S>(
  context: Context.Context<Services>,
  key: string,
  value: S
): Context.Context<Services | S> => {
  const impl = context as unknown as ContextImpl
  if (!laidOutAsEntry || impl.depth >= impl.maxDepth) {
    return Context.addUnsafe<Services, never, S>(context, key, value) as never
  }
  const self = Object.create(contextProto) as ContextImpl
  self.cacheRoot = impl.cacheRoot
  self.base = impl.base
  self.overlay = new Entry(key, value, impl.overlay)
  self.depth = impl.depth + 1
  self._flat = undefined
  self.baseHits = 0
  self.maxDepth = impl.maxDepth
  return self as unknown as Context.Context<Services | S>
}

/**
 * `context` with its overlays applied to one map, when it already holds `maxDepth` of them: a run's
 * worker context that deep (a run nested in agents, each level adding two) would have every agent's
 * `addEntry` copy the whole map, so the run copies it once. The result keeps `context`'s cache root
 * (it holds the same services); any other context is returned as it is.
 */
export const rebased = <Services>(context: Context.Context<Services>): Context.Context<Services> => {
  const impl = context as unknown as ContextImpl
  if (!laidOutAsEntry || impl.depth < impl.maxDepth) return context
  const self = Object.create(contextProto) as ContextImpl
  self.cacheRoot = impl.cacheRoot
  self.base = context.mapUnsafe
  self.overlay = undefined
  self.depth = 0
  self._flat = undefined
  self.baseHits = 0
  self.maxDepth = impl.maxDepth
  return self as unknown as Context.Context<Services>
}
