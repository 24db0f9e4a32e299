/**
 * A throwaway npm registry on 127.0.0.1 that serves packed tarballs, so npm installs `@corral/*` the
 * way it would from the public registry: it reads the packument, resolves the dependency ranges in
 * the packed manifests and checks each tarball's integrity. Only the `@corral` scope is pointed here
 * (`@corral:registry=` in an npmrc); every other package comes from the configured registry.
 *
 * Written here instead of running verdaccio: serving a packument and a tarball is two routes, and a
 * registry server with its own storage, auth and uplinks would be a heavy dependency for a test.
 */
import { createHash } from "node:crypto"
import * as NodeFs from "node:fs"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import * as NodePath from "node:path"

export interface Registry {
  readonly url: string
  readonly close: () => Promise<void>
}

interface Published {
  readonly manifest: Record<string, unknown> & { readonly name: string; readonly version: string }
  readonly file: string
  readonly bytes: Buffer
}

const manifestOf = (tarball: string, unpacked: string): Published => {
  const manifest = JSON.parse(NodeFs.readFileSync(NodePath.join(unpacked, "package.json"), "utf8"))
  return { manifest, file: NodePath.basename(tarball), bytes: NodeFs.readFileSync(tarball) }
}

const packument = (published: Published, url: string) => {
  const { manifest, bytes, file } = published
  const dist = {
    tarball: `${url}/-/${file}`,
    integrity: `sha512-${createHash("sha512").update(bytes).digest("base64")}`,
    shasum: createHash("sha1").update(bytes).digest("hex")
  }
  return {
    name: manifest.name,
    "dist-tags": { latest: manifest.version },
    versions: { [manifest.version]: { ...manifest, _id: `${manifest.name}@${manifest.version}`, dist } }
  }
}

/** Serves `tarballs`, each given with the folder its `package/` was unpacked to. */
export const serve = async (tarballs: ReadonlyArray<{ tarball: string; unpacked: string }>): Promise<Registry> => {
  const published = tarballs.map(({ tarball, unpacked }) => manifestOf(tarball, unpacked))
  const server: Server = createServer((request, response) => {
    const path = decodeURIComponent((request.url ?? "/").split("?")[0]!)
    const byFile = published.find((p) => path === `/-/${p.file}`)
    if (byFile !== undefined) {
      response.writeHead(200, { "content-type": "application/octet-stream", "content-length": byFile.bytes.length })
      return response.end(byFile.bytes)
    }
    const byName = published.find((p) => path === `/${p.manifest.name}`)
    if (byName !== undefined && request.method === "GET") {
      response.writeHead(200, { "content-type": "application/json" })
      return response.end(JSON.stringify(packument(byName, url)))
    }
    response.writeHead(404, { "content-type": "application/json" })
    response.end(JSON.stringify({ error: `not found: ${path}` }))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return {
    url,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections()
        server.close((error) => (error ? reject(error) : resolve()))
      })
  }
}
