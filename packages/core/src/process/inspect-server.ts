/**
 * The other end of `keel-inspect`: a local unix socket on which a process started with
 * `main(op, { inspect: true })` answers with its task tree.
 *
 * Protocol: the client writes one line, `text` or `json`, and reads until the server closes: the
 * formatted tree of every live root of the process (`main`'s first, then each `run()` root, oldest
 * first), then each section packages added (`addInspectSection`: `== title ==` and its text), or
 * their snapshots as one JSON array in that order, each section as `{ section, data }` (`Infinity` deadlines as null; times
 * and durations to a tenth of a millisecond, as people read them).
 * @module
 */
import { roundMs } from "../format-value.js";
import { otherLiveRoots } from "../kernel/roots.js";
import type { TaskImpl } from "../kernel/task.js";
import { formatTaskTree } from "../observe/format-tree.js";
import { snapshot } from "../observe/snapshot.js";
import { renderSections } from "./inspect-sections.js";

/**
 * The JSON form's numbers: clock readings and durations to a tenth of a millisecond (a real clock
 * reads `1796519528873.0452`); counts and ids are whole already.
 */
function readableNumber(_key: string, value: unknown): unknown {
  return typeof value === "number" ? roundMs(value) : value;
}

/** Where a process's socket is: in the temporary directory, named by its pid. */
export function inspectSocketPath(tmpdir: string, pid: number): string {
  return `${tmpdir}/keel-inspect-${pid}.sock`;
}

/**
 * Opens the socket (mode 0600: only the process's user may ask) and returns what closes it and
 * removes the file. Node modules are loaded here, on demand, so the barrel stays loadable where
 * there is no `node:net`.
 */
export async function openInspectSocket(task: TaskImpl<unknown>): Promise<() => void> {
  const [net, fs, os] = await Promise.all([import("node:net"), import("node:fs"), import("node:os")]);
  const path = inspectSocketPath(os.tmpdir(), process.pid);
  // A socket left by an earlier process with this pid (killed before it could remove it).
  fs.rmSync(path, { force: true });
  const server = net.createServer((socket) => {
    let asked = "";
    socket.setEncoding("utf8");
    socket.on("error", () => {});
    socket.on("data", (chunk: string) => {
      asked += chunk;
      if (!asked.includes("\n")) return;
      // Read at each question: roots come and go while the process runs.
      const roots = [task, ...otherLiveRoots(task)].map((root) => snapshot(root));
      void renderSections().then((sections) =>
        socket.end(
          asked.startsWith("json")
            ? `${JSON.stringify([...roots, ...sections.map(({ title, data }) => ({ section: title, data }))], readableNumber)}\n`
            : `${[...roots.map((s) => formatTaskTree(s)), ...sections.map(({ title, text }) => `== ${title} ==\n${text}`)].join("\n")}\n`,
        ),
      );
    });
  });
  // Never what keeps the process alive.
  server.unref();
  const listening = new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    // The file is made by the synchronous bind inside `listen`: under this umask it is never
    // readable by others, not even for the moment before the chmod.
    const previousUmask = process.umask(0o177);
    try {
      server.listen(path, () => resolve());
    } finally {
      process.umask(previousUmask);
    }
  });
  await listening;
  fs.chmodSync(path, 0o600);
  const remove = () => fs.rmSync(path, { force: true });
  // `process.exit` skips the close below: the file goes anyway.
  process.once("exit", remove);
  return () => {
    process.off("exit", remove);
    server.close();
    remove();
  };
}
