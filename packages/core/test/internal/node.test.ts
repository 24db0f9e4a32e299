import { Agent } from "@corral/core"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import fc from "fast-check"
import { link } from "../../src/internal/node.ts"
import { validate } from "../../src/internal/validate.ts"

interface Graph {
  /** Each agent's estimate in ms, or `null` for none. */
  readonly estimates: ReadonlyArray<number | null>
  /** Each agent's dependencies, by index into the graph before `order` permutes it. */
  readonly deps: ReadonlyArray<ReadonlyArray<number>>
  /** The order in which the agents are given to the run: a permutation of the graph's indices. */
  readonly order: ReadonlyArray<number>
}

/** A random DAG (every dependency an earlier node), given in its own order or shuffled. */
const graph: fc.Arbitrary<Graph> = fc.integer({ min: 1, max: 30 }).chain((n) =>
  fc.record({
    estimates: fc.array(fc.option(fc.integer({ min: 0, max: 50 })), { minLength: n, maxLength: n }),
    deps: fc.tuple(
      ...Array.from({ length: n }, (_, i) =>
        i === 0 ? fc.constant([]) : fc.uniqueArray(fc.nat({ max: i - 1 }), { maxLength: 3 })
      )
    ),
    order: fc.oneof(
      fc.constant(Array.from({ length: n }, (_, i) => i)),
      fc.shuffledSubarray(
        Array.from({ length: n }, (_, i) => i),
        { minLength: n, maxLength: n }
      )
    )
  })
)

/** The longest chain of dependents from each node, itself included, by brute force over the DAG. */
const longestChains = (g: Graph): ReadonlyArray<number> => {
  const memo = new Map<number, number>()
  const chain = (i: number): number => {
    const known = memo.get(i)
    if (known !== undefined) return known
    let longest = 0
    g.deps.forEach((deps, j) => {
      if (deps.includes(i)) longest = Math.max(longest, chain(j))
    })
    const value = (g.estimates[i] ?? 1) + longest
    memo.set(i, value)
    return value
  }
  return g.deps.map((_, i) => chain(i))
}

const settings = { concurrency: 1, pools: {}, claimTimeout: undefined, poolScope: "" }

describe("link", () => {
  it("gives every node the longest estimated chain of dependents from it, whatever order the agents come in", () => {
    fc.assert(
      fc.property(graph, (g) => {
        const agents = g.order.map((i) =>
          Agent.make(`n${i}`, {
            run: Effect.void,
            dependsOn: g.deps[i]!.map((dep) => `n${dep}`),
            ...(g.estimates[i] === null ? {} : { estimate: g.estimates[i]! })
          })
        )
        const nodes = validate(agents, settings)
        assert.isTrue(Result.isSuccess(nodes))
        const linked = Result.getOrThrow(nodes)
        link(linked)
        const expected = longestChains(g)
        linked.forEach((node, at) => {
          assert.strictEqual(node.priority, expected[g.order[at]!], node.id)
        })
      }),
      { numRuns: 500 }
    )
  })

  it("still finds a cycle whose edges point forward in the input", () => {
    const agents = [
      Agent.make("a", { run: Effect.void, dependsOn: ["c"] }),
      Agent.make("b", { run: Effect.void, dependsOn: ["a"] }),
      Agent.make("c", { run: Effect.void, dependsOn: ["b"] })
    ]
    const nodes = validate(agents, settings)
    assert.isTrue(Result.isFailure(nodes))
    if (Result.isFailure(nodes)) assert.include(nodes.failure.issues[0]!.message, "dependency cycle")
  })
})

describe("Node", () => {
  it("keeps an agent's claims in the node and shares one settings object among agents with no other settings", () => {
    const agents = [
      Agent.make("a", { run: Effect.void, claims: { write: ["x"] } }),
      Agent.make("b", { run: Effect.void, claims: { read: ["y"] } }),
      Agent.make("c", { run: Effect.void }),
      Agent.make("d", { run: Effect.void, claims: { write: ["x"] }, timeout: "1 second" })
    ]
    const nodes = Result.getOrThrow(validate(agents, settings))
    const spec = (index: number) => (nodes[index] as unknown as { readonly spec: object }).spec
    assert.deepStrictEqual(
      nodes.map((node) => node.request?.keys.map((key) => [key.key, key.mode])),
      [[["x", "write"]], [["y", "read"]], undefined, [["x", "write"]]]
    )
    assert.strictEqual(spec(0), spec(2))
    assert.strictEqual(spec(1), spec(2))
    assert.notStrictEqual(spec(3), spec(2))
    assert.deepStrictEqual(
      nodes.map((node) => [node.timeoutMs, node.claimTimeoutMs, node.estimateMs, node.depIndices.length]),
      [
        [undefined, undefined, 1, 0],
        [undefined, undefined, 1, 0],
        [undefined, undefined, 1, 0],
        [1000, undefined, 1, 0]
      ]
    )
  })
})
