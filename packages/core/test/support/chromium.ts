/**
 * Headless Chromium for the tests that look at a real page (the docs site, bull-board): where the
 * binary is, and one run of it on a URL. The flags are the ones this machine needs: without the
 * background-networking ones, Chromium's connections are refused by the closed network, many at a
 * time; `--virtual-time-budget` lets a page's deferred scripts run before the capture.
 * @module
 */
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

/** `KEEL_CHROMIUM` names the binary (and only it); otherwise Debian's path; null if absent. */
export function findChromium(): string | null {
  const candidates = process.env.KEEL_CHROMIUM ? [process.env.KEEL_CHROMIUM] : ["/usr/bin/chromium"];
  return candidates.find((c) => existsSync(c)) ?? null;
}

/** Whether CI asked for Chromium (`KEEL_REQUIRE_CHROMIUM=1`): then a missing one fails, not skips. */
export const chromiumRequired = process.env.KEEL_REQUIRE_CHROMIUM === "1";

/**
 * Runs headless Chromium once on `url` with `extra` flags (a fresh profile each time) and returns
 * what it printed (`--dump-dom`'s page).
 */
export function headless(
  binary: string,
  url: string,
  extra: string[],
  options: { windowSize?: string; timeoutMs?: number } = {},
): Promise<string> {
  const profile = mkdtempSync(path.join(tmpdir(), "keel-chromium-"));
  const flags = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    `--user-data-dir=${profile}`,
    `--window-size=${options.windowSize ?? "1280,1000"}`,
    "--hide-scrollbars",
    "--virtual-time-budget=5000",
    ...extra,
    url,
  ];
  return new Promise((resolve, reject) => {
    execFile(
      binary,
      flags,
      { maxBuffer: 64 * 1024 * 1024, timeout: options.timeoutMs ?? 120_000 },
      (error, stdout) => {
        rmSync(profile, { recursive: true, force: true });
        if (error) reject(error);
        else resolve(stdout);
      },
    );
  });
}
