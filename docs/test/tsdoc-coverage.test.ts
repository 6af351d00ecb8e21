/**
 * Every public export of Keel has TSDoc with a runnable `@example` (house style: "Public API docs").
 *
 * The public API is what the four barrels name. Each name is followed from its barrel to the module
 * that declares it (through further re-exports, if any), and the `/** … *\/` comment right before
 * that declaration must hold an `@example` tag followed by a ```ts fence: the form that
 * docs/test/examples.test.ts extracts and runs, so an export that passes here has an example that
 * runs there.
 */
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

const barrels = [
  "packages/core/src/index.ts",
  "packages/core/src/http/index.ts",
  "packages/core/src/effection/index.ts",
  "packages/testing/src/index.ts",
  "packages/testing/src/workflow/index.ts",
  "packages/worker/src/index.ts",
  "packages/workflow/src/index.ts",
  "packages/workflow/src/postgres/index.ts",
  "packages/workflow/src/sqlite/index.ts",
  "packages/worker/src/bullmq/index.ts",
  "packages/otel/src/index.ts",
];

/** One name a barrel exports: the public name, and the name it has where it comes from. */
interface ExportedName {
  readonly name: string;
  readonly local: string;
  /** The module specifier it is re-exported from, or null for a declaration in the barrel itself. */
  readonly from: string | null;
}

/** What the search for a declaration found. */
interface Declaration {
  readonly file: string;
  /** The `/** … *\/` comment right before the declaration, if any. */
  readonly doc: string | null;
}

function withoutComments(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
}

const declarationKeywords = String.raw`export\s+(?:declare\s+)?(?:abstract\s+)?(?:async\s+)?(?:function\s*\*?|class|interface|type|const|let|enum)\s+`;

/** The names a barrel exports: `export { a, type B, c as d } from "./x.js"` and `export <declaration>`. */
function parseBarrel(text: string): { names: ExportedName[]; starExports: string[] } {
  const code = withoutComments(text);
  const names: ExportedName[] = [];
  const clause = /export\s+(?:type\s+)?\{([^}]*)\}\s*(?:from\s*["']([^"']+)["'])?/g;
  for (const m of code.matchAll(clause)) {
    for (const part of m[1]!.split(",")) {
      const spec = part.trim().replace(/^type\s+/, "");
      if (!spec) continue;
      const [local, alias] = spec.split(/\s+as\s+/).map((s) => s.trim());
      names.push({ name: alias ?? local!, local: local!, from: m[2] ?? null });
    }
  }
  for (const m of code.matchAll(new RegExp(`${declarationKeywords}(\\w+)`, "g"))) {
    names.push({ name: m[1]!, local: m[1]!, from: null });
  }
  const starExports = [...code.matchAll(/export\s+\*[^;]*;/g)].map((m) => m[0]);
  return { names, starExports };
}

/** The `.ts` file a relative specifier (`./errors.js`, `./http`) of `fromFile` names, or null. */
function resolveModule(fromFile: string, specifier: string): string | null {
  if (!specifier.startsWith(".")) return null;
  const base = path.resolve(path.dirname(fromFile), specifier);
  const candidates = [base.replace(/\.js$/, ".ts"), `${base}.ts`, path.join(base, "index.ts")];
  return candidates.find((c) => c.endsWith(".ts") && existsSync(c)) ?? null;
}

/**
 * Finds where `name` is declared, starting in `file` and following re-exports (`export { x as name }
 * from "./y.js"`). Null when there is no such declaration.
 */
function findDeclaration(
  file: string,
  name: string,
  text = readFileSync(file, "utf8"),
  depth = 0,
): Declaration | null {
  const declared = new RegExp(
    String.raw`(/\*\*(?:(?!\*/)[\s\S])*\*/)?\s*${declarationKeywords}${name}\b`,
  ).exec(text);
  if (declared) return { file, doc: declared[1] ?? null };
  if (depth > 5) return null;
  for (const entry of parseBarrel(text).names) {
    if (entry.name !== name || entry.from === null) continue;
    const target = resolveModule(file, entry.from);
    if (target) return findDeclaration(target, entry.local, readFileSync(target, "utf8"), depth + 1);
  }
  return null;
}

/** The comment's text without its `/**`, `*\/` and leading ` * `, as examples.test.ts reads it. */
function commentBody(doc: string): string {
  return doc
    .replace(/^\/\*\*/, "")
    .replace(/\*\/$/, "")
    .split("\n")
    .map((line) => line.replace(/^\s*\* ?/, ""))
    .join("\n");
}

/** True when the comment holds an `@example` followed by a ```ts (or ```typescript) fence. */
function hasRunnableExample(doc: string | null): boolean {
  return doc !== null && /@example[^\n]*\n\s*```(?:ts|typescript)\n[\s\S]*?\n\s*```/.test(commentBody(doc));
}

interface PublicExport extends ExportedName {
  readonly barrel: string;
}

const publicExports: PublicExport[] = barrels.flatMap((barrel) =>
  parseBarrel(readFileSync(path.join(root, barrel), "utf8")).names.map((n) => ({ ...n, barrel })),
);

/** Where an export is declared: followed from its barrel's specifier, or the barrel itself. */
function locate(e: PublicExport): Declaration | null {
  const barrelFile = path.join(root, e.barrel);
  if (e.from === null) return findDeclaration(barrelFile, e.local);
  const target = resolveModule(barrelFile, e.from);
  return target ? findDeclaration(target, e.local) : null;
}

describe("the detector", () => {
  it("tells a declaration with a ts @example from one with a bare tag, a prose-only comment or none", () => {
    const source = [
      "/**\n * Adds.\n *\n * @example\n * ```ts\n * console.log(add(1, 2)); // 3\n * ```\n */",
      "export function add(a: number, b: number) { return a + b; }",
      "/** Subtracts.\n * @example sub(2, 1) is 1 */",
      "export const sub = (a: number, b: number) => a - b;",
      "/** A pair. */",
      "export type Pair = [number, number];",
      "export interface Bare { readonly x: number }",
    ].join("\n");
    const doc = (name: string) => findDeclaration("fixture.ts", name, source)?.doc ?? null;
    expect(hasRunnableExample(doc("add"))).toBe(true);
    expect(hasRunnableExample(doc("sub"))).toBe(false);
    expect(doc("Pair")).toBe("/** A pair. */");
    expect(hasRunnableExample(doc("Pair"))).toBe(false);
    expect(findDeclaration("fixture.ts", "Bare", source)).toEqual({ file: "fixture.ts", doc: null });
    expect(findDeclaration("fixture.ts", "Missing", source)).toBeNull();
  });

  it("reads type-only, inline-type and renamed names out of an export clause", () => {
    const { names } = parseBarrel(
      'export type { A } from "./a.js";\nexport { type B, c as d } from "./b.js";\nexport const e = 1;\n',
    );
    expect(names).toEqual([
      { name: "A", local: "A", from: "./a.js" },
      { name: "B", local: "B", from: "./b.js" },
      { name: "d", local: "c", from: "./b.js" },
      { name: "e", local: "e", from: null },
    ]);
  });
});

describe("the public API in the four barrels", () => {
  it("is named export by export, so every public name can be checked", () => {
    for (const barrel of barrels) {
      const { names, starExports } = parseBarrel(readFileSync(path.join(root, barrel), "utf8"));
      expect(starExports, `${barrel} re-exports with export *`).toEqual([]);
      expect(names.length, `${barrel} exports nothing the parser can see`).toBeGreaterThan(0);
    }
    const names = publicExports.map((e) => e.name);
    expect(names).toEqual(
      expect.arrayContaining(["run", "Task", "createHttpClient", "fromEffection", "createHarness"]),
    );
    expect(names.length).toBeGreaterThanOrEqual(120);
  });

  it.each(publicExports)("$name (from $barrel) has TSDoc with a runnable ```ts @example", (e) => {
    const found = locate(e);
    expect(
      found,
      `no declaration of ${e.local} found from ${e.barrel} (${e.from ?? "itself"})`,
    ).not.toBeNull();
    const where = path.relative(root, found!.file);
    expect(found!.doc, `${e.name} in ${where} has no TSDoc comment`).not.toBeNull();
    expect(
      hasRunnableExample(found!.doc),
      `${e.name} in ${where}: TSDoc has no @example with a \`\`\`ts fence`,
    ).toBe(true);
  });
});
