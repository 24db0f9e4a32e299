/**
 * A count and its noun in the number it takes: `1 agent`, `2 agents`, `0 agents`.
 *
 * @since 0.1.0
 */

/**
 * `n` followed by `noun`, or by `plural` (default `noun` + "s") when `n` is not 1.
 *
 * @since 0.1.0
 * @category text
 */
export const count = (n: number, noun: string, plural = `${noun}s`): string => `${n} ${n === 1 ? noun : plural}`
