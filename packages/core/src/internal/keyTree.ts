import type { KeyClaim, Mode } from "../Claims.ts"

/**
 * The holders of one key in one mode, in the order they came, each once (`add` does not look for
 * the holder: `KeyTree.add`'s callers add a holder once): a `Set` without its allocations. A `Set` reallocates its table whenever a delete leaves it under a quarter full, so
 * the last holder of a key leaving (every release of a key held by one agent, thousands a run)
 * allocated a new table; this list keeps its array and its `size`, and walks without an iterator.
 *
 * It also keeps a log of events on the key while it has holders (`events`, its first
 * `eventCount`; emptied when the last holder leaves) and each holder's position in it when it came
 * (`since`): a count over the events since a holder came is then made when it is needed, not kept
 * up to date in every holder at every event (the claim gate logs the agents that took a key its
 * waiters wait for, see `ClaimGate.passOver`).
 */
class Holders<H> {
  readonly items: Array<H | undefined> = []
  readonly since: Array<number> = []
  readonly events: Array<H | undefined> = []
  size = 0
  eventCount = 0
  private eventMark = 0

  /** Appends `holder`, which is not in the list (see `KeyTree.add`). */
  add(holder: H): void {
    this.since[this.size] = this.eventCount
    this.items[this.size++] = holder
  }

  /** Removes `holder`, keeping the others' order; whether it was there. */
  delete(holder: H): boolean {
    const at = this.indexOf(holder)
    if (at < 0) return false
    const items = this.items
    const since = this.since
    const last = --this.size
    for (let i = at; i < last; i++) {
      items[i] = items[i + 1]
      since[i] = since[i + 1]!
    }
    items[last] = undefined
    if (last === 0) this.eventCount = 0
    return true
  }

  /** Appends `event` to the log unless an event with this `mark` (> 0) was the last appended; whether it did. */
  log(event: H, mark: number): boolean {
    if (this.eventMark === mark) return false
    this.eventMark = mark
    this.events[this.eventCount++] = event
    return true
  }

  private indexOf(holder: H): number {
    const items = this.items
    for (let i = 0; i < this.size; i++) if (items[i] === holder) return i
    return -1
  }
}

class Node<H> {
  readonly children = new Map<string, Node<H>>()
  readonly readers = new Holders<H>()
  readonly writers = new Holders<H>()
  subReaders = 0
  subWriters = 0
  readonly parent: Node<H> | undefined
  readonly segment: string
  readonly path: string
  constructor(parent: Node<H> | undefined, segment: string, path: string) {
    this.parent = parent
    this.segment = segment
    this.path = path
  }
  isEmpty(): boolean {
    return this.children.size === 0 && this.readers.size === 0 && this.writers.size === 0
  }
}

export interface Hit<H> {
  readonly holder: H
  readonly key: string
  readonly mode: Mode
}

/**
 * The holders of one key in one mode, to read: `items`' first `size`, in the order they came, with
 * the key's event log (`events`' first `eventCount`, appended to by `log`) and where it stood when
 * each holder came (`since`, by the holder's index in `items`).
 */
export interface HolderList<H> {
  readonly items: ReadonlyArray<H | undefined>
  readonly since: ReadonlyArray<number>
  readonly events: ReadonlyArray<H | undefined>
  readonly size: number
  readonly eventCount: number
  log(event: H, mark: number): boolean
}

/** Called with each conflicting holder; a visit stops at the first call that returns `true`. */
type Visitor<H> = (holder: H, at: Node<H>, mode: Mode) => boolean | void

/** Called with the holders of each conflicting key in one mode; a visit stops at the first call that returns `true`. */
type SetVisitor<H> = (holders: Holders<H>, at: Node<H>, mode: Mode) => boolean | void

const found = (): boolean => true

const emit = <H>(node: Node<H>, mode: Mode, f: SetVisitor<H>): boolean => {
  if (node.writers.size > 0 && f(node.writers, node, "write") === true) return true
  return mode === "write" && node.readers.size > 0 && f(node.readers, node, "read") === true
}

const descend = <H>(node: Node<H>, mode: Mode, f: SetVisitor<H>): boolean => {
  for (const child of node.children.values()) {
    if (emit(child, mode, f)) return true
    const below = mode === "write" ? child.subReaders + child.subWriters : child.subWriters
    if (below > 0 && descend(child, mode, f)) return true
  }
  return false
}

/**
 * Holders of key claims, by path segment. A node left empty by `remove` stays for the next holder
 * of its key (claims on a few hot keys come and go thousands of times a run); once the tree has
 * doubled since the last sweep, an `add` sweeps the empty nodes, so a long-lived table stays bounded.
 */
export class KeyTree<H> {
  readonly root = new Node<H>(undefined, "", "")
  size = 0
  private nodes = 0
  private sweepAt = sweepAbove
  /** The visitor and the excluded holder of the walk under way (`visit`): fields, so a walk allocates no closure. */
  private visitor: Visitor<H> = found
  private exclude: H | undefined = undefined
  private readonly eachHolder: SetVisitor<H> = (holders, at, mode) => {
    const items = holders.items
    const exclude = this.exclude
    const f = this.visitor
    for (let i = 0; i < holders.size; i++) {
      const holder = items[i]!
      if (holder !== exclude && f(holder, at, mode) === true) return true
    }
    return false
  }

  /**
   * Adds `holder` to each key of `claims` (distinct keys, as `Claims.normalize` gives them), where
   * it is not yet: each add is counted (`size`), and a holder list is not searched for it (a park
   * scanned the key's waiters: the bench's 2,000-agent `claims` run names each of its 50 keys 80
   * times on average, its busiest 96).
   */
  add(holder: H, claims: ReadonlyArray<KeyClaim>): void {
    if (this.nodes > this.sweepAt) {
      this.sweep(this.root)
      this.sweepAt = sweepAbove + 2 * this.nodes
    }
    for (const claim of claims) {
      let node = this.root
      for (const segment of claim.segments) {
        if (claim.mode === "write") node.subWriters++
        else node.subReaders++
        let child = node.children.get(segment)
        if (child === undefined) {
          child = new Node(node, segment, node === this.root ? segment : `${node.path}/${segment}`)
          node.children.set(segment, child)
          this.nodes++
        }
        node = child
      }
      ;(claim.mode === "write" ? node.writers : node.readers).add(holder)
      this.size++
    }
  }

  remove(holder: H, claims: ReadonlyArray<KeyClaim>): void {
    for (const claim of claims) {
      const node = this.find(claim.segments)
      if (node === undefined) continue
      const set = claim.mode === "write" ? node.writers : node.readers
      if (!set.delete(holder)) continue
      this.size--
      for (let up = node.parent; up !== undefined; up = up.parent) {
        if (claim.mode === "write") up.subWriters--
        else up.subReaders--
      }
    }
  }

  hasConflict(claims: ReadonlyArray<KeyClaim>, exclude?: H): boolean {
    return this.visit(claims, exclude, found)
  }

  /**
   * Calls `f` with each holder that conflicts with `claims` (once per conflicting claim) and the
   * node of the key it holds (the same object for every holder of that key while any holds it).
   */
  eachConflict(claims: ReadonlyArray<KeyClaim>, f: (holder: H, at: object) => void, exclude?: H): void {
    this.visit(claims, exclude, f)
  }

  /**
   * Calls `f` with the holders of each key whose holders conflict with `claims` in one mode (once
   * per conflicting claim, in `eachConflict`'s order) and the key's node: a caller's loop over them
   * replaces one call per holder.
   */
  eachConflictSet(claims: ReadonlyArray<KeyClaim>, f: (holders: HolderList<H>, at: object) => void): void {
    this.visitSets(claims, f)
  }

  conflicts(claims: ReadonlyArray<KeyClaim>, exclude?: H): Array<Hit<H>> {
    const hits: Array<Hit<H>> = []
    this.visit(claims, exclude, (holder, at, mode) => {
      hits.push({ holder, key: at.path, mode })
      return false
    })
    return hits
  }

  /** Visits the conflicting holders until `f` returns true; whether it did. No allocation per hit. */
  private visit(claims: ReadonlyArray<KeyClaim>, exclude: H | undefined, f: Visitor<H>): boolean {
    if (this.size === 0) return false
    const outerVisitor = this.visitor
    const outerExclude = this.exclude
    this.visitor = f
    this.exclude = exclude
    const stopped = this.visitSets(claims, this.eachHolder)
    this.visitor = outerVisitor
    this.exclude = outerExclude
    return stopped
  }

  /** Visits the conflicting holder lists until `f` returns true; whether it did. */
  private visitSets(claims: ReadonlyArray<KeyClaim>, f: SetVisitor<H>): boolean {
    if (this.size === 0) return false
    for (const claim of claims) {
      let node: Node<H> | undefined = this.root
      for (const segment of claim.segments) {
        node = node.children.get(segment)
        if (node === undefined) break
        if (emit(node, claim.mode, f)) return true
      }
      if (node === undefined) continue
      const below = claim.mode === "write" ? node.subReaders + node.subWriters : node.subWriters
      if (below > 0 && descend(node, claim.mode, f)) return true
    }
    return false
  }

  private find(segments: ReadonlyArray<string>): Node<H> | undefined {
    let node: Node<H> | undefined = this.root
    for (const segment of segments) {
      node = node.children.get(segment)
      if (node === undefined) return undefined
    }
    return node
  }

  /** Removes the empty nodes below `node`; whether `node` itself is now empty. */
  private sweep(node: Node<H>): boolean {
    for (const [segment, child] of node.children) {
      if (this.sweep(child)) {
        node.children.delete(segment)
        this.nodes--
      }
    }
    return node.isEmpty()
  }

  entries(): Array<Hit<H>> {
    const out: Array<Hit<H>> = []
    const walk = (node: Node<H>): void => {
      for (let i = 0; i < node.writers.size; i++)
        out.push({ holder: node.writers.items[i]!, key: node.path, mode: "write" })
      for (let i = 0; i < node.readers.size; i++)
        out.push({ holder: node.readers.items[i]!, key: node.path, mode: "read" })
      for (const child of node.children.values()) walk(child)
    }
    walk(this.root)
    return out
  }
}

const sweepAbove = 256
