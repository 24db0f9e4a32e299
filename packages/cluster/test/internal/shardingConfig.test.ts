import { assert, describe, it } from "@effect/vitest"
import { Duration } from "effect"
import { shardingConfig } from "../../src/internal/shardingConfig.ts"

const millis = (input: Duration.Input) => Duration.toMillis(Duration.fromInputUnsafe(input))

describe("shardingConfig", () => {
  it("a runner polls for missed messages (and retries shards it could not lock) every refreshEvery, not ten times as often", () => {
    for (const refreshMs of [250, 1_000, 5_000]) {
      const config = shardingConfig({ expirationMs: 10_000, refreshMs })
      assert.strictEqual(millis(config.entityMessagePollInterval), refreshMs)
      assert.strictEqual(millis(config.refreshAssignmentsInterval), refreshMs)
      assert.strictEqual(millis(config.runnerHealthCheckInterval), refreshMs)
    }
  })

  it("shard locks are refreshed three times per expiration; replies missed are polled every 100 ms", () => {
    const config = shardingConfig({ expirationMs: 9_000, refreshMs: 1_000 })
    assert.strictEqual(millis(config.shardLockExpiration), 9_000)
    assert.strictEqual(millis(config.shardLockRefreshInterval), 3_000)
    assert.strictEqual(millis(config.entityReplyPollInterval), 100)
    assert.strictEqual(millis(config.sendRetryInterval), 100)
  })
})
