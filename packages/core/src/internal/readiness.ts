/**
 * Which agent runs next: the ready queue (critical-path priority, then input order) and the agents
 * parked for a rate-limit token, woken in the same order when a token is free. Queues only order
 * nodes; state moves are the caller's (`Lifecycle.move`), and entries whose node has moved on are
 * skipped when they come up.
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type * as RateLimiter from "../RateLimiter.ts"
import { Heap } from "./heap.ts"
import { before, type Node } from "./node.ts"

const noHeap = new Heap<Node>(before)

export class ReadyQueue {
  /** Read-only: may be the run's own array of nodes (`seedInOrder`). */
  private fifo: ReadonlyArray<Node> = []
  private head = 0
  /** Makes the node at an index of a queue seeded lazily (`seedLazily`); the queue is `count` long. */
  private make: ((index: number) => Node) | undefined = undefined
  private count = 0
  /** The node `make` made for `head`, not taken yet. */
  private made: Node | undefined = undefined
  /** Nodes queued by `push`; `noHeap` (never pushed to) until the first push: most runs push none. */
  private heap: Heap<Node> = noHeap

  get size(): number {
    return (this.make === undefined ? this.fifo.length : this.count) - this.head + this.heap.size
  }

  /** Queues the roots (already in priority order for most runs, so usually without a sort). */
  seed(roots: Array<Node>): void {
    for (let i = 1; i < roots.length; i++) {
      if (before(roots[i]!, roots[i - 1]!)) {
        roots.sort((a, b) => (before(a, b) ? -1 : 1))
        break
      }
    }
    this.fifo = roots
  }

  /** Queues nodes known to be in priority order; the queue reads the array and never writes it. */
  seedInOrder(roots: ReadonlyArray<Node>): void {
    this.fifo = roots
  }

  /** Queues `count` nodes in priority order that `make` makes by index when they come up (a compact run). */
  seedLazily(count: number, make: (index: number) => Node): void {
    this.count = count
    this.make = make
  }

  push(node: Node): void {
    if (this.heap === noHeap) this.heap = new Heap<Node>(before)
    this.heap.push(node)
  }

  /** The best queued node still `ready`, or `undefined`. */
  next(): Node | undefined {
    while (true) {
      const node = this.pop()
      if (node === undefined || node.state === "ready") return node
    }
  }

  private pop(): Node | undefined {
    const first = this.first()
    const top = this.heap.peek()
    if (first !== undefined && (top === undefined || before(first, top))) {
      this.head++
      this.made = undefined
      return first
    }
    return this.heap.pop()
  }

  private first(): Node | undefined {
    const make = this.make
    if (make === undefined) return this.head < this.fifo.length ? this.fifo[this.head] : undefined
    return this.head < this.count ? (this.made ??= make(this.head)) : undefined
  }
}

export interface RateHost {
  readonly limiter: RateLimiter.Service
  readonly scope: Scope.Scope
  /** Moves a parked node back to the ready queue. */
  readonly makeReady: (node: Node) => void
  readonly wake: () => void
}

interface RateQueue {
  readonly heap: Heap<Node>
  armed: boolean
}

/** Agents waiting for a rate-limit token, one queue per key with one timer armed at a time. */
export class RateWaits {
  private readonly queues = new Map<string, RateQueue>()
  readonly host: RateHost

  constructor(host: RateHost) {
    this.host = host
  }

  /** Queues a node that has just moved to `parked`; arms the key's timer unless it is armed. */
  park(node: Node, key: string, ms: number): Effect.Effect<void> {
    let queue = this.queues.get(key)
    if (queue === undefined) this.queues.set(key, (queue = { heap: new Heap<Node>(before), armed: false }))
    queue.heap.push(node)
    return queue.armed ? Effect.void : this.arm(queue, key, ms)
  }

  arm(queue: RateQueue, key: string, ms: number): Effect.Effect<void> {
    queue.armed = true
    return Effect.asVoid(Effect.forkIn(Effect.andThen(Effect.sleep(ms), this.wakeUp(queue, key)), this.host.scope))
  }

  private wakeUp(queue: RateQueue, key: string): Effect.Effect<void> {
    return Effect.gen({ self: new WakeUp(this, queue, key) }, WakeUp.prototype.run)
  }
}

/** A wake-up of one key's queue; a class so its generator is one function (see `Runner.runBody`). */
class WakeUp {
  readonly waits: RateWaits
  readonly queue: RateQueue
  readonly key: string

  constructor(waits: RateWaits, queue: RateQueue, key: string) {
    this.waits = waits
    this.queue = queue
    this.key = key
  }

  *run() {
    const { waits, queue, key } = this
    queue.armed = false
    while (queue.heap.size > 0) {
      const node = queue.heap.peek()!
      if (node.state !== "parked") {
        queue.heap.pop()
        continue
      }
      const probe = yield* waits.host.limiter.tryTake(key, 1)
      if (probe._tag === "Wait") return yield* waits.arm(queue, key, probe.ms)
      queue.heap.pop()
      node.rateTaken = true
      waits.host.makeReady(node)
      waits.host.wake()
    }
  }
}
