/**
 * The workflows' contract, `docs/guide/workflows.md` ("The rules"), is what the workflow errors mean
 * by "rule W4": every rule the page has (`### W<n>. Title`) is pinned by at least one test in
 * `packages/workflow/test` whose title (its describe blocks' and its own) names it, and no test
 * names a rule the page lacks. Each rule links the test that pins it, and cites its title.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const page = readFileSync(path.join(root, "docs/guide/workflows.md"), "utf8");
const testDir = path.join(root, "packages/workflow/test");

/** The rule numbers the page has: its `### W<n>. Title` headings, in order. */
function rulesOf(markdown: string): number[] {
  return [...markdown.matchAll(/^### W(\d+)\. \S/gm)].map((m) => Number(m[1]));
}

/**
 * The titles of the `describe`, `it` and `test` calls in a test file, each as written: a string
 * literal, or a template literal whose `${…}` parts are left in place (a rule's number is never in
 * one). The rules a test names are in these titles.
 */
function titlesIn(source: string): string[] {
  const call =
    /\b(?:describe|it|test)(?:\.(?:each\([^)]*\)|skip|only|concurrent|todo))?\(\s*(["'`])((?:\\.|(?!\1)[\s\S])*)\1/g;
  return [...source.matchAll(call)].map((m) => m[2]!);
}

/** The rule numbers a title names: `W4`, and each of `W6/W7`, `W10/W11` (not the `W1` in `W12`). */
function rulesNamedIn(title: string): number[] {
  return [...title.matchAll(/\bW(\d+)\b/g)].map((m) => Number(m[1]));
}

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return testFiles(full);
    return entry.name.endsWith(".test.ts") ? [full] : [];
  });
}

const named = testFiles(testDir).flatMap((file) =>
  titlesIn(readFileSync(file, "utf8")).flatMap((title) =>
    rulesNamedIn(title).map((rule) => ({ rule, title, file: path.relative(root, file) })),
  ),
);

describe("docs/guide/workflows.md, the rules the workflow tests pin", () => {
  const rules = rulesOf(page);

  it("has the twelve rules, W1 to W12, in order", () => {
    expect(rules).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
  });

  it.each(rulesOf(page).map((n) => [`W${n}`, n]))("%s has a test whose title names it", (_name, n) => {
    const pins = named.filter((t) => t.rule === n);
    expect(pins, `no test in packages/workflow/test names W${n} in its title`).not.toEqual([]);
  });

  it("no test names a rule the page lacks", () => {
    const dangling = named
      .filter((t) => !rules.includes(t.rule))
      .map((t) => `${t.file}: "${t.title}" names W${t.rule}, which docs/guide/workflows.md lacks`);
    expect(dangling).toEqual([]);
  });

  it("each rule links a workflow test file that exists, and cites a title that file has", () => {
    const sections = page.split(/^### (?=W\d+\. )/m).slice(1);
    expect(sections).toHaveLength(rules.length);
    const problems: string[] = [];
    for (const section of sections) {
      const rule = section.split("\n")[0]!;
      const body = section.split(/^## /m)[0]!;
      const links = [
        ...body.matchAll(/\]\((https:\/\/github\.com\/keel-ts\/keel\/blob\/main\/([^)\s#]+))\)/g),
      ];
      const tests = links.filter(([, , file]) => /^packages\/workflow\/test\/.+\.test\.ts$/.test(file!));
      if (tests.length === 0) problems.push(`${rule}: links no test in packages/workflow/test`);
      for (const [, url, file] of tests) {
        const local = path.join(root, file!);
        if (!existsSync(local)) {
          problems.push(`${rule}: ${url} does not exist`);
          continue;
        }
        // The first quoted title after the link, up to its first " › ", is a title in that file.
        const after = body.slice(body.indexOf(url!));
        const cited = /"([^"›]+?)(?: ›|")/.exec(after.replace(/\s*\n\s*/g, " "))?.[1];
        const titles = titlesIn(readFileSync(local, "utf8"));
        if (cited === undefined) problems.push(`${rule}: no title cited after ${file}`);
        else if (!titles.includes(cited)) problems.push(`${rule}: ${file} has no test titled "${cited}"`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('the workflow and its test printed under "Testing a workflow" are docs/test/workflows-guide.test.ts', () => {
    const block = [...page.matchAll(/```ts\n([\s\S]*?)```/g)]
      .map((m) => m[1]!)
      .find((b) => b.includes("testWorkflow(") && b.includes("vitest"));
    expect(block).toBeDefined();
    const file = readFileSync(path.join(root, "docs/test/workflows-guide.test.ts"), "utf8")
      .split("\n")
      .map((l) => l.trimEnd());
    let at = 0;
    for (const line of block!.split("\n").map((l) => l.trimEnd())) {
      if (line.trim() === "") continue;
      const found = file.indexOf(line, at);
      expect(found, `line not found (in order): ${line}`).toBeGreaterThanOrEqual(0);
      at = found + 1;
    }
  });

  it("the check itself: W1 is not read out of W12, both of W6/W7 are, template titles count", () => {
    expect(rulesNamedIn("W12: executions")).toEqual([12]);
    expect(rulesNamedIn("W6/W7: durable time")).toEqual([6, 7]);
    expect(rulesNamedIn("W10/W11: deadlines")).toEqual([10, 11]);
    expect(rulesNamedIn("a step named W2x or xW3")).toEqual([]);
    const source =
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a test file's source, as text
      'describe("W4: the guard", () => {\n  it(`${what} in W5`, () => {});\n  it.each([1])("W8 %s", () => {});\n});';
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a title as written in that source
    expect(titlesIn(source)).toEqual(["W4: the guard", "${what} in W5", "W8 %s"]);
  });
});
