import { execFileSync } from "node:child_process"
import * as NodeFs from "node:fs"
import * as net from "node:net"
import * as NodeOs from "node:os"
import * as NodePath from "node:path"

/** Where Debian's PostgreSQL 15 lives; the tests that need a server skip without it (and fail with CI=true). */
export const postgresBin = "/usr/lib/postgresql/15/bin"

const inPath = (command: string): boolean =>
  (process.env.PATH ?? "").split(NodePath.delimiter).some((dir) => NodeFs.existsSync(NodePath.join(dir, command)))

/** The server tools and `psql` (which the agents of the test use). */
export const hasPostgres = (): boolean =>
  NodeFs.existsSync(NodePath.join(postgresBin, "initdb")) &&
  NodeFs.existsSync(NodePath.join(postgresBin, "pg_ctl")) &&
  inPath("psql")

export interface Postgres {
  readonly url: string
  readonly port: number
  readonly stop: () => Promise<void>
}

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = net.createServer()
    server.on("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as net.AddressInfo).port
      server.close(() => resolve(port))
    })
  })

/** Runs a PostgreSQL tool as `postgres` when we are root (initdb refuses root), else as ourselves. */
const asPostgres = (tool: string, args: ReadonlyArray<string>) => {
  const file = NodePath.join(postgresBin, tool)
  return process.getuid?.() === 0
    ? execFileSync("runuser", ["-u", "postgres", "--", file, ...args], { stdio: "pipe" })
    : execFileSync(file, [...args], { stdio: "pipe" })
}

/** A throwaway server in a temp folder on 127.0.0.1 (trust authentication), stopped by its pid. */
export const startPostgres = async (): Promise<Postgres> => {
  const dir = NodeFs.mkdtempSync(NodePath.join(NodeOs.tmpdir(), "corral-pg-"))
  if (process.getuid?.() === 0) execFileSync("chown", ["postgres", dir])
  const data = NodePath.join(dir, "data")
  asPostgres("initdb", ["-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"])
  const port = await freePort()
  asPostgres("pg_ctl", [
    "-D",
    data,
    "-l",
    NodePath.join(dir, "server.log"),
    "-o",
    `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`,
    "-w",
    "start"
  ])
  const pid = Number(NodeFs.readFileSync(NodePath.join(data, "postmaster.pid"), "utf8").split("\n")[0])
  const stop = async () => {
    try {
      process.kill(pid, "SIGINT")
    } catch {
      return NodeFs.rmSync(dir, { recursive: true, force: true })
    }
    const deadline = Date.now() + 30_000
    while (Date.now() < deadline) {
      try {
        process.kill(pid, 0)
      } catch {
        break
      }
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    NodeFs.rmSync(dir, { recursive: true, force: true })
  }
  return { url: `postgres://postgres@127.0.0.1:${port}/postgres`, port, stop }
}
