import { assert, describe, it } from "@effect/vitest"
import { Lifecycle, type NodeState, type Stateful } from "../../src/internal/lifecycle.ts"

const node = (state: NodeState): Stateful => ({ state, id: "a" })

const counters = (lifecycle: Lifecycle) => ({
  progress: lifecycle.progress(),
  ready: lifecycle.ready,
  running: lifecycle.running,
  done: lifecycle.done
})

describe("Lifecycle", () => {
  it("start and succeeded count as the moves they stand for", () => {
    const fast = new Lifecycle(2)
    const table = new Lifecycle(2)
    fast.seeded(2)
    table.seeded(2)
    const [a, b] = [node("ready"), node("ready")]
    const [c, d] = [node("ready"), node("ready")]
    fast.start(a)
    table.move(c, "running")
    assert.deepStrictEqual(counters(fast), counters(table))
    assert.strictEqual(a.state, "running")
    fast.succeeded(a)
    table.finish(c, "Succeeded")
    assert.deepStrictEqual(counters(fast), counters(table))
    assert.strictEqual(a.state, "done")
    fast.start(b)
    fast.succeeded(b)
    table.move(d, "running")
    table.finish(d, "Succeeded")
    assert.deepStrictEqual(counters(fast), counters(table))
    assert.isTrue(fast.allDone)
  })

  it("start and succeeded reject the moves the table rejects, counting nothing", () => {
    const lifecycle = new Lifecycle(3)
    lifecycle.seeded(1)
    const before = counters(lifecycle)
    for (const state of ["waiting-deps", "parked", "running", "done"] as const) {
      assert.throws(() => lifecycle.start(node(state)), /illegal lifecycle move of agent "a" from .* to running/)
    }
    assert.throws(() => lifecycle.succeeded(node("done")), /illegal lifecycle move of agent "a" from done to done/)
    assert.deepStrictEqual(counters(lifecycle), before)
  })

  it("succeeded of a node that is not running moves it as finish does", () => {
    const lifecycle = new Lifecycle(1)
    lifecycle.seeded(1)
    const ready = node("ready")
    lifecycle.succeeded(ready)
    assert.strictEqual(ready.state, "done")
    assert.strictEqual(lifecycle.progress().succeeded, 1)
    assert.isTrue(lifecycle.allDone)
  })
})
