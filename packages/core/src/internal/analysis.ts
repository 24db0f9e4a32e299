import * as Claims from "../Claims.ts"
import { Heap } from "./heap.ts"
import type { Node } from "./node.ts"

export interface Conflict {
  readonly a: string
  readonly b: string
  readonly keys: ReadonlyArray<string>
}

export interface Analysis {
  readonly order: ReadonlyArray<string>
  readonly criticalPath: { readonly ids: ReadonlyArray<string>; readonly totalMs: number }
  readonly maxParallelism: number
  readonly conflicts: ReadonlyArray<Conflict>
}

export const topologicalOrder = (nodes: ReadonlyArray<Node>): Array<number> => {
  const left = nodes.map((node) => node.depIndices.length)
  const dependents: Array<Array<number>> = nodes.map(() => [])
  nodes.forEach((node, i) => {
    for (const dep of node.depIndices) dependents[dep]!.push(i)
  })
  const ready = new Heap<number>((a, b) => a < b)
  for (let i = 0; i < left.length; i++) if (left[i] === 0) ready.push(i)
  const order: Array<number> = []
  for (let i = ready.pop(); i !== undefined; i = ready.pop()) {
    order.push(i)
    for (const next of dependents[i]!) if (--left[next]! === 0) ready.push(next)
  }
  return order
}

const schedule = (nodes: ReadonlyArray<Node>, order: ReadonlyArray<number>, durations: ReadonlyArray<number>) => {
  const start = new Array<number>(nodes.length).fill(0)
  const previous = new Array<number>(nodes.length).fill(-1)
  for (const i of order) {
    for (const dep of nodes[i]!.depIndices) {
      const end = start[dep]! + durations[dep]!
      if (previous[i] === -1 || end > start[i]!) {
        start[i] = end
        previous[i] = dep
      }
    }
  }
  return { start, previous }
}

const criticalPath = (
  nodes: ReadonlyArray<Node>,
  start: ReadonlyArray<number>,
  previous: ReadonlyArray<number>,
  durations: ReadonlyArray<number>
) => {
  let last = -1
  let totalMs = 0
  nodes.forEach((_, i) => {
    const end = start[i]! + durations[i]!
    if (last === -1 || end > totalMs) {
      last = i
      totalMs = end
    }
  })
  const ids: Array<string> = []
  for (let i = last; i !== -1; i = previous[i]!) ids.unshift(nodes[i]!.id)
  return { ids, totalMs }
}

const maxWidth = (start: ReadonlyArray<number>, durations: ReadonlyArray<number>): number => {
  const points: Array<readonly [number, number]> = []
  start.forEach((at, i) => {
    if (durations[i]! > 0) points.push([at, 1], [at + durations[i]!, -1])
  })
  points.sort((a, b) => a[0] - b[0] || a[1] - b[1])
  let width = 0
  let peak = 0
  for (const [, delta] of points) peak = Math.max(peak, (width += delta))
  return peak
}

const ancestors = (nodes: ReadonlyArray<Node>, order: ReadonlyArray<number>): Array<Uint32Array> => {
  const words = Math.ceil(nodes.length / 32)
  const sets = nodes.map(() => new Uint32Array(words))
  for (const i of order) {
    const set = sets[i]!
    for (const dep of nodes[i]!.depIndices) {
      const other = sets[dep]!
      for (let w = 0; w < words; w++) set[w]! |= other[w]!
      set[dep >> 5]! |= 1 << (dep & 31)
    }
  }
  return sets
}

const has = (set: Uint32Array, i: number): boolean => (set[i >> 5]! & (1 << (i & 31))) !== 0

const conflicts = (nodes: ReadonlyArray<Node>, order: ReadonlyArray<number>): Array<Conflict> => {
  const claimed = nodes.filter((node) => node.request !== undefined && node.request.keys.length > 0)
  if (claimed.length < 2) return []
  const sets = ancestors(nodes, order)
  const found: Array<Conflict> = []
  for (let x = 0; x < claimed.length; x++) {
    for (let y = x + 1; y < claimed.length; y++) {
      const a = claimed[x]!
      const b = claimed[y]!
      if (has(sets[a.index]!, b.index) || has(sets[b.index]!, a.index)) continue
      const keys = Claims.conflicts(a.request!, b.request!)
      if (keys.length > 0) found.push({ a: a.id, b: b.id, keys })
    }
  }
  return found
}

export const analyze = (nodes: ReadonlyArray<Node>, durations: ReadonlyArray<number>): Analysis => {
  const order = topologicalOrder(nodes)
  const { start, previous } = schedule(nodes, order, durations)
  return {
    order: order.map((i) => nodes[i]!.id),
    criticalPath: criticalPath(nodes, start, previous, durations),
    maxParallelism: maxWidth(start, durations),
    conflicts: conflicts(nodes, order)
  }
}
