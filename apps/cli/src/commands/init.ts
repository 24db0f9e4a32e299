import * as Git from "@corral/platform-node/Git"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Command from "effect/cli/Command"
import * as Flag from "effect/cli/Flag"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { invalidInput } from "../CliExit.ts"
import * as OutputGuard from "../OutputGuard.ts"
import { resolve } from "../Paths.ts"

const idOf = (folder: string): string => {
  const id = folder
    .replace(/[^A-Za-z0-9._-]+/g, "-")
    .replace(/^[^A-Za-z0-9]+/, "")
    .replace(/[.-]+$/, "")
  return id.length === 0 || id === "integration" ? "work" : id.slice(0, 40)
}

const usable = (folder: string) => !folder.startsWith(".") && !folder.startsWith("-") && folder !== "node_modules"

/** The repository's top-level folders, tracked ones first (git), else what is on disk. */
const topFolders = (repo: string) =>
  Git.run(["ls-tree", "-d", "--name-only", "-z", "HEAD"], { cwd: repo }).pipe(
    Effect.map((out) => out.split("\0").filter((name) => name.length > 0)),
    Effect.orElseSucceed(() =>
      NodeFs.readdirSync(repo, { withFileTypes: true })
        .filter((entry) => entry.isDirectory())
        .map((entry) => entry.name)
    ),
    Effect.map((names) => names.filter(usable).sort().slice(0, 3))
  )

/**
 * A commented starter plan: one agent per top-level folder (at most three) claiming that folder,
 * and a check that runs after them.
 *
 * @since 0.1.0
 */
export const starterPlan = (name: string, folders: ReadonlyArray<string>, file = "corral.yaml"): string => {
  const q = (text: string) => JSON.stringify(text)
  const ids = new Set<string>(["check"])
  const agents = folders.map((folder) => {
    let id = idOf(folder)
    while (ids.has(id)) id = `${id}-2`
    ids.add(id)
    return { id, folder }
  })
  const work =
    agents.length === 0
      ? [
          "  - id: hello",
          '    run: echo "hello from corral" > hello.txt    # replace with a real command',
          "    claims: { write: [hello.txt] }              # no two agents write it at once"
        ]
      : agents.flatMap(({ id, folder }, i) => [
          `  - id: ${id}`,
          `    run: echo ${q(`work on ${folder}/`)}${i === 0 ? "        # replace with a real command, e.g. a coding agent CLI" : ""}`,
          `    claims: { write: [${q(`${folder}/`)}] }${i === 0 ? "    # no two agents write the same folder at once" : ""}`
        ])
  const after = agents.length === 0 ? ["hello"] : agents.map((agent) => agent.id)
  return [
    `# A corral plan for ${name}. Check it with: corral validate ${file}`,
    `# Run it with: corral run ${file} (the field reference is in corral's docs/cli.md)`,
    "# Each agent runs its command in its own git worktree; its changes are committed and merged",
    "# into the branch corral/<run-id>/integration, which you take with git merge.",
    "version: 1",
    "concurrency: 4          # most agents running at once",
    "mode: settle            # settle: run everything; fail-fast: stop at the first failure",
    "defaults:",
    "  timeout: 10m          # an agent running longer is stopped",
    "agents:",
    ...work,
    "  - id: check",
    '    run: echo "check the result"',
    `    dependsOn: [${after.join(", ")}]    # starts when these succeeded`,
    ""
  ].join("\n")
}

/**
 * `corral init`.
 *
 * @since 0.1.0
 */
export const init = Command.make(
  "init",
  {
    repo: Flag.String("repo").pipe(
      Flag.optional,
      Flag.withDescription("The target repository (default: current directory)")
    ),
    file: Flag.String("file").pipe(Flag.withDefault("corral.yaml"), Flag.withDescription("The plan file to write"))
  },
  (flags) =>
    Effect.gen(function* () {
      const paths = yield* resolve(flags.repo, Option.none())
      const file = NodePath.resolve(paths.repo, flags.file)
      if (!/\.ya?ml$/i.test(file)) {
        return yield* invalidInput(`--file ${flags.file}: corral init writes a YAML plan; name it *.yaml or *.yml`)
      }
      if (NodeFs.existsSync(file)) return yield* invalidInput(`${file} already exists; not overwriting it`)
      if (!NodeFs.existsSync(NodePath.dirname(file))) {
        return yield* invalidInput(`cannot write ${file}: no such folder ${NodePath.dirname(file)}`)
      }
      const folders = yield* topFolders(paths.repo)
      const text = starterPlan(NodePath.basename(paths.repo), folders, flags.file)
      const written = yield* Effect.try({
        try: () => NodeFs.writeFileSync(file, text, { flag: "wx" }),
        catch: (error) => (error as Error).message
      }).pipe(Effect.result)
      if (written._tag === "Failure") return yield* invalidInput(`cannot write ${file}: ${written.failure}`)
      OutputGuard.write(process.stdout, `wrote ${file}\ncheck it with: corral validate ${flags.file}\n`)
    })
).pipe(
  Command.withDescription("Write corral.yaml, a commented starter plan for this repository (never overwrites)"),
  Command.withExamples([{ command: "corral init", description: "a starter plan with the top-level folders as claims" }])
)
