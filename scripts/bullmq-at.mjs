/**
 * `node --import ./scripts/bullmq-at.mjs`: resolves `bullmq` (and its subpaths) from the folder
 * KEEL_BULLMQ_DIR (a project with another bullmq installed) instead of the repository's, in this
 * process and, through NODE_OPTIONS, in the worker processes the tests start. Used by
 * scripts/bullmq5.sh; vitest.bullmq5.config.ts does the same for the modules vitest resolves itself.
 */
import { register } from "node:module";
import { pathToFileURL } from "node:url";
import { isMainThread } from "node:worker_threads";

const dir = process.env.KEEL_BULLMQ_DIR;
if (!dir)
  throw new Error("scripts/bullmq-at.mjs: set KEEL_BULLMQ_DIR to a folder whose node_modules has bullmq");
const parentURL = pathToFileURL(`${dir}/package.json`).href;

/** The resolve hook (run in the hooks thread): `bullmq` as if imported from KEEL_BULLMQ_DIR. */
export async function resolve(specifier, context, next) {
  if (specifier === "bullmq" || specifier.startsWith("bullmq/"))
    return next(specifier, { ...context, parentURL });
  return next(specifier, context);
}

if (isMainThread) register(import.meta.url);
