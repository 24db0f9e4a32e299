/**
 * The fibers an agent forked as children of the worker fiber that ran it (`Effect.forkChild`,
 * `Effect.fork`), so the run can interrupt them when the agent ends, before its claims are
 * released. A worker runs agent after agent on one fiber, and effect interrupts a fiber's children
 * only when that fiber ends: without this, a child outlived its agent until the worker's last agent
 * ended — past the claims it ran under, and for as long as depended on which worker ran it.
 *
 * effect 4.1 has no public way to reach the children forked during a region of a fiber (the `Fiber`
 * interface has none; `awaitAllChildren` waits for them, it does not interrupt them; `FiberSet` and
 * `Scope` hold only fibers forked into them, not an agent's own `forkChild`), and a fiber per agent is
 * the cost the worker design avoids, so this reads the fiber's own child set (`FiberImpl._children`,
 * a `Set` effect creates on the first `forkChild` and from which each child removes itself when it
 * ends; effect's `awaitAllChildren` reads the same field). `test/agentChildren.test.ts` pins that
 * contract and fails naming this module if an effect upgrade changes it. Fibers forked with
 * `forkDetach`, `forkIn` or `forkScoped` are not children and are left running, as documented.
 */
import type * as Fiber from "effect/Fiber"

type AnyFiber = Fiber.Fiber<unknown, unknown>

const childrenOf = (fiber: AnyFiber): ReadonlySet<AnyFiber> | undefined =>
  (fiber as unknown as { readonly _children?: ReadonlySet<AnyFiber> | undefined })._children

/** The children `fiber` has now, when it has any (rarely: workers fork none of their own). */
export const snapshot = (fiber: AnyFiber): ReadonlySet<AnyFiber> | undefined => {
  const children = childrenOf(fiber)
  return children === undefined || children.size === 0 ? undefined : new Set(children)
}

/** The children of `fiber` still running that were not among `before`, or `undefined` when none. */
export const forkedSince = (
  fiber: AnyFiber,
  before: ReadonlySet<AnyFiber> | undefined
): ReadonlyArray<AnyFiber> | undefined => {
  const children = childrenOf(fiber)
  if (children === undefined || children.size === 0) return undefined
  let forked: Array<AnyFiber> | undefined
  for (const child of children) if (before === undefined || !before.has(child)) (forked ??= []).push(child)
  return forked
}
