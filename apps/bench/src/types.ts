export interface Sample {
  readonly ms: number
  readonly metrics?: Readonly<Record<string, number>>
}

export interface RunContext {
  readonly signal: AbortSignal
}

export interface Approach<P> {
  readonly name: string
  readonly run: (params: P, context: RunContext) => Promise<Sample>
}

export interface Case<P> {
  readonly label: string
  readonly params: P
  readonly reps?: number
  readonly boundMs?: number
  readonly approaches?: ReadonlyArray<Approach<P>>
  readonly profile?: P
  readonly notes?: ReadonlyArray<string>
}

export interface Column {
  readonly key: string
  readonly label: string
  readonly format: (value: number) => string
}

export interface SuiteOptions {
  readonly quick: boolean
  readonly reps: number | undefined
}

/** The verdict on one target, computed from a scenario's results when it ran. */
export interface Verdict {
  readonly target: string
  readonly figure: string
  readonly met: boolean | undefined
  /** Not met, but the repetitions' spread covers the target (see `pairedNoWorseThan`). */
  readonly withinNoise?: boolean
  /**
   * Not met, but the floor measured in the same run is itself at or over the target, the approach
   * is within the target of that floor and no approach's median is under the floor's fastest
   * repetition (see `ratioAtMost`).
   */
  readonly outOfReach?: boolean
}

/**
 * A target a scenario is measured against. `evaluate` reads the scenario's results and returns the
 * figure that decides it; `undefined` when the case it needs did not run (e.g. `--quick`).
 */
export interface Target {
  readonly label: string
  readonly evaluate: (cases: ReadonlyArray<CaseResult>) => Omit<Verdict, "target"> | undefined
}

export interface Scenario<P = any> {
  readonly name: string
  readonly description: string
  readonly floor: string
  readonly targets?: ReadonlyArray<Target>
  readonly reps?: number
  readonly warmup?: boolean
  /**
   * Measure every repetition twice: once right after two forced full GCs (reported as "after GC"),
   * and once, after every after-GC sample and `rewarm` untimed runs of each approach, with only a
   * young-generation GCs (two) before it (the steady-state sample the ratio uses; see `harness.ts`).
   */
  readonly steadyState?: boolean
  /** With `steadyState`: the untimed runs of each approach before the steady samples (2 unless set). */
  readonly rewarm?: number
  readonly timeoutMs?: number
  readonly floorApproach?: string
  readonly columns?: ReadonlyArray<Column>
  readonly approaches: ReadonlyArray<Approach<P>>
  readonly cases: (options: SuiteOptions) => ReadonlyArray<Case<P>> | Promise<ReadonlyArray<Case<P>>>
}

export interface ApproachResult {
  readonly name: string
  readonly samplesMs: ReadonlyArray<number>
  readonly medianMs: number | undefined
  readonly minMs: number | undefined
  readonly maxMs: number | undefined
  readonly ratio: number | undefined
  readonly metrics: Readonly<Record<string, number>>
  readonly error: string | undefined
}

export interface CaseResult {
  readonly label: string
  /** The table as printed, kept so BENCHMARKS.md shows exactly what the run printed. */
  readonly table?: string
  readonly reps: number
  readonly boundMs: number | undefined
  readonly floorApproach: string | undefined
  readonly notes: ReadonlyArray<string>
  readonly approaches: ReadonlyArray<ApproachResult>
}

export interface ScenarioResult {
  readonly scenario: string
  readonly description: string
  readonly floor: string
  readonly targets: ReadonlyArray<Verdict>
  readonly startedAt: string
  readonly elapsedMs: number
  readonly command: string
  readonly loadAverage: { readonly start: number; readonly end: number }
  readonly machine: Readonly<Record<string, string | number>>
  readonly cases: ReadonlyArray<CaseResult>
}

export interface Report {
  readonly name: string
  readonly text: string
  readonly data: unknown
  /** Verdicts a scenario that prints its own tables evaluated itself. */
  readonly targets?: ReadonlyArray<Verdict> | undefined
}
