/**
 * Overlay workspaces (Linux): an agent's folder is an overlayfs mount whose lower layer is a
 * read-only snapshot of its start commit, shared by every agent of the run starting there, and whose
 * upper layer is the agent's own empty folder. Nothing is checked out per agent; the agent's changes
 * are the files in its upper folder, which is all a commit reads.
 *
 * The mount lives in a private mount namespace entered with `unshare -rm` (util-linux), which needs
 * no privilege where user namespaces are allowed: `sh` mounts the overlay (`userxattr`, so whiteouts
 * and opaque folders are recorded as the kernel allows inside a user namespace), changes into it and
 * runs the command. The mount dies with the namespace's last process, so no exit path leaves one.
 * bubblewrap would keep the user id, but its `--overlay` options need bubblewrap 0.9; `unshare` runs
 * the command as root of its namespace (files it writes belong to the user on disk).
 *
 * Snapshots: `<stateDir>/overlay/<runId>/snapshots/<commit>`, written once into a temporary folder
 * and renamed. The first is a `checkout-index` of the commit; a later one is a hard-link farm of the
 * run's latest snapshot (`cp -al`) with the paths `git diff-tree` lists as deleted removed and the
 * others written again by `git checkout-index --force`. Overlayfs never writes to a lower layer (a
 * change copies the file up), and git never writes into an existing file (it unlinks it and creates
 * the new one with `O_EXCL`), so a shared inode is never modified. A snapshot no
 * agent uses is removed at release unless it is the run's latest; the run's folder goes when the run
 * ends, and `gc` removes it for a dead run.
 *
 * Agent state machine (per agent folder `<stateDir>/overlay/<runId>/agents/<agentId>`): created with
 * `upper/` (holding the worktree's `.git` file) and `work/` at acquire → mounted while the agent's
 * command or a commit runs → removed at release (or kept with its snapshot when it holds uncommitted
 * changes).
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs/promises"
import * as fsSync from "node:fs"
import type { BigIntStats } from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Effect from "effect/Effect"
import type { OverlayLayers } from "../Workspace.ts"
import { toolFinder } from "./executable.ts"
import { git, gitOutput } from "./git.ts"
import { OverlayUnavailable, type WorkspaceError } from "./workspaceErrors.ts"
import { attempt, makeDir } from "./workspaceFs.ts"
import { type UpperState, unchangedSinceCommit } from "./overlayCommitted.ts"
import { linkTree, removeTrees } from "./treeCommands.ts"

export type { OverlayLayers }

const mountScript =
  'mount -t overlay overlay -o "userxattr,lowerdir=$1,upperdir=$2,workdir=$3" "$4" && cd "$4" && shift 4 && exec "$@"'

/** Characters overlayfs reads as separators in its mount options. */
const unsafePath = /[,:\\\n]/

/** `CORRAL_UNSHARE` names the executable; otherwise `unshare` is looked up in PATH. */
export const findUnshare = toolFinder("CORRAL_UNSHARE", "unshare")

const probed = new Map<string, string | undefined>()

/**
 * Why an overlay cannot be mounted here (`undefined` when it can): `unshare` found and one overlay
 * mounted in a throwaway namespace over temporary folders, once per executable and process.
 */
export const overlayProblem = (env: NodeJS.ProcessEnv = process.env): string | undefined => {
  if (process.platform !== "linux") return `overlay workspaces need Linux, not ${process.platform}`
  const unshare = findUnshare(env)
  if (unshare === undefined) {
    return env.CORRAL_UNSHARE === undefined
      ? "`unshare` (util-linux) is not in PATH"
      : `CORRAL_UNSHARE=${env.CORRAL_UNSHARE} is not an executable`
  }
  if (probed.has(unshare)) return probed.get(unshare)
  const dir = fsSync.mkdtempSync(path.join(os.tmpdir(), "corral-overlay-probe-"))
  try {
    const [lower, upper, work, mnt] = ["lower", "upper", "work", "mnt"].map((name) => path.join(dir, name))
    for (const d of [lower!, upper!, work!, mnt!]) fsSync.mkdirSync(d)
    const out = spawnSync(unshare, ["-rm", "--", "sh", "-c", mountScript, "sh", lower!, upper!, work!, mnt!, "true"], {
      encoding: "utf8",
      timeout: 30_000
    })
    const problem =
      out.status === 0
        ? undefined
        : `\`${unshare} -rm\` could not mount an overlay (user namespaces or unprivileged overlayfs not allowed?): ${(
            out.stderr || out.error?.message || `exit ${out.status}`
          ).trim()}`
    probed.set(unshare, problem)
    return problem
  } finally {
    fsSync.rmSync(dir, { recursive: true, force: true })
  }
}

/** The command prefix that runs a command (appended) with `layers` mounted at `dir`, in `dir`. */
export const mountPrefix = (unshare: string, layers: OverlayLayers, dir: string): ReadonlyArray<string> => [
  unshare,
  "-rm",
  "--",
  "sh",
  "-c",
  mountScript,
  "sh",
  layers.lower,
  layers.upper,
  layers.work,
  dir
]

/** Fails with {@link OverlayUnavailable} unless an overlay can be mounted with these folders. */
export const requireOverlay = (agentId: string, paths: ReadonlyArray<string>) =>
  Effect.suspend(() => {
    const problem = overlayProblem()
    if (problem !== undefined) return Effect.fail(new OverlayUnavailable({ agentId, reason: problem }))
    const bad = paths.find((p) => unsafePath.test(p))
    if (bad !== undefined) {
      return Effect.fail(
        new OverlayUnavailable({
          agentId,
          reason: `${bad} holds ',', ':', '\\' or a line break, which overlayfs cannot take`
        })
      )
    }
    return Effect.succeed(findUnshare()!)
  })

export const runDirOf = (stateDir: string, runId: string) => path.join(stateDir, "overlay", runId)

export const layersOf = (stateDir: string, runId: string, agentId: string, commit: string): OverlayLayers => {
  const agent = path.join(runDirOf(stateDir, runId), "agents", agentId)
  return {
    lower: path.join(runDirOf(stateDir, runId), "snapshots", commit),
    upper: path.join(agent, "upper"),
    work: path.join(agent, "work")
  }
}

const removeSnapshot = (dir: string) => removeTrees(indexOf(dir), dir).pipe(Effect.ignore)

interface Snapshot {
  users: number
  readonly ready: Effect.Effect<void, WorkspaceError>
}

interface RunSnapshots {
  readonly byCommit: Map<string, Snapshot>
  /** The snapshot written last: the next one is derived from it, and it is kept while the run lasts. */
  latest: { readonly commit: string; readonly dir: string } | undefined
}

const runs = new Map<string, RunSnapshots>()

const runSnapshots = (runDir: string) => {
  let found = runs.get(runDir)
  if (found === undefined) {
    found = { byCommit: new Map(), latest: undefined }
    runs.set(runDir, found)
  }
  return found
}

/** A snapshot's index: `commit` read into it (no stat data), copied as the index of each agent starting there. */
export const indexOf = (snapshot: string) => `${snapshot}.index`

/**
 * Writes `paths` of `commit` under `dir` (every file when `paths` is undefined), through the index
 * `index` of `commit`, which stays for the agents.
 */
const checkOutInto = (
  root: string,
  commit: string,
  dir: string,
  index: string,
  paths: ReadonlyArray<string> | undefined
) =>
  Effect.gen(function* () {
    const env = { GIT_INDEX_FILE: index }
    yield* git(["read-tree", commit], { cwd: root, env })
    const prefix = `--prefix=${dir}/`
    if (paths === undefined) yield* git(["checkout-index", "--all", "--force", prefix], { cwd: root, env })
    else if (paths.length > 0) {
      yield* git(["checkout-index", "--force", "-z", "--stdin", prefix], { cwd: root, env, input: paths.join("\0") })
    }
  })

const pruneEmptyParents = async (top: string, file: string) => {
  for (let dir = path.dirname(file); dir.startsWith(`${top}/`); dir = path.dirname(dir)) {
    if (
      !(await fs.rmdir(dir).then(
        () => true,
        () => false
      ))
    )
      return
  }
}

/** A hard-link farm of `from` (at `fromCommit`) turned into `commit`: only the changed paths are rewritten. */
const derive = (root: string, from: string, fromCommit: string, commit: string, dir: string, index: string) =>
  Effect.gen(function* () {
    yield* linkTree(from, dir)
    const diff = yield* gitOutput(["diff-tree", "-r", "-z", "--no-renames", "--name-status", fromCommit, commit], {
      cwd: root
    })
    const fields = diff.stdout.split("\0")
    const deleted: Array<string> = []
    const written: Array<string> = []
    for (let i = 0; i + 1 < fields.length; i += 2) {
      const status = fields[i]!
      const file = fields[i + 1]!
      if (status === "D") deleted.push(file)
      else written.push(file)
    }
    yield* attempt("update snapshot", dir, async () => {
      for (const file of deleted) {
        await fs.rm(path.join(dir, file), { force: true })
        await pruneEmptyParents(dir, path.join(dir, file))
      }
    })
    yield* checkOutInto(root, commit, dir, index, written)
  })

/** A derivation's source is used no more: removed when no agent uses it and it is no longer the latest. */
const releaseSource = (state: RunSnapshots, commit: string, dir: string, source: Snapshot) =>
  Effect.suspend(() => {
    source.users--
    if (source.users > 0 || state.latest?.commit === commit || state.byCommit.get(commit) !== source) return Effect.void
    state.byCommit.delete(commit)
    return removeSnapshot(dir)
  })

const build = (root: string, runDir: string, commit: string, final: string) =>
  Effect.gen(function* () {
    const state = runSnapshots(runDir)
    const source = state.latest === undefined ? undefined : state.byCommit.get(state.latest.commit)
    const from = source === undefined ? undefined : state.latest!
    if (source !== undefined) source.users++
    yield* Effect.addFinalizer(() =>
      source === undefined ? Effect.void : releaseSource(state, from!.commit, from!.dir, source)
    )
    const temp = `${final}.tmp-${process.pid}-${Math.random().toString(36).slice(2)}`
    yield* makeDir(path.dirname(final))
    const index = indexOf(temp)
    const write =
      from === undefined
        ? attempt("create folder", temp, () => fs.mkdir(temp)).pipe(
            Effect.andThen(checkOutInto(root, commit, temp, index, undefined))
          )
        : derive(root, from.dir, from.commit, commit, temp, index)
    const discard = removeTrees(temp, index).pipe(Effect.ignore)
    yield* write.pipe(Effect.tapError(() => discard))
    yield* attempt("publish snapshot", final, async () => {
      await fs.rename(index, indexOf(final))
      await fs.rename(temp, final)
    })
    const previous = state.latest
    state.latest = { commit, dir: final }
    if (previous !== undefined && previous.commit !== commit) {
      const old = state.byCommit.get(previous.commit)
      if (old !== undefined && old.users === 0) {
        state.byCommit.delete(previous.commit)
        yield* removeSnapshot(previous.dir)
      }
    }
  })

/**
 * The run's snapshot of `commit` (written once, shared by the run's agents), counted as used until
 * {@link releaseSnapshot}.
 */
export const useSnapshot = (root: string, stateDir: string, runId: string, commit: string) =>
  Effect.gen(function* () {
    const runDir = runDirOf(stateDir, runId)
    const state = runSnapshots(runDir)
    const dir = path.join(runDir, "snapshots", commit)
    let snapshot = state.byCommit.get(commit)
    if (snapshot === undefined) {
      const ready = yield* Effect.cached(Effect.scoped(build(root, runDir, commit, dir)))
      snapshot = { users: 0, ready }
      state.byCommit.set(commit, snapshot)
    }
    snapshot.users++
    const entry = snapshot
    yield* entry.ready.pipe(
      Effect.tapError(() =>
        Effect.sync(() => {
          entry.users--
          if (state.byCommit.get(commit) === entry) state.byCommit.delete(commit)
        })
      )
    )
    return dir
  })

/** One agent less uses the snapshot; one no agent uses is removed unless it is the run's latest. */
export const releaseSnapshot = (stateDir: string, runId: string, commit: string) =>
  Effect.suspend(() => {
    const state = runs.get(runDirOf(stateDir, runId))
    const snapshot = state?.byCommit.get(commit)
    if (state === undefined || snapshot === undefined) return Effect.void
    snapshot.users--
    if (snapshot.users > 0 || state.latest?.commit === commit) return Effect.void
    state.byCommit.delete(commit)
    return removeSnapshot(path.join(runDirOf(stateDir, runId), "snapshots", commit))
  })

/**
 * Removes the run's overlay folder when the run ends, unless a kept workspace still uses a snapshot
 * (then only the unused snapshots go; `gc` removes the rest once the run is dead).
 */
export const drainSnapshots = (runId: string) =>
  Effect.forEach(
    [...runs.keys()].filter((runDir) => path.basename(runDir) === runId),
    (runDir) =>
      Effect.suspend(() => {
        const state = runs.get(runDir)!
        runs.delete(runDir)
        const used = [...state.byCommit.entries()].filter(([, snapshot]) => snapshot.users > 0)
        if (used.length === 0) {
          return removeTrees(runDir).pipe(
            Effect.ignore,
            Effect.andThen(Effect.promise(() => fs.rmdir(path.dirname(runDir)).catch(() => undefined)))
          )
        }
        const keep = new Set(used.map(([commit]) => commit))
        return attempt("list", runDir, () => fs.readdir(path.join(runDir, "snapshots")).catch(() => [])).pipe(
          Effect.flatMap((names) =>
            removeTrees(
              ...names
                .filter((name) => !keep.has(name.replace(/\.index$/, "")))
                .map((name) => path.join(runDir, "snapshots", name))
            )
          ),
          Effect.ignore
        )
      }),
    { discard: true }
  )

/** What {@link changedPaths} found. */
export interface Changes {
  /** Files, symbolic links, whiteouts, and folders that replaced a file of the snapshot. */
  readonly paths: ReadonlyArray<string>
  /**
   * For each folder of the upper layer that the snapshot has too and whose snapshot entries are not
   * all in the upper folder: one such entry. The folder is opaque (the agent removed and re-created
   * it) when that entry is missing from the mounted view; the kernel records that in an extended
   * attribute Node cannot read, so the check runs in the mount (see {@link stageScript}).
   */
  readonly probes: ReadonlyArray<string>
  /** Every entry of the upper folder as the walk saw it. */
  readonly upper: UpperState
}

/** Entries a walk reads between two turns of the event loop. */
const WALK_SLICE = 1_000

/**
 * The paths an agent changed, read from its upper folder alone (never a scan of the whole tree). The
 * worktree's `.git` file at the top is not the agent's. The walk uses Node's synchronous calls, in
 * slices of {@link WALK_SLICE} entries between which the event loop runs: an asynchronous `lstat`
 * or `readdir` costs ≈ 30 µs of this process's CPU (a threadpool request and a promise), ten times
 * the call itself, and an agent's upper folder is mostly entries the kernel has just cached.
 */
export const changedPaths = (layers: OverlayLayers): Effect.Effect<Changes, WorkspaceError> =>
  attempt("read the changes in", layers.upper, async () => {
    const paths: Array<string> = []
    const probes: Array<string> = []
    const upper: Array<readonly [string, BigIntStats]> = []
    let sliceEnd = WALK_SLICE
    const walk = async (relative: string) => {
      const entries = fsSync.readdirSync(path.join(layers.upper, relative), { withFileTypes: true })
      for (const entry of entries) {
        const child = relative === "" ? entry.name : `${relative}/${entry.name}`
        if (relative === "" && entry.name === ".git") continue
        upper.push([child, fsSync.lstatSync(path.join(layers.upper, child), { bigint: true })])
        if (upper.length >= sliceEnd) {
          sliceEnd += WALK_SLICE
          await new Promise(setImmediate)
        }
        if (!entry.isDirectory()) {
          paths.push(child)
          continue
        }
        const probe = hiddenProbe(layers, child)
        if (probe === child) paths.push(child)
        else if (probe !== undefined) probes.push(probe)
        await walk(child)
      }
    }
    await walk("")
    return { paths, probes, upper }
  })

/** The entry at `file`, or `undefined` when there is none (a missing path or one through a file). */
const lstatOrUndefined = (file: string) => {
  try {
    return fsSync.lstatSync(file)
  } catch {
    return undefined
  }
}

/**
 * For a folder of the upper layer: itself when the snapshot has a non-folder there (a changed path),
 * one of the snapshot's entries of that folder the upper folder lacks (a probe), or `undefined`.
 */
const hiddenProbe = (layers: OverlayLayers, child: string): string | undefined => {
  const lower = lstatOrUndefined(path.join(layers.lower, child))
  if (lower === undefined) return undefined
  if (!lower.isDirectory()) return child
  const upper = new Set(fsSync.readdirSync(path.join(layers.upper, child)))
  const shown = fsSync.readdirSync(path.join(layers.lower, child)).find((name) => !upper.has(name))
  return shown === undefined ? undefined : `${child}/${shown}`
}

/**
 * Run in the mount before a git command (its arguments, ending in `--` and the changed paths): adds
 * each probed folder whose entry the view hides (an opaque folder) to the paths, then runs it.
 */
const probeScript = `set -f; IFS='
'; for p in $CORRAL_OVERLAY_PROBES; do if [ ! -e "$p" ] && [ ! -L "$p" ]; then set -- "$@" "\${p%/*}"; fi; done; unset IFS; exec "$@"`

/**
 * How to run `git <args> -- <changed paths>` in the mount: the command prefix, the environment
 * (literal pathspecs, the probes), and the paths. A probe with a line break names its folder directly;
 * without other probes git runs without the probe script (one `sh` less, ≈ 0.6 ms of CPU).
 */
export const inMount = (unshare: string, layers: OverlayLayers, dir: string, changes: Changes) => {
  const direct = changes.probes.filter((p) => p.includes("\n")).map((p) => p.slice(0, p.lastIndexOf("/")))
  const probes = changes.probes.filter((p) => !p.includes("\n"))
  const mount = mountPrefix(unshare, layers, dir)
  return {
    via: probes.length === 0 ? mount : [...mount, "sh", "-c", probeScript, "sh"],
    env:
      probes.length === 0
        ? { GIT_LITERAL_PATHSPECS: "1" }
        : { GIT_LITERAL_PATHSPECS: "1", CORRAL_OVERLAY_PROBES: probes.join("\n") },
    paths: [...changes.paths, ...direct]
  }
}

export const isEmpty = (changes: Changes) => changes.paths.length === 0 && changes.probes.length === 0

/**
 * Whether an agent's upper folder holds anything but the worktree's `.git` file at its top and the
 * files corral copied in (`copies`, relative paths): what may be uncommitted work when git cannot be
 * asked in the mount. A whiteout (a deletion) counts, and so does an empty folder, which may be
 * opaque (the agent emptied a folder of the snapshot; only the mount shows it). No upper folder holds
 * nothing. The walk goes folder by folder, judging a folder's own entries before reading any folder
 * below it, and stops at the first entry that counts; like {@link changedPaths} it uses Node's
 * synchronous calls and lets the event loop run after each {@link WALK_SLICE} entries.
 */
export const upperHoldsWork = (upper: string, copies: ReadonlyArray<string>) =>
  attempt("read", upper, async () => {
    if (!fsSync.existsSync(upper)) return false
    const copied = new Set(copies)
    const folders = [""]
    let read = 0
    let sliceEnd = WALK_SLICE
    for (let next = 0; next < folders.length; next++) {
      const relative = folders[next]!
      const entries = fsSync.readdirSync(path.join(upper, relative), { withFileTypes: true })
      if (relative !== "" && entries.length === 0) return true
      for (const entry of entries) {
        const child = relative === "" ? entry.name : `${relative}/${entry.name}`
        if (entry.isDirectory()) folders.push(child)
        else if (!(child === ".git" || copied.has(child))) return true
      }
      read += entries.length
      if (read >= sliceEnd) {
        sliceEnd = read + WALK_SLICE
        await new Promise(setImmediate)
      }
    }
    return false
  })

/** The base commit an agent's overlay was set up at (written at acquire, read by gc). */
export const baseFile = (layers: OverlayLayers) => path.join(path.dirname(layers.upper), "base")

/**
 * Whether an overlay workspace holds changes its branch does not have (ignored files aside): a
 * `git status` of the upper folder's paths alone, in the mount, unless nothing changed since this
 * process committed them (see `overlayCommitted.ts`).
 */
export const overlayDirty = (unshare: string, layers: OverlayLayers, dir: string, skip: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const found = yield* changedPaths(layers)
    const changes = { ...found, paths: found.paths.filter((p) => !skip.includes(p)) }
    if (isEmpty(changes)) return false
    if (yield* unchangedSinceCommit(layers.upper, dir, found.upper, skip)) return false
    const run = inMount(unshare, layers, dir, changes)
    const status = yield* git(["status", "--porcelain", "--untracked-files=all", "--", ...run.paths], {
      cwd: dir,
      via: run.via,
      env: run.env
    })
    return status.length > 0
  })
