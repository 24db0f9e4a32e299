import { Effect } from "effect"
import * as TestServer from "/work/wt/i17/packages/postgres/src/TestServer.ts"
Effect.runPromise(
  Effect.scoped(
    Effect.gen(function* () {
      const server = yield* TestServer.start()
      const a = yield* server.createDatabase("a")
      const b = yield* server.createDatabase("b")
      console.log(a)
      console.log(b)
      setInterval(() => {}, 1000)
      return yield* Effect.never
    })
  )
)
