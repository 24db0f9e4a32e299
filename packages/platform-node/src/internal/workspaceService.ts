import * as Effect from "effect/Effect"
import type { Config, Workspace } from "../Workspace.ts"
import { acquireWorkspace, closePool, drainPool, recycleAfter } from "./workspaceAcquire.ts"
import { makePortAllocator } from "./workspaceEnv.ts"
import { collectGarbage } from "./workspaceGc.ts"
import { makeIntegration } from "./workspaceIntegration.ts"
import { registerRun } from "./workspaceLease.ts"
import { drainSnapshots } from "./workspaceOverlay.ts"
import { makePools } from "./workspacePool.ts"
import { makeRepoLocks } from "./workspaceRepo.ts"

export const makeWorkspace = (config: Config): Workspace["Service"] => {
  const locks = makeRepoLocks()
  const pools = makePools()
  const ports = makePortAllocator({ base: config.portBase, size: config.portsPerAgent, blocks: config.portBlocks })
  const lenders = new WeakMap()
  return {
    acquire: (options) => acquireWorkspace({ locks, ports, pools, lenders }, options),
    recycleAfter: (handle, lastUse) => recycleAfter({ lenders }, handle, lastUse),
    closePool: (runId) => closePool({ locks, pools }, runId),
    integration: (options) => makeIntegration(locks, options),
    registerRun: (repo, runId) =>
      registerRun(config, repo, runId).pipe(
        Effect.tap(() =>
          Effect.addFinalizer(() => Effect.andThen(drainPool({ locks, pools }, runId), drainSnapshots(runId)))
        )
      ),
    gc: (options) => collectGarbage(config, locks, options).pipe(Effect.withSpan("Workspace.gc"))
  }
}
