import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Agent from "../../src/Agent.ts"
import { addEntry, laidOutAsEntry, rebased } from "../../src/internal/frameContext.ts"

const A = Context.Service<{ readonly a: number }>("test/frameContext/A")
const B = Context.Service<{ readonly b: string }>("test/frameContext/B")
const key = Agent.CurrentRef.key

/** A context with `adds` services added one by one over a base of two (overlays, then a flattened map). */
const contextOf = (adds: number, maxDepth?: number): Context.Context<never> => {
  let context = Context.makeUnsafe<never>(
    new Map<string, unknown>([
      [A.key, { a: 1 }],
      [B.key, { b: "b" }]
    ]),
    maxDepth === undefined ? undefined : { maxDepth }
  )
  for (let i = 0; i < adds; i++) context = Context.addUnsafe(context, `test/frameContext/extra${i % 3}`, i)
  return context
}

const fields = (context: object): Array<[string, unknown]> =>
  Object.keys(context).map((name) => [name, (context as Record<string, unknown>)[name]])

describe("addEntry", () => {
  it("finds this effect's context laid out as it builds one (else it would fall back to Context.addUnsafe)", () => {
    expect(laidOutAsEntry).toBe(true)
  })

  it("builds what Context.addUnsafe builds: prototype, own fields in order, cache root, lookups", () => {
    fc.assert(
      fc.property(fc.nat(20), fc.option(fc.nat(10), { nil: undefined }), (adds, maxDepth) => {
        const context = contextOf(adds, maxDepth)
        const value = { frame: adds }
        const ours = addEntry(context, key, value) as unknown as Record<string, unknown>
        const theirs = Context.addUnsafe(context, key, value) as unknown as Record<string, unknown>
        expect(Object.getPrototypeOf(ours)).toBe(Object.getPrototypeOf(theirs))
        expect(Object.keys(ours)).toEqual(Object.keys(theirs))
        for (const name of ["cacheRoot", "base", "depth", "_flat", "baseHits", "maxDepth"]) {
          if (ours.overlay === undefined || name !== "base") expect(ours[name]).toStrictEqual(theirs[name])
        }
        if (theirs.overlay === undefined) expect(ours.overlay).toBeUndefined()
        else expect(fields(ours.overlay as object)).toEqual(fields(theirs.overlay as object))
        const mine = ours as unknown as Context.Context<never>
        const effects = theirs as unknown as Context.Context<never>
        expect(Context.getOrUndefined(mine, Agent.CurrentRef)).toBe(value)
        expect([...mine.mapUnsafe]).toEqual([...effects.mapUnsafe])
        expect([...Context.addUnsafe(mine, "test/frameContext/later", 1).mapUnsafe]).toEqual([
          ...Context.addUnsafe(effects, "test/frameContext/later", 1).mapUnsafe
        ])
      }),
      { numRuns: 200 }
    )
  })

  it("makes its overlay entry with a constructor, never with an object literal (which V8 may pretenure)", () => {
    const context = contextOf(2)
    const overlay = (addEntry(context, key, { frame: 1 }) as unknown as { readonly overlay: object }).overlay
    expect(Object.getPrototypeOf(overlay)).not.toBe(Object.prototype)
  })

  it("serves the frame to an effect running with the context", () => {
    const frame = { frame: 1 } as unknown as Agent.Frame
    const context = addEntry(contextOf(1), key, frame) as Context.Context<never>
    const read = Effect.runSync(Effect.provideContext(Effect.service(Agent.CurrentRef), context))
    expect(read).toBe(frame)
  })
})

describe("rebased", () => {
  it("flattens a context holding maxDepth overlays as Context.addUnsafe would, keeping its cache root; any other is kept", () => {
    fc.assert(
      fc.property(fc.nat(20), fc.option(fc.nat(10), { nil: undefined }), (adds, maxDepth) => {
        const context = contextOf(adds, maxDepth)
        const impl = context as unknown as Record<string, unknown>
        const flat = rebased(context)
        const ours = flat as unknown as Record<string, unknown>
        if ((impl.depth as number) < (impl.maxDepth as number)) {
          expect(flat).toBe(context)
          return
        }
        expect(Object.getPrototypeOf(ours)).toBe(Object.getPrototypeOf(impl))
        expect(Object.keys(ours)).toEqual(Object.keys(impl))
        expect([ours.cacheRoot, ours.depth, ours.overlay, ours.maxDepth]).toEqual([
          impl.cacheRoot,
          0,
          undefined,
          impl.maxDepth
        ])
        expect([...flat.mapUnsafe]).toEqual([...context.mapUnsafe])
        const value = { frame: adds }
        const bound = addEntry(flat, key, value) as unknown as Record<string, unknown>
        if ((impl.maxDepth as number) > 0) expect([bound.depth, bound.base === ours.base]).toEqual([1, true])
        expect([...(bound as unknown as Context.Context<never>).mapUnsafe]).toEqual([
          ...Context.addUnsafe(context, key, value).mapUnsafe
        ])
      }),
      { numRuns: 200 }
    )
  })
})
