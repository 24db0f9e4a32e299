/**
 * Spares the commit's `git add --all` git's racy-clean re-hash, without ever hiding a change.
 *
 * git (2.39 as Debian builds it, without `USE_NSEC`) compares file times in whole seconds, so it
 * treats every index entry whose file mtime is in or after the second of the index file's own mtime
 * as "racily clean" and hashes that file again: after a set-up checkout, the files the checkout
 * wrote in the second it wrote the index (`pnpm bench workspaces-real`, full size, tmpfs: the
 * commit's `add --all` 75 → 54 ms of git CPU per agent with this module).
 * The index still records each file's nanoseconds, so this module does the check git cannot:
 * for each such entry whose second `T` (the current second) would no longer cover, it `lstat`s the
 * file and either git will see a change by itself (size, type or mtime second differ, or the file
 * is gone) or the file is byte-for-byte stat-identical to what git recorded (mtime, ctime and inode
 * to the nanosecond, size) and either its recorded mtime is strictly before the index file's — so
 * any write after the index was written has a later time than the recorded one — or, for the few
 * files recorded in the index's own clock tick, its content hashes to the blob git recorded. (A
 * write in the same clock tick as the recording, before the index was written, would have raced the
 * git command that recorded the file; git's own check misses that too whenever that command ends in
 * a later second.) Only when
 * every such entry passes is the index file's mtime moved to `T` (on the descriptor it was read
 * from, so an index git replaced meanwhile is left alone); entries of second `T` stay racy and are
 * hashed as before. Anything unusual (another index version or hash, conflicts, sparse or split
 * index, skip-worktree, intent-to-add or assume-unchanged entries) leaves the index untouched.
 *
 * Hand-written because no library reads git's index format (documented in git's
 * `Documentation/gitformat-index.txt`), and git has no command that trusts recorded nanoseconds.
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"

export interface Entry {
  readonly name: string
  readonly ctimeSec: number
  readonly ctimeNsec: number
  readonly mtimeSec: number
  readonly mtimeNsec: number
  readonly ino: number
  readonly mode: number
  readonly size: number
  readonly oid: Buffer
}

const HASH = 20
const EXTENDED = 0x4000
const STAGE = 0x3000
const ASSUME_VALID = 0x8000

/** git's offset varint (used by index version 4 for the length of the shared path prefix). */
const varint = (buf: Buffer, at: number): [number, number] => {
  let c = buf[at++]!
  let value = c & 127
  while (c & 128) {
    c = buf[at++]!
    value = ((value + 1) << 7) | (c & 127)
  }
  return [value, at]
}

/** The entries of a SHA-1 index of version 2–4, or `undefined` for anything this module does not trust. */
export const parseIndex = (buf: Buffer): ReadonlyArray<Entry> | undefined => {
  if (buf.length < 12 + HASH || buf.toString("latin1", 0, 4) !== "DIRC") return undefined
  const version = buf.readUInt32BE(4)
  if (version < 2 || version > 4) return undefined
  const body = buf.subarray(0, buf.length - HASH)
  if (
    !createHash("sha1")
      .update(body)
      .digest()
      .equals(buf.subarray(buf.length - HASH))
  )
    return undefined
  const count = buf.readUInt32BE(8)
  const entries: Array<Entry> = []
  let at = 12
  let previous = ""
  for (let i = 0; i < count; i++) {
    const start = at
    if (start + 62 > body.length) return undefined
    const flags = buf.readUInt16BE(start + 60)
    let nameAt = start + 62
    if (flags & EXTENDED) {
      if (version < 3) return undefined
      if (buf.readUInt16BE(nameAt) !== 0) return undefined
      nameAt += 2
    }
    if (flags & (STAGE | ASSUME_VALID)) return undefined
    let name: string
    if (version === 4) {
      const [strip, after] = varint(buf, nameAt)
      const end = buf.indexOf(0, after)
      if (end < 0 || strip > previous.length) return undefined
      name = previous.slice(0, previous.length - strip) + buf.toString("utf8", after, end)
      at = end + 1
    } else {
      const end = buf.indexOf(0, nameAt)
      if (end < 0) return undefined
      name = buf.toString("utf8", nameAt, end)
      at = start + ((nameAt - start + (end - nameAt) + 8) & ~7)
    }
    previous = name
    const mode = buf.readUInt32BE(start + 24)
    const type = mode >>> 12
    if (type !== 0o10 && type !== 0o12) return undefined
    entries.push({
      name,
      ctimeSec: buf.readUInt32BE(start),
      ctimeNsec: buf.readUInt32BE(start + 4),
      mtimeSec: buf.readUInt32BE(start + 8),
      mtimeNsec: buf.readUInt32BE(start + 12),
      ino: buf.readUInt32BE(start + 20),
      mode,
      size: buf.readUInt32BE(start + 36),
      oid: buf.subarray(start + 40, start + 40 + HASH)
    })
  }
  for (let ext = at; ext + 8 <= body.length; ) {
    const signature = buf.toString("latin1", ext, ext + 4)
    if (signature === "link" || signature === "sdir") return undefined
    ext += 8 + buf.readUInt32BE(ext + 4)
  }
  return entries
}

const low32 = (value: bigint) => Number(value & 0xffffffffn)
const NS = 1_000_000_000n

/** Whether git's own whole-second comparison will see that `entry`'s file changed (`stat` undefined: gone). */
const gitSeesChange = (entry: Entry, stat: fs.BigIntStats | undefined) =>
  stat === undefined ||
  !(stat.isFile() || stat.isSymbolicLink()) ||
  (entry.mode >>> 12 === 0o12) !== stat.isSymbolicLink() ||
  low32(stat.size) !== entry.size ||
  low32(stat.mtimeNs / NS) !== entry.mtimeSec

/** The file is exactly as git recorded it, to the nanosecond. */
const unchanged = (entry: Entry, stat: fs.BigIntStats) =>
  low32(stat.mtimeNs / NS) === entry.mtimeSec &&
  Number(stat.mtimeNs % NS) === entry.mtimeNsec &&
  low32(stat.ctimeNs / NS) === entry.ctimeSec &&
  Number(stat.ctimeNs % NS) === entry.ctimeNsec &&
  low32(stat.ino) === entry.ino

/** The file holds the blob git recorded (git's `blob <size>\0<content>` SHA-1). */
const sameBlob = (entry: Entry, file: string) => {
  const content = fs.readFileSync(file)
  return createHash("sha1").update(`blob ${content.length}\0`).update(content).digest().equals(entry.oid)
}

/**
 * Moves the mtime of the index of the worktree at `dir` (git folder `gitDir`) to the current second
 * when that keeps every change visible to git (see the module comment); returns whether it did.
 * Errors (a missing index, an unreadable file) leave the index as it was and return `false`.
 */
export const settleRacyEntries = (dir: string, gitDir: string, nowMs: number = Date.now()): boolean => {
  let fd: number | undefined
  try {
    fd = fs.openSync(path.join(gitDir, "index"), "r")
    const indexStat = fs.fstatSync(fd, { bigint: true })
    const indexNs = indexStat.mtimeNs
    const indexSec = indexNs / NS
    const target = BigInt(Math.floor(nowMs / 1000))
    if (target <= indexSec) return false
    const entries = parseIndex(fs.readFileSync(fd))
    if (entries === undefined) return false
    for (const entry of entries) {
      const sec = BigInt(entry.mtimeSec)
      if (sec < indexSec || sec >= target) continue
      const stat = fs.lstatSync(path.join(dir, entry.name), { bigint: true, throwIfNoEntry: false })
      if (gitSeesChange(entry, stat)) continue
      if (!unchanged(entry, stat!)) return false
      const recordedInIndexTick = sec * NS + BigInt(entry.mtimeNsec) >= indexNs
      if (recordedInIndexTick && !(stat!.isFile() && sameBlob(entry, path.join(dir, entry.name)))) return false
    }
    fs.futimesSync(fd, Number(indexStat.atimeNs) / 1e9, Number(target))
    return true
  } catch {
    return false
  } finally {
    if (fd !== undefined) fs.closeSync(fd)
  }
}
