import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import type { RunRecord } from "@corral/platform-node/RunRecord"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Report from "../src/Report.ts"

interface Box {
  readonly width: number
  readonly height: number
}
interface Locator {
  count(): Promise<number>
  nth(index: number): Locator
  boundingBox(): Promise<Box | null>
  getAttribute(name: string): Promise<string | null>
}
interface Page {
  setContent(html: string): Promise<void>
  screenshot(options: { path: string; fullPage: boolean }): Promise<Buffer>
  locator(selector: string): Locator
}
interface Browser {
  newPage(options: { viewport: Box }): Promise<Page>
  close(): Promise<void>
}
interface Chromium {
  launch(options: { executablePath: string; args: ReadonlyArray<string> }): Promise<Browser>
}

const chromiumPath = "/usr/bin/chromium"
const launchArgs = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync"
]

const loadChromium = async (): Promise<Chromium | string> => {
  let resolved: string
  try {
    resolved = createRequire(import.meta.url).resolve("playwright-core")
  } catch {
    return "playwright-core is not installed"
  }
  if (!existsSync(chromiumPath)) return `${chromiumPath} is missing (run .ci/install-browser)`
  const module = await import(pathToFileURL(resolved).href)
  return (module.chromium ?? module.default.chromium) as Chromium
}

const chromium = await loadChromium()
const skipReason = typeof chromium === "string" ? chromium : undefined
if (skipReason !== undefined && process.env.CI === "true") throw new Error(`Chromium is required on CI: ${skipReason}`)
if (skipReason !== undefined) console.warn(`Report.browser.test.ts skipped: ${skipReason}`)

const here = dirname(fileURLToPath(import.meta.url))
const run: RunRecord = JSON.parse(readFileSync(join(here, "fixtures", "report", "run.json"), "utf8"))
const pngSignature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])

describe.skipIf(skipReason !== undefined)(
  `Report.html in headless Chromium${skipReason ? ` (skipped: ${skipReason})` : ""}`,
  () => {
    let browser: Browser
    let page: Page
    let dir: string

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), "corral-report-"))
      browser = await (chromium as Chromium).launch({ executablePath: chromiumPath, args: launchArgs })
      page = await browser.newPage({ viewport: { width: 1280, height: 800 } })
      await page.setContent(Report.html(run))
    })

    afterAll(async () => {
      await browser?.close()
      if (process.env.CORRAL_KEEP_SCREENSHOT === undefined) rmSync(dir, { recursive: true, force: true })
    })

    it("takes a full-page screenshot", async () => {
      const path = join(dir, "report.png")
      await page.screenshot({ path, fullPage: true })
      assert.isAbove(statSync(path).size, pngSignature.length)
      assert.deepStrictEqual(readFileSync(path).subarray(0, 8), pngSignature)
    })

    it("renders one visible bar per agent", async () => {
      const bars = page.locator(".bar")
      assert.strictEqual(await bars.count(), run.agents.length)
      for (let i = 0; i < run.agents.length; i++) {
        const box = await bars.nth(i).boundingBox()
        const agent = await bars.nth(i).getAttribute("data-agent")
        assert.isNotNull(box, `bar ${agent} is not rendered`)
        assert.isAbove(box!.width, 0, `bar ${agent} has no width`)
        assert.isAbove(box!.height, 0, `bar ${agent} has no height`)
      }
    })
  }
)
