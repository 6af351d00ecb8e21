import { run, spawn, type Task, until } from "@keel/core";

function* child() {
  return 1;
}
const t0 = performance.now();
await run(function* parent() {
  const tasks: Task<number>[] = [];
  for (let i = 0; i < 100000; i++) tasks.push(yield* spawn(child));
  for (const task of tasks) yield* task;
});
const t1 = performance.now();
await run(function* microtasks() {
  for (let i = 0; i < 100000; i++) yield* until(Promise.resolve(i));
});
const t2 = performance.now();
console.log("spawnJoin", Math.round(t1 - t0), "micro", Math.round(t2 - t1));
