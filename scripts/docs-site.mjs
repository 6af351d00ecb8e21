#!/usr/bin/env node
/**
 * `npm run docs`: the static site, the guide (`docs/guide`) and the API reference (the TSDoc of
 * every package's entry points), built by typedoc into `docs/site/`.
 *
 * typedoc reads TypeScript through its compiler API, which TypeScript 7 no longer has: the docs
 * workspace pins its own TypeScript 5.9 beside typedoc (`docs/package.json`), and the repository's
 * TypeScript 7 is untouched.
 *
 * The guide is copied to `docs/.site-guide/` first, each page given the front matter typedoc reads
 * (its first heading as `title`, its first paragraph's first sentence as `summary`, shown in the
 * front page's list) and its headings' backticks dropped (so anchors are GitHub's): the pages stay
 * plain Markdown on GitHub. The site lists them in the guide index's reading order (the order its
 * links first name them), then any page the index does not link, by name.
 *
 * The programs the guide links (`../examples/x.ts`) become pages of the site, children of an
 * "Examples" page: the program's header comment as prose, then its code, highlighted. On GitHub the
 * links open the file; on the site they open that page, not a raw `.ts` file (which a static host
 * serves as a download, or as an MPEG transport stream).
 *
 * The entry points are every public workspace's `exports` (their `source` files), so a new package
 * or subpath is in the reference when it lands; each entry's module comment must name it as users
 * import it (`@module @keel/core/http`), which is the name the site shows. `docs/typedoc.json` holds the rest: validation with warnings as errors, so a broken link
 * or an undocumented export fails the build.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const docs = join(root, "docs");
const guide = join(docs, "guide");
const staged = join(docs, ".site-guide");

const pages = readdirSync(guide).filter((f) => f.endsWith(".md"));
const index = readFileSync(join(guide, "index.md"), "utf8");
const linked = [...index.matchAll(/\]\(([a-z0-9-]+\.md)(#[^)]*)?\)/g)].map((m) => m[1]);
const order = [...new Set([...linked, ...pages.sort()])].filter((p) => p !== "index.md" && pages.includes(p));

const entryPoints = [];
const packages = [];
for (const dir of JSON.parse(readFileSync(join(root, "package.json"), "utf8")).workspaces) {
  const pkg = JSON.parse(readFileSync(join(root, dir, "package.json"), "utf8"));
  if (pkg.private) continue;
  packages.push(pkg.name);
  for (const [key, target] of Object.entries(pkg.exports ?? {})) {
    if (key.endsWith(".json")) continue;
    const specifier = key === "." ? pkg.name : `${pkg.name}${key.slice(1)}`;
    const file = join(root, dir, target.source);
    if (!readFileSync(file, "utf8").includes(`@module ${specifier}\n`))
      throw new Error(`${file}: its module comment must say "@module ${specifier}" (the site's name for it)`);
    entryPoints.push(file);
  }
}

/** Markdown prose as one plain line: links keep their text, bold and code marks go (`yield*` keeps its star). */
function plain(markdown) {
  return markdown
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/\*\*|`/g, "")
    .replace(/\s+/g, " ")
    .trim();
}

/** A summary longer than this is cut at a word and ends with "…". */
const SUMMARY_MAX = 160;

/** The first sentence of a page's first paragraph (the text after its title), for the page lists. */
function summaryOf(markdown) {
  const paragraph = markdown
    .replace(/^---\n[\s\S]*?\n---\n/, "")
    .split(/\n\s*\n/)
    .find((block) => block.trim() && !/^\s*(#|```|\||- |\d+\. |>)/.test(block));
  if (!paragraph) return "";
  const text = plain(paragraph);
  const end = text.search(/\.(\s|$)/);
  const sentence = end === -1 ? text : text.slice(0, end + 1);
  if (sentence.length <= SUMMARY_MAX) return sentence;
  return `${sentence.slice(0, sentence.lastIndexOf(" ", SUMMARY_MAX)).replace(/[,;:]$/, "")}…`;
}

const examplesDir = join(docs, "examples");
const examplePrograms = readdirSync(examplesDir)
  .filter((f) => f.endsWith(".ts"))
  .sort();
const exampleLink = /\]\(\.\.\/examples\/([\w-]+)\.ts\)/g;

rmSync(staged, { recursive: true, force: true });
mkdirSync(join(staged, "examples"), { recursive: true });
for (const page of pages) {
  const text = readFileSync(join(guide, page), "utf8");
  // Navigation titles are plain text (typedoc drops a title with backticks for the file name).
  const title = (text.match(/^# (.+)$/m)?.[1] ?? page.replace(/\.md$/, "")).replaceAll("`", "");
  // typedoc's heading anchors leave out code spans, GitHub's keep their text: without the backticks
  // both give `## \`allSettled\`: every outcome` the anchor `#allsettled-every-outcome`.
  const body = text
    .replace(/^(#{1,6} .*)$/gm, (heading) => heading.replaceAll("`", ""))
    .replace(exampleLink, "](examples/$1.md)");
  const summary = summaryOf(text.replace(/^# .*$/m, ""));
  writeFileSync(
    join(staged, page),
    `---\ntitle: ${JSON.stringify(title)}\nsummary: ${JSON.stringify(summary)}\n---\n\n${body}`,
  );
}

// Each program as a page: its header comment as prose, its code below.
const exampleRows = [];
for (const file of examplePrograms) {
  const name = file.replace(/\.ts$/, "");
  const source = readFileSync(join(examplesDir, file), "utf8");
  const header = source.match(/^\/\*\*([\s\S]*?)\*\/\n/);
  const prose = header
    ? header[1]
        .split("\n")
        .map((line) => line.replace(/^\s*\* ?/, ""))
        .join("\n")
        .trim()
    : "";
  const code = (header ? source.slice(header[0].length) : source).trim();
  const summary = summaryOf(prose);
  exampleRows.push(`| [${file}](examples/${name}.md) | ${summary.replaceAll("|", "\\|")} |`);
  writeFileSync(
    join(staged, "examples", `${name}.md`),
    [
      `---\ntitle: ${JSON.stringify(file)}\nsummary: ${JSON.stringify(summary)}\n---\n`,
      `# ${file}\n`,
      prose,
      "",
      `The \`assert\` lines check what the guide says, so the program fails if Keel and the guide ever`,
      `disagree. To run it in a project that has \`@keel/core\`, \`@keel/testing\` and the packages it`,
      `imports installed: \`npx tsx ${file}\`.`,
      "",
      "```ts",
      code,
      "```",
      "",
    ].join("\n"),
  );
}
writeFileSync(
  join(staged, "examples.md"),
  [
    "---",
    'title: "Examples"',
    `summary: ${JSON.stringify("Every program the guide links, each a runnable file that checks what its page says.")}`,
    "children:",
    ...examplePrograms.map(
      (f) => `  ${JSON.stringify(f)}: ${JSON.stringify(`examples/${f.replace(/\.ts$/, ".md")}`)}`,
    ),
    "---",
    "",
    "# Examples",
    "",
    "Every program the guide links, each a runnable file that checks what its page says with",
    "`node:assert`. Each page shows the program's own explanation, then its code.",
    "",
    "| Program | What it shows |",
    "| --- | --- |",
    ...exampleRows,
    "",
  ].join("\n"),
);

try {
  execFileSync(
    join(docs, "node_modules", ".bin", "typedoc"),
    [
      "--options",
      "typedoc.json",
      ...entryPoints.flatMap((e) => ["--entryPoints", e]),
      ...packages.flatMap((name) => ["--packagesRequiringDocumentation", name]),
      "--readme",
      ".site-guide/index.md",
      ...order.flatMap((p) => ["--projectDocuments", `.site-guide/${p}`]),
      "--projectDocuments",
      ".site-guide/examples.md",
    ],
    { cwd: docs, stdio: "inherit" },
  );
} catch {
  console.error(
    "docs: typedoc failed (its warnings are errors: a broken link or an undocumented export, above)",
  );
  process.exitCode = 1;
} finally {
  rmSync(staged, { recursive: true, force: true });
}
