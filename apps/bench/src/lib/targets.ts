import { duration } from "../format.ts"
import { median } from "../stats.ts"
import type { ApproachResult, CaseResult, Target, Verdict } from "../types.ts"

type Figure = Omit<Verdict, "target">

const approachIn = (item: CaseResult, name: string): ApproachResult | undefined =>
  item.approaches.find((a) => a.name === name && a.error === undefined)

const casesMatching = (cases: ReadonlyArray<CaseResult>, label: RegExp): ReadonlyArray<CaseResult> =>
  cases.filter((item) => label.test(item.label))

const combine = (figures: ReadonlyArray<Figure | undefined>): Figure | undefined => {
  const known = figures.filter((f): f is Figure => f !== undefined)
  if (known.length === 0) return undefined
  const met = known.some((f) => f.met === undefined) ? undefined : known.every((f) => f.met === true)
  const noise = met === false && known.every((f) => f.met !== false || f.withinNoise === true)
  const reach = met === false && known.every((f) => f.met !== false || f.outOfReach === true)
  return {
    figure: known.map((f) => f.figure).join("; "),
    met,
    ...(noise ? { withinNoise: true } : {}),
    ...(reach ? { outOfReach: true } : {})
  }
}

const failed = (item: CaseResult, name: string): Figure | undefined => {
  const found = item.approaches.find((a) => a.name === name)
  return found?.error === undefined ? undefined : { figure: `failed: ${found.error}`, met: false }
}

/**
 * A target judged per matching case on `approach`'s median: `judge` receives the case and that
 * median; a case where `approach` failed is failed, one where it did not run is not evaluated.
 */
const medianPerCase = (
  label: string,
  cases: RegExp,
  approach: string,
  judge: (item: CaseResult, mineMs: number) => Figure | undefined
): Target => ({
  label,
  evaluate: (results) =>
    combine(
      casesMatching(results, cases).map((item) => {
        const mineMs = approachIn(item, approach)?.medianMs
        return mineMs === undefined ? failed(item, approach) : judge(item, mineMs)
      })
    )
})

/**
 * `value` as a multiple with two decimals, or three when two would round it onto the wrong side of
 * (or onto) `limit`: a verdict of "not met" beside "1.02×" for a target of 1.02× read as a contradiction.
 */
export const multiple = (value: number, limit: number): string => {
  const two = value.toFixed(2)
  return Number(two) === limit && value !== limit ? `${value.toFixed(3)}×` : `${two}×`
}

/** Another approach of the case has a median under `floor`'s fastest repetition: the floor did not hold. */
const beaten = (item: CaseResult, floor: ApproachResult): boolean =>
  item.approaches.some(
    (other) =>
      other.name !== floor.name &&
      other.error === undefined &&
      other.medianMs !== undefined &&
      floor.minMs !== undefined &&
      other.medianMs < floor.minMs
  )

/**
 * `approach`'s ratio to the case's bound or floor is at most `max`, in every case whose label matches.
 * With `floor` (an approach measured in the same repetitions that no scheduler can beat), the figure
 * also gives the floor's ratio, and a miss is marked out of reach when the floor itself is at or over
 * the target in that run (no scheduler in this process could have met it then), `approach` is within
 * `max` of the floor, and no approach's median in the case is under the floor's fastest repetition
 * (else the floor was beaten, so it was no floor); any other miss is a plain miss.
 */
export const ratioAtMost = (label: string, cases: RegExp, approach: string, max: number, floor?: string): Target => ({
  label,
  evaluate: (results) =>
    combine(
      casesMatching(results, cases).map((item) => {
        const found = approachIn(item, approach)
        if (found?.ratio === undefined) return failed(item, approach)
        const met = found.ratio <= max
        const floorResult = floor === undefined ? undefined : approachIn(item, floor)
        const base = floorResult?.ratio
        if (floorResult === undefined || base === undefined) return { figure: multiple(found.ratio, max), met }
        const reach = base >= max && found.ratio <= base * max && !beaten(item, floorResult)
        return {
          figure: `${multiple(found.ratio, max)} (the floor is ${multiple(base, max)})`,
          met,
          ...(!met && reach ? { outOfReach: true } : {})
        }
      })
    )
})

/** A metric of `approach` is at most `max` in every matching case. */
export const metricAtMost = (
  label: string,
  cases: RegExp,
  approach: string,
  metric: string,
  max: number,
  format: (value: number) => string
): Target => ({
  label,
  evaluate: (results) =>
    combine(
      casesMatching(results, cases).map((item) => {
        const value = approachIn(item, approach)?.metrics[metric]
        if (value === undefined) return failed(item, approach)
        return { figure: format(value), met: value <= max }
      })
    )
})

/** A metric of `approach` is at least `min` in every matching case. */
export const metricAtLeast = (
  label: string,
  cases: RegExp,
  approach: string,
  metric: string,
  min: number,
  format: (value: number) => string
): Target => ({
  label,
  evaluate: (results) =>
    combine(
      casesMatching(results, cases).map((item) => {
        const value = approachIn(item, approach)?.metrics[metric]
        if (value === undefined) return failed(item, approach)
        return { figure: format(value), met: value >= min }
      })
    )
})

/** `approach`'s median is at most `factor` × `peer`'s median in every matching case. */
export const noWorseThan = (label: string, cases: RegExp, approach: string, peer: string, factor = 1): Target =>
  medianPerCase(label, cases, approach, (item, mineMs) => {
    const theirs = approachIn(item, peer)?.medianMs
    if (theirs === undefined) return undefined
    const ratio = mineMs / theirs
    return { figure: `${multiple(ratio, factor)} ${peer}`, met: ratio <= factor }
  })

const ratioRange = (ratios: ReadonlyArray<number>): string =>
  `${Math.min(...ratios).toFixed(3)}–${Math.max(...ratios).toFixed(3)}×`

/**
 * `approach` no worse than `peer`, judged on paired repetitions: each repetition runs every approach
 * once, in rotated order, so sample i of both was taken in the same repetition, within seconds of
 * each other, and shares the machine's state of that moment. The ratio of the two samples is taken
 * per repetition; the target is met when the median of those ratios is at most `factor`. When it is not, but at least one repetition has the
 * ratio at or below `factor`, the verdict is "not met" marked within noise: the repetitions' spread
 * covers the target. The figure gives the median paired ratio (three decimals), the range over the
 * repetitions and in how many `approach` was slower.
 */
export const pairedNoWorseThan = (
  label: string,
  cases: RegExp,
  approach: string,
  peer: string,
  factor = 1
): Target => ({
  label,
  evaluate: (results) =>
    combine(
      casesMatching(results, cases).map((item) => {
        const mine = approachIn(item, approach)?.samplesMs
        const theirs = approachIn(item, peer)?.samplesMs
        if (mine === undefined || mine.length === 0) return failed(item, approach)
        if (theirs === undefined || theirs.length !== mine.length) return undefined
        const ratios = mine.map((ms, i) => ms / theirs[i]!)
        const ratio = median(ratios)
        const slower = ratios.filter((r) => r > factor).length
        const met = ratio <= factor
        return {
          figure:
            `${ratio.toFixed(3)}× ${peer} (median of ${ratios.length} paired repetitions, ` +
            `${ratioRange(ratios)}, slower in ${slower})`,
          met,
          ...(!met && slower < ratios.length ? { withinNoise: true } : {})
        }
      })
    )
})

/** Evaluates every target; a target whose cases did not run is reported as not evaluated. */
export const verdicts = (targets: ReadonlyArray<Target>, results: ReadonlyArray<CaseResult>): Array<Verdict> =>
  targets.map((target) => {
    const outcome = target.evaluate(results)
    return {
      target: target.label,
      figure: outcome?.figure ?? "not measured in this run",
      met: outcome?.met,
      ...(outcome?.withinNoise === true ? { withinNoise: true } : {}),
      ...(outcome?.outOfReach === true ? { outOfReach: true } : {})
    }
  })

/**
 * The gap that is corral's own: `approach`'s median against `floor`'s (a zero-scheduler-cost replay
 * measured in the same run), at most `max`; the figure also says where the floor itself lands
 * against the bound, i.e. how much of the bound target this machine's timers leave reachable.
 * `names` words the figure when the floor is a named peer and the ratios are to another one.
 */
export const overFloor = (
  label: string,
  cases: RegExp,
  approach: string,
  floor: string,
  max: number | ((caseLabel: string) => number),
  names: { readonly floor: string; readonly bound: string } = { floor: "the floor", bound: "the bound" }
): Target =>
  medianPerCase(label, cases, approach, (item, mineMs) => {
    const base = approachIn(item, floor)
    if (base?.medianMs === undefined) return failed(item, floor)
    const ratio = mineMs / base.medianMs
    const floorRatio = base.ratio === undefined ? "" : ` (${names.floor} is ${base.ratio.toFixed(2)}× ${names.bound})`
    const limit = typeof max === "number" ? max : max(item.label)
    return { figure: `${multiple(ratio, limit)} ${names.floor}${floorRatio}`, met: ratio <= limit }
  })

/**
 * `approach`'s median against the fastest of `others` in the same run, at most `max`: the gap to
 * what was reached on this machine, in this run, whichever approach reached it. The figure names
 * that approach and where it lands against the bound.
 */
export const overFastest = (
  label: string,
  cases: RegExp,
  approach: string,
  others: ReadonlyArray<string>,
  max: number
): Target =>
  medianPerCase(label, cases, approach, (item, mineMs) => {
    const best = fastest(item, others)
    if (best?.medianMs === undefined) return undefined
    const ratio = mineMs / best.medianMs
    const bestRatio = best.ratio === undefined ? "" : `, ${best.ratio.toFixed(2)}× the bound`
    return { figure: `${multiple(ratio, max)} ${best.name} (the fastest${bestRatio})`, met: ratio <= max }
  })

const fastest = (item: CaseResult, names: ReadonlyArray<string>): ApproachResult | undefined => {
  let best: ApproachResult | undefined
  for (const name of names) {
    const other = approachIn(item, name)
    if (other?.medianMs !== undefined && (best === undefined || other.medianMs < best.medianMs!)) best = other
  }
  return best
}

/**
 * The floor measured in the same run held: in every matching case, no other approach's median is
 * under `floor`'s fastest repetition. The figure names the fastest other approach and its median
 * as a multiple of that repetition.
 */
export const floorHolds = (label: string, cases: RegExp, floor: string): Target => ({
  label,
  evaluate: (results) =>
    combine(
      casesMatching(results, cases).map((item) => {
        const base = approachIn(item, floor)
        if (base?.minMs === undefined) return failed(item, floor)
        const others = item.approaches.map((a) => a.name).filter((name) => name !== floor)
        const best = fastest(item, others)
        if (best?.medianMs === undefined) return undefined
        const ratio = best.medianMs / base.minMs
        return {
          figure:
            `the fastest median, ${best.name} ${duration(best.medianMs)}, is ${ratio.toFixed(3)}× ` +
            `the floor's fastest repetition (${duration(base.minMs)})`,
          met: !beaten(item, base)
        }
      })
    )
})
