import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import type { KeyClaim, Mode } from "../src/Claims.ts"
import { type HolderList, KeyTree } from "../src/internal/keyTree.ts"

const PATHS = [["a"], ["a", "b"], ["a", "b", "c"], ["a", "d"], ["e"], ["e", "f"]]

const claimOf = (path: number, mode: Mode): KeyClaim => ({
  key: PATHS[path]!.join("/"),
  segments: PATHS[path]!,
  mode
})

const overlaps = (a: ReadonlyArray<string>, b: ReadonlyArray<string>): boolean => {
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return false
  return true
}

const opArb = fc.record({
  add: fc.boolean(),
  holder: fc.integer({ min: 0, max: 5 }),
  path: fc.oneof(fc.constant(1), fc.integer({ min: 0, max: PATHS.length - 1 })),
  mode: fc.constantFrom<Mode>("read", "write")
})

describe("KeyTree", () => {
  it("property: holders of a key stay in the order they came, each once, and conflicts match a reference", () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 100 }), opArb, (ops, probe) => {
        const tree = new KeyTree<number>()
        // Reference: per key and mode, the holders in the order they came (a `Set`'s order).
        const held = new Map<string, { readonly claim: KeyClaim; readonly holders: Set<number> }>()
        for (const op of ops) {
          const claim = claimOf(op.path, op.mode)
          const id = `${claim.key} ${claim.mode}`
          const entry = held.get(id) ?? { claim, holders: new Set<number>() }
          held.set(id, entry)
          if (op.add) {
            // Callers never add a holder's claim twice (the tree counts each add).
            if (entry.holders.has(op.holder)) continue
            tree.add(op.holder, [claim])
            entry.holders.add(op.holder)
          } else {
            tree.remove(op.holder, [claim])
            entry.holders.delete(op.holder)
          }
        }
        const order = (mode: Mode) => (key: string) =>
          tree
            .entries()
            .filter((hit) => hit.key === key && hit.mode === mode)
            .map((hit) => hit.holder)
        for (const { claim, holders } of held.values()) {
          assert.deepStrictEqual(order(claim.mode)(claim.key), [...holders])
        }
        const asked = claimOf(probe.path, probe.mode)
        const expected: Array<string> = []
        for (const { claim, holders } of held.values()) {
          if (!overlaps(claim.segments, asked.segments)) continue
          if (claim.mode === "read" && asked.mode === "read") continue
          for (const holder of holders)
            if (holder !== probe.holder) expected.push(`${holder} ${claim.key} ${claim.mode}`)
        }
        const found = tree.conflicts([asked], probe.holder).map((hit) => `${hit.holder} ${hit.key} ${hit.mode}`)
        assert.deepStrictEqual(found.sort(), expected.sort())
        assert.strictEqual(tree.hasConflict([asked], probe.holder), expected.length > 0)
        // The gate's walks read the holder lists (`eachConflictSet`): the same holders and keys, in
        // `eachConflict`'s order.
        const each: Array<string> = []
        tree.eachConflict([asked], (holder, at) => each.push(`${holder} ${(at as { path: string }).path}`))
        const bySet: Array<string> = []
        tree.eachConflictSet([asked], (holders, at) => {
          for (let i = 0; i < holders.size; i++) bySet.push(`${holders.items[i]} ${(at as { path: string }).path}`)
        })
        assert.deepStrictEqual(bySet, each)
        assert.strictEqual(each.length, tree.conflicts([asked]).length)
        assert.strictEqual(
          tree.size,
          [...held.values()].reduce((n, entry) => n + entry.holders.size, 0)
        )
      }),
      { numRuns: 500 }
    )
  })
  it("property: a long holder list keeps its order and each holder's log position through removals at either end", () => {
    const stepArb = fc.oneof(
      { arbitrary: fc.integer({ min: 0, max: 79 }).map((holder) => ({ _tag: "add" as const, holder })), weight: 3 },
      { arbitrary: fc.nat({ max: 100 }).map((at) => ({ _tag: "remove" as const, at })), weight: 2 },
      { arbitrary: fc.constant({ _tag: "event" as const }), weight: 1 }
    )
    fc.assert(
      fc.property(fc.array(stepArb, { minLength: 200, maxLength: 800 }), (steps) => {
        const tree = new KeyTree<number>()
        const claim = claimOf(1, "write")
        // Reference: the holders in the order they came, each with the events since it came.
        const reference: Array<{ readonly holder: number; readonly events: Array<number> }> = []
        let mark = 0
        for (const step of steps) {
          if (step._tag === "add") {
            if (reference.some((entry) => entry.holder === step.holder)) continue
            tree.add(step.holder, [claim])
            reference.push({ holder: step.holder, events: [] })
          } else if (step._tag === "remove") {
            if (reference.length === 0) continue
            // Mostly the front or the back, as a key's holders and waiters leave.
            const at = step.at < 40 ? 0 : step.at < 70 ? reference.length - 1 : step.at % reference.length
            tree.remove(reference[at]!.holder, [claim])
            reference.splice(at, 1)
          } else {
            const event = ++mark
            tree.eachConflictSet([claim], (list) => list.log(event, event))
            for (const entry of reference) entry.events.push(event)
          }
        }
        const lists: Array<HolderList<number>> = []
        tree.eachConflictSet([claim], (list) => lists.push(list))
        const list = lists[0]
        if (reference.length === 0) return assert.isTrue(list === undefined || list.size === 0)
        assert.deepStrictEqual(
          list!.items.slice(0, list!.size),
          reference.map((entry) => entry.holder)
        )
        for (let i = 0; i < list!.size; i++) {
          const at = i
          assert.deepStrictEqual(list!.events.slice(list!.since[at], list!.eventCount), reference[i]!.events)
        }
      }),
      { numRuns: 300 }
    )
  })

  it("property: a holder list's log, counted from where each holder came, is what happened while it held the key", () => {
    const stepArb = fc.oneof(
      opArb.map((op) => ({ _tag: "op" as const, op })),
      fc
        .record({ path: fc.integer({ min: 0, max: PATHS.length - 1 }), mode: fc.constantFrom<Mode>("read", "write") })
        .map((probe) => ({ _tag: "event" as const, probe }))
    )
    fc.assert(
      fc.property(fc.array(stepArb, { minLength: 20, maxLength: 120 }), (steps) => {
        const tree = new KeyTree<number>()
        // Reference: per key, each holder's mode and the events on its list since it came.
        const logs = new Map<string, Map<number, { readonly mode: Mode; readonly events: Array<number> }>>()
        let mark = 0
        for (const step of steps) {
          if (step._tag === "op") {
            const { op } = step
            const claim = claimOf(op.path, op.mode)
            const holders =
              logs.get(claim.key) ?? new Map<number, { readonly mode: Mode; readonly events: Array<number> }>()
            logs.set(claim.key, holders)
            const known = holders.get(op.holder)
            if (op.add) {
              // A holder holds a key in one mode (requests are normalized).
              if (known !== undefined) continue
              tree.add(op.holder, [claim])
              holders.set(op.holder, { mode: op.mode, events: [] })
            } else if (known?.mode === op.mode) {
              tree.remove(op.holder, [claim])
              holders.delete(op.holder)
            }
            continue
          }
          // One event logged on each list conflicting with the probe, once however often it is met, as the gate logs a take.
          const event = ++mark
          const asked = claimOf(step.probe.path, step.probe.mode)
          const met = new Set<HolderList<number>>()
          tree.eachConflictSet([asked, asked], (list, at) => {
            list.log(event, event)
            if (met.has(list)) return
            met.add(list)
            const holders = logs.get((at as { path: string }).path)!
            for (let i = 0; i < list.size; i++) holders.get(list.items[i]!)!.events.push(event)
          })
        }
        for (const [key, holders] of logs) {
          const lists: Array<HolderList<number>> = []
          tree.eachConflictSet([{ key, segments: key.split("/"), mode: "write" }], (list, at) => {
            if ((at as { path: string }).path === key) lists.push(list)
          })
          for (const [holder, { events }] of holders) {
            const list = lists.find((list) => list.items.slice(0, list.size).includes(holder))!
            const at = list.items.indexOf(holder)
            assert.deepStrictEqual(list.events.slice(list.since[at], list.eventCount), events, `${key}: ${holder}`)
          }
        }
      }),
      { numRuns: 500 }
    )
  })
})
