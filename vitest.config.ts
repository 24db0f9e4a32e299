import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["packages/*/test/**/*.test.ts", "apps/*/test/**/*.test.ts", "test/**/*.test.ts"],
    globalSetup: ["test/tmpdir.setup.ts"],
    testTimeout: 120_000,
    hookTimeout: 120_000
  }
})
