import { mulberry32, randomInt } from "./async.ts"

export interface ClaimJob {
  readonly id: string
  readonly keys: ReadonlyArray<string>
}

const keyName = (k: number): string => `key-${String(k).padStart(2, "0")}`

export const claimJobs = (seed: number, count: number, keyCount: number): ReadonlyArray<ClaimJob> => {
  const random = mulberry32(seed)
  return Array.from({ length: count }, (_, i) => {
    const wanted = randomInt(random, 1, 3)
    const keys = new Set<number>()
    while (keys.size < wanted) keys.add(randomInt(random, 0, keyCount - 1))
    return { id: `job${i}`, keys: [...keys].sort((a, b) => a - b).map(keyName) }
  })
}

export const busiestKeyCount = (jobs: ReadonlyArray<ClaimJob>): number => {
  const counts = new Map<string, number>()
  for (const job of jobs) for (const key of job.keys) counts.set(key, (counts.get(key) ?? 0) + 1)
  return Math.max(...counts.values())
}

export interface DagNode {
  readonly id: string
  readonly index: number
  readonly ms: number
  readonly deps: ReadonlyArray<number>
}

export const randomDag = (seed: number, size: number): ReadonlyArray<DagNode> => {
  const random = mulberry32(seed)
  return Array.from({ length: size }, (_, index) => {
    const wanted = Math.min(index, randomInt(random, 0, 3))
    const deps = new Set<number>()
    while (deps.size < wanted) deps.add(randomInt(random, 0, index - 1))
    return { id: `n${index}`, index, ms: randomInt(random, 1, 20), deps: [...deps].sort((a, b) => a - b) }
  })
}

export const remainingPath = (nodes: ReadonlyArray<DagNode>): ReadonlyArray<number> => {
  const longest = nodes.map((node) => node.ms)
  for (let i = nodes.length - 1; i >= 0; i--) {
    for (const dep of nodes[i]!.deps) longest[dep] = Math.max(longest[dep]!, nodes[dep]!.ms + longest[i]!)
  }
  return longest
}

export const levels = (nodes: ReadonlyArray<DagNode>): ReadonlyArray<ReadonlyArray<DagNode>> => {
  const depth: Array<number> = []
  const out: Array<Array<DagNode>> = []
  for (const node of nodes) {
    const d = node.deps.reduce((max, dep) => Math.max(max, depth[dep]! + 1), 0)
    depth.push(d)
    ;(out[d] ??= []).push(node)
  }
  return out
}
