/**
 * The size guard (issue 15's decision: the 20 KB target is retired, and a guard keeps the size from
 * growing): the size row's program (`bench/src/size/programs/keel.ts`: run, timeout, retry) bundled
 * and minified from the sources, against a ceiling. A change that needs more bytes raises the
 * ceiling here, in its own commit, saying what for; `npm run bench:size` gives the full breakdown.
 */
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { expect, it } from "vitest";

/**
 * Bytes, minified. 47,284 when the guard was decided (2026-12-03); 47,676 with issue 23 (the
 * kernel's cleanup cap for shield chains, a Proxy-safe `isCancelled`, bounded descriptions of
 * poison values); 47,865 with issue 24's trace per job (long-lived tasks marked on `task:start`, an
 * HTTP dispatch an observer can wrap); 51,896 with the rest of issue 24 (an awaited operation
 * throws: `then` on every operation's prototype, 1.2 KB; `cancel()` as a real promise, 0.5 KB; the
 * host's timers kept from fake ones, 0.4 KB; log levels per event and job fields on records, 1.2 KB;
 * rounded numbers, 0.3 KB); 52,680 with issue 25's kernel hooks for durable workflows (a wait guard
 * read at each wait and spawn, structural waits marked, eviction of a parked subtree: 0.8 KB), and
 * 52,887 with the `workflow:` event family (its channel, its levels, `emitEvent` taking it: 0.2 KB).
 */
const CEILING_BYTES = 52_900;

const root = fileURLToPath(new URL("../../../", import.meta.url));

it("the size row's program stays within its ceiling, minified", async () => {
  const result = await build({
    entryPoints: [`${root}bench/src/size/programs/keel.ts`],
    absWorkingDir: root,
    bundle: true,
    minify: true,
    format: "esm",
    platform: "node",
    target: "node20",
    write: false,
    logLevel: "error",
    alias: { "@keel/core": `${root}packages/core/src/index.ts` },
  });
  const bytes = result.outputFiles[0]!.contents.length;
  expect(bytes, `the size row's program is ${bytes} B minified`).toBeLessThanOrEqual(CEILING_BYTES);
  // Not a size of nothing: the program's own code is there (a broken bundle would be tiny).
  expect(bytes).toBeGreaterThan(CEILING_BYTES / 2);
}, 30_000);
