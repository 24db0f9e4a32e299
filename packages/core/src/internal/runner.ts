import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Result from "effect/Result"
import * as Scope from "effect/Scope"
import * as Tracer from "effect/Tracer"
import type * as Agent from "../Agent.ts"
import type * as Corral from "../Corral.ts"
import * as AgentModule from "../Agent.ts"
import type { CorralEvent, Progress, StopReason } from "../CorralEvent.ts"
import type { InvalidRun, Issue } from "../CorralError.ts"
import * as Ledger from "../Ledger.ts"
import * as Outcome from "../Outcome.ts"
import * as RateLimiter from "../RateLimiter.ts"
import * as ResourceLocks from "../ResourceLocks.ts"
import { RunResult } from "../RunResult.ts"
import * as Usage from "../Usage.ts"
import { ClaimGate } from "./claimGate.ts"
import { Heap } from "./heap.ts"
import { before, link, type Node, ReadyQueue, waitOf } from "./node.ts"
import { validate } from "./validate.ts"

export type RunOptions = Corral.Options

export const maxRateLimitedAttempts = 5

interface Services {
  readonly locks: ResourceLocks.ResourceLocks["Service"]
  readonly limiter: RateLimiter.Service | undefined
  readonly localLimiter: boolean
  readonly ledger: Ledger.Service | undefined
  readonly tracing: boolean
}

interface RateQueue {
  readonly heap: Heap<Node>
  armed: boolean
}

class AgentTimeout {
  readonly afterMs: number
  constructor(afterMs: number) {
    this.afterMs = afterMs
  }
}

let runCounter = 0
const makeRunId = (now: number): string =>
  `${new Date(now).toISOString().replace(/[-:]/g, "").replace(/\..*$/, "")}-${(++runCounter).toString(36)}${Math.random().toString(36).slice(2, 6)}`

export const run = <A, E, R>(
  agents: ReadonlyArray<Agent.Agent<A, E, R>>,
  options: RunOptions = {}
): Effect.Effect<RunResult<A, E>, InvalidRun, R> =>
  Effect.gen(function* () {
    const clock = yield* Clock.Clock
    const runId = options.runId ?? makeRunId(clock.currentTimeMillisUnsafe())
    const concurrency = options.concurrency ?? 8
    const limits = yield* limiterOf(options, clock)
    const nodes = validate(agents, {
      concurrency,
      pools: options.pools ?? {},
      claimTimeout: options.claimTimeout,
      poolScope: `${runId}/`,
      rateLimits: limits.keys,
      issues: limits.issues
    })
    if (Result.isFailure(nodes)) return yield* Effect.fail(nodes.failure)
    const services: Services = {
      locks: yield* ResourceLocks.current,
      limiter: limits.limiter,
      localLimiter: options.rateLimits !== undefined,
      ledger: Option.getOrUndefined(yield* Effect.serviceOption(Ledger.Ledger)),
      tracing: (yield* Tracer.Tracer) !== Tracer.nativeTracer
    }
    const tracing = services.tracing
    const execute = Effect.acquireUseRelease(
      Scope.make(),
      (scope) => new Runner<A, E, R>(nodes.success, options, concurrency, runId, clock, services, scope).run,
      (scope, exit) => Scope.close(scope, exit)
    )
    return yield* tracing
      ? Effect.withSpan(execute, "corral.run", {
          attributes: { "corral.run.id": runId, "corral.run.agents": agents.length }
        })
      : execute
  })

class Runner<A, E, R> {
  readonly nodes: ReadonlyArray<Node>
  readonly ready = new ReadyQueue()
  readonly gate: ClaimGate
  readonly mode: "settle" | "fail-fast"
  readonly maxBypass: number
  readonly counts: Record<Outcome.Tag, number> = {
    Succeeded: 0,
    Failed: 0,
    TimedOut: 0,
    Interrupted: 0,
    Cancelled: 0,
    Skipped: 0,
    ClaimTimedOut: 0
  }
  readonly stopSignal = Deferred.makeUnsafe<void>()
  readonly events: Queue.Queue<CorralEvent, Cause.Done> | undefined
  readonly options: RunOptions
  readonly concurrency: number
  readonly runId: string
  readonly clock: Clock.Clock
  readonly locks: ResourceLocks.ResourceLocks["Service"]
  readonly limiter: RateLimiter.Service | undefined
  readonly ledger: Ledger.Service | undefined
  readonly services: Services
  readonly rateQueues = new Map<string, RateQueue>()
  readonly scope: Scope.Closeable
  readonly tracing: boolean
  running = 0
  done = 0
  waiting = 0
  readonly idle: Array<Deferred.Deferred<void>> = []
  stopped: StopReason | undefined = undefined
  spent = Usage.zero
  startedAt = 0

  constructor(
    nodes: ReadonlyArray<Node>,
    options: RunOptions,
    concurrency: number,
    runId: string,
    clock: Clock.Clock,
    services: Services,
    scope: Scope.Closeable
  ) {
    this.options = options
    this.concurrency = concurrency
    this.runId = runId
    this.clock = clock
    this.services = services
    this.locks = services.locks
    this.limiter = services.limiter
    this.ledger = services.ledger
    this.scope = scope
    this.tracing = services.tracing
    this.nodes = nodes
    link(nodes)
    this.mode = options.mode ?? "settle"
    this.maxBypass = options.maxBypass ?? Math.max(32, 4 * concurrency)
    this.gate = new ClaimGate({
      runId,
      locks: services.locks,
      maxBypass: this.maxBypass,
      observing: options.onEvent !== undefined,
      makeReady: (node) => this.makeReady(node),
      wake: () => this.wake(),
      parked: (node, changed) => this.parked(node, changed),
      granted: (node, lease) => this.granted(node, lease)
    })
    this.events = options.onEvent === undefined ? undefined : Effect.runSync(Queue.unbounded<CorralEvent, Cause.Done>())
  }

  get run(): Effect.Effect<RunResult<A, E>, never, R> {
    return Effect.gen({ self: this }, function* () {
      this.startedAt = this.clock.currentTimeMillisUnsafe()
      const consumer =
        this.events === undefined ? undefined : yield* Effect.forkIn(this.consume(this.events), this.scope)
      yield* this.locks.onRelease((lease) => this.gate.onRelease(lease.id)).pipe(Scope.provide(this.scope))
      this.enqueueRoots()
      if (this.options.stopOn !== undefined) {
        const stopOn = this.options.stopOn
        yield* Effect.forkIn(
          Effect.flatMap(stopOn, (reason) => Effect.sync(() => this.stop({ _tag: "Stopped", reason }))),
          this.scope
        )
      }
      const workers = Math.min(this.concurrency, this.nodes.length)
      if (workers > 0) {
        yield* Effect.raceFirst(
          Effect.all(
            Array.from({ length: workers }, () => this.worker()),
            { concurrency: "unbounded", discard: true }
          ),
          Deferred.await(this.stopSignal)
        ).pipe(Effect.onInterrupt(() => this.settleRunning))
      }
      yield* this.settleRunning
      this.cancelRest()
      const endedAt = this.clock.currentTimeMillisUnsafe()
      if (this.events !== undefined) this.emit(() => ({ _tag: "RunFinished", ...this.base(), stopped: this.stopped }))
      if (this.events !== undefined && consumer !== undefined) {
        Queue.endUnsafe(this.events)
        yield* Fiber.await(consumer)
      }
      return new RunResult<A, E>({
        runId: this.runId,
        outcomes: this.nodes.map((node) => node.outcome as Outcome.Outcome<A, E>),
        startedAt: this.startedAt,
        endedAt,
        stopped: this.stopped
      })
    }) as Effect.Effect<RunResult<A, E>, never, R>
  }

  private enqueueRoots(): void {
    const startedAt = this.startedAt
    for (const node of this.nodes) node.queuedAt = startedAt
    if (this.events !== undefined) {
      this.emit(() => ({ _tag: "RunStarted", ...this.base(), concurrency: this.concurrency, mode: this.mode }))
      for (const node of this.nodes) this.emit(() => ({ _tag: "Queued", ...this.base(), agentId: node.id }))
    }
    this.ready.seed(this.nodes)
  }

  private makeReady(node: Node): void {
    this.ready.push(node)
  }

  private get settleRunning(): Effect.Effect<void> {
    return Effect.suspend(() => {
      const running = this.nodes.filter((node) => node.state === "running")
      return Effect.forEach(running, (node) => this.finish(node, Exit.interrupt()), { discard: true })
    })
  }

  private worker(): Effect.Effect<void> {
    const slot: { node: Node | undefined } = { node: undefined }
    const loop = Effect.gen({ self: this }, function* () {
      while (this.stopped === undefined) {
        const node = this.next()
        if (node !== undefined) {
          if (this.ledger !== undefined && node.ledgerKey === undefined && (yield* this.cached(node))) continue
          if (node.agent.rateLimit !== undefined && !node.rateTaken && !(yield* this.takeRate(node))) continue
          if (node.request === undefined) this.start(node)
          else if (!this.gate.check(node) || !(yield* this.gate.acquire(node))) {
            yield* this.armClaimTimer(node)
            continue
          }
          if (this.ready.size > 0) this.wake()
          slot.node = node
          const exit = yield* Effect.exit(this.attempts(node))
          slot.node = undefined
          yield* Effect.uninterruptible(this.finish(node, exit))
          continue
        }
        if (this.done === this.nodes.length) return
        yield* this.sleep
      }
    })
    const reporting = loop.pipe(
      Effect.provideService(Usage.Reporter, (usage) => {
        if (slot.node !== undefined) this.report(slot.node, usage)
      }),
      Effect.provideService(AgentModule.CurrentRef, () => {
        const node = slot.node
        if (node === undefined) return undefined
        return { runId: this.runId, agentId: node.id, attempt: node.attempts, fencingToken: node.lease?.fencingToken }
      })
    )
    return this.services.localLimiter
      ? Effect.provideService(reporting, RateLimiter.RateLimiter, this.limiter!)
      : reporting
  }

  private cached(node: Node): Effect.Effect<boolean> {
    const key = keyOf(node, this.depsOf(node))
    node.ledgerKey = key ?? ""
    if (key === undefined) return Effect.succeed(false)
    return this.ledger!.lookup(key).pipe(
      Effect.catch(() => Effect.succeed(Option.none<Ledger.Entry>())),
      Effect.map((entry) => {
        if (node.state !== "ready") return true
        if (Option.isNone(entry)) return false
        this.record(node, new Outcome.Succeeded({ ...this.common(node), value: entry.value.value, cached: true }))
        return true
      })
    )
  }

  private takeRate(node: Node): Effect.Effect<boolean> {
    const key = node.agent.rateLimit!
    return Effect.flatMap(this.limiter!.tryTake(key, 1), (probe) => {
      if (node.state !== "ready") return Effect.succeed(false)
      if (probe._tag === "Taken") return Effect.succeed((node.rateTaken = true))
      return Effect.as(this.parkForRate(node, key, probe.ms), false)
    })
  }

  private parkForRate(node: Node, key: string, ms: number): Effect.Effect<void> {
    node.state = "parked"
    if (!node.waiting) {
      node.waiting = true
      this.waiting++
    }
    let queue = this.rateQueues.get(key)
    if (queue === undefined) this.rateQueues.set(key, (queue = { heap: new Heap<Node>(before), armed: false }))
    queue.heap.push(node)
    if (this.events !== undefined)
      this.emit(() => ({ _tag: "WaitingForRateLimit", ...this.base(), agentId: node.id, key, ms }))
    return queue.armed ? Effect.void : this.armRate(queue, key, ms)
  }

  private armRate(queue: RateQueue, key: string, ms: number): Effect.Effect<void> {
    queue.armed = true
    return Effect.asVoid(Effect.forkIn(Effect.andThen(Effect.sleep(ms), this.wakeRate(queue, key)), this.scope))
  }

  private wakeRate(queue: RateQueue, key: string): Effect.Effect<void> {
    return Effect.gen({ self: this }, function* () {
      queue.armed = false
      while (queue.heap.size > 0) {
        const node = queue.heap.peek()!
        if (node.state !== "parked") {
          queue.heap.pop()
          continue
        }
        const probe = yield* this.limiter!.tryTake(key, 1)
        if (probe._tag === "Wait") return yield* this.armRate(queue, key, probe.ms)
        queue.heap.pop()
        node.rateTaken = true
        this.makeReady(node)
        this.wake()
      }
    })
  }

  private next(): Node | undefined {
    while (true) {
      const node = this.ready.pop()
      if (node === undefined || node.state === "ready") return node
    }
  }

  private get sleep(): Effect.Effect<void> {
    return Effect.suspend(() => {
      if (this.ready.size > 0 || this.done === this.nodes.length || this.stopped !== undefined) return Effect.void
      const signal = Deferred.makeUnsafe<void>()
      this.idle.push(signal)
      return Deferred.await(signal)
    })
  }

  private wake(): void {
    if (this.idle.length === 0) return
    if (this.done === this.nodes.length) {
      for (const signal of this.idle.splice(0)) Deferred.doneUnsafe(signal, Effect.void)
    } else if (this.ready.size > 0) {
      Deferred.doneUnsafe(this.idle.pop()!, Effect.void)
    }
  }

  private granted(node: Node, lease: ResourceLocks.Lease): void {
    if (this.events !== undefined)
      this.emit(() => ({ _tag: "ClaimsAcquired", ...this.base(), agentId: node.id, fencingToken: lease.fencingToken }))
    this.start(node)
  }

  private parked(node: Node, changed: boolean): void {
    if (!node.waiting) {
      node.waiting = true
      this.waiting++
    }
    if (changed && this.events !== undefined) {
      const blockers = node.wait?.describeBlockers?.() ?? []
      this.emit(() => ({ _tag: "WaitingForClaims", ...this.base(), agentId: node.id, blockers }))
    }
  }

  private armClaimTimer(node: Node): Effect.Effect<void> {
    if (node.claimTimeoutMs === undefined || node.wait?.timer === true || node.state !== "parked") return Effect.void
    waitOf(node).timer = true
    return Effect.asVoid(Effect.forkIn(this.claimTimer(node, node.claimTimeoutMs), this.scope))
  }

  private claimTimer(node: Node, ms: number): Effect.Effect<void> {
    return Effect.sleep(ms).pipe(
      Effect.andThen(
        Effect.sync(() => {
          if (node.state !== "parked" && node.state !== "ready") return
          const blockers = (node.wait?.describeBlockers?.() ?? []).flatMap((blocker) =>
            blocker._tag === "Key"
              ? [{ key: blocker.key, holder: blocker.holder.agentId }]
              : blocker.holders.map((holder) => ({
                  key: `pool:${blocker.pool.slice(this.runId.length + 1)}`,
                  holder: holder.agentId
                }))
          )
          this.gate.dropIntent(node)
          this.record(node, new Outcome.ClaimTimedOut({ ...this.common(node), afterMs: ms, blockers }))
        })
      )
    )
  }

  private start(node: Node): void {
    node.state = "running"
    node.startedAt = this.clock.currentTimeMillisUnsafe()
    if (node.waiting) {
      node.waiting = false
      this.waiting--
    }
    this.running++
    if (this.events !== undefined) this.emit(() => ({ _tag: "Started", ...this.base(), agentId: node.id }))
  }

  private depsOf(node: Node): Record<string, unknown> {
    const deps: Record<string, unknown> = node.deps.length === 0 ? noDeps : {}
    for (const dep of node.deps) deps[dep.id] = dep.value
    return deps
  }

  private attempts(node: Node): Effect.Effect<unknown, unknown> {
    const deps = this.depsOf(node)
    let effect: Effect.Effect<unknown, unknown>
    if (node.agent.retry === undefined) {
      node.attempts = 1
      effect = node.agent.run(deps) as Effect.Effect<unknown, unknown>
      if (this.limiter !== undefined) effect = this.retryRateLimited(node, effect, this.limiter)
    } else {
      effect = Effect.suspend(() => {
        if (++node.attempts > 1 && this.events !== undefined) {
          this.emit(() => ({ _tag: "Retrying", ...this.base(), agentId: node.id, attempt: node.attempts }))
        }
        return node.agent.run(deps) as Effect.Effect<unknown, unknown>
      })
      effect = Effect.retry(effect, node.agent.retry) as Effect.Effect<unknown, unknown>
    }
    if (node.timeoutMs !== undefined) {
      const afterMs = node.timeoutMs
      effect = Effect.timeoutOrElse(effect, { duration: afterMs, orElse: () => Effect.fail(new AgentTimeout(afterMs)) })
    }
    if (!this.tracing) return effect
    return effect.pipe(
      Effect.onExit((exit) =>
        Effect.annotateCurrentSpan({
          "corral.agent.outcome": this.classify(node, exit)._tag,
          "corral.agent.attempts": node.attempts
        })
      ),
      Effect.withSpan("corral.agent", { attributes: { "corral.agent.id": node.id, "corral.run.id": this.runId } })
    )
  }

  private retryRateLimited(
    node: Node,
    effect: Effect.Effect<unknown, unknown>,
    limiter: RateLimiter.Service
  ): Effect.Effect<unknown, unknown> {
    const attempt: Effect.Effect<unknown, unknown> = Effect.catch(effect, (error) => {
      const retryAfter = RateLimiter.retryAfterOf(error)
      if (retryAfter === undefined || node.attempts >= maxRateLimitedAttempts) return Effect.fail(error)
      node.attempts++
      if (this.events !== undefined)
        this.emit(() => ({ _tag: "Retrying", ...this.base(), agentId: node.id, attempt: node.attempts }))
      const key = keyOfError(error, limiter) ?? node.agent.rateLimit
      const wait =
        key === undefined
          ? Effect.sleep(retryAfter)
          : Effect.andThen(limiter.pause(key, retryAfter), limiter.take(key, 1))
      return Effect.andThen(wait, attempt)
    })
    return attempt
  }

  private report(node: Node, usage: Partial<Usage.Usage>): void {
    node.usage = Usage.add(node.usage, usage)
    this.spent = Usage.add(this.spent, usage)
    const budget = this.options.budget
    if (budget === undefined || this.stopped !== undefined) return
    if (budget.costUsd !== undefined && this.spent.costUsd > budget.costUsd) {
      this.stop({
        _tag: "BudgetExceeded",
        agentId: node.id,
        limit: "costUsd",
        spent: this.spent.costUsd,
        budget: budget.costUsd
      })
    } else if (budget.tokens !== undefined && Usage.tokens(this.spent) > budget.tokens) {
      this.stop({
        _tag: "BudgetExceeded",
        agentId: node.id,
        limit: "tokens",
        spent: Usage.tokens(this.spent),
        budget: budget.tokens
      })
    }
  }

  private finish(node: Node, exit: Exit.Exit<unknown, unknown>): Effect.Effect<void> {
    return Effect.suspend(() => {
      if (node.state !== "running") return Effect.void
      node.state = "finishing"
      const lease = node.lease
      if (lease !== undefined) this.gate.releaseLocal(node)
      node.lease = undefined
      const outcome = this.classify(node, exit)
      this.running--
      this.record(node, outcome)
      const release = lease === undefined ? Effect.void : this.locks.release(lease)
      return this.ledger === undefined || outcome._tag !== "Succeeded"
        ? release
        : Effect.andThen(release, this.remember(node, outcome))
    })
  }

  private remember(node: Node, outcome: Outcome.Succeeded): Effect.Effect<void> {
    const key = node.ledgerKey
    if (key === undefined || key === "") return Effect.void
    return this.ledger!.record(key, outcome).pipe(
      Effect.catch((error) =>
        Effect.logWarning(`corral: could not record agent ${JSON.stringify(node.id)} in the ledger`, error.message)
      )
    )
  }

  private classify(node: Node, exit: Exit.Exit<unknown, unknown>): Outcome.Outcome {
    if (Exit.isSuccess(exit)) {
      const endedAt = this.clock.currentTimeMillisUnsafe()
      return new Outcome.Succeeded({
        agentId: node.id,
        attempts: node.attempts,
        queuedAt: node.queuedAt,
        startedAt: node.startedAt ?? null,
        endedAt,
        waitedMs: (node.startedAt ?? endedAt) - node.queuedAt,
        usage: node.usage,
        value: exit.value,
        cached: false
      })
    }
    const common = this.common(node)
    const cause = exit.cause
    if (Cause.hasInterruptsOnly(cause)) return new Outcome.Interrupted({ ...common, reason: this.stopText() })
    const error = Cause.findErrorOption(cause)
    if (error._tag === "Some") {
      if (error.value instanceof AgentTimeout) {
        return new Outcome.TimedOut({ ...common, afterMs: error.value.afterMs })
      }
      return new Outcome.Failed({ ...common, error: error.value, defect: false, message: messageOf(error.value) })
    }
    const defect = Cause.squash(cause)
    return new Outcome.Failed({ ...common, error: defect, defect: true, message: messageOf(defect) }) as Outcome.Outcome
  }

  private common(node: Node) {
    const endedAt = this.clock.currentTimeMillisUnsafe()
    return {
      agentId: node.id,
      attempts: node.attempts,
      queuedAt: node.queuedAt,
      startedAt: node.startedAt ?? null,
      endedAt,
      waitedMs: (node.startedAt ?? endedAt) - node.queuedAt,
      usage: node.usage
    }
  }

  private record(node: Node, outcome: Outcome.Outcome): void {
    if (node.waiting) {
      node.waiting = false
      this.waiting--
    }
    node.state = "done"
    node.outcome = outcome
    this.counts[outcome._tag]++
    this.done++
    if (this.events !== undefined) this.emit(() => ({ _tag: "Finished", ...this.base(), agentId: node.id, outcome }))
    if (outcome._tag === "Succeeded") {
      node.value = outcome.value
      this.release(node)
    } else if (Outcome.isFailure(outcome)) {
      if (this.mode === "fail-fast") this.stop({ _tag: "AgentFailed", agentId: node.id, outcome: outcome._tag })
      else this.skipDependents(node, node, outcome._tag)
    }
    this.wake()
  }

  private release(node: Node): void {
    for (const dependent of node.dependents) {
      if (--dependent.depsLeft === 0 && dependent.state === "waiting-deps") {
        dependent.queuedAt = this.clock.currentTimeMillisUnsafe()
        this.makeReady(dependent)
      }
    }
  }

  private skipDependents(node: Node, root: Node, rootTag: Outcome.Tag): void {
    for (const dependent of node.dependents) {
      if (dependent.state !== "waiting-deps") continue
      const common = this.common(dependent)
      this.record(dependent, new Outcome.Skipped({ ...common, dependency: root.id, dependencyOutcome: rootTag }))
      this.skipDependents(dependent, root, rootTag)
    }
  }

  private stop(reason: StopReason): void {
    if (this.stopped !== undefined) return
    this.stopped = reason
    if (this.events !== undefined) this.emit(() => ({ _tag: "Stopping", ...this.base(), reason }))
    Deferred.doneUnsafe(this.stopSignal, Effect.void)
  }

  private stopText(): string {
    const stopped = this.stopped
    if (stopped === undefined) return "the run was interrupted"
    switch (stopped._tag) {
      case "AgentFailed":
        return `the run stopped after agent ${JSON.stringify(stopped.agentId)} ended ${stopped.outcome}`
      case "BudgetExceeded":
        return `the run stopped: ${stopped.limit} budget of ${stopped.budget} exceeded (${stopped.spent}) by agent ${JSON.stringify(stopped.agentId)}`
      case "Stopped":
        return `the run was stopped: ${stopped.reason}`
    }
  }

  private cancelRest(): void {
    const reason = this.stopText()
    for (const node of this.nodes) {
      if (node.state === "done") continue
      if (node.wait?.intent === true) this.gate.dropIntent(node)
      this.record(node, new Outcome.Cancelled({ ...this.common(node), reason }))
    }
  }

  private emit(make: () => CorralEvent): void {
    Queue.offerUnsafe(this.events!, make())
  }

  private base(): { runId: string; at: number; progress: Progress } {
    return { runId: this.runId, at: this.clock.currentTimeMillisUnsafe(), progress: this.progress() }
  }

  progress(): Progress {
    const total = this.nodes.length
    return {
      total,
      pending: total - this.running - this.done,
      waiting: this.waiting,
      running: this.running,
      done: this.done,
      succeeded: this.counts.Succeeded,
      failed: this.counts.Failed + this.counts.ClaimTimedOut,
      timedOut: this.counts.TimedOut,
      interrupted: this.counts.Interrupted,
      cancelled: this.counts.Cancelled,
      skipped: this.counts.Skipped
    }
  }

  private consume(events: Queue.Queue<CorralEvent, Cause.Done>): Effect.Effect<void> {
    const onEvent = this.options.onEvent!
    let broken = false
    const deliver = (event: CorralEvent) =>
      broken
        ? Effect.void
        : onEvent(event).pipe(
            Effect.catchCause((cause) =>
              Effect.suspend(() => {
                broken = true
                return Effect.logWarning("corral: the event subscriber failed and was detached", Cause.pretty(cause))
              })
            )
          )
    return Effect.forever(Effect.flatMap(Queue.take(events), deliver)).pipe(Effect.catchCause(() => Effect.void))
  }
}

const noDeps: Record<string, unknown> = Object.freeze({})

const limiterOf = (
  options: RunOptions,
  clock: Clock.Clock
): Effect.Effect<{
  limiter: RateLimiter.Service | undefined
  keys: ReadonlyArray<string> | undefined
  issues: ReadonlyArray<Issue>
}> => {
  const buckets = options.rateLimits
  return Effect.map(Effect.serviceOption(RateLimiter.RateLimiter), (service) => {
    const outer = Option.getOrUndefined(service)
    if (buckets === undefined) return { limiter: outer, keys: outer?.keys, issues: [] }
    const issues = RateLimiter.validateBuckets(buckets)
    if (issues.length > 0) return { limiter: undefined, keys: Object.keys(buckets), issues }
    const own = RateLimiter.makeUnsafe(buckets, clock.currentTimeMillisUnsafe())
    const limiter = outer === undefined ? own : RateLimiter.overlay(own, outer)
    return { limiter, keys: limiter.keys, issues }
  })
}

const keyOf = (node: Node, deps: Agent.Deps): string | undefined => {
  try {
    return Ledger.keyOf(node.agent, deps)
  } catch {
    return undefined
  }
}

const keyOfError = (error: unknown, limiter: RateLimiter.Service): string | undefined => {
  const key = typeof error === "object" && error !== null && "key" in error ? error.key : undefined
  return typeof key === "string" && limiter.keys.includes(key) ? key : undefined
}

const messageOf = (error: unknown): string => {
  if (error instanceof Error) return error.message
  if (typeof error === "object" && error !== null) {
    const message = (error as { message?: unknown }).message
    if (typeof message === "string" && message.length > 0) return message
    const tag = (error as { _tag?: unknown })._tag
    if (typeof tag === "string") return tag
  }
  try {
    return typeof error === "string" ? error : JSON.stringify(error)
  } catch {
    return String(error)
  }
}
