/**
 * The URL of a worker-thread entry module beside `from` (an `import.meta.url`): `name.ts` while the
 * package runs from its sources, `name.js` in the compiled package, where `dist/` holds only `.js`.
 */
export const workerEntry = (name: string, from: string): URL =>
  new URL(`./${name}${from.endsWith(".ts") ? ".ts" : ".js"}`, from)
