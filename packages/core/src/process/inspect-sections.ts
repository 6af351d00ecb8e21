/**
 * Sections that packages add to `keel-inspect`'s answer, after the task trees: what a process knows
 * that is not a task (a workflow engine's executions, parked ones included, by status). Each is
 * rendered when asked, bounded in time: a section that does not answer within 2 s says so.
 * @module
 */
import { invalidType } from "../errors.js";
import { hostTimers } from "../kernel/host.js";

/**
 * What a section renders: its text for people, and its data for `keel-inspect --json`.
 *
 * @example
 * ```ts
 * import type { InspectSectionContent } from "@keel/core";
 * const content: InspectSectionContent = { text: "queue depth: 3", data: { depth: 3 } };
 * console.log(content.text); // queue depth: 3
 * ```
 */
export interface InspectSectionContent {
  readonly text: string;
  readonly data: unknown;
}

interface Section {
  readonly title: string;
  readonly render: () => Promise<InspectSectionContent> | InspectSectionContent;
}

const sections = new Set<Section>();

/**
 * Adds a section to this process's `keel-inspect` answer (see `main`'s `inspect`); returns what
 * removes it. `render` is called at each question.
 *
 * @example
 * ```ts
 * import { addInspectSection } from "@keel/core";
 * const remove = addInspectSection("cache", () => ({ text: "entries: 42", data: { entries: 42 } }));
 * remove();
 * console.log(typeof remove); // function
 * ```
 */
export function addInspectSection(
  title: string,
  render: () => Promise<InspectSectionContent> | InspectSectionContent,
): () => void {
  if (typeof title !== "string" || title.length === 0)
    throw invalidType("addInspectSection(title)", "a non-empty string", title);
  if (typeof render !== "function")
    throw invalidType("addInspectSection(title, render)", "a function", render);
  const section: Section = { title, render };
  sections.add(section);
  return () => {
    sections.delete(section);
  };
}

/** @internal Every section, rendered (each bounded by `limitMs`; a failure is its text). */
export async function renderSections(
  limitMs = 2_000,
): Promise<{ title: string; text: string; data: unknown }[]> {
  return Promise.all(
    [...sections].map(async ({ title, render }) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      try {
        const late = new Promise<never>((_, reject) => {
          timer = hostTimers.setTimeout(() => reject(new Error(`no answer within ${limitMs} ms`)), limitMs);
        });
        const content = await Promise.race([Promise.resolve().then(render), late]);
        return { title, text: content.text, data: content.data };
      } catch (e) {
        const message = e instanceof Error ? e.message : String(e);
        return { title, text: `(failed: ${message})`, data: { error: message } };
      } finally {
        hostTimers.clearTimeout(timer);
      }
    }),
  );
}
