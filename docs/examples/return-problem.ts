/**
 * Why Keel does not stop generators with `iterator.return()`: plain JavaScript, no Keel.
 *
 * A `finally` that yields inside a `yield*`-delegated generator swallows the return: once that
 * `finally` finishes, the outer generator carries on after the `yield*` as if nothing happened.
 * A thrown signal keeps its pending completion through every frame.
 */
import assert from "node:assert/strict";

function* inner(log: string[]) {
  try {
    yield "waiting";
  } finally {
    yield "async cleanup step"; // e.g. `yield* flush()` in a runtime built on generators
    log.push("inner cleanup done");
  }
}

function* outer(log: string[]) {
  yield* inner(log);
  log.push("outer went on after yield*"); // must never run once the task is stopped
  yield "more work";
}

// Stopping with return(): the outer frame resumes normal code.
{
  const log: string[] = [];
  const it = outer(log);
  it.next(); // suspended at "waiting"
  assert.deepEqual(it.return(undefined), { value: "async cleanup step", done: false });
  assert.deepEqual(it.next(), { value: "more work", done: false }); // the stop was lost
  assert.deepEqual(log, ["inner cleanup done", "outer went on after yield*"]);
}

// Stopping with throw(signal): the signal survives the yielding finally and reaches the caller.
{
  const log: string[] = [];
  const it = outer(log);
  const stop = { stop: true };
  it.next();
  assert.deepEqual(it.throw(stop), { value: "async cleanup step", done: false });
  assert.throws(
    () => it.next(),
    (e) => e === stop,
  );
  assert.deepEqual(log, ["inner cleanup done"]);
}
console.log("return-problem: ok");
