import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { Effect } from "effect"
import { afterAll } from "vitest"
import { sharedServer } from "../../packages/postgres/test/support/server.ts"
import { git, makeRepo, type RunningCli, runCli, startCli, tempDir, waitFor } from "../helpers.ts"

/** A `corral runner` that printed `runner <address> ready`. */
export interface Runner extends RunningCli {
  readonly address: string
}

export interface RunnerOptions {
  /** Variables added to the runner's environment. */
  readonly env?: Record<string, string>
  /** More arguments after `runner --cluster <url> --repo <repo>` (`--capacity 2`…). */
  readonly args?: ReadonlyArray<string>
}

/**
 * The prelude of the cluster end-to-end tests: one throwaway PostgreSQL server for the calling file
 * (`undefined` when PostgreSQL is not installed; with `CI=true` that fails the file instead), a fresh
 * database per test, `corral runner` processes started on it and waited for until they are ready,
 * and temporary folders. After the file's last test every process it started is killed and every
 * folder removed (a runner started inside a test is also stopped when that test ends, see `startCli`).
 */
export const clusterTests = async () => {
  const server = await sharedServer()
  const started: Array<RunningCli> = []
  const dirs: Array<string> = []
  afterAll(() => {
    for (const cli of started) cli.signal("SIGKILL")
    for (const dir of dirs) NodeFs.rmSync(dir, { recursive: true, force: true })
  })

  /** A temporary folder, removed after the file's last test. */
  const scratch = (prefix: string): string => {
    const dir = tempDir(prefix)
    dirs.push(dir)
    return dir
  }

  /** A git repository with `files` committed on `main` (see `makeRepo`), removed after the file's last test. */
  const scratchRepo = (files?: Record<string, string>): string => {
    const repo = makeRepo(files)
    dirs.push(repo)
    return repo
  }

  /** A clone of `origin` for a runner (`<folder>/repo`): its own repository, never the coordinator's checkout. */
  const runnerClone = (origin: string, name = "clone"): string => {
    const parent = scratch(`corral-runner-${name}-`)
    const repo = NodePath.join(parent, "repo")
    git(parent, "clone", "-q", origin, repo)
    return repo
  }

  /** Kills `cli` (a coordinator a test leaves running when it fails) after the file's last test. */
  const track = <A extends RunningCli>(cli: A): A => {
    started.push(cli)
    return cli
  }

  /** A fresh database on the file's server. */
  const database = (): Promise<string> => Effect.runPromise(server!.createDatabase())

  /** Starts `corral runner` on `url` with `repo` as its checkout; resolves once it is ready. */
  const startRunner = async (url: string, repo: string, options: RunnerOptions = {}): Promise<Runner> => {
    const runner = track(
      startCli(["runner", "--cluster", url, "--repo", repo, ...(options.args ?? [])], {
        cwd: repo,
        env: options.env ?? {}
      })
    )
    let exited = false
    void runner.done.then(() => {
      exited = true
    })
    const ready = () => /runner (\S+) ready/.exec(runner.output())
    await waitFor(() => ready() !== null || exited, 60_000, `runner ready: ${runner.output()}`)
    const address = ready()?.[1]
    if (address === undefined) throw new Error(`corral runner exited before it was ready:\n${runner.output()}`)
    return { ...runner, address }
  }

  /** `count` runners on a fresh database (or `options.url`), all with `repo` as their checkout, all ready. */
  const runners = async (
    count: number,
    repo: string,
    options: RunnerOptions & { readonly url?: string } = {}
  ): Promise<{ readonly url: string; readonly runners: Array<Runner> }> => {
    const url = options.url ?? (await database())
    return { url, runners: await Promise.all(Array.from({ length: count }, () => startRunner(url, repo, options))) }
  }

  /**
   * Polls `corral runs --cluster <url>` (in `cwd`) until its output matches `pattern` (a crashed
   * coordinator is told from a live one only once its session is gone); returns that output.
   */
  const listedAs = async (url: string, cwd: string, pattern: RegExp): Promise<string> => {
    const deadline = Date.now() + 60_000
    for (;;) {
      const listed = await runCli(["runs", "--cluster", url], { cwd })
      if (listed.code !== 0) throw new Error(`corral runs exited with ${listed.code}: ${listed.stderr}`)
      if (pattern.test(listed.stdout) || Date.now() > deadline) return listed.stdout
    }
  }

  return {
    available: server !== undefined,
    /** The file's server (to stop and restart it); defined when `available`. */
    server,
    scratch,
    scratchRepo,
    runnerClone,
    track,
    database,
    startRunner,
    runners,
    listedAs
  }
}
