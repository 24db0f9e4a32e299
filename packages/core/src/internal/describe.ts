/**
 * What kind of value a caller passed where another was expected, for error messages about input
 * that did not go through the type checker (JavaScript callers, `as any`, decoded configuration).
 */
export const describe = (value: unknown): string =>
  value === null ? "null" : Array.isArray(value) ? "an array" : value instanceof Promise ? "a Promise" : typeof value
