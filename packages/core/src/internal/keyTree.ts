import type { KeyClaim, Mode } from "../Claims.ts"

class Node<H> {
  readonly children = new Map<string, Node<H>>()
  readonly readers = new Set<H>()
  readonly writers = new Set<H>()
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

export class KeyTree<H> {
  readonly root = new Node<H>(undefined, "", "")
  size = 0

  add(holder: H, claims: ReadonlyArray<KeyClaim>): void {
    for (const claim of claims) {
      let node = this.root
      for (const segment of claim.segments) {
        if (claim.mode === "write") node.subWriters++
        else node.subReaders++
        let child = node.children.get(segment)
        if (child === undefined) {
          child = new Node(node, segment, node === this.root ? segment : `${node.path}/${segment}`)
          node.children.set(segment, child)
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
      this.prune(node)
    }
  }

  hasConflict(claims: ReadonlyArray<KeyClaim>, exclude?: H): boolean {
    let found = false
    this.visit(claims, exclude, () => {
      found = true
      return true
    })
    return found
  }

  eachConflict(claims: ReadonlyArray<KeyClaim>, f: (holder: H) => void): void {
    this.visit(claims, undefined, (hit) => {
      f(hit.holder)
      return false
    })
  }

  conflicts(claims: ReadonlyArray<KeyClaim>, exclude?: H): Array<Hit<H>> {
    const hits: Array<Hit<H>> = []
    this.visit(claims, exclude, (hit) => {
      hits.push(hit)
      return false
    })
    return hits
  }

  private visit(claims: ReadonlyArray<KeyClaim>, exclude: H | undefined, f: (hit: Hit<H>) => boolean): void {
    if (this.size === 0) return
    for (const claim of claims) {
      let node: Node<H> | undefined = this.root
      for (const segment of claim.segments) {
        node = node.children.get(segment)
        if (node === undefined) break
        if (this.emit(node, claim.mode, exclude, f)) return
      }
      if (node === undefined) continue
      const below = claim.mode === "write" ? node.subReaders + node.subWriters : node.subWriters
      if (below > 0 && this.descend(node, claim.mode, exclude, f)) return
    }
  }

  private emit(node: Node<H>, mode: Mode, exclude: H | undefined, f: (hit: Hit<H>) => boolean): boolean {
    for (const holder of node.writers) {
      if (holder !== exclude && f({ holder, key: node.path, mode: "write" })) return true
    }
    if (mode === "write") {
      for (const holder of node.readers) {
        if (holder !== exclude && f({ holder, key: node.path, mode: "read" })) return true
      }
    }
    return false
  }

  private descend(node: Node<H>, mode: Mode, exclude: H | undefined, f: (hit: Hit<H>) => boolean): boolean {
    for (const child of node.children.values()) {
      if (this.emit(child, mode, exclude, f)) return true
      const below = mode === "write" ? child.subReaders + child.subWriters : child.subWriters
      if (below > 0 && this.descend(child, mode, exclude, f)) return true
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

  private prune(node: Node<H>): void {
    let current: Node<H> = node
    while (current.parent !== undefined && current.isEmpty()) {
      current.parent.children.delete(current.segment)
      current = current.parent
    }
  }

  entries(): Array<Hit<H>> {
    const out: Array<Hit<H>> = []
    const walk = (node: Node<H>): void => {
      for (const holder of node.writers) out.push({ holder, key: node.path, mode: "write" })
      for (const holder of node.readers) out.push({ holder, key: node.path, mode: "read" })
      for (const child of node.children.values()) walk(child)
    }
    walk(this.root)
    return out
  }
}
