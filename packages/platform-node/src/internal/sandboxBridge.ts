/**
 * `network: "loopback"`: the sandbox gets its own network namespace, and only the listed ports of the
 * host's 127.0.0.1 are carried into it. Outside, corral listens on one Unix socket per port (in a
 * private folder mounted read-only into the sandbox) and connects each accepted stream to
 * 127.0.0.1:port; inside, a small Node program (this same Node binary) listens on 127.0.0.1:port in
 * the sandbox's namespace, forwards to the socket, and runs the command once every port listens.
 * A Unix socket is the only channel between the two namespaces, so nothing else of the host's
 * network is reachable.
 */
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Folder from "../Folder.ts"

export interface Bridge {
  readonly dir: string
  readonly ports: ReadonlyArray<number>
}

export const makeBridge = (ports: ReadonlyArray<number>): Bridge => ({
  dir: path.join(os.tmpdir(), `corral-net-${process.pid}-${Math.random().toString(36).slice(2, 10)}`),
  ports: [...new Set(ports)]
})

/** The program that runs first inside the sandbox: `node -e FORWARDER <dir> <ports> -- <command…>`. */
const FORWARDER = `
const net = require("node:net"), cp = require("node:child_process")
const [dir, list, , ...command] = process.argv.slice(1)
const ports = list === "" ? [] : list.split(",").map(Number)
let waiting = ports.length
const start = () => {
  const child = cp.spawn(command[0], command.slice(1), { stdio: "inherit" })
  for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"]) process.on(signal, () => child.kill(signal))
  child.on("error", (error) => { console.error("corral: " + error.message); process.exit(127) })
  child.on("exit", (code, signal) => {
    if (signal === null) process.exit(code)
    process.removeAllListeners(signal)
    process.kill(process.pid, signal)
  })
}
for (const port of ports) {
  net.createServer((socket) => {
    const upstream = net.connect(dir + "/" + port)
    socket.pipe(upstream).pipe(socket)
    socket.on("error", () => upstream.destroy())
    upstream.on("error", () => socket.destroy())
  }).on("error", (error) => { console.error("corral loopback: " + error.message); process.exit(125) })
    .listen(port, "127.0.0.1", () => { if (--waiting === 0) start() })
}
if (ports.length === 0) start()
`

/** The command line run inside the sandbox, and the paths it needs to see. */
export const forwarderArgv = (
  bridge: Bridge,
  argv: readonly [string, ...Array<string>]
): readonly [string, ...Array<string>] => [
  process.execPath,
  "-e",
  FORWARDER,
  bridge.dir,
  bridge.ports.join(","),
  "--",
  ...argv
]

const listen = (bridge: Bridge, port: number) =>
  new Promise<net.Server>((resolve, reject) => {
    const server = net.createServer((socket) => {
      const upstream = net.connect(port, "127.0.0.1")
      socket.pipe(upstream).pipe(socket)
      socket.on("error", () => upstream.destroy())
      upstream.on("error", () => socket.destroy())
    })
    server.on("error", reject)
    server.listen(path.join(bridge.dir, String(port)), () => resolve(server))
  })

/** Opens the host side of the bridge for the lifetime of the scope; fails when its folder cannot be made. */
export const openBridge = (bridge: Bridge): Effect.Effect<void, Folder.FolderError, Scope.Scope> =>
  Effect.asVoid(
    Effect.acquireRelease(
      Effect.andThen(
        Folder.make(bridge.dir, 0o700),
        Effect.promise(() => Promise.all(bridge.ports.map((port) => listen(bridge, port))))
      ),
      (servers) =>
        Effect.promise(async () => {
          await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))))
          fs.rmSync(bridge.dir, { recursive: true, force: true })
        })
    )
  )
