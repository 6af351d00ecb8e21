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
 * (its first heading as `title`) and its headings' backticks dropped (so anchors are GitHub's): the
 * pages stay plain Markdown on GitHub. The site lists them in the guide index's reading order (the
 * order its links first name them), then any page the index does not link, by name.
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

rmSync(staged, { recursive: true, force: true });
mkdirSync(staged);
for (const page of pages) {
  const text = readFileSync(join(guide, page), "utf8");
  // Navigation titles are plain text (typedoc drops a title with backticks for the file name).
  const title = (text.match(/^# (.+)$/m)?.[1] ?? page.replace(/\.md$/, "")).replaceAll("`", "");
  // typedoc's heading anchors leave out code spans, GitHub's keep their text: without the backticks
  // both give `## \`allSettled\`: every outcome` the anchor `#allsettled-every-outcome`.
  const body = text.replace(/^(#{1,6} .*)$/gm, (heading) => heading.replaceAll("`", ""));
  writeFileSync(join(staged, page), `---\ntitle: ${JSON.stringify(title)}\n---\n\n${body}`);
}

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
