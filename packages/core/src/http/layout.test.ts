/**
 * The HTTP folder reads top-down: no file imports (even for a type) a file that imports it back,
 * directly or through others.
 */
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, test } from "vitest";

const folder = fileURLToPath(new URL(".", import.meta.url));

/** The folder's own imports of each file: `import … from "./x.js"` and `export … from "./x.js"`. */
function importsOf(source: string): string[] {
  const found = source.matchAll(/^(?:import|export)\b[^;]*?\bfrom\s+"\.\/([\w.-]+)\.js"/gms);
  return [...found].map((m) => `${m[1]}.ts`);
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

describe("http/ imports", () => {
  test("the check finds a circle, through a type import and a re-export too", () => {
    const files: Record<string, string> = {
      "a.ts": 'import { b } from "./b.js";',
      "b.ts": 'import type {\n  C,\n} from "./c.js";',
      "c.ts": 'export { a } from "./a.js";',
      "d.ts": 'import { a } from "./a.js";',
    };
    const graph = new Map(Object.entries(files).map(([f, s]) => [f, importsOf(s)]));
    expect(cyclesOf(graph)).toEqual(["a.ts → b.ts → c.ts → a.ts"]);
  });

  test("no file of the client imports one that imports it", () => {
    const files = readdirSync(folder).filter((f) => f.endsWith(".ts") && !f.endsWith(".test.ts"));
    const graph = new Map(files.map((f) => [f, importsOf(readFileSync(`${folder}/${f}`, "utf8"))]));
    expect([...graph.values()].flat().length).toBeGreaterThan(10);
    expect(cyclesOf(graph)).toEqual([]);
  });
});
