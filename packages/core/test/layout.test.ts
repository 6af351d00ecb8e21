/**
 * `packages/core/src` reads top-down (style.md, "Layout shows the architecture"): no file imports,
 * even for a type, a file that imports it back, directly or through others; and each folder imports
 * only the layers under it (kernel <- time <- resilience <- http; observe reads kernel only).
 */
import { readdirSync, readFileSync } from "node:fs";
import { posix } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, test } from "vitest";

const src = fileURLToPath(new URL("../src/", import.meta.url));

/** The relative imports of `file` (a path under src), resolved: `import … from` and `export … from`. */
function importsOf(file: string, source: string): string[] {
  const found = source.matchAll(/^(?:import|export)\b[^;]*?\bfrom\s+"(\.\.?\/[\w./-]+)\.js"/gms);
  return [...found].map((m) => posix.normalize(posix.join(posix.dirname(file), `${m[1]}.ts`)));
}

/** Every cycle of `graph`, each as the path that closes it (`a.ts → b.ts → a.ts`). */
function cyclesOf(graph: ReadonlyMap<string, readonly string[]>): string[] {
  const cycles: string[] = [];
  const state = new Map<string, "open" | "done">();
  const path: string[] = [];
  const visit = (file: string) => {
    if (state.get(file) === "done") return;
    if (state.get(file) === "open") {
      cycles.push([...path.slice(path.indexOf(file)), file].join(" → "));
      return;
    }
    state.set(file, "open");
    path.push(file);
    for (const next of graph.get(file) ?? []) visit(next);
    path.pop();
    state.set(file, "done");
  };
  for (const file of [...graph.keys()].sort()) visit(file);
  return cycles;
}

/**
 * The layer of a file: its folder; `errors.ts`, `format-value.ts` and `argument-checks.ts` are the
 * kernel's (every layer raises errors, formats values, checks arguments); `run.ts` and `index.ts` are
 * their own.
 */
function layerOf(file: string): string {
  const slash = file.indexOf("/");
  if (slash >= 0) return file.slice(0, slash);
  if (file === "errors.ts" || file === "format-value.ts" || file === "argument-checks.ts") return "kernel";
  return file.slice(0, -".ts".length);
}

/** The layers each layer may import (its own included). A new folder must be placed here. */
const MAY_IMPORT: Record<string, readonly string[]> = {
  kernel: ["kernel"],
  observe: ["kernel", "observe"],
  time: ["kernel", "time"],
  resilience: ["kernel", "time", "resilience"],
  http: ["kernel", "time", "resilience", "http"],
  run: ["kernel", "observe", "time", "run"],
  effection: ["kernel", "run", "effection"],
  process: ["kernel", "observe", "run", "process"],
  index: ["kernel", "observe", "time", "resilience", "run", "process", "index"],
};

/**
 * The one import against the layers: the kernel emits events, so it reads their table and its
 * channel names (`observe/events.ts`, which itself reads only the kernel's `cancelled.ts`, so no
 * file circle). Moving the table into the kernel would end the exception.
 */
const EXCEPTIONS = new Set([
  "kernel/cancellable.ts → observe/events.ts",
  "kernel/diagnostics.ts → observe/events.ts",
  "kernel/runtime.ts → observe/events.ts",
  "kernel/task.ts → observe/events.ts",
]);

/** The imports of `graph` that go against {@link MAY_IMPORT}, as `from → to`. */
function upwardOf(graph: ReadonlyMap<string, readonly string[]>): string[] {
  const found: string[] = [];
  for (const [file, imports] of graph) {
    const allowed = MAY_IMPORT[layerOf(file)];
    for (const to of imports) {
      const edge = `${file} → ${to}`;
      if (allowed?.includes(layerOf(to)) !== true && !EXCEPTIONS.has(edge)) found.push(edge);
    }
  }
  return found.sort();
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: "utf8" })
    .map((f) => f.split("\\").join("/"))
    .filter((f) => f.endsWith(".ts") && !f.endsWith(".test.ts"));
}

const graphOf = (files: Record<string, string>) =>
  new Map(Object.entries(files).map(([f, s]) => [f, importsOf(f, s)]));

describe("packages/core/src imports", () => {
  test("the check finds a circle across folders, through a type import and a re-export too", () => {
    const graph = graphOf({
      "kernel/a.ts": 'import { b } from "../time/b.js";',
      "time/b.ts": 'import type {\n  C,\n} from "./c.js";',
      "time/c.ts": 'export { a } from "../kernel/a.js";',
      "time/d.ts": 'import { a } from "../kernel/a.js";',
    });
    expect(cyclesOf(graph)).toEqual(["kernel/a.ts → time/b.ts → time/c.ts → kernel/a.ts"]);
  });

  test("the check finds an import against the layers, a type import too, and a folder with no place", () => {
    const graph = graphOf({
      "kernel/a.ts": 'import type { Retry } from "../resilience/retry.js";',
      "observe/b.ts": 'import { sleep } from "../time/sleep.js";',
      "time/c.ts": 'import { a } from "../kernel/a.js";\nimport { e } from "../errors.js";',
      "queue/d.ts": 'import { a } from "../kernel/a.js";',
    });
    expect(upwardOf(graph)).toEqual([
      "kernel/a.ts → resilience/retry.ts",
      "observe/b.ts → time/sleep.ts",
      "queue/d.ts → kernel/a.ts",
    ]);
  });

  const files = filesUnder(src);
  const graph = new Map(files.map((f) => [f, importsOf(f, readFileSync(`${src}${f}`, "utf8"))]));

  test("no file imports one that imports it", () => {
    expect(files).toContain("kernel/task.ts");
    expect(files).toContain("http/client.ts");
    expect([...graph.values()].flat().length).toBeGreaterThan(200);
    expect(cyclesOf(graph)).toEqual([]);
  });

  test("every import goes down the layers", () => {
    for (const file of files) expect(Object.keys(MAY_IMPORT)).toContain(layerOf(file));
    expect(upwardOf(graph)).toEqual([]);
  });
});
