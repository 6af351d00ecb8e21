/**
 * The docs site (`npm run docs`, typedoc into `docs/site/`): every relative link in it resolves, and
 * its front page renders in headless Chromium, served from 127.0.0.1: a screenshot is written to
 * `docs/site/front-page.png` (to look at), and the DOM after the page's scripts ran must hold the
 * guide's front page and the navigation with every package's entry points, named as users import
 * them.
 *
 * The rough edges a newcomer saw are checked where a check can see them: module pages give each
 * export its summary; code blocks keep their lines (a long line scrolls, it does not wrap to column
 * 0: the computed `white-space` in Chromium, on a page with long lines, screenshot in
 * `docs/site/example-page.png`); the front page offers `npm i`, not a contributor's `npm ci`; the
 * guide's example links open pages of the site (the program's explanation, then its code), never a
 * raw `.ts` file; the OpenTelemetry setup snippet imports what it uses.
 *
 * The site is built here when `docs/site/` has none or is older than its sources (CI builds it first, with `npm run docs`, whose
 * typedoc validation fails on broken links and undocumented exports). Without Chromium the test is
 * skipped with one line saying how to install it, unless `KEEL_REQUIRE_CHROMIUM=1` (CI) makes that a
 * failure.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chromiumRequired, findChromium, headless } from "../../packages/core/test/support/chromium.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const site = path.join(root, "docs", "site");
const required = chromiumRequired;

const chromium = findChromium();
if (!chromium && !required)
  console.warn(
    "docs site test skipped: Chromium is not installed (apt-get update && apt-get install -y chromium)",
  );

const types: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript",
  ".css": "text/css",
  ".svg": "image/svg+xml",
};

/**
 * Injected into a page served with `?probe`: once the page's own scripts have shown it, writes each
 * code block's computed layout into `<pre id="keel-probe">` as JSON, for `--dump-dom` to carry out.
 */
const PROBE_SCRIPT = `<script>
setTimeout(() => {
  const blocks = [...document.querySelectorAll(".col-content pre")].map((pre) => {
    const style = getComputedStyle(pre);
    return { whiteSpace: style.whiteSpace, overflowX: style.overflowX, scrolls: pre.scrollWidth > pre.clientWidth + 1 };
  });
  const out = document.createElement("pre");
  out.id = "keel-probe";
  const mark = ["@@keel", "probe@@"].join("-"); // not spelled out here, so the script never matches
  out.textContent = mark + JSON.stringify(blocks) + mark;
  document.body.append(out);
}, 2000);
</script>`;

function serve(dir: string): Promise<Server> {
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    let file = path.join(dir, decodeURIComponent(url.pathname));
    if (!file.startsWith(dir)) file = dir;
    if (existsSync(file) && statSync(file).isDirectory()) file = path.join(file, "index.html");
    if (!existsSync(file)) {
      res.statusCode = 404;
      res.end();
      return;
    }
    res.setHeader("content-type", types[path.extname(file)] ?? "application/octet-stream");
    if (url.searchParams.has("probe") && file.endsWith(".html")) {
      res.end(readFileSync(file, "utf8").replace("</body>", `${PROBE_SCRIPT}</body>`));
      return;
    }
    res.end(readFileSync(file));
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

/** Every public package's entry points, as users import them (`@keel/core/http`). */
function entryPoints(): string[] {
  const read = (file: string) => JSON.parse(readFileSync(path.join(root, file), "utf8"));
  return (read("package.json").workspaces as string[]).flatMap((dir) => {
    const pkg = read(path.join(dir, "package.json"));
    if (pkg.private) return [];
    return Object.keys(pkg.exports ?? {})
      .filter((key) => !key.endsWith(".json"))
      .map((key) => (key === "." ? pkg.name : `${pkg.name}${key.slice(1)}`));
  });
}

/** Newest modification time under `dir` of the files `keep` accepts (0 when there is none). */
function newestMtimeMs(dir: string, keep: (name: string) => boolean): number {
  if (!existsSync(dir)) return 0;
  return readdirSync(dir, { withFileTypes: true }).reduce((newest, entry) => {
    if (entry.name === "node_modules" || entry.name === "dist") return newest;
    const full = path.join(dir, entry.name);
    const t = entry.isDirectory() ? newestMtimeMs(full, keep) : keep(entry.name) ? statSync(full).mtimeMs : 0;
    return Math.max(newest, t);
  }, 0);
}

/**
 * A site older than the guide, the sources or the typedoc settings is rebuilt: a site left by an
 * earlier build would be checked against packages and pages it does not have.
 */
function siteIsStale(): boolean {
  const index = path.join(site, "index.html");
  if (!existsSync(index)) return true;
  const built = statSync(index).mtimeMs;
  const sources = Math.max(
    newestMtimeMs(path.join(root, "docs", "guide"), (n) => n.endsWith(".md")),
    newestMtimeMs(path.join(root, "packages"), (n) => n.endsWith(".ts") || n === "package.json"),
    newestMtimeMs(path.join(root, "docs", "examples"), (n) => n.endsWith(".ts")),
    statSync(path.join(root, "docs", "typedoc.json")).mtimeMs,
    statSync(path.join(root, "docs", "site.css")).mtimeMs,
    statSync(path.join(root, "scripts", "docs-site.mjs")).mtimeMs,
  );
  return sources > built;
}

function htmlFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return htmlFiles(full);
    return entry.name.endsWith(".html") ? [full] : [];
  });
}

describe.skipIf(!chromium && !required)("the docs site", () => {
  let server: Server | undefined;

  beforeAll(() => {
    if (siteIsStale())
      execFileSync(process.execPath, [path.join(root, "scripts", "docs-site.mjs")], { stdio: "inherit" });
  }, 300_000);

  afterAll(() => {
    server?.close();
  });

  it("has no relative link to a file that is not in the site", () => {
    const broken: string[] = [];
    const files = htmlFiles(site);
    for (const file of files) {
      for (const [, target] of readFileSync(file, "utf8").matchAll(/(?:href|src)="([^"]*)"/g)) {
        if (!target || /^(#|[a-z]+:|\/\/)/i.test(target)) continue;
        const local = decodeURIComponent(target.replace(/[?#].*$/, ""));
        if (!existsSync(path.resolve(path.dirname(file), local)))
          broken.push(`${path.relative(site, file)} -> ${target}`);
      }
    }
    expect(files.length).toBeGreaterThan(50);
    expect(broken).toEqual([]);
  });

  it("renders its front page in headless Chromium", async () => {
    if (!chromium) throw new Error("KEEL_REQUIRE_CHROMIUM=1 but Chromium is not installed");
    server = await serve(site);
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    const screenshot = path.join(site, "front-page.png");
    rmSync(screenshot, { force: true });
    const [dom] = await Promise.all([
      headless(chromium, url, ["--dump-dom"]),
      headless(chromium, url, [`--screenshot=${screenshot}`]),
    ]);

    expect(dom).toContain("The Keel guide");
    // The front page is for users: it installs the packages, and hands out no contributor command.
    const text = dom.replace(/<[^>]*>/g, "");
    expect(text).toContain("npm i @keel/core");
    expect(text).not.toContain("npm ci");
    expect(text).not.toContain("--conditions=source");
    // The navigation is filled in by a script, from compressed data: the guide's pages and every
    // entry point of every package, named as users import it, must be in it.
    const nav = dom.slice(dom.indexOf('id="tsd-nav-container"'));
    expect(nav).toContain("<span>The task tree</span>");
    // The contract, the pages for newcomers from other tools, and the examples' pages, in the navigation.
    const navText = nav.replace(/<wbr\s*\/?>/g, "");
    for (const title of [
      "The runtime's contract",
      "Coming from BullMQ",
      "Coming from Temporal",
      "Coming from DBOS",
      "Durable workflows",
      "Examples",
      "from-bullmq.ts",
      "workflows.ts",
    ])
      expect(navText).toContain(`<span>${title}</span>`);
    for (const module of entryPoints()) expect(nav).toContain(`<span>${module}</span>`);

    const png = readFileSync(screenshot);
    expect(png.subarray(1, 4).toString("latin1")).toBe("PNG");
    expect([png.readUInt32BE(16), png.readUInt32BE(20)]).toEqual([1280, 1000]);
    // A blank or unstyled page compresses to a few KB; the rendered front page is about 200 KB.
    expect(png.length).toBeGreaterThan(50_000);
  }, 300_000);
  it("lists each export of a module page with its summary", () => {
    const pages = readdirSync(path.join(site, "modules")).filter((f) => f.endsWith(".html"));
    expect(pages.length).toBe(entryPoints().length);
    const bare: string[] = [];
    let listed = 0;
    for (const page of pages) {
      const html = readFileSync(path.join(site, "modules", page), "utf8");
      for (const [, id, summary] of html.matchAll(
        /<dt class="tsd-member-summary" id="([^"]*)"[\s\S]*?<dd class="tsd-member-summary">([\s\S]*?)<\/dd>/g,
      )) {
        listed++;
        if (!summary!.replace(/<[^>]*>/g, "").trim()) bare.push(`${page}: ${id}`);
      }
    }
    expect(listed).toBeGreaterThan(100);
    expect(bare).toEqual([]);
  });

  it("opens the guide's example links as pages of the site, never as raw .ts files", () => {
    const raw: string[] = [];
    for (const file of htmlFiles(site)) {
      for (const [, target] of readFileSync(file, "utf8").matchAll(/href="([^"#?]*)/g)) {
        if (/\.ts$/.test(target!) && !/^[a-z]+:/.test(target!))
          raw.push(`${path.relative(site, file)} -> ${target}`);
      }
    }
    expect(raw).toEqual([]);
    const timeouts = readFileSync(path.join(site, "documents", "Timeouts.html"), "utf8");
    expect(timeouts).toContain('href="Examples.timeouts.ts.html"');
    const example = readFileSync(path.join(site, "documents", "Examples.timeouts.ts.html"), "utf8");
    // The program's own explanation as prose, then its code, highlighted.
    expect(example).toMatch(/<p>[^<]*timeout/i);
    expect(example).toMatch(/<pre><code class="ts">[\s\S]*from[\s\S]*@keel\/core/);
  });

  it("shows the OpenTelemetry setup with the imports it uses", () => {
    const text = readFileSync(path.join(site, "documents", "Operating_Keel.html"), "utf8");
    const blocks = [...text.matchAll(/<pre><code[^>]*>([\s\S]*?)<\/code>/g)].map((m) =>
      m[1]!.replace(/<[^>]*>/g, "").replaceAll("&quot;", '"'),
    );
    const setup = blocks.find((b) => b.includes("setGlobalContextManager"));
    expect(setup).toBeDefined();
    for (const name of ["instrument", "context", "AsyncLocalStorageContextManager"])
      expect(setup, `the setup snippet imports ${name}`).toMatch(
        new RegExp(`import \\{[^}]*\\b${name}\\b[^}]*\\} from`),
      );
  });

  it("keeps code lines whole in Chromium: a long line scrolls sideways, it does not wrap to column 0", async () => {
    if (!chromium) throw new Error("KEEL_REQUIRE_CHROMIUM=1 but Chromium is not installed");
    server ??= await serve(site);
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    // An example page: a program with lines longer than the content column.
    const page = `${base}/documents/Examples.from-bullmq.ts.html`;
    const screenshot = path.join(site, "example-page.png");
    rmSync(screenshot, { force: true });
    const [dom] = await Promise.all([
      headless(chromium, `${page}?probe`, ["--dump-dom"]),
      headless(chromium, page, [`--screenshot=${screenshot}`]),
    ]);
    const found = /@@keel-probe@@(.*)@@keel-probe@@/.exec(dom);
    expect(found, "the probe script wrote its result").not.toBeNull();
    const blocks = JSON.parse(found![1]!) as { whiteSpace: string; overflowX: string; scrolls: boolean }[];
    expect(blocks.length).toBeGreaterThan(0);
    for (const b of blocks) expect([b.whiteSpace, b.overflowX]).toEqual(["pre", "auto"]);
    expect(blocks.some((b) => b.scrolls)).toBe(true);
    expect(readFileSync(screenshot).length).toBeGreaterThan(50_000);
  }, 300_000);
});
