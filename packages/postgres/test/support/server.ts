import { afterAll } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import * as TestServer from "../../src/TestServer.ts"

/**
 * One throwaway server for the calling test file, stopped after its last test; `undefined` when
 * PostgreSQL is not installed. With `CI=true` a missing PostgreSQL fails the file instead.
 */
export const sharedServer = async (): Promise<TestServer.TestServer | undefined> => {
  const found = TestServer.findBinaries()
  if (found._tag === "Missing") {
    if (process.env.CI === "true") throw new Error(`PostgreSQL is required on CI: ${found.reason}`)
    return undefined
  }
  const scope = Scope.makeUnsafe()
  afterAll(() => Effect.runPromise(Scope.close(scope, Exit.void)))
  return Effect.runPromise(Scope.provide(TestServer.start(), scope))
}
