/**
 * Runs the programs named on the command line in this one process, one after another, and prints a
 * result line for each (a child process per program would spend most of the test starting `tsx`).
 *
 * A program passes when its module evaluation (top-level await included) settles without an error,
 * no unhandled rejection or uncaught exception surfaces while it runs, it leaves `process.exitCode`
 * at 0, and it finishes within the per-program limit. Host timers it leaves pending are counted
 * separately: a pending timer keeps a real process alive after its work is done.
 *
 * `--signal SIGINT file` runs one program that waits for a signal (`main`): once the program has
 * installed a handler for it, the signal is sent to this process; `main` then exits the process
 * itself, with the code it documents.
 */
import { pathToFileURL } from "node:url";

const START = "@@keel-example:start ";
const RESULT = "@@keel-example:result ";
const LIMIT_MS = Number(process.env.KEEL_EXAMPLE_LIMIT_MS ?? 30_000);

function describe(e: unknown): string {
  if (e instanceof Error) return e.stack ?? `${e.name}: ${e.message}`;
  if (typeof e === "object" && e !== null && "toString" in e) return String(e);
  return JSON.stringify(e) ?? String(e);
}

function hostTimers(): number {
  return process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;
}

/** Sends `signal` to this process as soon as someone other than Node's default listens for it. */
function sendWhenHandled(signal: NodeJS.Signals): void {
  const before = process.listenerCount(signal);
  const poll = setInterval(() => {
    if (process.listenerCount(signal) > before) {
      clearInterval(poll);
      process.kill(process.pid, signal);
    }
  }, 5);
  poll.unref();
}

let args = process.argv.slice(2);
let signal: NodeJS.Signals | null = null;
if (args[0] === "--signal") {
  signal = args[1] as NodeJS.Signals;
  args = args.slice(2);
}

let failures = 0;
for (const file of args) {
  console.log(`${START}${file}`);
  const problems: string[] = [];
  const onError = (e: unknown) => problems.push(`unhandled: ${describe(e)}`);
  process.on("unhandledRejection", onError);
  process.on("uncaughtException", onError);
  process.exitCode = 0;
  const timersBefore = hostTimers();
  const started = performance.now();
  let guard: ReturnType<typeof setTimeout> | undefined;
  try {
    const hung = new Promise<"hung">((resolve) => {
      guard = setTimeout(() => resolve("hung"), LIMIT_MS);
    });
    if (signal) sendWhenHandled(signal);
    const outcome = await Promise.race([import(pathToFileURL(file).href), hung]);
    if (outcome === "hung") problems.push(`did not finish within ${LIMIT_MS} ms`);
  } catch (e) {
    problems.push(describe(e));
  } finally {
    clearTimeout(guard);
  }
  // Let a late rejection or a stray immediate surface while this program is still the one blamed.
  await new Promise<void>((resolve) => setImmediate(resolve));
  const ms = Math.round(performance.now() - started);
  const exitCode = Number(process.exitCode ?? 0);
  if (exitCode !== 0) problems.push(`set process.exitCode to ${exitCode}`);
  const lingeringTimers = Math.max(0, hostTimers() - timersBefore);
  process.off("unhandledRejection", onError);
  process.off("uncaughtException", onError);
  if (problems.length > 0) failures++;
  console.log(
    `${RESULT}${JSON.stringify({ file, ok: problems.length === 0, ms, problems, lingeringTimers })}`,
  );
}
process.exit(failures > 0 ? 1 : 0);
