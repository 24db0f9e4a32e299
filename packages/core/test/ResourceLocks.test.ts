import { ResourceLocks } from "@corral/core"
import { resourceLocksContract } from "./contracts/ResourceLocksContract.ts"

resourceLocksContract("in memory", ResourceLocks.layerMemory)
