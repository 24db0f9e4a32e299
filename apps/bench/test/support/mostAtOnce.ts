/** The most tasks running at one instant, from the recorded intervals (an end before a start at a tie). */
export const mostAtOnce = (recorded: { readonly starts: Float64Array; readonly ends: Float64Array }): number => {
  const points = [...recorded.starts].flatMap((start, i) => [
    { at: start, delta: 1 },
    { at: recorded.ends[i]!, delta: -1 }
  ])
  points.sort((a, b) => a.at - b.at || a.delta - b.delta)
  let now = 0
  let most = 0
  for (const point of points) most = Math.max(most, (now += point.delta))
  return most
}
