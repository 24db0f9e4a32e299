/**
 * @since 0.1.0
 */
export * as TestServer from "./TestServer.ts"
