export interface BucketConfig {
  readonly capacity: number
  readonly perMs: number
}

export type Probe = { readonly _tag: "Taken" } | { readonly _tag: "Wait"; readonly ms: number }

export const taken: Probe = { _tag: "Taken" }

export class TokenBucket {
  readonly config: BucketConfig
  tokens: number
  updatedAt: number
  pausedUntil = 0

  constructor(config: BucketConfig, now: number) {
    this.config = config
    this.tokens = config.capacity
    this.updatedAt = now
  }

  refill(now: number): void {
    if (now <= this.updatedAt) return
    const refill = Math.max(this.updatedAt, this.pausedUntil)
    if (now > refill) this.tokens = Math.min(this.config.capacity, this.tokens + (now - refill) * this.config.perMs)
    this.updatedAt = now
  }

  tryTake(tokens: number, now: number): Probe {
    this.refill(now)
    if (now < this.pausedUntil) return { _tag: "Wait", ms: this.pausedUntil - now }
    const need = Math.min(tokens, this.config.capacity)
    if (this.tokens >= need) {
      this.tokens -= tokens
      return taken
    }
    return { _tag: "Wait", ms: Math.max(1, Math.ceil((need - this.tokens) / this.config.perMs)) }
  }

  reserve(tokens: number, now: number): number {
    this.refill(now)
    const paused = Math.max(0, this.pausedUntil - now)
    const need = Math.min(tokens, this.config.capacity)
    const wait = this.tokens >= need ? 0 : Math.ceil((need - this.tokens) / this.config.perMs)
    this.tokens -= tokens
    return paused + wait
  }

  settle(delta: number, now: number): void {
    this.refill(now)
    this.tokens = Math.min(this.config.capacity, this.tokens + delta)
  }

  pause(ms: number, now: number): void {
    this.refill(now)
    this.tokens = Math.min(this.tokens, 0)
    this.pausedUntil = Math.max(this.pausedUntil, now + ms)
  }
}
