/**
 * corral as a user gets it: every publishable workspace package is built, packed with `pnpm pack`
 * (so `workspace:` ranges and `publishConfig` are rewritten as on publish), served from a throwaway
 * registry on 127.0.0.1 and installed with npm into an app outside the workspace. The app then
 * type-checks against the packed declarations under strict settings, runs with plain `node`, runs
 * a vitest file under `TestClock`, and the command is installed globally and run on a git repository.
 */
import { execFile } from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodeModule from "node:module"
import * as NodePath from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { git, makeRepo, root, tempDir, writePlan } from "../helpers.ts"
import { type Registry, serve } from "./registry.ts"

const fixture = NodePath.join(import.meta.dirname, "app")
const rootManifest = JSON.parse(NodeFs.readFileSync(NodePath.join(root, "package.json"), "utf8"))
const pinned = (name: string): string => rootManifest.devDependencies[name]

/** The environment of a user's shell: nothing pnpm or vitest put there for this repository. */
const userEnv = (first: ReadonlyArray<string> = []): NodeJS.ProcessEnv => {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([key]) => !/^(npm_|pnpm_|vitest|init_cwd$|node_env$)/i.test(key))
  )
  const inherited = (process.env.PATH ?? "").split(NodePath.delimiter).filter((dir) => !dir.startsWith(root))
  // `first` (a Node to test with) or else the Node running this test comes first, as a user's own Node would.
  const node = first.length > 0 ? [...first] : [NodePath.dirname(process.execPath)]
  return { ...env, PATH: [...node, ...inherited].join(NodePath.delimiter) }
}

/** Runs a command without blocking the event loop: the registry answers npm from this process. */
const run = (
  command: string,
  args: ReadonlyArray<string>,
  options: { readonly cwd: string; readonly env?: NodeJS.ProcessEnv }
): Promise<string> =>
  new Promise((resolve, reject) => {
    execFile(
      command,
      [...args],
      { encoding: "utf8", env: options.env ?? userEnv(), cwd: options.cwd, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) =>
        error
          ? reject(
              new Error(
                `\`${command} ${args.join(" ")}\` in ${options.cwd} failed (${error.code ?? error.signal})\n${stdout}\n${stderr}`
              )
            )
          : resolve(stdout)
    )
  })

const publishable = (): Array<string> =>
  ["packages", "apps"].flatMap((group) =>
    NodeFs.readdirSync(NodePath.join(root, group))
      .map((name) => NodePath.join(root, group, name))
      .filter((dir) => {
        const file = NodePath.join(dir, "package.json")
        return NodeFs.existsSync(file) && JSON.parse(NodeFs.readFileSync(file, "utf8")).private !== true
      })
  )

let registry: Registry | undefined
let app = ""
let work = ""
const packed = new Map<string, Record<string, any>>()
/** npm installs and a fresh Node download: minutes on a cold cache or a loaded machine. */
const slow = 600_000

const packAll = async (tarballs: string) => {
  await run("pnpm", ["build"], { cwd: root, env: process.env })
  for (const dir of publishable())
    await run("pnpm", ["pack", "--pack-destination", tarballs], { cwd: dir, env: process.env })
  const served: Array<{ tarball: string; unpacked: string }> = []
  for (const file of NodeFs.readdirSync(tarballs)) {
    const unpacked = NodePath.join(work, "unpacked", file)
    NodeFs.mkdirSync(unpacked, { recursive: true })
    await run("tar", ["xzf", NodePath.join(tarballs, file), "-C", unpacked, "--strip-components=1"], { cwd: work })
    const manifest = JSON.parse(NodeFs.readFileSync(NodePath.join(unpacked, "package.json"), "utf8"))
    packed.set(manifest.name, { ...manifest, unpacked })
    served.push({ tarball: NodePath.join(tarballs, file), unpacked })
  }
  return served
}

beforeAll(async () => {
  work = tempDir("corral-consumer-")
  const tarballs = NodePath.join(work, "tarballs")
  NodeFs.mkdirSync(tarballs)
  registry = await serve(await packAll(tarballs))
  app = NodePath.join(work, "app")
  NodeFs.cpSync(fixture, app, { recursive: true })
  NodeFs.writeFileSync(
    NodePath.join(app, ".npmrc"),
    `@corral:registry=${registry.url}/\nfund=false\naudit=false\nupdate-notifier=false\n`
  )
  NodeFs.writeFileSync(
    NodePath.join(app, "package.json"),
    JSON.stringify({ name: "consumer-app", private: true, type: "module" })
  )
  const dependencies = ["@corral/core", "@corral/platform-node", "effect", "@effect/platform-node"]
  await run(
    "npm",
    ["install", ...dependencies.map((name) => (name.startsWith("@corral/") ? name : `${name}@${pinned(name)}`))],
    {
      cwd: app
    }
  )
  const tools = ["typescript", "vitest", "@types/node"]
  await run("npm", ["install", "--save-dev", ...tools.map((name) => `${name}@${pinned(name)}`)], { cwd: app })
}, 2 * slow)

afterAll(async () => {
  await registry?.close()
  // the app's node_modules is large: removing it takes minutes on a loaded, noisy disk
  if (work !== "") await NodeFs.promises.rm(work, { recursive: true, force: true })
}, slow)

describe("packed packages in an app outside the workspace", () => {
  it("packs manifests a registry can serve: dist exports, no workspace ranges, no tests", () => {
    expect([...packed.keys()]).toEqual(expect.arrayContaining(["@corral/cli", "@corral/core", "@corral/platform-node"]))
    for (const [name, manifest] of packed) {
      expect(JSON.stringify(manifest), name).not.toContain("workspace:")
      expect(manifest.license, name).toBe("MIT")
      expect(manifest.engines?.node, name).toBe(">=22.16.0")
      for (const file of ["LICENSE", "README.md"]) {
        expect(NodeFs.existsSync(NodePath.join(manifest.unpacked, file)), `${name} ${file}`).toBe(true)
      }
      expect(NodeFs.existsSync(NodePath.join(manifest.unpacked, "test")), name).toBe(false)
      expect(NodeFs.existsSync(NodePath.join(manifest.unpacked, "dist/.tsbuildinfo")), name).toBe(false)
    }
    for (const name of ["@corral/core", "@corral/platform-node"]) {
      const manifest = packed.get(name)!
      expect(manifest.exports["."]).toEqual({ types: "./dist/index.d.ts", default: "./dist/index.js" })
      expect(manifest.exports["./*"]).toEqual({ types: "./dist/*.d.ts", default: "./dist/*.js" })
      expect(manifest.exports["./internal/*"]).toBeNull()
      expect(manifest.peerDependencies.effect).toBe("^4.1.0")
      expect(manifest.sideEffects).toBe(false)
    }
    expect(packed.get("@corral/platform-node")!.peerDependencies["@effect/platform-node"]).toBe("^4.1.0")
    expect(packed.get("@corral/cli")!.bin).toEqual({ corral: "./dist/bin.js" })
  })

  it("ships the command as one bundle: its files import only Node's built-in modules and each other", () => {
    const dist = NodePath.join(packed.get("@corral/cli")!.unpacked, "dist")
    const files = NodeFs.readdirSync(dist, { recursive: true, encoding: "utf8" }).filter((file) => file.endsWith(".js"))
    expect(files).toEqual(
      expect.arrayContaining(["bin.js", "ledgerWorker.js", "blockingWorker.js", "internal/codingAgentLauncher.js"])
    )
    const specifiers = files.flatMap((file) =>
      [
        ...NodeFs.readFileSync(NodePath.join(dist, file), "utf8").matchAll(
          /^(?:import|export)\b[^;]*?\bfrom\s*"([^"]+)"|^import\s*"([^"]+)"|\bimport\("([^"]+)"\)/gm
        )
      ].map((match) => match[1] ?? match[2] ?? match[3]!)
    )
    expect(specifiers.filter((specifier) => specifier.startsWith("./"))).not.toEqual([])
    const outside = specifiers.filter((specifier) => !NodeModule.isBuiltin(specifier) && !/^\.\.?\//.test(specifier))
    expect(outside).toEqual([])
  })

  it(
    "type-checks under strict consumer settings with exactOptionalPropertyTypes on",
    async () => {
      await run(NodePath.join(app, "node_modules/.bin/tsc"), ["-p", "tsconfig.exact.json"], { cwd: app })
    },
    slow
  )

  it(
    "type-checks with exactOptionalPropertyTypes off and emits JavaScript that plain node runs",
    async () => {
      await run(NodePath.join(app, "node_modules/.bin/tsc"), ["-p", "tsconfig.json"], { cwd: app })
      const stdout = await run(process.execPath, ["out/src/main.js"], { cwd: app })
      expect(JSON.parse(stdout.trim().split("\n").at(-1)!)).toEqual({
        outcomes: {
          "edit-a": "Succeeded",
          "edit-a-again": "Succeeded",
          "after-edit": "Succeeded",
          "too-slow": "TimedOut",
          echo: "Succeeded"
        },
        waits: ["edit-a-again"],
        after: 11,
        echo: ["hello from a process"],
        double: 42
      })
    },
    slow
  )

  it(
    "runs a vitest file that uses @corral/core/Testing under TestClock",
    async () => {
      const stdout = await run(NodePath.join(app, "node_modules/.bin/vitest"), ["run", "--reporter=verbose"], {
        cwd: app
      })
      expect(stdout).toContain("two writers of one file serialize under TestClock")
    },
    slow
  )

  it(
    "installs exactly one copy of effect: the app's own",
    async () => {
      const tree = JSON.parse(await run("npm", ["ls", "effect", "--all", "--json"], { cwd: app }))
      const versions: Array<string> = []
      const walk = (node: { dependencies?: Record<string, any> }) => {
        for (const [name, child] of Object.entries(node.dependencies ?? {})) {
          if (name === "effect" && !versions.includes(child.version)) versions.push(child.version)
          walk(child)
        }
      }
      walk(tree)
      expect(versions).toEqual([pinned("effect")])
      const copies = (await run("find", ["node_modules", "-path", "*node_modules/effect/package.json"], { cwd: app }))
        .split("\n")
        .filter((line) => line !== "")
      expect(copies).toEqual(["node_modules/effect/package.json"])
    },
    slow
  )

  it(
    "keeps internal modules behind the exports map",
    async () => {
      await expect(
        run(process.execPath, ["--input-type=module", "-e", 'await import("@corral/core/internal/runner")'], {
          cwd: app
        })
      ).rejects.toThrow(/ERR_PACKAGE_PATH_NOT_EXPORTED/)
    },
    slow
  )
})

describe('the README\'s "Install in your project"', () => {
  it(
    "works exactly as written (with @corral/* served by the local registry)",
    async () => {
      const readme = NodeFs.readFileSync(NodePath.join(root, "README.md"), "utf8")
      const section = readme.slice(readme.indexOf("## Install in your project"))
      const blocks = [...section.slice(0, section.indexOf("\n## ", 5)).matchAll(/^```(\w+)\n([\s\S]*?)^```/gm)].map(
        (match) => ({ lang: match[1]!, code: match[2]! })
      )
      expect(blocks.map((block) => block.lang)).toEqual(["sh", "json", "ts", "sh"])
      const dir = NodePath.join(work, "readme-app")
      NodeFs.mkdirSync(NodePath.join(dir, "src"), { recursive: true })
      NodeFs.writeFileSync(NodePath.join(dir, ".npmrc"), `@corral:registry=${registry!.url}/\n`)
      const shell = (script: string) => run("sh", ["-ec", script], { cwd: dir })
      await shell(blocks[0]!.code)
      NodeFs.writeFileSync(NodePath.join(dir, "tsconfig.json"), blocks[1]!.code)
      NodeFs.writeFileSync(NodePath.join(dir, "src/main.ts"), blocks[2]!.code)
      const output = await shell(blocks[3]!.code)
      for (const id of ["research", "edit-a", "edit-a-again", "node-version"])
        expect(output).toContain(`${id}: Succeeded`)
    },
    slow
  )
})

describe("the README's tracing example", () => {
  it(
    "runs outside the workspace with the packages its install block names (with @corral/* served by the local registry)",
    async () => {
      const readme = NodeFs.readFileSync(NodePath.join(root, "README.md"), "utf8")
      const section = readme.slice(readme.indexOf("### Tracing"))
      const blocks = [...section.slice(0, section.indexOf("\n## ")).matchAll(/^```(\w+)\n([\s\S]*?)^```/gm)].map(
        (match) => ({ lang: match[1]!, code: match[2]! })
      )
      expect(blocks.map((block) => block.lang)).toEqual(["sh", "ts"])
      const printed = blocks[1]!.code
        .split("\n")
        .filter((line) => line.startsWith("// "))
        .map((line) => line.slice(3))
      const dir = NodePath.join(work, "tracing-app")
      NodeFs.mkdirSync(dir, { recursive: true })
      NodeFs.writeFileSync(NodePath.join(dir, ".npmrc"), `@corral:registry=${registry!.url}/\n`)
      const shell = (script: string) => run("sh", ["-ec", script], { cwd: dir })
      await shell("npm init -y && npm pkg set type=module && npm install @corral/core effect")
      await shell(blocks[0]!.code)
      NodeFs.writeFileSync(NodePath.join(dir, "tracing.ts"), blocks[1]!.code)
      const stdout = await run(process.execPath, ["tracing.ts"], { cwd: dir })
      expect(stdout.trim().split("\n")).toEqual(printed)
    },
    slow
  )
})

describe("the command installed globally with npm", () => {
  const install = (prefix: string) =>
    run("npm", ["install", "--global", "--prefix", prefix, "@corral/cli", `--@corral:registry=${registry!.url}/`], {
      cwd: work
    })

  const exercise = async (bin: string, env: NodeJS.ProcessEnv) => {
    expect((await run(bin, ["--version"], { cwd: work, env })).trim()).toContain(packed.get("@corral/cli")!.version)
    const repo = makeRepo({ "README.md": "# app\n" })
    const plan = writePlan(
      work,
      "plan.yaml",
      "version: 1\nconcurrency: 2\nagents:\n  - id: one\n    run: echo one > one.txt\n  - id: two\n    run: cat one.txt > two.txt\n    dependsOn: [one]\n"
    )
    expect(await run(bin, ["validate", plan], { cwd: repo, env })).toContain("two")
    expect(await run(bin, ["run", plan], { cwd: repo, env })).toContain("2 succeeded")
    const integration = git(repo, "branch", "--format=%(refname:short)")
      .split("\n")
      .find((branch) => branch.endsWith("/integration"))!
    expect(git(repo, "show", `${integration}:two.txt`)).toBe("one\n")
    // records on the ledger's writer thread, an entry of its own in the bundle
    expect(await run(bin, ["discard", "--all-merged", "--yes"], { cwd: repo, env })).toContain("removed")
  }

  it(
    "gives a working `corral` on the repository's Node",
    async () => {
      const prefix = NodePath.join(work, "global")
      await install(prefix)
      await exercise(NodePath.join(prefix, "bin/corral"), userEnv())
    },
    slow
  )

  it(
    "gives a working `corral` on the oldest Node the manifest allows",
    async () => {
      const minimum = packed.get("@corral/cli")!.engines.node.replace(/^>=/, "")
      const nodeDir = NodePath.join(work, `node-${minimum}`)
      NodeFs.mkdirSync(nodeDir)
      NodeFs.writeFileSync(NodePath.join(nodeDir, "package.json"), "{}")
      await run("npm", ["install", `node@${minimum}`], { cwd: nodeDir })
      const bin = NodePath.join(nodeDir, "node_modules/.bin")
      expect((await run(NodePath.join(bin, "node"), ["--version"], { cwd: work })).trim()).toBe(`v${minimum}`)
      if (NodeFs.existsSync(NodePath.join(app, "out/src/main.js"))) {
        const stdout = await run(NodePath.join(bin, "node"), ["out/src/main.js"], { cwd: app, env: userEnv([bin]) })
        const output = JSON.parse(stdout.trim().split("\n").at(-1)!)
        expect([output.outcomes["too-slow"], output.echo, output.double]).toEqual([
          "TimedOut",
          ["hello from a process"],
          42
        ])
      }
      const prefix = NodePath.join(work, "global-oldest")
      await install(prefix)
      await exercise(NodePath.join(prefix, "bin/corral"), userEnv([bin]))
    },
    slow
  )
})
