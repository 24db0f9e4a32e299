/**
 * The mark of a `LanguageModel` that reports its own usage, every call and a stream cut short
 * included (`OpenAiCompat`, `Anthropic`, and what `Llm.wrap` and `Llm.layer` return): `Llm.layer`
 * over it only settles its buckets and leaves the spend to it.
 *
 * @internal
 */
const key: unique symbol = Symbol.for("@corral/core/SelfReporting")

/** `model` marked as reporting its own usage. */
export const mark = <A extends object>(model: A): A => ({ ...model, [key]: true })

/** Whether `model` reports its own usage, a stream cut short included. */
export const isMarked = (model: object): boolean => (model as { readonly [key]?: unknown })[key] === true
