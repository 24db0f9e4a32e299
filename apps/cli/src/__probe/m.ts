await import("effect/Effect")
await import("effect/Schema")
await import("effect/cli/Command")
await import("@effect/platform-node/NodeServices")
await import("@corral/platform-node/Workspace")
await import("@corral/platform-node/Git")
await import("@corral/core/Corral")
const order = process.argv.slice(2)
for (const m of order) {
  const c0 = process.cpuUsage()
  const t0 = performance.now()
  await import(m)
  const c = process.cpuUsage(c0)
  console.log(
    m.padEnd(40),
    "cpu",
    ((c.user + c.system) / 1000).toFixed(1).padStart(6),
    "wall",
    (performance.now() - t0).toFixed(1)
  )
}
