/**
 * The mark of a `LanguageModel` whose streams report their own usage, a stream cut short included
 * (`OpenAiCompat`, `Anthropic`): `Llm.layer` leaves such a stream's spend to it.
 *
 * @internal
 */
const key: unique symbol = Symbol.for("@corral/core/SelfReporting")

/** `model` marked as reporting its own streams' usage. */
export const mark = <A extends object>(model: A): A => ({ ...model, [key]: true })

/** Whether `model` reports its own streams' usage, a stream cut short included. */
export const isMarked = (model: object): boolean => (model as { readonly [key]?: unknown })[key] === true
