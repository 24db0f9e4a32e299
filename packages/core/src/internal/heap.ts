export class Heap<T> {
  private readonly items: Array<T> = []
  private readonly before: (a: T, b: T) => boolean

  constructor(before: (a: T, b: T) => boolean) {
    this.before = before
  }

  get size(): number {
    return this.items.length
  }

  push(item: T): void {
    const items = this.items
    let i = items.length
    items.push(item)
    while (i > 0) {
      const parent = (i - 1) >> 1
      if (!this.before(item, items[parent]!)) break
      items[i] = items[parent]!
      i = parent
    }
    items[i] = item
  }

  peek(): T | undefined {
    return this.items[0]
  }

  pop(): T | undefined {
    const items = this.items
    if (items.length === 0) return undefined
    const top = items[0]!
    const last = items.pop()!
    if (items.length > 0) this.siftDown(last)
    return top
  }

  private siftDown(item: T): void {
    const items = this.items
    const n = items.length
    let i = 0
    while (true) {
      const left = 2 * i + 1
      if (left >= n) break
      const right = left + 1
      const child = right < n && this.before(items[right]!, items[left]!) ? right : left
      if (!this.before(items[child]!, item)) break
      items[i] = items[child]!
      i = child
    }
    items[i] = item
  }
}
