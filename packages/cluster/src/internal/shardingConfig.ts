/**
 * The `effect/cluster` settings corral passes to runners and coordinators (the rest are
 * `ShardingConfig.defaults`), from `Cluster.ClusterOptions`' durations.
 */
import * as Duration from "effect/Duration"

/** `Cluster.ClusterOptions`' durations in milliseconds, defaults filled in. */
export interface Timing {
  readonly expirationMs: number
  readonly refreshMs: number
}

/**
 * Requests reach their runner by a direct notification after they are persisted, and a runner
 * reads its shards' unprocessed messages as soon as it acquires them; the message poll (every
 * `refreshEvery`) only covers what a notification missed, and also paces a runner's retries to take
 * shards whose lock another runner still holds. A coordinator reads replies that missed their
 * notification every 100 ms.
 */
export const shardingConfig = (timing: Timing) => {
  const refresh = Duration.millis(timing.refreshMs)
  return {
    shardLockExpiration: Duration.millis(timing.expirationMs),
    shardLockRefreshInterval: Duration.millis(timing.expirationMs / 3),
    refreshAssignmentsInterval: refresh,
    runnerHealthCheckInterval: refresh,
    entityMessagePollInterval: refresh,
    entityReplyPollInterval: Duration.millis(100),
    sendRetryInterval: Duration.millis(100)
  } as const
}
