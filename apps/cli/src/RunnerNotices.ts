/**
 * What `corral runner` says about its cluster's database. effect's sharding tells of a database
 * that stops answering only in its log: `Shard lock storage is unhealthy` (level Error, with the
 * cause's stack trace) when a runner cannot refresh the locks of the shards it holds, and `Shard
 * lock storage has recovered` (level Info, below what the command prints) when it can again; it
 * offers no other way to see either. Around the runner, these entries become one plain line each
 * naming the database, and every other entry goes to the loggers in place as before (entries below
 * the level in place are dropped).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as References from "effect/References"

const unhealthy = "Shard lock storage is unhealthy"
const recovered = "Shard lock storage has recovered"

/** The plain lines, for `runner` (its address) and `database` (a URL without its password). */
const lines = (runner: string, database: string) => ({
  down: `runner ${runner}: the cluster's database ${database} does not answer; the agents running here stop, and run again once it is back`,
  up: `runner ${runner}: the cluster's database ${database} answers again`
})

const notices = (
  inner: ReadonlySet<Logger.Logger<unknown, unknown>>,
  minimum: LogLevel.LogLevel,
  said: { readonly down: string; readonly up: string },
  write: (line: string) => void
) =>
  Logger.make((options) => {
    const message = Array.isArray(options.message) ? options.message[0] : options.message
    if (message === unhealthy) return write(said.down)
    if (message === recovered) return write(said.up)
    if (!LogLevel.isGreaterThanOrEqualTo(options.logLevel, minimum)) return
    for (const logger of inner) logger.log(options)
  })

/**
 * Runs `effect` (a runner) with its database's health said in plain lines through `write`.
 *
 * @since 0.1.0
 */
export const around =
  (runner: string, database: string, write: (line: string) => void) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.gen(function* () {
      const inner = yield* References.CurrentLoggers
      const minimum = yield* References.MinimumLogLevel
      const logger = notices(inner, minimum, lines(runner, database), write)
      const level = LogLevel.isGreaterThan(minimum, "Info") ? "Info" : minimum
      return yield* effect.pipe(
        Effect.provideService(References.CurrentLoggers, new Set([logger])),
        Effect.provideService(References.MinimumLogLevel, level)
      )
    })
