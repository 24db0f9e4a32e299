/**
 * Builds the published `corral` command (`dist/bin.js`) as a bundle: one ES module per entry plus
 * shared chunks, all in `dist/`, with corral's packages, `effect` and the other dependencies inside.
 * Node's module loader costs ≈ 0.5 ms of CPU per file it resolves and links, and the command as
 * separate compiled modules loads ≈ 450 files before it does anything (≈ 275 ms of CPU for
 * `corral --version`, ≈ 100 ms bundled). Modules loaded with `import()` (commands, reports, the
 * cluster) stay chunks loaded on demand; `log-update`, `string-width`, `wrap-ansi` and `cli-table3`, loaded with
 * `require` only when needed, stay dependencies resolved at run time.
 *
 * Besides the command, the files that corral's code starts by path beside its own module are entries
 * of their own: the worker threads of `@corral/platform-node` (`workerEntry`: `<name>.js` beside the
 * chunk that starts it) and the coding-agent launcher (`internal/` beside `CodingAgent`'s chunk).
 */
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { fileURLToPath } from "node:url"
import { build } from "rolldown"

const cli = fileURLToPath(new URL("..", import.meta.url))
const dist = NodePath.join(cli, "dist")
const platformInternal = NodePath.join(
  NodePath.dirname(fileURLToPath(import.meta.resolve("@corral/platform-node/SpawnHelper"))),
  "internal"
)

NodeFs.rmSync(dist, { recursive: true, force: true })
await build({
  input: {
    bin: NodePath.join(cli, "src", "bin.ts"),
    ledgerWorker: NodePath.join(platformInternal, "ledgerWorker.ts"),
    blockingWorker: NodePath.join(platformInternal, "blockingWorker.ts"),
    "internal/codingAgentLauncher": NodePath.join(platformInternal, "codingAgentLauncher.ts")
  },
  platform: "node",
  logLevel: "warn",
  output: {
    dir: dist,
    format: "esm",
    entryFileNames: "[name].js",
    chunkFileNames: "[name]-[hash].js"
  }
})
