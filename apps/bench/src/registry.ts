import { optionalScenario } from "./optional.ts"
import { claims } from "./scenarios/claims.ts"
import { dag } from "./scenarios/dag.ts"
import { events } from "./scenarios/events.ts"
import { ioScaling } from "./scenarios/io-scaling.ts"
import { ledger } from "./scenarios/ledger.ts"
import { perRunScenario } from "./scenarios/per-run.ts"
import { providers } from "./scenarios/providers.ts"
import { ratelimit } from "./scenarios/ratelimit.ts"
import { sharedLimiter } from "./scenarios/shared-limiter.ts"
import { scheduling } from "./scenarios/scheduling.ts"
import { workspacesReal } from "./scenarios/workspaces-real.ts"
import type { Report, Scenario, SuiteOptions } from "./types.ts"

export interface Entry {
  readonly name: string
  readonly load: (options: SuiteOptions) => Promise<Scenario | Report | string>
}

const ready = (scenario: Scenario): Entry => ({ name: scenario.name, load: async () => scenario })

const optional = (name: string): Entry => ({ name, load: (options) => optionalScenario(name, options) })

/**
 * The order `pnpm bench` runs them in: the in-process, CPU-bound scenarios first, then those that
 * spend most of their time in other processes (git, bubblewrap) and on the disk, led by the
 * longest (`workspaces-real`, most of a full run). A full run on a shared machine then measures the
 * scenarios that load moves most before whatever is started beside its long tail.
 */
export const registry: ReadonlyArray<Entry> = [
  ready(scheduling),
  ready(ioScaling),
  ready(claims),
  ready(dag),
  ready(ratelimit),
  ready(perRunScenario),
  ready(events),
  ready(providers),
  ready(sharedLimiter),
  ready(ledger),
  optional("spawn"),
  optional("cluster"),
  optional("workspaces"),
  ready(workspacesReal),
  optional("sandbox")
]
