import { execFileSync, spawnSync } from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { describe, expect, it } from "vitest"
import { corralBin, git, makeRepo, planFile, runCli, startCli, tempDir, waitFor, writePlan } from "../helpers.ts"

const repoWithFolders = () =>
  makeRepo({ "README.md": "# test\n", "a/keep.txt": "a\n", "b/keep.txt": "b\n", "c/d/keep.txt": "d\n" })

const runIdOf = (stdout: string) => /run (\d{8}-\d{6}-[a-z0-9]+)/.exec(stdout)?.[1]

describe("corral from a subfolder of the repository (end to end)", () => {
  it("keeps its state at the repository's top: runs, status and logs from the top and from another subfolder see the run", async () => {
    const repo = repoWithFolders()
    const plan = planFile("agents:\n  - id: one\n    run: echo one > one.txt && echo said-one\n")
    const made = await runCli(["run", plan], { cwd: NodePath.join(repo, "a") })
    expect(made.code, made.stderr).toBe(0)
    expect(NodeFs.existsSync(NodePath.join(repo, "a", ".corral")), "no state folder in the subfolder").toBe(false)
    expect(NodeFs.existsSync(NodePath.join(repo, ".corral", "ledger.db"))).toBe(true)
    expect(git(repo, "status", "--porcelain"), "the state folder is ignored").toBe("")
    const fromTop = await runCli(["runs"], { cwd: repo })
    expect(fromTop.code, fromTop.stderr).toBe(0)
    const runId = runIdOf(fromTop.stdout) ?? /\d{8}-\d{6}-[a-z0-9]+/.exec(fromTop.stdout)?.[0]
    expect(runId, fromTop.stdout).toBeDefined()
    const fromOther = await runCli(["runs"], { cwd: NodePath.join(repo, "c", "d") })
    expect(fromOther.code, fromOther.stderr).toBe(0)
    expect(fromOther.stdout).toContain(runId!)
    const status = await runCli(["status"], { cwd: NodePath.join(repo, "b") })
    expect(status.code, status.stderr).toBe(0)
    expect(status.stdout).toContain(runId!)
    const logs = await runCli(["logs", "one"], { cwd: NodePath.join(repo, "c") })
    expect(logs.code, logs.stderr).toBe(0)
    expect(logs.stdout).toContain("said-one")
  })

  it("runs and status show the plan's absolute path, whatever folder the run was started from with a relative one", async () => {
    const repo = repoWithFolders()
    writePlan(NodePath.join(repo, "c"), "plan.yaml", "agents:\n  - id: one\n    run: echo one > one.txt\n")
    const made = await runCli(["run", "plan.yaml"], { cwd: NodePath.join(repo, "c") })
    expect(made.code, made.stderr).toBe(0)
    const absolute = NodeFs.realpathSync(NodePath.join(repo, "c", "plan.yaml"))
    for (const cwd of [repo, NodePath.join(repo, "a")]) {
      const runs = await runCli(["runs"], { cwd })
      expect(runs.code, runs.stderr).toBe(0)
      expect(runs.stdout.trim().endsWith(`  ${absolute}`), runs.stdout).toBe(true)
    }
    const status = await runCli(["status"], { cwd: NodePath.join(repo, "b") })
    expect(status.stdout).toContain(`plan ${absolute},`)
  })

  it("--repo naming a subfolder keeps the state at the repository's top too; --state-dir and CORRAL_HOME still win", async () => {
    const repo = repoWithFolders()
    const plan = planFile("agents:\n  - id: one\n    run: echo one > one.txt\n")
    const elsewhere = tempDir("elsewhere-")
    const made = await runCli(["run", plan, "--repo", NodePath.join(repo, "c", "d")], { cwd: elsewhere })
    expect(made.code, made.stderr).toBe(0)
    expect(NodeFs.existsSync(NodePath.join(repo, "c", "d", ".corral"))).toBe(false)
    expect(NodeFs.existsSync(NodePath.join(elsewhere, ".corral"))).toBe(false)
    const listed = await runCli(["runs"], { cwd: repo })
    expect(listed.code, listed.stderr).toBe(0)
    expect(listed.stdout).toMatch(/\d{8}-\d{6}-[a-z0-9]+/)
    const home = NodePath.join(tempDir("home-"), "state")
    const withHome = await runCli(["run", plan], { cwd: NodePath.join(repo, "a"), env: { CORRAL_HOME: home } })
    expect(withHome.code, withHome.stderr).toBe(0)
    expect(NodeFs.existsSync(NodePath.join(home, "ledger.db"))).toBe(true)
    const given = NodePath.join(tempDir("given-"), "state")
    const withFlag = await runCli(["run", plan, "--state-dir", given], { cwd: NodePath.join(repo, "a") })
    expect(withFlag.code, withFlag.stderr).toBe(0)
    expect(NodeFs.existsSync(NodePath.join(given, "ledger.db"))).toBe(true)
  })

  it("two runs from two subfolders claiming one file exclude each other", async () => {
    const repo = repoWithFolders()
    const marks = tempDir("marks-")
    const planFor = (name: string, run: string) =>
      writePlan(
        tempDir("plan-"),
        `${name}.yaml`,
        `isolation: none
merge: none
agents:
  - id: ${name}
    run: ${run}
    claims: { write: [shared/log.txt] }
`
      )
    const holding = planFor(
      "first",
      `touch ${marks}/first-started; while [ ! -f ${marks}/release ]; do sleep 0.05; done; echo first >> ${marks}/order`
    )
    const waiting = planFor("second", `echo second >> ${marks}/order`)
    const first = startCli(["run", holding, "--json"], { cwd: NodePath.join(repo, "a") })
    await waitFor(() => NodeFs.existsSync(NodePath.join(marks, "first-started")), 30_000, "the first run's agent")
    const second = startCli(["run", waiting, "--json"], { cwd: NodePath.join(repo, "b") })
    await waitFor(
      () => /"WaitingForClaims"|"Started"/.test(second.output()) || NodeFs.existsSync(NodePath.join(marks, "order")),
      30_000,
      "the second run to wait or start"
    )
    NodeFs.writeFileSync(NodePath.join(marks, "release"), "")
    const [a, b] = await Promise.all([first.done, second.done])
    expect(a.code, a.stdout + a.stderr).toBe(0)
    expect(b.code, b.stdout + b.stderr).toBe(0)
    expect(b.stdout).toContain('"WaitingForClaims"')
    expect(NodeFs.readFileSync(NodePath.join(marks, "order"), "utf8")).toBe("first\nsecond\n")
  })
})

/** The state folder `corral runs` names ("no runs recorded in <folder>") when run in `cwd`. */
const stateFolderNamed = async (cwd: string, env: Record<string, string> = {}, args: Array<string> = []) => {
  const listed = await runCli(["runs", ...args], { cwd, env })
  expect(listed.code, listed.stdout + listed.stderr).toBe(2)
  return /no runs recorded in (.+)\n/.exec(listed.stderr)?.[1]
}

/** `git rev-parse --show-toplevel` in `cwd` with `env` added, `undefined` outside a work tree. */
const gitTop = (cwd: string, env: Record<string, string> = {}): string | undefined => {
  const answer = spawnSync("git", ["rev-parse", "--show-toplevel"], {
    cwd,
    env: { ...process.env, ...env },
    encoding: "utf8"
  })
  return answer.status === 0 ? answer.stdout.trim() : undefined
}

/** Mounting a tmpfs in a user namespace; on CI the test runs regardless and fails where it cannot. */
/** A worktree run from `cwd` with `--state-dir`, then with `CORRAL_HOME`: each exits 2 saying `refusal`, runs nothing and writes no state folder. */
const expectRefusedWithStateFolder = async (cwd: string, refusal: string) => {
  const marker = NodePath.join(tempDir("marks-"), "ran")
  const plan = planFile(`agents:\n  - id: one\n    run: touch ${marker}\n`)
  const state = NodePath.join(tempDir("state-"), "state")
  for (const [args, env] of [
    [["run", plan, "--state-dir", state], {}],
    [["run", plan], { CORRAL_HOME: state }]
  ] as const) {
    const result = await runCli([...args], { cwd, env })
    expect(result.code, result.stdout + result.stderr).toBe(2)
    expect(result.stderr).toContain(refusal)
  }
  expect(NodeFs.existsSync(marker)).toBe(false)
  expect(NodeFs.existsSync(state), "nothing written").toBe(false)
}

const canMount =
  spawnSync("unshare", ["--user", "--map-root-user", "--mount", "true"]).status === 0 || process.env.CI === "true"

describe("the default state folder is where git finds the work tree (end to end)", () => {
  it("stops at GIT_CEILING_DIRECTORIES as git does", async () => {
    const repo = NodeFs.realpathSync(repoWithFolders())
    const sub = NodePath.join(repo, "c", "d")
    const ceiling = { GIT_CEILING_DIRECTORIES: repo }
    expect(gitTop(sub, ceiling)).toBeUndefined()
    expect(await stateFolderNamed(sub, ceiling)).toBe(NodePath.join(sub, ".corral"))
    const below = { GIT_CEILING_DIRECTORIES: `/nonexistent:relative:${NodePath.join(repo, "c")}` }
    expect(gitTop(sub, below)).toBeUndefined()
    expect(await stateFolderNamed(sub, below)).toBe(NodePath.join(sub, ".corral"))
    const above = { GIT_CEILING_DIRECTORIES: NodePath.dirname(repo) }
    expect(gitTop(sub, above)).toBe(repo)
    expect(await stateFolderNamed(sub, above)).toBe(NodePath.join(repo, ".corral"))
    expect(await stateFolderNamed(repo, ceiling)).toBe(NodePath.join(repo, ".corral"))
  })

  it("follows a symbolic link to a subfolder to the repository it is in, as git does", async () => {
    const repo = NodeFs.realpathSync(repoWithFolders())
    const link = NodePath.join(NodeFs.realpathSync(tempDir("link-")), "to-sub")
    NodeFs.symlinkSync(NodePath.join(repo, "c", "d"), link)
    expect(gitTop(link)).toBe(repo)
    expect(await stateFolderNamed(link)).toBe(NodePath.join(repo, ".corral"))
    expect(await stateFolderNamed(tempDir("elsewhere-"), {}, ["--repo", link])).toBe(NodePath.join(repo, ".corral"))
  })

  it("finds a linked worktree's top and a submodule's top as git does, and ignores GIT_DIR/GIT_WORK_TREE as corral's git commands do", async () => {
    const repo = NodeFs.realpathSync(repoWithFolders())
    const linked = NodePath.join(NodeFs.realpathSync(tempDir("linked-")), "wt")
    git(repo, "worktree", "add", "-q", linked)
    expect(gitTop(NodePath.join(linked, "c", "d"))).toBe(linked)
    expect(await stateFolderNamed(NodePath.join(linked, "c", "d"))).toBe(NodePath.join(linked, ".corral"))
    const inner = NodeFs.realpathSync(makeRepo({ "x/keep.txt": "x\n" }))
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", inner, "mod")
    const inSubmodule = NodePath.join(repo, "mod", "x")
    expect(gitTop(inSubmodule)).toBe(NodePath.join(repo, "mod"))
    expect(await stateFolderNamed(inSubmodule)).toBe(NodePath.join(repo, "mod", ".corral"))
    const other = NodeFs.realpathSync(makeRepo())
    const redirected = { GIT_DIR: NodePath.join(other, ".git"), GIT_WORK_TREE: other }
    expect(await stateFolderNamed(NodePath.join(repo, "a"), redirected)).toBe(NodePath.join(repo, ".corral"))
  })

  it("refuses, as git does, a .git file that names no repository: exit 2 naming the file, nothing started or written", async () => {
    const repo = NodeFs.realpathSync(repoWithFolders())
    const sub = NodePath.join(repo, "c")
    const dotGit = NodePath.join(sub, ".git")
    const marker = NodePath.join(tempDir("marks-"), "ran")
    const plan = planFile(`isolation: none\nagents:\n  - id: one\n    run: touch ${marker}\n`)
    const notFound = NodePath.join(repo, "missing")
    const cases: Array<[string, string]> = [
      [`gitdir: ${notFound}\n`, `names ${notFound}, which is not a git repository`],
      ["gitdir: ../a\n", `names ${NodePath.join(repo, "a")}, which is not a git repository`],
      ["not a git file\n", "is not a git file"]
    ]
    for (const [text, reason] of cases) {
      NodeFs.writeFileSync(dotGit, text)
      expect(gitTop(NodePath.join(sub, "d")), text).toBeUndefined()
      for (const args of [["runs"], ["run", plan], ["gc"]]) {
        const result = await runCli(args, { cwd: NodePath.join(sub, "d") })
        expect(result.code, `${args[0]} with ${text}: ${result.stdout}${result.stderr}`).toBe(2)
        expect(result.stderr).toContain(`${dotGit} ${reason}`)
      }
    }
    expect(NodeFs.existsSync(marker)).toBe(false)
    expect(NodeFs.existsSync(NodePath.join(sub, ".corral"))).toBe(false)
    expect(NodeFs.existsSync(NodePath.join(sub, "d", ".corral"))).toBe(false)
    expect(NodeFs.existsSync(NodePath.join(repo, ".corral"))).toBe(false)
  })

  it.skipIf(process.getuid?.() !== 0 && process.env.CI !== "true")(
    "refuses, as git does, a repository another user owns unless safe.directory trusts it",
    async () => {
      const repo = NodeFs.realpathSync(repoWithFolders())
      execFileSync("chown", ["-R", "nobody", repo])
      const sub = NodePath.join(repo, "c", "d")
      const marker = NodePath.join(tempDir("marks-"), "ran")
      const plan = planFile(`isolation: none\nagents:\n  - id: one\n    run: touch ${marker}\n`)
      expect(gitTop(sub)).toBeUndefined()
      for (const args of [["runs"], ["run", plan], ["gc"]]) {
        const result = await runCli(args, { cwd: sub })
        expect(result.code, `${args[0]}: ${result.stdout}${result.stderr}`).toBe(2)
        expect(result.stderr).toContain(`git refuses the repository at ${repo}: it is owned by another user`)
        expect(result.stderr).toContain(`safe.directory ${repo}`)
      }
      expect(NodeFs.existsSync(marker)).toBe(false)
      expect(NodeFs.existsSync(NodePath.join(repo, ".corral"))).toBe(false)
      expect(NodeFs.existsSync(NodePath.join(sub, ".corral"))).toBe(false)
      const trusted = { GIT_CONFIG_COUNT: "1", GIT_CONFIG_KEY_0: "safe.directory", GIT_CONFIG_VALUE_0: "*" }
      expect(gitTop(sub, trusted)).toBe(repo)
      expect(await stateFolderNamed(sub, trusted)).toBe(NodePath.join(repo, ".corral"))
    }
  )

  it("a worktree run with --state-dir or CORRAL_HOME refuses a .git file naming no repository, as the walk-up does", async () => {
    const repo = NodeFs.realpathSync(repoWithFolders())
    const sub = NodePath.join(repo, "c")
    const dotGit = NodePath.join(sub, ".git")
    NodeFs.writeFileSync(dotGit, "gitdir: ../a\n")
    await expectRefusedWithStateFolder(
      NodePath.join(sub, "d"),
      `git refuses the work tree at ${sub}: ${dotGit} names ${NodePath.join(repo, "a")}, which is not a git repository`
    )
  })

  it.skipIf(process.getuid?.() !== 0 && process.env.CI !== "true")(
    "a worktree run with --state-dir or CORRAL_HOME refuses another user's repository, as the walk-up does",
    async () => {
      const repo = NodeFs.realpathSync(repoWithFolders())
      execFileSync("chown", ["-R", "nobody", repo])
      await expectRefusedWithStateFolder(
        NodePath.join(repo, "c", "d"),
        `git refuses the repository at ${repo}: it is owned by another user`
      )
    }
  )

  it.skipIf(process.getuid?.() !== 0 && process.env.CI !== "true")(
    "a symbolic-link .git is owner-checked as git checks it: the link's owner, not its target's",
    async () => {
      const me = String(process.getuid?.() ?? 0)
      const linked = (linkOwner: string, targetOwner: string) => {
        const repo = NodeFs.realpathSync(repoWithFolders())
        const real = NodePath.join(tempDir("real-git-"), "real.git")
        NodeFs.renameSync(NodePath.join(repo, ".git"), real)
        NodeFs.symlinkSync(real, NodePath.join(repo, ".git"))
        execFileSync("chown", ["-R", targetOwner, real])
        execFileSync("chown", ["-h", linkOwner, NodePath.join(repo, ".git")])
        return repo
      }
      const foreignLink = linked("nobody", me)
      const sub = NodePath.join(foreignLink, "c", "d")
      expect(gitTop(sub), "git refuses a link another user owns").toBeUndefined()
      const refused = await runCli(["runs"], { cwd: sub })
      expect(refused.code, refused.stdout + refused.stderr).toBe(2)
      expect(refused.stderr).toContain(`git refuses the repository at ${foreignLink}: it is owned by another user`)
      const ownLink = linked(me, "nobody")
      expect(gitTop(NodePath.join(ownLink, "c", "d")), "git takes a link the user owns").toBe(ownLink)
      expect(await stateFolderNamed(NodePath.join(ownLink, "c", "d"))).toBe(NodePath.join(ownLink, ".corral"))
    }
  )

  it.skipIf(!canMount)(
    "stops at a file system's edge unless GIT_DISCOVERY_ACROSS_FILESYSTEM, as git does",
    async () => {
      const repo = NodeFs.realpathSync(repoWithFolders())
      const mountPoint = NodePath.join(repo, "mnt")
      NodeFs.mkdirSync(mountPoint)
      const inMount = (env: Record<string, string>) =>
        spawnSync(
          "unshare",
          [
            "--user",
            "--map-root-user",
            "--mount",
            "sh",
            "-c",
            'mount -t tmpfs none "$1" && mkdir "$1/x" && cd "$1/x" && { git rev-parse --show-toplevel 2>/dev/null || echo none; } && "$2" runs 2>&1; true',
            "sh",
            mountPoint,
            corralBin
          ],
          { env: { ...process.env, ...env }, encoding: "utf8" }
        ).stdout
      const inside = NodePath.join(mountPoint, "x")
      expect(inMount({})).toBe(`none\ncorral: no runs recorded in ${inside}/.corral\n`)
      expect(inMount({ GIT_DISCOVERY_ACROSS_FILESYSTEM: "true" })).toBe(
        `${repo}\ncorral: no runs recorded in ${repo}/.corral\n`
      )
    }
  )
})
