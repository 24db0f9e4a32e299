/**
 * One run: up to `min(concurrency, agents)` worker fibers, started on demand, pull ready agents
 * and run them inline. The
 * pieces live beside this file, one concern each:
 *
 * - `lifecycle.ts`: the agent state machine (diagram and table) and the progress counters;
 * - `readiness.ts`: the ready queue and agents parked for rate-limit tokens;
 * - `claimGate.ts`: when an agent with claims may start;
 * - `execute.ts`: executing one agent (context, attempts, timeout, span) and classifying its exit;
 * - `stopping.ts`: stop requests (fail-fast, budget, `stopOn`) and the reasons outcomes give;
 * - `events.ts`: delivery of events to the subscriber, bounded.
 *
 * This file wires them: the worker loop, starting and finishing agents, dependencies, ledger
 * lookups, usage and the end of the run.
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Result from "effect/Result"
import * as Scope from "effect/Scope"
import * as AgentModule from "../Agent.ts"
import type * as Corral from "../Corral.ts"
import type { CorralEvent, StopReason } from "../CorralEvent.ts"
import type { InvalidRun, Issue } from "../CorralError.ts"
import * as Ledger from "../Ledger.ts"
import * as Outcome from "../Outcome.ts"
import * as RateLimiter from "../RateLimiter.ts"
import * as ResourceLocks from "../ResourceLocks.ts"
import { RunResult } from "../RunResult.ts"
import * as Usage from "../Usage.ts"
import { ClaimGate, type GateHost } from "./claimGate.ts"
import { EventSink } from "./events.ts"
import { forkedSince, snapshot } from "./agentChildren.ts"
import { annotate } from "./annotations.ts"
import { callerOf } from "./caller.ts"
import { attempts, bind, classify, common, type ExecHost, succeeded } from "./execute.ts"
import { boundWaits, type Held } from "./inherit.ts"
import { type AgentFrame, agentFrame, enter, isExitFast, type Owner, under } from "./continuation.ts"
import { Lifecycle } from "./lifecycle.ts"
import { Compact, link, Node, plainNode, Times, waitOf } from "./node.ts"
import { RateWaits, ReadyQueue } from "./readiness.ts"
import { drawRunId, formatRunId } from "./runId.ts"
import { overBudget, Stopping } from "./stopping.ts"
import { noPools, validate } from "./validate.ts"

export type RunOptions = Corral.Options

export { maxRateLimitedAttempts } from "./execute.ts"

const defaultEventBuffer = 10_000

/** How long a run interrupted from outside waits for its subscriber to handle its last events. */
const interruptGrace = "1 second"

/** The stop a run interrupted from outside reports in its `Stopping` and `RunFinished` events. */
const interruptedStop: StopReason = { _tag: "Stopped", reason: "interrupted" }

interface Services {
  readonly locks: ResourceLocks.ResourceLocks["Service"]
  readonly held: Held | undefined
  readonly parent: AgentModule.Frame | undefined
  readonly annotations: Readonly<Record<string, unknown>>
  readonly logAnnotations: Readonly<Record<string, unknown>>
  readonly queue: Queue.Queue<CorralEvent, Cause.Done> | undefined
  readonly limiter: RateLimiter.Service | undefined
  readonly localLimiter: boolean
  readonly ledger: Ledger.Service | undefined
  readonly tracing: boolean
}

/**
 * Everything a run reads from its context is read synchronously from the calling fiber (one
 * `withFiber` rather than a generator step per service): a nested run pays this every time.
 */
export const run = <A, E, R>(
  agents: ReadonlyArray<AgentModule.Agent<A, E, R>>,
  options: RunOptions = {}
): Effect.Effect<RunResult<A, E>, InvalidRun, R> =>
  Effect.withFiber((fiber) => {
    const caller = callerOf(fiber)
    const clock = caller.clock
    const now = clock.currentTimeMillisUnsafe()
    const draw = options.runId === undefined ? drawRunId(caller.random) : 0
    const tracing = caller.tracing
    const runId = options.runId ?? (tracing || options.pools !== undefined ? formatRunId(now, draw) : undefined)
    const concurrency = options.concurrency ?? 8
    const limits = limiterOf(options, clock, caller.limiter)
    const parent = caller.parent
    const inherited = parent instanceof Node ? parent.inherited() : undefined
    const nodes = validate(
      agents,
      {
        held: inherited?.held,
        eventBuffer: options.eventBuffer,
        budget: options.budget,
        maxBypass: options.maxBypass,
        mode: options.mode,
        onEvent: options.onEvent,
        stopOn: options.stopOn,
        concurrency,
        pools: options.pools ?? noPools,
        claimTimeout: options.claimTimeout,
        poolScope: runId === undefined ? "" : `${runId}/`,
        rateLimits: limits.keys,
        issues: limits.issues
      },
      true
    )
    if (Result.isFailure(nodes)) return Effect.fail(nodes.failure)
    if (inherited !== undefined && nodes.success?.some((node) => node.claimTimeoutMs !== undefined)) {
      boundWaits(
        inherited.locks,
        nodes.success!.flatMap((node) => (node.claimTimeoutMs === undefined ? [] : [node.id]))
      )
    }
    const start = (queue: Queue.Queue<CorralEvent, Cause.Done> | undefined) => {
      const services: Services = {
        locks: inherited?.locks ?? caller.locks ?? fiber.getRef(ResourceLocks.DefaultLocks),
        held: inherited?.held,
        parent,
        annotations: caller.annotations,
        logAnnotations: caller.logAnnotations,
        queue,
        limiter: limits.limiter,
        localLimiter: options.rateLimits !== undefined,
        ledger: caller.ledger,
        tracing
      }
      const runner = new Runner<A, E, R>(
        nodesOf(agents, nodes.success, options, services),
        options,
        concurrency,
        runId,
        draw,
        now,
        clock,
        services
      )
      if (runner.direct && !tracing) return runner.runDirect(fiber)
      const scope = runner.scope
      if (scope === undefined) return runner.run
      return Effect.onExit(runner.run, (exit) =>
        runner.events !== undefined && Exit.hasInterrupts(exit)
          ? Effect.andThen(runner.interruptedEnd, Scope.close(scope, exit))
          : Scope.close(scope, exit)
      )
    }
    const execute =
      options.onEvent === undefined
        ? start(undefined)
        : Effect.flatMap(Queue.unbounded<CorralEvent, Cause.Done>(), start)
    return tracing
      ? Effect.withSpan(execute, "corral.run", {
          attributes: { "corral.run.id": runId!, "corral.run.agents": agents.length }
        })
      : execute
  })

/**
 * Runs of fewer than `min` agents are never compact: their nodes die young anyway, and the store's
 * arrays cost more to make than the nodes (2,000 runs of 10 agents: ≈ +0.5 µs CPU per run). Tests
 * lower it to run small cases through compact runs.
 */
export const compactRuns = { min: 256 }

/**
 * Whether a run of `total` agents may be compact: it has at least `compactRuns.min` agents, no ledger
 * and no subscriber. Such a run is compact when every agent is plain (`nodesOf`: `validate` made no
 * node) or when its agents have claims, none has dependencies and all are of one priority (the
 * `Runner` constructor: the store takes the nodes `validate` made for this run alone).
 */
const mayBeCompact = (total: number, options: RunOptions, services: Services): boolean =>
  total >= compactRuns.min && services.ledger === undefined && options.onEvent === undefined

/**
 * The nodes of a run, or its `Compact` store when every agent is plain (`undefined` from `validate`:
 * no node made yet) and the run may be compact (`mayBeCompact`). The store reads a copy of the
 * caller's array: an agent is read when it comes up, after the caller may have changed the array.
 */
const nodesOf = (
  agents: ReadonlyArray<AgentModule.Any>,
  nodes: ReadonlyArray<Node> | undefined,
  options: RunOptions,
  services: Services
): ReadonlyArray<Node> | Compact => {
  if (nodes !== undefined) return nodes
  if (mayBeCompact(agents.length, options, services)) return new Compact(agents.slice())
  const made: Array<Node> = []
  for (let index = 0; index < agents.length; index++) made.push(plainNode(index, agents[index]!))
  return made
}

const noNodes: ReadonlyArray<Node> = []

/**
 * The nodes' outcomes, in a loop (like `nodesOf`'s nodes): `Array.prototype.map` with a callback
 * costs a builtin call per element in code that runs once per run (≈ 0.4k instructions per agent of
 * a small run, callgrind).
 */
const outcomesOf = (nodes: ReadonlyArray<Node>): Array<Outcome.Outcome | undefined> => {
  const outcomes: Array<Outcome.Outcome | undefined> = []
  for (let index = 0; index < nodes.length; index++) outcomes.push(nodes[index]!.outcome)
  return outcomes
}

/** The worker fibers of a run none of whose workers has suspended (never added to). */
const noFibers: Set<Fiber.Fiber<void>> = new Set()

/** The top-up cell while `Runner.topUp` starts workers: never holds a runner. */
const heldOff: { runner: undefined } = { runner: undefined }

class Runner<A, E, R> implements ExecHost {
  /** Every node of the run, made before it starts; empty in a compact run (see `compact`). */
  readonly nodes: ReadonlyArray<Node>
  /** A compact run's agents and outcomes: its nodes are made when they come up and dropped when they end. */
  readonly compact: Compact | undefined
  /** How many agents the run has. */
  readonly total: number
  readonly lifecycle: Lifecycle
  readonly ready = new ReadyQueue()
  /** Only for runs with an agent that has claims. */
  readonly gate: ClaimGate | undefined
  readonly rateWaits: RateWaits | undefined
  readonly stopping = new Stopping<Node>()
  readonly events: EventSink | undefined
  readonly mode: "settle" | "fail-fast"
  readonly options: RunOptions
  readonly concurrency: number
  /** The run's id once formatted, before that the random part of a generated one (see `runId`). */
  private id: string | number
  readonly clock: Clock.Clock
  readonly locks: ResourceLocks.ResourceLocks["Service"]
  readonly limiter: RateLimiter.Service | undefined
  readonly ledger: Ledger.Service | undefined
  readonly services: Services
  /** Holds the run's background fibers; only runs that can fork one (claims, limiter, events, `stopOn`) have it. */
  readonly scope: Scope.Closeable | undefined
  readonly tracing: boolean
  readonly held: Held | undefined
  readonly idle: Array<Deferred.Deferred<void>> = []
  /** Worker fibers that suspended and have not ended; `noFibers` until the first one suspends. */
  workerFibers: Set<Fiber.Fiber<void>> = noFibers
  /** Worker fibers started and not ended (counted from before a worker's first synchronous stretch). */
  liveWorkers = 0
  /**
   * Running agents that gave their slot back (`Corral.releaseSlot`): each lets one more worker run,
   * so workers ≤ `maxWorkers + released` bounds the agents that hold a slot by `maxWorkers`.
   */
  released = 0
  /** Released agents waiting to take a slot again for a retry (see `retake`), first come first served. */
  readonly retakers: Array<Deferred.Deferred<void>> = []
  /** Set when the last worker ended, a worker died, or the run stops (see `settle`). */
  settled = false
  /** The run's fiber waiting in `awaitEnd`, resumed by `settle`. */
  private onSettled: ((effect: Effect.Effect<RunResult<A, E>>) => void) | undefined = undefined
  maxWorkers = 0
  /**
   * The queued top-up task's hold on this runner, cut when the run ends: the task runs on a later
   * scheduler turn, and until then it would keep the whole run (agents, outcomes) alive, across any
   * number of runs that complete without a macrotask in between.
   */
  topUpCell: { runner: Runner<A, E, R> | undefined } | undefined = undefined
  /** The run's own fiber, whose dispatcher runs the top-up task (see `wake`). */
  runFiber: Fiber.Fiber<unknown, unknown> | undefined = undefined
  draining = false
  workerContext: Context.Context<never> | undefined = undefined
  /** Forks a worker in `workerContext`. */
  fork: ((effect: Effect.Effect<void>) => Fiber.Fiber<void>) | undefined = undefined
  workerDefect: Cause.Cause<unknown> | undefined = undefined
  /** The subscriber's fiber, once forked. */
  consumer: Fiber.Fiber<void> | undefined = undefined
  /** A `Stopping` event was emitted for an interruption from outside. */
  private interruptNoted = false
  readonly logAnnotations: Readonly<Record<string, unknown>>
  spent = Usage.zero
  /** The run's start (see `Times`). */
  private readonly start0 = new Times()
  /** The last clock reading (see `Times`). */
  private readonly last = new Times()
  /** Set once the outcomes are final: later usage goes to the enclosing agent or is dropped. */
  finished = false
  /** Every node is a root and they are already in priority order (no dependencies, one priority). */
  readonly inOrder: boolean

  constructor(
    nodes: ReadonlyArray<Node> | Compact,
    options: RunOptions,
    concurrency: number,
    runId: string | undefined,
    draw: number,
    startedAt: number,
    clock: Clock.Clock,
    services: Services
  ) {
    this.options = options
    this.concurrency = concurrency
    this.id = runId ?? draw
    this.clock = clock
    this.services = services
    this.locks = services.locks
    this.limiter = services.limiter
    this.ledger = services.ledger
    this.start0.value = startedAt
    this.tracing = services.tracing
    this.held = services.held
    this.logAnnotations = services.logAnnotations
    let compact = nodes instanceof Compact ? nodes : undefined
    const made = compact === undefined ? (nodes as ReadonlyArray<Node>) : noNodes
    this.total = compact === undefined ? made.length : compact.agents.length
    let claims = false
    let graph = false
    let uniform = true
    let roots = compact === undefined ? 0 : this.total
    const priority = made.length > 0 ? made[0]!.priority : 0
    for (let index = 0; index < made.length; index++) {
      const node = made[index]!
      node.host = this
      if (node.request !== undefined) claims = true
      if (node.depIndices.length > 0) graph = true
      else {
        node.state = "ready"
        roots++
      }
      if (node.priority !== priority) uniform = false
    }
    if (graph) link(made)
    this.inOrder = !graph && uniform
    if (claims && this.inOrder && mayBeCompact(made.length, options, services)) {
      compact = Compact.ofNodes(made as Array<Node>)
    }
    this.compact = compact
    this.nodes = compact === undefined ? made : noNodes
    this.lifecycle = new Lifecycle(this.total)
    this.lifecycle.seeded(roots)
    this.mode = options.mode ?? "settle"
    const limiter = services.limiter
    const forks = claims || limiter !== undefined || options.onEvent !== undefined || options.stopOn !== undefined
    this.scope = forks ? Scope.makeUnsafe() : undefined
    this.gate = !claims
      ? undefined
      : new ClaimGate(
          new RunnerGateHost(
            this,
            this.runId,
            services.locks,
            options.maxBypass ?? Math.max(32, 4 * concurrency),
            options.onEvent !== undefined
          )
        )
    this.rateWaits =
      limiter === undefined
        ? undefined
        : new RateWaits({
            limiter,
            scope: this.scope!,
            makeReady: (node) => this.makeReady(node),
            wake: () => this.wake()
          })
    this.events =
      services.queue === undefined
        ? undefined
        : new EventSink(services.queue, this.runId, clock, this.lifecycle, options.eventBuffer ?? defaultEventBuffer)
  }

  /**
   * The run's id: the given one, or one generated from the run's start and the draw made then,
   * formatted when first read. A direct run reads it once its first workers have started
   * (`runDirect`): formatting it cold before the first agent's timer was set delayed that timer.
   */
  get runId(): string {
    const id = this.id
    return typeof id === "string" ? id : this.formatId(id)
  }

  private formatId(draw: number): string {
    const id = formatRunId(this.start0.value!, draw)
    this.id = id
    return id
  }

  /** When the run queued its roots: the `queuedAt` of every agent that never waited for a dependency. */
  get startedAt(): number {
    return this.start0.value!
  }

  /** The clock's time, as the box shared by every reading in the same millisecond (see `Times`). */
  now(): number {
    const now = this.clock.currentTimeMillisUnsafe()
    const last = this.last
    if (last.value !== now) last.value = now
    return last.value
  }

  get run(): Effect.Effect<RunResult<A, E>, never, R> {
    return Effect.gen(() => this.runBody()) as Effect.Effect<RunResult<A, E>, never, R>
  }

  /**
   * The run's body. Generator functions are methods (one function object), never created per run:
   * in Node 24 every new generator function object gets its own `prototype`, so its generators get
   * a new hidden class each time, which cost ≈ 3 µs per run and made effect's generator loop
   * megamorphic. `Effect.gen` is given an arrow that calls the method: its `{ self }` form takes
   * its arguments apart with an array iterator on every call (a worker's start included).
   */
  private *runBody() {
    const events = this.events
    const consumer =
      events === undefined ? undefined : yield* Effect.forkIn(events.consume(this.options.onEvent!), this.scope!)
    this.consumer = consumer
    const gate = this.gate
    if (gate !== undefined)
      yield* this.locks.onRelease((lease) => gate.onRelease(lease.id)).pipe(Scope.provide(this.scope!))
    this.enqueueRoots()
    if (events !== undefined) {
      events.emit({ _tag: "RunStarted", ...events.base(), concurrency: this.concurrency, mode: this.mode })
      let progress = this.lifecycle.progress()
      for (const node of this.nodes) {
        if (events.admit()) events.emit(events.queued(node.id, this.startedAt, progress))
        const catchUp = events.catchUp()
        if (catchUp === undefined) continue
        yield* catchUp
        progress = this.lifecycle.progress()
      }
    }
    const stopOn = this.options.stopOn
    if (stopOn !== undefined) {
      yield* Effect.forkIn(
        Effect.flatMap(stopOn, (reason) => this.stopOnCompleted({ _tag: "Stopped", reason })),
        this.scope!,
        { startImmediately: true }
      )
    }
    if (this.launch(Fiber.getCurrent()!)) return yield* this.awaitEnd
    return yield* this.ending()
  }

  /**
   * Whether the run can start in the caller's own synchronous step (`runDirect`): it forks no
   * background fiber (no claims, limiter, subscriber or `stopOn`), so it needs no scope and no
   * step before its workers start.
   */
  get direct(): boolean {
    return this.scope === undefined
  }

  /**
   * `run` of a `direct` run without tracing, called from the run's own fiber: the roots are queued
   * and the first workers started before the run's effect is returned, with no generator and no
   * effect step before the first agent starts. Its end is `runBody`'s (`awaitEnd`, `ending`).
   */
  runDirect(fiber: Fiber.Fiber<unknown, unknown>): Effect.Effect<RunResult<A, E>, never, R> {
    this.enqueueRoots()
    if (!this.launch(fiber)) return this.ending()
    if (typeof this.id === "number") this.formatId(this.id)
    return this.awaitEnd
  }

  /**
   * The run's end, once it no longer waits for its workers (they are done or the run stops). A run
   * with nothing left to wait for (no worker fiber, defect or running agent, no subscriber, no
   * `stopOn`) ends here, at once: the last worker's exit makes the result and resumes the run's
   * fiber with it (`settle`), with no effect step between. Otherwise `endSteps`.
   */
  private ending(): Effect.Effect<RunResult<A, E>> {
    if (
      this.workerFibers.size > 0 ||
      this.workerDefect !== undefined ||
      this.lifecycle.running > 0 ||
      this.events !== undefined ||
      this.options.stopOn !== undefined
    ) {
      return Effect.gen(() => this.endSteps())
    }
    this.draining = true
    if (!this.lifecycle.allDone) this.cancelRest()
    return Effect.succeed(this.end(this.clock.currentTimeMillisUnsafe()))
  }

  /**
   * The run's end with something to wait for: stops the workers still running, fails with a
   * worker's defect, ends the running agents `Interrupted`, lets a completed `stopOn`'s fiber set
   * the reason, cancels the agents never started, and hands the subscriber `RunFinished`.
   */
  private *endSteps() {
    if (this.workerFibers.size > 0) yield* this.stopWorkers
    else this.draining = true
    if (this.workerDefect !== undefined) return yield* Effect.failCause(this.workerDefect as Cause.Cause<never>)
    if (this.lifecycle.running > 0) yield* this.settleRunning
    if (this.options.stopOn !== undefined && this.stopping.reason === undefined) yield* Effect.yieldNow
    if (!this.lifecycle.allDone) this.cancelRest()
    const endedAt = this.clock.currentTimeMillisUnsafe()
    const events = this.events
    const consumer = this.consumer
    if (events !== undefined && consumer !== undefined) {
      this.close()
      events.final({ _tag: "RunFinished", ...events.base(), stopped: this.stopping.reason })
      yield* Fiber.await(consumer)
      return this.result(endedAt)
    }
    return this.end(endedAt)
  }

  /**
   * Starts the run's first workers from `fiber`, the run's own fiber. `true` when the run must wait
   * for them (a worker is still running, or one died); `false` when there was no worker to start or
   * every agent ended before any suspended.
   */
  private launch(fiber: Fiber.Fiber<unknown, unknown>): boolean {
    const workers = Math.min(this.concurrency, this.total)
    if (workers === 0 || this.stopping.reason !== undefined) return false
    this.maxWorkers = workers
    this.workerContext = annotate(fiber.context, this.services.annotations, this, this.logAnnotations)
    this.runFiber = fiber
    this.fork = Effect.runForkWith(this.workerContext)
    this.topUp()
    if (this.workerFibers.size === 0 && this.workerDefect === undefined) {
      this.draining = true
      return false
    }
    return true
  }

  /**
   * Waits until the workers are done or the run stops, then runs the run's end (`ending`);
   * interrupted, it stops the workers and ends the running agents (the callback's cancel effect,
   * which runs uninterruptibly). One callback rather than `Deferred.await` under
   * `Effect.onInterrupt`: on the run's end path that frame cost an `Exit`, a finalizer call and a
   * `flatMap` before the run's end could run.
   */
  private get awaitEnd(): Effect.Effect<RunResult<A, E>> {
    return Effect.callback<RunResult<A, E>>((resume) => {
      if (this.settled) return resume(this.ending())
      this.onSettled = resume
      return Effect.suspend(() => {
        this.onSettled = undefined
        this.noteInterrupt()
        return Effect.andThen(this.stopWorkers, this.settleRunning)
      })
    })
  }

  /** The workers are done or the run stops: resumes the run's fiber with its end if it waits in `awaitEnd`. */
  private settle(): void {
    if (this.settled) return
    this.settled = true
    const resume = this.onSettled
    if (resume === undefined) return
    this.onSettled = undefined
    resume(this.ending())
  }

  /**
   * The end of a run with a subscriber that was interrupted from outside (the run's fiber runs it
   * uninterruptibly, before its scope closes): its agents are stopped as on any interruption,
   * those still pending are `Cancelled`, and the subscriber gets their `Finished` events and
   * `RunFinished` (stopped: `interrupted`), then up to `interruptGrace` to handle them before the
   * scope interrupts it. A run interrupted after its `RunFinished` only grants the grace.
   */
  get interruptedEnd(): Effect.Effect<void> {
    return Effect.suspend(() => {
      const consumer = this.consumer
      if (consumer === undefined) return Effect.void
      const grace = Effect.timeoutOption(Fiber.await(consumer), interruptGrace)
      if (this.finished) return Effect.asVoid(grace)
      this.noteInterrupt()
      return Effect.andThen(this.stopWorkers, this.settleRunning).pipe(
        Effect.andThen(Effect.sync(() => this.finalAfterInterrupt())),
        Effect.andThen(grace),
        Effect.asVoid
      )
    })
  }

  private finalAfterInterrupt(): void {
    if (!this.lifecycle.allDone) this.cancelRest()
    this.close()
    const events = this.events!
    events.final({ _tag: "RunFinished", ...events.base(), stopped: this.stopping.reason ?? interruptedStop })
  }

  /** A `Stopping` event for an interruption from outside, once, unless the run was already stopping. */
  private noteInterrupt(): void {
    const events = this.events
    if (events === undefined || this.interruptNoted || this.stopping.reason !== undefined) return
    this.interruptNoted = true
    events.emit({ _tag: "Stopping", ...events.base(), reason: interruptedStop })
  }

  /** The run is over: later usage goes to the enclosing agent, and a queued top-up task lets go of it. */
  private close(): void {
    this.finished = true
    if (this.topUpCell !== undefined) this.topUpCell.runner = undefined
  }

  private end(endedAt: number): RunResult<A, E> {
    this.close()
    return this.result(endedAt)
  }

  private result(endedAt: number): RunResult<A, E> {
    return new RunResult<A, E>({
      runId: this.runId,
      outcomes: (this.compact === undefined
        ? outcomesOf(this.nodes)
        : this.compact.outcomes(this.startedAt)) as ReadonlyArray<Outcome.Outcome<A, E>>,
      startedAt: this.startedAt,
      endedAt,
      stopped: this.stopping.reason
    })
  }

  // workers

  /**
   * Starts one more worker fiber, which runs at once until it first suspends. Workers start on
   * demand, not `min(concurrency, agents)` at once: the first when the run starts, further ones
   * from a task queued on the scheduler when a worker finds more agents ready (`wake`). The task
   * runs once the current fiber suspends, and then starts as many workers as there are ready agents
   * (up to the limit), so agents that yield all start in the scheduler turn they did before, while
   * agents that complete without yielding are all run by the first worker: no fiber each. The
   * run's first stretch starts its workers itself (`topUp`).
   */
  private spawn(): void {
    this.liveWorkers++
    const fiber = this.fork!(this.worker())
    const exit = fiber.pollUnsafe()
    if (exit !== undefined) {
      this.ended(exit)
      return
    }
    if (this.workerFibers === noFibers) this.workerFibers = new Set()
    this.workerFibers.add(fiber)
    fiber.addObserver((exit) => {
      this.workerFibers.delete(fiber)
      this.ended(exit)
    })
  }

  private ended(exit: Exit.Exit<void>): void {
    this.liveWorkers--
    if (this.retakers.length > 0) this.admitRetakers()
    if (Exit.isFailure(exit) && !Cause.hasInterruptsOnly(exit.cause)) this.workerDefect ??= exit.cause
    if (this.liveWorkers === 0 || this.workerDefect !== undefined) this.settle()
  }

  /**
   * Starts workers while one is needed: from the queued top-up task, and in the run's first
   * synchronous stretch, so that the first wave of agents that suspend starts before the run's own
   * fiber suspends, as `Effect.forEach` forks its fibers, rather than from a top-up task a scheduler
   * turn later. `heldOff` stands in for a queued task meanwhile, so `wake` queues none: this loop
   * starts every worker `wake` would ask for.
   */
  private topUp(): void {
    this.topUpCell = heldOff
    while (this.needsWorker()) this.spawn()
    this.topUpCell = undefined
  }

  private needsWorker(): boolean {
    return (
      this.ready.size > 0 &&
      this.idle.length === 0 &&
      this.liveWorkers < this.maxWorkers + this.released &&
      !this.draining &&
      this.stopping.reason === undefined
    )
  }

  /** Interrupts the workers still running (the run stopped or was interrupted) and awaits them. */
  private get stopWorkers(): Effect.Effect<void> {
    return Effect.suspend(() => {
      this.draining = true
      return this.workerFibers.size === 0 ? Effect.void : Fiber.interruptAll([...this.workerFibers])
    })
  }

  private worker(): Effect.Effect<void> {
    const loop = Effect.gen(() => this.workerBody())
    return this.services.localLimiter ? Effect.provideService(loop, RateLimiter.RateLimiter, this.limiter!) : loop
  }

  /**
   * One worker: takes ready agents and runs them inline until none is pending (waiting for its
   * dependencies, a worker, claims or a token), so that the last agents' workers end as those agents
   * end rather than all at once after the last one (which delayed the run's end). `endedAt` is the time
   * the previous agent ended while nothing has yielded since: the next agent started in the same
   * synchronous stretch starts at that time, without reading the clock again. An agent runs under
   * its `Stint` (see there), which also runs the agents after it that need nothing from this loop.
   * Its result is taken with a plain `yield`, which `Effect.gen` runs as it runs `yield*` and
   * answers with the value: `yield*` would build an iterator for the effect and step through it.
   */
  private *workerBody() {
    const fiber = Fiber.getCurrent()!
    const context = fiber.context
    const stint = new Stint(this, fiber, context)
    let endedAt: number | undefined
    while (this.stopping.reason === undefined) {
      if (this.retakers.length > 0 && this.surplus() > 0 && stint.pending === undefined) return
      const node = stint.next()
      if (node === undefined) {
        if (this.lifecycle.nonePending) return
        endedAt = undefined
        yield* this.sleep
        continue
      }
      if (this.ledger !== undefined && node.ledgerKey === undefined) {
        endedAt = undefined
        if (yield* this.cached(node)) continue
      }
      if (node.agent.rateLimit !== undefined && !node.rateTaken) {
        endedAt = undefined
        if (!(yield* this.takeRate(node))) continue
      }
      if (node.request === undefined) this.start(node, endedAt)
      else if (
        !this.gate!.check(node) ||
        !(this.gate!.table !== undefined ? this.gate!.acquireNow(node) : yield* this.gate!.acquire(node))
      ) {
        endedAt = undefined
        yield* this.armClaimTimer(node)
        continue
      }
      if (this.ready.size > 0) this.wake()
      if (this.stopping.reason !== undefined) return yield* this.unstart(node)
      const release: Effect.Effect<void> | undefined = yield stint.run(node)
      endedAt = stint.endedAt
      if (release !== undefined) {
        endedAt = undefined
        yield* Effect.uninterruptible(release)
      }
      if (stint.slotEnded) {
        stint.slotEnded = false
        if (this.surplus() > 0) return
      }
      const catchUp = this.events?.catchUp()
      if (catchUp !== undefined) {
        endedAt = undefined
        yield* catchUp
      }
    }
  }

  /**
   * Ends the stint's agent, synchronously. Answers the next agent, already started, when it needs
   * nothing from the worker loop (no ledger, rate limit, claims or events, and the run goes on);
   * else what the loop runs: the release of the ended agent's claims (released here, on an in-memory
   * lock service), or nothing.
   */
  agentEnded(
    stint: Stint,
    node: Node,
    exit: Exit.Exit<unknown, unknown> | undefined,
    value: unknown
  ): Node | Effect.Effect<unknown> {
    const endedAt = this.now()
    stint.endedAt = endedAt
    if (node.slotReleased) {
      node.slotReleased = false
      this.released--
      stint.slotEnded = true
    }
    if (this.ledger !== undefined || (node.lease !== undefined && this.gate!.table === undefined)) {
      return Effect.succeed(this.finish(node, exit ?? Exit.succeed(value)))
    }
    if (node.lease !== undefined) this.finishNow(node, exit, value, endedAt)
    else if (node.state === "running") {
      if (exit === undefined && this.compact !== undefined) this.recordValue(node, value, endedAt)
      else this.record(node, exit === undefined ? succeeded(endedAt, node, value) : classify(this, node, exit, endedAt))
    }
    if (
      exit !== undefined ||
      this.events !== undefined ||
      this.stopping.reason !== undefined ||
      stint.slotEnded ||
      (this.retakers.length > 0 && this.surplus() > 0)
    ) {
      return noRelease
    }
    const next = this.ready.next()
    if (next === undefined) return noRelease
    if (next.agent.rateLimit !== undefined || next.request !== undefined) {
      stint.pending = next
      return noRelease
    }
    this.start(next, endedAt)
    if (this.ready.size > 0) this.wake()
    return next
  }

  // released slots

  /**
   * `Corral.releaseSlot` for a running agent: it keeps running on its worker (and keeps its claims),
   * and one more worker may run, so the next ready agent starts at once. `false` when the agent is
   * not running in this run, has already released its slot, or the run is over.
   */
  releaseSlot(node: Node): boolean {
    if (node.state !== "running" || node.slotReleased || this.finished || this.draining) return false
    node.slotReleased = true
    this.released++
    if (this.retakers.length > 0) this.admitRetakers()
    else if (this.ready.size > 0) this.wake()
    return true
  }

  /** Workers beyond what the agents that hold a slot and the released ones allow. */
  private surplus(): number {
    return this.liveWorkers - this.maxWorkers - this.released
  }

  /**
   * A released agent that starts another attempt takes a slot again: at once when a worker's
   * capacity is free, else once a surplus worker has ended (an idle one is told to end now; a busy one
   * ends after its agent instead of taking the next). Interrupted while it waits, it stays released.
   */
  retake(node: Node): Effect.Effect<void> {
    return Effect.suspend(() => {
      if (!node.slotReleased || node.state !== "running") return Effect.void
      node.slotReleased = false
      this.released--
      if (this.surplus() <= this.retakers.length) return Effect.void
      const admitted = Deferred.makeUnsafe<void>()
      this.retakers.push(admitted)
      if (this.idle.length > 0) Deferred.doneUnsafe(this.idle.pop()!, Effect.void)
      return Deferred.await(admitted).pipe(
        Effect.onInterrupt(() =>
          Effect.sync(() => {
            const at = this.retakers.indexOf(admitted)
            if (at >= 0) this.retakers.splice(at, 1)
            if (node.state === "running" && !node.slotReleased) {
              node.slotReleased = true
              this.released++
            }
          })
        )
      )
    })
  }

  /** Lets in the waiting retakers that the workers now leave room for. */
  private admitRetakers(): void {
    while (this.retakers.length > Math.max(0, this.surplus())) {
      Deferred.doneUnsafe(this.retakers.shift()!, Effect.void)
    }
  }

  // queueing and readiness

  /**
   * Queues the roots: the nodes without dependencies, which the constructor moved to `ready` in its
   * one pass over the nodes (their `queuedAt` is the run's start).
   */
  private enqueueRoots(): void {
    const compact = this.compact
    if (compact !== undefined) {
      this.ready.seedLazily(this.total, (index) => compact.node(index, this)!)
      return
    }
    if (this.inOrder) {
      this.ready.seedInOrder(this.nodes)
      return
    }
    const roots: Array<Node> = []
    for (const node of this.nodes) if (node.state === "ready") roots.push(node)
    this.ready.seed(roots)
  }

  makeReady(node: Node): void {
    this.lifecycle.move(node, "ready")
    this.ready.push(node)
  }

  private get sleep(): Effect.Effect<void> {
    return Effect.suspend(() => {
      if (this.ready.size > 0 || this.lifecycle.nonePending || this.stopping.reason !== undefined) return Effect.void
      const signal = Deferred.makeUnsafe<void>()
      this.idle.push(signal)
      return Deferred.await(signal)
    })
  }

  wake(): void {
    if (this.idle.length === 0) {
      if (this.topUpCell === undefined && this.needsWorker()) {
        const cell: { runner: Runner<A, E, R> | undefined } = { runner: this }
        this.topUpCell = cell
        this.runFiber!.currentDispatcher.scheduleTask(() => cell.runner?.topUp(), 0)
      }
    } else if (this.lifecycle.nonePending) {
      this.endIdle()
    } else if (this.ready.size > 0) {
      Deferred.doneUnsafe(this.idle.pop()!, Effect.void)
    }
  }

  private cached(node: Node): Effect.Effect<boolean> {
    const key = keyOf(node, depsOf(node))
    node.ledgerKey = key ?? ""
    if (key === undefined) return Effect.succeed(false)
    return this.ledger!.lookup(key).pipe(
      Effect.catch(() => Effect.succeed(Option.none<Ledger.Entry>())),
      Effect.map((entry) => {
        if (node.state !== "ready") return true
        if (Option.isNone(entry)) return false
        this.record(
          node,
          new Outcome.Succeeded({ ...common(this.clock, node), value: entry.value.value, cached: true })
        )
        return true
      })
    )
  }

  private takeRate(node: Node): Effect.Effect<boolean> {
    const key = node.agent.rateLimit!
    return Effect.flatMap(this.limiter!.tryTake(key, 1), (probe) => {
      if (node.state !== "ready") return Effect.succeed(false)
      if (probe._tag === "Taken") return Effect.succeed((node.rateTaken = true))
      this.lifecycle.move(node, "parked")
      const events = this.events
      if (events !== undefined) {
        events.emit({ _tag: "WaitingForRateLimit", ...events.base(), agentId: node.id, key, ms: probe.ms })
      }
      return Effect.as(this.rateWaits!.park(node, key, probe.ms), false)
    })
  }

  // claim gating

  parked(node: Node, changed: boolean): void {
    this.lifecycle.move(node, "parked")
    const events = this.events
    if (changed && events !== undefined) {
      const blockers = this.gate!.blockers(node)
      events.emit({ _tag: "WaitingForClaims", ...events.base(), agentId: node.id, blockers })
    }
  }

  granted(node: Node, lease: ResourceLocks.Lease): void {
    const events = this.events
    if (events !== undefined) {
      events.emit({ _tag: "ClaimsAcquired", ...events.base(), agentId: node.id, fencingToken: lease.fencingToken })
    }
    this.start(node)
  }

  private armClaimTimer(node: Node): Effect.Effect<void> {
    if (node.claimTimeoutMs === undefined || node.wait?.timer === true || node.state !== "parked") return Effect.void
    waitOf(node).timer = true
    return Effect.asVoid(Effect.forkIn(this.claimTimer(node, node.claimTimeoutMs), this.scope!))
  }

  private claimTimer(node: Node, ms: number): Effect.Effect<void> {
    return Effect.sleep(ms).pipe(
      Effect.andThen(
        Effect.sync(() => {
          if (node.state !== "parked" && node.state !== "ready") return
          const blockers = this.gate!.blockers(node).flatMap((blocker) =>
            blocker._tag === "Key"
              ? [{ key: blocker.key, holder: blocker.holder.agentId }]
              : blocker.holders.map((holder) => ({
                  key: `pool:${blocker.pool.slice(this.runId.length + 1)}`,
                  holder: holder.agentId
                }))
          )
          this.gate!.dropIntent(node)
          this.record(node, new Outcome.ClaimTimedOut({ ...common(this.clock, node), afterMs: ms, blockers }))
        })
      )
    )
  }

  // execution of one agent

  /**
   * Marks a node running. When it was the last pending one, the idle workers are told to end now,
   * while the last agents run: left idle until the next agent ended, their wake-ups and exits came
   * between the run's last agent's end and its return.
   */
  private start(node: Node, at = this.now()): void {
    this.lifecycle.start(node)
    node.startedAt = at
    const events = this.events
    if (events?.admit()) events.emit(events.started(node.id, at))
    if (this.idle.length > 0 && this.lifecycle.nonePending) this.endIdle()
  }

  /** Wakes every idle worker: with nothing pending, each ends. */
  private endIdle(): void {
    for (const signal of this.idle.splice(0)) Deferred.doneUnsafe(signal, Effect.void)
  }

  /** Ends a running agent with its exit: releases its claims, records its outcome. */
  private finish(node: Node, exit: Exit.Exit<unknown, unknown>): Effect.Effect<void> {
    return Effect.suspend(() => {
      if (node.state !== "running") return Effect.void
      const release = this.releaseClaims(node)
      const outcome = classify(this, node, exit)
      this.record(node, outcome)
      return this.ledger === undefined || outcome._tag !== "Succeeded"
        ? release
        : Effect.andThen(release, this.remember(node, outcome))
    })
  }

  /** `finish` of an agent holding a lease of an in-memory lock service, in one synchronous step. */
  private finishNow(node: Node, exit: Exit.Exit<unknown, unknown> | undefined, value: unknown, endedAt: number): void {
    if (node.state !== "running") return
    const lease = node.lease!
    const gate = this.gate!
    gate.detach(node)
    if (exit === undefined && this.compact !== undefined) this.recordValue(node, value, endedAt)
    else this.record(node, exit === undefined ? succeeded(endedAt, node, value) : classify(this, node, exit, endedAt))
    gate.releaseNow(node, lease)
  }

  private releaseClaims(node: Node): Effect.Effect<void> {
    const lease = node.lease
    if (lease === undefined) return Effect.void
    return this.gate!.release(node, lease)
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

  /** Records a node's outcome (its only move to `done`) and what follows from it. */
  private record(node: Node, outcome: Outcome.Outcome): void {
    this.done(node, outcome._tag)
    node.outcome = outcome
    this.compact?.ended(node.index, outcome)
    const events = this.events
    if (events?.admit()) events.emit(events.finished(node.id, outcome))
    if (outcome._tag === "Succeeded") {
      this.releaseDependents(node, outcome.endedAt)
    } else if (Outcome.isFailure(outcome)) {
      if (this.mode === "fail-fast") this.stop({ _tag: "AgentFailed", agentId: node.id, outcome: outcome._tag })
      else this.skipDependents(node, node, outcome._tag)
    }
    this.wake()
  }

  /**
   * `record` of a `Succeeded` outcome in a compact run (no events, no dependents): an agent that
   * ran once without usage leaves its value and times, its outcome is built when the run returns.
   */
  private recordValue(node: Node, value: unknown, endedAt: number): void {
    if (node.attempts !== 1 || node.usage !== Usage.zero) {
      this.record(node, succeeded(endedAt, node, value))
      return
    }
    this.done(node, "Succeeded")
    this.compact!.succeeded(node, value, endedAt)
    this.wake()
  }

  /**
   * Moves a node to `done` with its outcome's tag, and drops its claim wait (`ClaimGate.forget`). A
   * success takes `Lifecycle.succeeded`, not `finish`'s table walk: at the first agent's end after an
   * idle wait, which delays the timers of the agents ending after it, `finish` took ≈ 10 µs and this ≈ 2.
   */
  private done(node: Node, tag: Outcome.Tag): void {
    if (tag === "Succeeded") this.lifecycle.succeeded(node)
    else this.lifecycle.finish(node, tag)
    if (node.wait !== undefined) this.gate?.forget(node)
  }

  /**
   * Queues the dependents `node` was the last dependency of, as of `endedAt`, its end: a worker may
   * start one at that same reading (`agentEnded`), so a later one would make its wait negative.
   */
  private releaseDependents(node: Node, endedAt: number): void {
    const dependents = node.dependents
    for (let index = 0; index < dependents.length; index++) {
      const dependent = dependents[index]!
      if (--dependent.depsLeft === 0 && dependent.state === "waiting-deps") {
        dependent.queuedAt = endedAt
        this.makeReady(dependent)
      }
    }
  }

  private skipDependents(node: Node, root: Node, rootTag: Outcome.Tag): void {
    for (const dependent of node.dependents) {
      if (dependent.state !== "waiting-deps") continue
      const fields = common(this.clock, dependent)
      this.record(dependent, new Outcome.Skipped({ ...fields, dependency: root.id, dependencyOutcome: rootTag }))
      this.skipDependents(dependent, root, rootTag)
    }
  }

  /** Usage reported by an agent or a fiber it forked (also after it ended). */
  report(node: Node, usage: Partial<Usage.Usage>): boolean {
    if (this.finished) return this.services.parent?.report(usage) ?? false
    node.usage = Usage.add(node.usage, usage)
    if (node.state === "done") {
      const compact = this.compact
      if (compact === undefined) node.outcome = Outcome.withUsage(node.outcome!, node.usage)
      else compact.ended(node.index, Outcome.withUsage(compact.outcome(node.index, this.startedAt), node.usage))
    }
    this.spent = Usage.add(this.spent, usage)
    this.services.parent?.report(usage)
    const budget = this.options.budget
    if (budget === undefined || this.stopping.reason !== undefined) return true
    const stop = overBudget(node.id, this.spent, budget)
    if (stop !== undefined) {
      this.stopping.crossing = node
      this.stop(stop)
    }
    return true
  }

  // stopping and settling

  private stop(reason: StopReason): void {
    if (!this.stopping.request(reason)) return
    this.settle()
    const events = this.events
    if (events !== undefined) events.emit({ _tag: "Stopping", ...events.base(), reason })
  }

  /**
   * `stop` for a completed `stopOn`: the request at once (no agent starts after it), the
   * interruption of the running agents one scheduler turn later. An agent whose effect completed
   * `stopOn` resumed this fiber in its own step; it ends the stretch it runs without yielding
   * (returns and is recorded) before the interruption, so an agent that stops the run as its last
   * step ends with its own outcome rather than `Interrupted`.
   */
  private stopOnCompleted(reason: StopReason): Effect.Effect<void> {
    return Effect.suspend(() => {
      if (!this.stopping.request(reason)) return Effect.void
      const events = this.events
      if (events !== undefined) events.emit({ _tag: "Stopping", ...events.base(), reason })
      return Effect.andThen(
        Effect.yieldNow,
        Effect.sync(() => this.settle())
      )
    })
  }

  private get settleRunning(): Effect.Effect<void> {
    return Effect.suspend(() => {
      const nodes = this.compact === undefined ? this.nodes : this.compact.live()
      const running = nodes.filter((node) => node.state === "running")
      return Effect.forEach(running, (node) => this.finish(node, Exit.interrupt()), { discard: true })
    })
  }

  /** A node granted its start after the run stopped never ran: it is `Cancelled`. */
  private unstart(node: Node): Effect.Effect<void> {
    const release = this.releaseClaims(node)
    const fields = { ...common(this.clock, node), startedAt: null }
    this.record(node, new Outcome.Cancelled({ ...fields, reason: this.stopping.text() }))
    return release
  }

  private cancelRest(): void {
    const reason = this.stopping.text()
    const compact = this.compact
    for (let index = 0; index < this.total; index++) {
      const node = compact === undefined ? this.nodes[index]! : compact.node(index, this)
      if (node === undefined || node.state === "done") continue
      if (node.wait?.intent === true) this.gate!.dropIntent(node)
      this.record(node, new Outcome.Cancelled({ ...common(this.clock, node), reason }))
    }
  }
}

interface StintHost extends ExecHost {
  readonly ready: ReadyQueue
  agentEnded(
    stint: Stint,
    node: Node,
    exit: Exit.Exit<unknown, unknown> | undefined,
    value: unknown
  ): Node | Effect.Effect<unknown>
}

const noRelease: Effect.Effect<undefined> = Effect.succeed(undefined)

type GateCallbacks = Pick<GateHost, "makeReady" | "wake" | "parked" | "granted">

/**
 * The claim gate's view of its run. A class, not an object of closures: its methods are the same
 * functions in every run, so the gate's optimised code that calls them (`wakeFreed`, `park`) does not
 * embed a run's closure, which V8 would deoptimise it for once the run is collected.
 */
class RunnerGateHost implements GateHost {
  readonly runner: GateCallbacks
  readonly runId: string
  readonly locks: ResourceLocks.ResourceLocks["Service"]
  readonly maxBypass: number
  readonly observing: boolean

  constructor(
    runner: GateCallbacks,
    runId: string,
    locks: ResourceLocks.ResourceLocks["Service"],
    maxBypass: number,
    observing: boolean
  ) {
    this.runner = runner
    this.runId = runId
    this.locks = locks
    this.maxBypass = maxBypass
    this.observing = observing
  }

  makeReady(node: Node): void {
    this.runner.makeReady(node)
  }

  wake(): void {
    this.runner.wake()
  }

  parked(node: Node, changed: boolean): void {
    this.runner.parked(node, changed)
  }

  granted(node: Node, lease: ResourceLocks.Lease): void {
    this.runner.granted(node, lease)
  }
}

/**
 * A worker's agents between two steps of its loop. `run` binds an agent to the worker's fiber and
 * runs it under the worker's frame (`agentFrame`, effect's `Effect.matchCauseEffect` frame, made
 * once per worker and pointed at each agent's effect in turn), whose handlers restore the worker's
 * context and have the runner end the agent (`Runner.agentEnded`); an agent whose effect is already
 * an `Exit` is ended in `run`'s own loop.
 * When the next agent needs nothing from the worker loop, the stint starts it at once: per agent, no
 * `Exit` for a success and no step of the loop's generator.
 */
class Stint implements Owner {
  readonly host: StintHost
  readonly fiber: Fiber.Fiber<unknown, unknown>
  readonly context: Context.Context<never>
  node: Node | undefined = undefined
  /** An agent the stint took from the ready queue and left to the loop. */
  pending: Node | undefined = undefined
  /** When the last agent ended. */
  endedAt: number | undefined = undefined
  /** The agent that ended last had given its slot back (`Corral.releaseSlot`): the loop checks for a surplus worker. */
  slotEnded = false
  /** The worker fiber's children when the running agent started (`agentChildren.ts`). */
  private childrenBefore: ReadonlySet<Fiber.Fiber<unknown, unknown>> | undefined = undefined
  private frame: AgentFrame | undefined = undefined

  constructor(host: StintHost, fiber: Fiber.Fiber<unknown, unknown>, context: Context.Context<never>) {
    this.host = host
    this.fiber = fiber
    this.context = context
  }

  /** The agent the loop takes next: one the stint left to it, else the best ready one. */
  next(): Node | undefined {
    const pending = this.pending
    if (pending === undefined) return this.host.ready.next()
    this.pending = undefined
    return pending.state === "ready" ? pending : this.host.ready.next()
  }

  /**
   * Runs `node` and the agents after it: those whose effect is already an `Exit` (`Effect.void`,
   * `Effect.succeed`) in this loop, without an effect step, the first other one under the
   * worker's frame.
   */
  run(node: Node, handling = false): Effect.Effect<unknown> {
    let current = node
    while (true) {
      this.fiber.setContext(bind(this.context, current))
      const effect = attempts(this.host, current, runDeps(current))
      if (!isExitFast(effect)) {
        this.node = current
        this.childrenBefore = snapshot(this.fiber)
        const frame = (this.frame ??= agentFrame(this))
        return handling ? enter(frame, this.fiber, effect) : under(frame, effect)
      }
      this.fiber.setContext(this.context)
      const after = Exit.isSuccess(effect)
        ? this.host.agentEnded(this, current, undefined, effect.value)
        : this.host.agentEnded(this, current, effect, undefined)
      if (!(after instanceof Node)) return after
      current = after
    }
  }

  /** Ends the running agent with its value (the frame's success handler). */
  succeeded(value: unknown): Effect.Effect<unknown> {
    return this.end(undefined, value)
  }

  /** Ends the running agent with its failure, defect or interruption (the frame's failure handler). */
  failed(cause: Cause.Cause<unknown>): Effect.Effect<unknown> {
    return this.end(Exit.failCause(cause), undefined)
  }

  private end(exit: Exit.Exit<unknown, unknown> | undefined, value: unknown): Effect.Effect<unknown> {
    const forked = forkedSince(this.fiber, this.childrenBefore)
    this.childrenBefore = undefined
    if (forked !== undefined) return Effect.andThen(Fiber.interruptAll(forked), () => this.finish(exit, value, false))
    return this.finish(exit, value, true)
  }

  private finish(
    exit: Exit.Exit<unknown, unknown> | undefined,
    value: unknown,
    handling: boolean
  ): Effect.Effect<unknown> {
    const node = this.node!
    this.node = undefined
    this.fiber.setContext(this.context)
    const after = this.host.agentEnded(this, node, exit, value)
    return after instanceof Node ? this.run(after, handling) : after
  }
}

const noDeps: Record<string, unknown> = Object.freeze({})

const depsOf = (node: Node): Record<string, unknown> => {
  const deps: Record<string, unknown> = node.deps.length === 0 ? noDeps : {}
  for (const dep of node.deps) deps[dep.id] = dep.value
  return deps
}

/** The `deps` an attempt gets: built only for an agent whose `run` reads them (`Agent.readsDeps`). */
const runDeps = (node: Node): Record<string, unknown> =>
  node.deps.length === 0 || !AgentModule.readsDeps(node.agent) ? noDeps : depsOf(node)

const limiterOf = (
  options: RunOptions,
  clock: Clock.Clock,
  outer: RateLimiter.Service | undefined
): {
  limiter: RateLimiter.Service | undefined
  keys: ReadonlyArray<string> | undefined
  issues: ReadonlyArray<Issue>
} => {
  const buckets = options.rateLimits
  if (buckets === undefined)
    return outer === undefined ? noLimiter : { limiter: outer, keys: outer.keys, issues: noIssues }
  const issues = RateLimiter.validateBuckets(buckets)
  if (issues.length > 0) return { limiter: undefined, keys: Object.keys(buckets), issues }
  const own = RateLimiter.makeUnsafe(buckets, clock.currentTimeMillisUnsafe())
  const limiter = outer === undefined ? own : RateLimiter.overlay(own, outer)
  return { limiter, keys: limiter.keys, issues }
}

const noIssues: ReadonlyArray<Issue> = []

const noLimiter = { limiter: undefined, keys: undefined, issues: noIssues }

const keyOf = (node: Node, deps: AgentModule.Deps): string | undefined => {
  try {
    return Ledger.keyOf(node.agent, deps)
  } catch {
    return undefined
  }
}

/**
 * One object of each class a run makes, made when the module loads and never run, kept for the
 * life of the process. V8 forgets a hidden class (map) once no object of it is left and a full GC
 * runs, and then deoptimises every function whose optimised code embeds it ("embedded weak objects
 * cleared" in `--trace-deopt`): without these, the first run after each full GC (every second run of
 * 100k agents) ran the worker loop, the queue and the node's getters unoptimised again and compiled
 * them again; without the waiting node and the claim gate, every run with claims after a full GC ran
 * the gate's walks unoptimised. The same reason as `succeededShape` in `execute.ts`. The same holds
 * for the options literal `result` passes to `RunResult` and the result itself: after a full GC,
 * making them took ≈ 40 µs at a small run's end (22–35 µs of it the literal), ≈ 8 µs with these kept.
 */
export const shapes: ReadonlyArray<unknown> = (() => {
  const services: Services = {
    locks: undefined as never,
    held: undefined,
    parent: undefined,
    annotations: {},
    logAnnotations: {},
    queue: undefined,
    limiter: undefined,
    localLimiter: false,
    ledger: undefined,
    tracing: false
  }
  const clock = Context.get(Context.empty(), Clock.Clock)
  const runner = new Runner<unknown, unknown, never>([], {}, 1, "", 0, Number.NaN, clock, services)
  const agent = AgentModule.make("shape", { run: Effect.void })
  const fiber = Effect.runFork(Effect.void)
  const waiting = plainNode(1, agent)
  waitOf(waiting)
  const gate = new ClaimGate(new RunnerGateHost(runner, "", ResourceLocks.makeMemory(), 0, false))
  const resultOptions = { runId: "", outcomes: [], startedAt: Number.NaN, endedAt: Number.NaN, stopped: undefined }
  const stint = new Stint(runner, fiber, Context.empty())
  return [
    resultOptions,
    new RunResult(resultOptions),
    waiting,
    gate,
    stint,
    agentFrame(stint),
    new Compact([agent]),
    plainNode(0, agent)
  ]
})()
