import { parentPort, workerData } from "node:worker_threads"

interface Job {
  readonly module: string
  readonly export: string
  readonly input: unknown
}

const describe = (error: unknown): { readonly name: string; readonly message: string } =>
  error instanceof Error ? { name: error.name, message: error.message } : { name: "Error", message: String(error) }

const main = async (job: Job): Promise<void> => {
  try {
    const loaded = (await import(job.module)) as Record<string, unknown>
    const fn = loaded[job.export]
    if (typeof fn !== "function")
      throw new TypeError(`${job.module} has no exported function ${JSON.stringify(job.export)}`)
    parentPort!.postMessage({ ok: true, value: fn(job.input) })
  } catch (error) {
    parentPort!.postMessage({ ok: false, ...describe(error) })
  }
}

void main(workerData as Job)
