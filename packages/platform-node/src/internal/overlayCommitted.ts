/**
 * An overlay workspace's commit, remembered so that its release needs no mount: `git add --all` of
 * every path of the upper folder and the commit of the whole index leave nothing for a `git status`
 * of those paths to report, so while the upper folder, the worktree's index, HEAD log, HEAD and
 * branch, and the ignore rules outside the upper folder are as they were, the release's dirty check
 * can answer "clean" without mounting the overlay (one `unshare` + mount + `git status` less per agent).
 *
 * The upper folder is compared by the identity of every entry (mode, inode, size, modification and
 * change times in nanoseconds), taken before `add` read it. A later change shows in the change time,
 * unless it falls in the same clock tick as the entry's previous one: a file or symbolic link whose
 * change time is within {@link racyMs} of the walk is "racy" (git's index has the same rule), and
 * the release compares its content with HEAD's blob (`git ls-tree`, hashed here) instead; one HEAD
 * lacks was ignored at `add` (the only way a named path stays out without an error). Other entries
 * hold no content: a folder's change shows in the entries below it, and a whiteout (or anything git
 * does not add) can only be replaced, which changes its mode. Nothing is remembered for a nested
 * repository (a `.git` below the top, whose own state can make the status dirty); the release then
 * asks git in the mount as before.
 */
import { createHash } from "node:crypto"
import * as fsSync from "node:fs"
import type { BigIntStats } from "node:fs"
import * as fs from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import * as Effect from "effect/Effect"
import { gitOutput } from "./git.ts"
import { worktreeGitDir } from "./workspaceRepo.ts"

/** Every entry of an upper folder (the top `.git` file aside) as a walk saw it, in walk order. */
export type UpperState = ReadonlyArray<readonly [relative: string, stat: BigIntStats]>

interface Committed {
  readonly upper: string
  readonly skip: string
  readonly git: string
  readonly racy: ReadonlyArray<string>
}

/** More than a coarse clock tick (1–10 ms): a change after the walk cannot share an older entry's change time. */
const racyMs = 20

const committed = new Map<string, Committed>()

/**
 * What identifies an entry: a file's, link's or folder's inode, size and times; for anything else
 * (a whiteout: overlayfs links every whiteout to one shared inode, whose change time moves with each
 * link) its kind and device number alone.
 */
const identity = (upper: UpperState) =>
  upper
    .map(([relative, s]) =>
      s.isFile() || s.isSymbolicLink() || s.isDirectory()
        ? `${relative}\0${s.mode}\0${s.ino}\0${s.size}\0${s.mtimeNs}\0${s.ctimeNs}\n`
        : `${relative}\0${s.mode}\0${s.rdev}\n`
    )
    .join("")

/**
 * A file's identity (following links), read synchronously: most of the files asked about are
 * missing, and a missing file costs no error object this way (a rejected `fs.stat` builds one with
 * its stack).
 */
const fileState = (file: string) => {
  try {
    const stat = fsSync.statSync(file, { bigint: true, throwIfNoEntry: false })
    return stat === undefined ? "missing" : `${stat.ino}\0${stat.size}\0${stat.mtimeNs}\0${stat.ctimeNs}`
  } catch {
    return "unreadable"
  }
}

/** What `ref` (under `common`) points to: its loose file, else its line in the packed refs. */
const refValue = async (common: string, ref: string) => {
  const loose = await fs.readFile(path.join(common, ref), "utf8").catch(() => undefined)
  if (loose !== undefined) return loose.trim()
  const packed = await fs.readFile(path.join(common, "packed-refs"), "utf8").catch(() => "")
  return packed.split("\n").find((line) => line.endsWith(` ${ref}`)) ?? "missing"
}

/**
 * The files outside the upper folder that say what git ignores there: the repository's exclude file,
 * and the configurations that can name another (`core.excludesFile`) with the global exclude file
 * at its default place. Not watched: the system configuration, and the content of an exclude file
 * a configuration names elsewhere.
 */
const ruleFiles = (gitDir: string, common: string) => {
  const config = process.env.XDG_CONFIG_HOME || path.join(os.homedir(), ".config")
  return [
    path.join(common, "info", "exclude"),
    path.join(common, "config"),
    path.join(gitDir, "config.worktree"),
    process.env.GIT_CONFIG_GLOBAL ?? path.join(os.homedir(), ".gitconfig"),
    path.join(config, "git", "config"),
    path.join(config, "git", "ignore")
  ]
}

/**
 * The worktree's index and HEAD log and the ignore rules outside the upper folder (by identity), and
 * HEAD and the commit of the branch it names (by value): each commit, reset or checkout changes one
 * of them, and so does a rule that stops ignoring a file the commit left out.
 */
const gitState = async (gitDir: string) => {
  const head = await fs.readFile(path.join(gitDir, "HEAD"), "utf8").catch(() => "")
  const ref = /^ref: (.+)$/m.exec(head)?.[1]?.trim()
  const common = await fs
    .readFile(path.join(gitDir, "commondir"), "utf8")
    .then((text) => path.resolve(gitDir, text.trim()))
    .catch(() => gitDir)
  const files = [path.join(gitDir, "index"), path.join(gitDir, "logs", "HEAD"), ...ruleFiles(gitDir, common)].map(
    fileState
  )
  return [head.trim(), ref === undefined ? "" : await refValue(common, ref), ...files].join("\n")
}

/**
 * Remembers that the commit of `upper` (walked from `walkedAtMs` on, `skip` left out) succeeded,
 * unless a nested repository is there.
 */
export const rememberCommit = (
  upperDir: string,
  gitDir: string | undefined,
  upper: UpperState,
  walkedAtMs: number,
  skip: ReadonlyArray<string>
) =>
  Effect.promise(async () => {
    committed.delete(upperDir)
    if (gitDir === undefined || upper.some(([relative]) => path.posix.basename(relative) === ".git")) return
    const racy = upper.filter(
      ([relative, s]) =>
        (s.isFile() || s.isSymbolicLink()) &&
        !skip.includes(relative) &&
        Number(s.ctimeNs / 1_000_000n) >= walkedAtMs - racyMs
    )
    committed.set(upperDir, {
      upper: identity(upper),
      skip: skip.join("\0"),
      git: await gitState(gitDir),
      racy: racy.map(([relative]) => relative)
    })
  })

const blobId = (content: Buffer, oid: string) =>
  createHash(oid.length === 64 ? "sha256" : "sha1")
    .update(`blob ${content.length}\0`)
    .update(content)
    .digest("hex")

/**
 * Whether each racy path HEAD has holds what HEAD has there (its content, and its kind: file,
 * executable, link). A racy path HEAD lacks was named to `add` and not staged, so it is ignored,
 * whatever it holds now.
 */
const racyMatchHead = (dir: string, upperDir: string, racy: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const out = yield* gitOutput(["ls-tree", "-z", "HEAD", "--", ...racy], {
      cwd: dir,
      env: { GIT_LITERAL_PATHSPECS: "1" }
    })
    const head = new Map<string, { readonly mode: string; readonly oid: string }>()
    for (const record of out.stdout.split("\0")) {
      const tab = record.indexOf("\t")
      if (tab < 0) continue
      const [mode = "", , oid = ""] = record.slice(0, tab).split(" ")
      head.set(record.slice(tab + 1), { mode, oid })
    }
    return yield* Effect.tryPromise(async () => {
      for (const relative of racy) {
        const entry = head.get(relative)
        if (entry === undefined) continue
        const file = path.join(upperDir, relative)
        const stat = await fs.lstat(file)
        const mode = stat.isSymbolicLink() ? "120000" : (stat.mode & 0o100) !== 0 ? "100755" : "100644"
        const content = stat.isSymbolicLink()
          ? await fs.readlink(file, { encoding: "buffer" })
          : await fs.readFile(file)
        if (entry.mode !== mode || blobId(content, entry.oid) !== entry.oid) return false
      }
      return true
    })
  })

/**
 * Whether the upper folder, the skipped paths and the worktree's git state are as at the remembered
 * commit, and each racy path holds HEAD's content; `false` (ask git in the mount) on any doubt or
 * failure. The worktree's `.git` file (in `dir`) is read only when a remembered commit matches the
 * upper folder.
 */
export const unchangedSinceCommit = (upperDir: string, dir: string, upper: UpperState, skip: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const found = committed.get(upperDir)
    if (found === undefined || found.skip !== skip.join("\0") || found.upper !== identity(upper)) return false
    const gitDir = yield* worktreeGitDir(dir)
    if (gitDir === undefined || found.git !== (yield* Effect.promise(() => gitState(gitDir)))) return false
    return found.racy.length === 0 || (yield* racyMatchHead(dir, upperDir, found.racy))
  }).pipe(Effect.catch(() => Effect.succeed(false)))

/** Forgets the commit of `upperDir` (its workspace is gone). */
export const forgetCommit = (upperDir: string) =>
  Effect.sync(() => {
    committed.delete(upperDir)
  })
