import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { hotShards, Placement, type RunnerView, type Ticket } from "../../src/internal/placement.ts"

/** The same hash `effect/cluster` uses is not exported; any deterministic spread over 300 shards will do. */
const shardOf = (entityId: string) => {
  let h = 5381
  for (let i = 0; i < entityId.length; i++) h = Math.imul(h, 33) ^ entityId.charCodeAt(i)
  return (Math.abs(h) % 300) + 1
}

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i)

const runner = (address: string, capacity: number, shards: Record<string, ReadonlyArray<number>>): RunnerView => ({
  address,
  capacity,
  shards
})

const idOf = (agent: string) => (salt: number) => `run/${agent}~${salt}`

const place = (placement: Placement, agent: string, group = "default") => {
  const ticket = placement.tryPlace(group, idOf(agent))
  if (ticket === "full") throw new Error(`${agent}: every runner is full`)
  return ticket
}

describe("Placement", () => {
  it("fills the runner with the most free slots and never a full one (capacities 1 and 3)", () => {
    const placement = new Placement((id) => shardOf(id))
    placement.setView([runner("a", 1, { default: range(1, 150) }), runner("b", 3, { default: range(151, 300) })])
    const tickets = ["x0", "x1", "x2", "x3"].map((agent) => place(placement, agent))
    const on = (address: string) => tickets.filter((t) => t.runner === address).length
    assert.strictEqual(on("a"), 1)
    assert.strictEqual(on("b"), 3)
    for (const ticket of tickets) {
      const shard = shardOf(ticket.entityId)
      assert.strictEqual(ticket.runner, shard <= 150 ? "a" : "b", `${ticket.entityId} hashes to its runner's shard`)
    }
    assert.strictEqual(placement.tryPlace("default", idOf("x4")), "full")
    assert.strictEqual(placement.available("default"), 0)
    placement.release(tickets.find((t) => t.runner === "b")!)
    assert.strictEqual(placement.available("default"), 1)
    assert.strictEqual(place(placement, "x5").runner, "b", "the freed slot is used")
  })

  it("places an agent that requires a label only on runners holding the label's group", () => {
    const placement = new Placement((id) => shardOf(id))
    placement.setView([
      runner("plain", 8, { default: range(1, 150) }),
      runner("gpu", 1, { default: range(151, 300), "label:gpu": range(1, 300) })
    ])
    assert.strictEqual(place(placement, "g0", "label:gpu").runner, "gpu")
    assert.strictEqual(
      placement.tryPlace("label:gpu", idOf("g1")),
      "full",
      "waits rather than run on a runner without it"
    )
    assert.strictEqual(place(placement, "p0").runner, "plain")
  })

  it("places a runner's attempts on its lowest hot shards of the group, so their replies share shard-lock checks", () => {
    const placement = new Placement((id) => shardOf(id), 2)
    const ofA = [7, 3, 250, 120]
    placement.setView([
      runner("a", 64, { default: ofA }),
      runner("b", 1, { default: range(1, 300).filter((shard) => !ofA.includes(shard)) })
    ])
    const tickets = range(1, 40).map((i) => place(placement, `x${i}`))
    const onA = tickets.filter((t) => t.runner === "a")
    assert.strictEqual(onA.length, 40, "a has the most free slots throughout")
    assert.deepStrictEqual([...new Set(onA.map((t) => t.shard))].sort(), ["default:3", "default:7"])
    for (const ticket of onA) assert.strictEqual(`default:${shardOf(ticket.entityId)}`, ticket.shard)
  })

  it("falls back to any shard of the runner when no salt hashes to a hot one", () => {
    // salts hash to shards 10..19 only: never to runner a's hot shard 1
    const placement = new Placement((id) => 10 + (Number(id.slice(id.indexOf("~") + 1)) % 10), 1)
    placement.setView([runner("a", 2, { default: [1, 15, 17] })])
    const ticket = place(placement, "x")
    assert.deepStrictEqual(ticket, { entityId: "run/x~5", runner: "a", shard: "default:15" })
  })

  it("sends to salt 0 uncounted when no runner holds the group", () => {
    const placement = new Placement((id) => shardOf(id))
    placement.setView([runner("a", 1, { default: range(1, 300) })])
    const ticket = placement.tryPlace("label:gpu", idOf("g"))
    assert.deepStrictEqual(ticket, { entityId: "run/g~0", runner: undefined, shard: undefined })
    placement.release(ticket as Ticket)
    assert.strictEqual(placement.free("a"), 1)
  })

  it("counts an attempt whose runner died on its shard's new owner", () => {
    const placement = new Placement((id) => shardOf(id))
    placement.setView([runner("a", 2, { default: range(1, 150) }), runner("b", 2, { default: range(151, 300) })])
    const onA = place(placement, "x0")
    assert.strictEqual(onA.runner, "a")
    placement.setView([runner("b", 2, { default: range(1, 300) })])
    assert.strictEqual(placement.free("b"), 1, "a's attempt is re-delivered to b and counts there")
    placement.release(onA)
    assert.strictEqual(placement.free("b"), 2)
  })

  it("property: no runner gets more than its capacity, and no attempt waits while an eligible runner has a free slot", () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant("place" as const), label: fc.boolean() }),
      fc.record({ kind: fc.constant("release" as const), pick: fc.nat() })
    )
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 5 }),
        fc.array(fc.boolean(), { minLength: 5, maxLength: 5 }),
        fc.array(op, { maxLength: 80 }),
        (capacities, gpu, ops) => {
          const per = Math.floor(300 / capacities.length)
          const views = capacities.map((capacity, i) => {
            const shards = range(i * per + 1, i === capacities.length - 1 ? 300 : (i + 1) * per)
            return runner(`r${i}`, capacity, gpu[i] ? { default: shards, "label:gpu": shards } : { default: shards })
          })
          const placement = new Placement((id) => shardOf(id))
          placement.setView(views)
          const held: Array<Ticket> = []
          let n = 0
          for (const next of ops) {
            if (next.kind === "release") {
              if (held.length > 0) placement.release(held.splice(next.pick % held.length, 1)[0]!)
              continue
            }
            const group = next.label ? "label:gpu" : "default"
            const eligible = views.filter((v) => v.shards[group] !== undefined)
            const ticket = placement.tryPlace(group, idOf(`x${n++}`))
            if (eligible.length === 0) {
              assert.isTrue(ticket !== "full" && ticket.runner === undefined)
              continue
            }
            if (ticket === "full") {
              for (const v of eligible) assert.isAtMost(placement.free(v.address), 0, `${v.address} had a free slot`)
              continue
            }
            const owner = views.find((v) => (v.shards[group] ?? []).includes(shardOf(ticket.entityId)))!
            assert.strictEqual(ticket.runner, owner.address, "the entity id hashes to a shard of the chosen runner")
            assert.include(
              owner.shards[group]!.slice(0, hotShards),
              shardOf(ticket.entityId),
              "on one of the runner's hot shards"
            )
            held.push(ticket)
          }
          for (const v of views) {
            const count = held.filter((t) => t.runner === v.address).length
            assert.isAtMost(count, v.capacity, `${v.address} holds at most its capacity`)
            assert.strictEqual(placement.free(v.address), v.capacity - count)
          }
        }
      )
    )
  })
})
