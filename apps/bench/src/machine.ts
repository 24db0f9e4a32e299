import { readFileSync } from "node:fs"
import os from "node:os"

const cpuModel = (): string => {
  try {
    const match = /^model name\s*:\s*(.+)$/m.exec(readFileSync("/proc/cpuinfo", "utf8"))
    return match?.[1] ?? os.cpus()[0]?.model ?? "unknown"
  } catch {
    return os.cpus()[0]?.model ?? "unknown"
  }
}

const fsType = (path: string): string => {
  try {
    const mounts = readFileSync("/proc/mounts", "utf8")
      .split("\n")
      .map((line) => line.split(" "))
      .filter(
        ([, target]) => target !== undefined && (path === target || path.startsWith(`${target}/`) || target === "/")
      )
    const best = mounts.sort((a, b) => b[1]!.length - a[1]!.length)[0]
    return best?.[2] ?? "unknown"
  } catch {
    return "unknown"
  }
}

export const machine = (): Record<string, string | number> => ({
  cpus: os.availableParallelism(),
  cpuModel: cpuModel(),
  memoryGiB: Math.round(os.totalmem() / 2 ** 30),
  node: process.version,
  tmpdir: `${os.tmpdir()} (${fsType(os.tmpdir())})`,
  platform: `${os.platform()} ${os.release()}`
})

export const describeMachine = (): string => {
  const m = machine()
  return `${m.cpus} CPUs (${m.cpuModel}), ${m.memoryGiB} GiB, Node ${m.node}, ${m.platform}, tmpdir ${m.tmpdir}`
}
