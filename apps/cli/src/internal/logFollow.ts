/**
 * Following an agent's log by its path: a retry renames the log of the attempt before to
 * `<id>@attempt-<n>.log` and the next attempt writes the path afresh, so the follower keeps the file
 * it opened until the path names another, reads what is left of it, then reads the new one from its
 * start.
 */
import * as Effect from "effect/Effect"
import * as NodeFs from "node:fs"

/** The file being followed: its descriptor and inode while open, and how much of it was copied. */
interface Followed {
  readonly file: string
  fd: number | undefined
  ino: number | undefined
  read: number
}

const inodeOf = (file: string): number | undefined => {
  try {
    return NodeFs.statSync(file).ino
  } catch {
    return undefined
  }
}

const drain = (followed: Followed, write: (text: string) => void): void => {
  if (followed.fd === undefined) return
  const size = NodeFs.fstatSync(followed.fd).size
  if (size <= followed.read) return
  const buffer = Buffer.alloc(size - followed.read)
  NodeFs.readSync(followed.fd, buffer, 0, buffer.length, followed.read)
  followed.read = size
  write(buffer.toString("utf8"))
}

const close = (followed: Followed): void => {
  if (followed.fd !== undefined) NodeFs.closeSync(followed.fd)
  followed.fd = undefined
}

/**
 * Copies what was added to the followed file since the last call; when its path now names another
 * file (the next attempt's log), first the rest of the old one, then `onNext`, then the new one from
 * its start.
 */
const copyNew = (followed: Followed, write: (text: string) => void, onNext: () => void): void => {
  const ino = inodeOf(followed.file)
  const moved = ino !== undefined && ino !== followed.ino
  if (moved) {
    const hadOne = followed.fd !== undefined
    drain(followed, write)
    close(followed)
    try {
      followed.fd = NodeFs.openSync(followed.file, "r")
      followed.ino = NodeFs.fstatSync(followed.fd).ino
      followed.read = 0
    } catch {
      followed.ino = undefined
    }
    if (hadOne) onNext()
  }
  drain(followed, write)
}

/**
 * Runs `use` with a `copy` that prints what the log at `file` gained since the last call, across the
 * attempts that replace it; the open file is closed however `use` ends.
 *
 * @since 0.1.0
 */
export const following = <A, E, R>(
  file: string,
  write: (text: string) => void,
  onNext: () => void,
  use: (copy: () => void) => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  Effect.acquireUseRelease(
    Effect.sync((): Followed => ({ file, fd: undefined, ino: undefined, read: 0 })),
    (followed) => use(() => copyNew(followed, write, onNext)),
    (followed) => Effect.sync(() => close(followed))
  )
