/**
 * Fake timers installed after load (`vi.useFakeTimers()`, sinon) must not capture Keel's internals:
 * `@keel/core` and `@keel/testing` schedule and read time only through the host functions kept at
 * module load (`kernel/host.ts`, `testing/src/host.ts`). The behaviour under vitest's fake timers is
 * pinned in `packages/testing/test/fake-timers.test.ts`; this check finds the next direct call to a
 * global before a test has to hang on it.
 */
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, test } from "vitest";
import { hostPerformance, hostTimers } from "../src/kernel/host.js";

const roots = ["../src/", "../../testing/src/"].map((r) => fileURLToPath(new URL(r, import.meta.url)));

/** The source without its comments (block and line; a `//` inside a string is rare enough here). */
function codeOf(source: string): string {
  return source.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:"'`])\/\/.*$/gm, "$1");
}

/** The host globals fake timers replace, used directly (not as `globalThis.x` or `host.x`). */
const DIRECT =
  /(?<![\w.$])(setTimeout|clearTimeout|setInterval|clearInterval|setImmediate|clearImmediate|queueMicrotask|performance|Date\.now)\b(?!\s*[:,}]|\s*\?\.)/g;

/** `file:line: use` for every direct use in the code of `source`. */
function directUses(file: string, source: string): string[] {
  return codeOf(source)
    .split("\n")
    .flatMap((line, i) =>
      [...line.matchAll(DIRECT)]
        // A type position (`ReturnType<typeof setTimeout>`) calls nothing.
        .filter((m) => !/typeof\s+$/.test(line.slice(0, m.index)))
        .map((m) => `${file}:${i + 1}: ${m[1]}`),
    );
}

describe("host timers", () => {
  test("the check finds a direct call, and passes a kept one, a type and a comment", () => {
    const source = [
      "const t = setTimeout(fn, 1); // setImmediate here is a comment",
      "const h = hostTimers.setTimeout(fn, 1);",
      "let x: ReturnType<typeof setInterval> | null = null;",
      "/* performance.now() */ const n = performance.now() + Date.now();",
      "export const k = globalThis.queueMicrotask;",
    ].join("\n");
    expect(directUses("f.ts", source)).toEqual([
      "f.ts:1: setTimeout",
      "f.ts:4: performance",
      "f.ts:4: Date.now",
    ]);
  });

  test("no module of @keel/core or @keel/testing calls a host timer or clock through the globals", () => {
    const found = roots.flatMap((root) =>
      readdirSync(root, { recursive: true, encoding: "utf8" })
        .filter((f) => f.endsWith(".ts") && !f.endsWith(".test.ts"))
        .flatMap((f) => directUses(f, readFileSync(root + f, "utf8"))),
    );
    expect(found).toEqual([]);
  });

  test("the kept functions are the real ones: they schedule on the host's event loop", async () => {
    const order: string[] = [];
    await new Promise<void>((resolve) => {
      hostTimers.setTimeout(() => order.push("timeout"), 0);
      hostTimers.setImmediate(() => {
        order.push("immediate");
        resolve();
      });
      hostTimers.queueMicrotask(() => order.push("microtask"));
    });
    expect(order[0]).toBe("microtask");
    expect(hostPerformance.now()).toBeGreaterThan(0);
    expect(Math.abs(hostPerformance.timeOrigin + hostPerformance.now() - Date.now())).toBeLessThan(1000);
  });
});
