import { Runner } from "@corral/cluster"
import { Console, Effect } from "effect"
import { Mark, Sleep } from "./clusterKinds.ts"

const [url, port, capacity] = process.argv.slice(2)

Effect.runPromise(
  Runner.serve({ url: url!, port: Number(port), capacity: Number(capacity), kinds: [Sleep, Mark] }, (address) =>
    Console.log(`runner ${address} ready`)
  )
).catch((error) => {
  console.error(String(error))
  process.exit(1)
})
