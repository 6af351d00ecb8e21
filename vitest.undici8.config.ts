/**
 * The HTTP suite against undici 8 (run by scripts/http-undici8.sh under Node 22): the root config's
 * resolution, with `undici` resolved to the copy at KEEL_UNDICI_PATH, and only the files that reach
 * undici.
 */
import { defineConfig } from "vitest/config";
import base from "./vitest.config.js";

const undici = process.env.KEEL_UNDICI_PATH;
if (!undici) throw new Error("vitest.undici8.config.ts: set KEEL_UNDICI_PATH to an undici 8 package folder");

export default defineConfig({
  ...base,
  resolve: { ...base.resolve, alias: [{ find: /^undici$/, replacement: undici }] },
  test: {
    ...base.test,
    include: [
      "packages/core/src/http/**/*.test.ts",
      "packages/core/test/conformance/i-http.test.ts",
      "packages/core/test/conformance/g-retries-http.test.ts",
    ],
  },
});
