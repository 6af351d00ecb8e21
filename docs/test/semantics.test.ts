/**
 * The runtime's contract, `docs/guide/semantics.md`, is what the sources mean by "semantics §N": every
 * `§N` cited in `packages/*\/src`, `packages/*\/test`, `docs/guide` and `examples/src` must name a
 * section the page has (`## N. Title`). A line that names an RFC cites the RFC's sections, not ours.
 * The page's links to the repository (the tests that pin each rule) must name files that exist.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const page = path.join(root, "docs/guide/semantics.md");
const REPO = "https://github.com/keel-ts/keel/blob/main/";

function listFiles(dir: string, keep: (name: string) => boolean): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    if (entry.name === "node_modules" || entry.name === "dist") return [];
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return listFiles(full, keep);
    return keep(entry.name) ? [full] : [];
  });
}

/** The section numbers a page has: its `## N. Title` headings. */
function sectionsOf(markdown: string): Set<number> {
  return new Set([...markdown.matchAll(/^## (\d+)\. \S/gm)].map((m) => Number(m[1])));
}

/** Every `§N` in `text` outside lines that name an RFC, with its line number. */
function citationsIn(text: string): { line: number; section: number; raw: string }[] {
  return text.split("\n").flatMap((line, i) => {
    if (/\bRFC\s*\d/.test(line)) return [];
    return [...line.matchAll(/§\s*(\d+(?:\.\d+)*)/g)].map((m) => ({
      line: i + 1,
      // A dotted number (§5.2) points at a subsection the page does not number: counted as not found.
      section: m[1]!.includes(".") ? Number.NaN : Number(m[1]),
      raw: m[0],
    }));
  });
}

const sources = [
  ...readdirSync(path.join(root, "packages")).flatMap((pkg) => [
    ...listFiles(path.join(root, "packages", pkg, "src"), (n) => /\.(ts|tsx|mjs|md)$/.test(n)),
    ...listFiles(path.join(root, "packages", pkg, "test"), (n) => /\.(ts|tsx|mjs|md)$/.test(n)),
  ]),
  ...listFiles(path.join(root, "packages/core/src/kernel"), (n) => n === "README.md"),
  ...listFiles(path.join(root, "docs/guide"), (n) => n.endsWith(".md")),
  ...listFiles(path.join(root, "examples/src"), (n) => n.endsWith(".ts")),
];

describe("docs/guide/semantics.md, the contract the sources cite", () => {
  const sections = sectionsOf(readFileSync(page, "utf8"));

  it("has the ten sections of the contract, numbered in order", () => {
    expect([...sections]).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  });

  it("has every section a `§N` in the sources cites", () => {
    const cited = [...new Set(sources)].flatMap((file) =>
      citationsIn(readFileSync(file, "utf8")).map((c) => ({ ...c, file: path.relative(root, file) })),
    );
    // The sources do cite the contract: a change that dropped them all would make this test vacuous.
    expect(cited.length).toBeGreaterThanOrEqual(34);
    const dangling = cited
      .filter((c) => !sections.has(c.section))
      .map((c) => `${c.file}:${c.line}: ${c.raw} is not a section of docs/guide/semantics.md`);
    expect(dangling).toEqual([]);
  });

  it("the check itself: a citation of a missing section is found, an RFC's section is not", () => {
    const text = "see semantics §12\n(RFC 9110 §10.2.3), HTTP-date (§5.6.7)\nsemantics §2, §5\nsee §5.1";
    const missing = citationsIn(text).filter((c) => !sections.has(c.section));
    expect(missing.map((c) => `${c.line} ${c.raw}`)).toEqual(["1 §12", "4 §5.1"]);
  });

  it("every repository link of the guide names a file that exists", () => {
    const broken: string[] = [];
    for (const file of listFiles(path.join(root, "docs/guide"), (n) => n.endsWith(".md"))) {
      const text = readFileSync(file, "utf8");
      for (const [, target] of text.matchAll(
        /\]\((https:\/\/github\.com\/keel-ts\/keel\/blob\/main\/[^)\s#]+)/g,
      )) {
        const local = path.join(root, target!.slice(REPO.length));
        if (!existsSync(local)) broken.push(`${path.relative(root, file)}: ${target}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it("names, for each section, a guide page that shows it and a test that pins it", () => {
    const text = readFileSync(page, "utf8");
    const bodies = text.split(/^## (?=\d+\. )/m).slice(1);
    expect(bodies).toHaveLength(10);
    for (const body of bodies) {
      const title = body.split("\n")[0];
      expect(body, `§${title}: a guide link`).toMatch(/^- Guide: \[/m);
      expect(body, `§${title}: a test link`).toMatch(
        /^- Tests: \[[^\]]+\]\(https:\/\/github\.com\/keel-ts\/keel\/blob\/main\/packages\/[^)]+\.test\.ts\)/m,
      );
    }
  });
});
