/**
 * A test hook for crash tests: with `CORRAL_TEST_KILL_AT=<point>:<agent id>` in its environment,
 * corral sends itself SIGKILL when it reaches that point for that agent. Points: `merged` (the
 * agent's work is on the integration branch, the ledger has not recorded it yet).
 */
export type Point = "merged"

const target = process.env.CORRAL_TEST_KILL_AT

export const reached = (point: Point, agentId: string): void => {
  if (target !== undefined && target === `${point}:${agentId}`) process.kill(process.pid, "SIGKILL")
}
