/**
 * Hot loops: four ways to spawn a child per item give the same results; the shared-body forms skip
 * the cost V8 puts on a new generator function per child (see the guide's performance page).
 */
import assert from "node:assert/strict";
import { run, spawn, type Task } from "@keel/core";

const items = Array.from({ length: 2_000 }, (_, i) => i);

// Made once, at module level: every child's generator object shares one hidden class.
function* double(item: number) {
  return item * 2;
}

function* fanOut(spawnOne: (item: number) => ReturnType<typeof spawn<number>>) {
  const tasks: Task<number>[] = [];
  for (const item of items) tasks.push(yield* spawnOne(item));
  let sum = 0;
  for (const task of tasks) sum += yield* task;
  return sum;
}

const expected = items.reduce((sum, item) => sum + item * 2, 0);

// 1. A closure per child: what most code writes; fine outside hot loops.
const closures = await run(() =>
  fanOut((item) =>
    spawn(function* doubleOne() {
      return item * 2;
    }),
  ),
);

// 2. The shared body's generator object: no new function per child.
const generators = await run(() => fanOut((item) => spawn(double(item))));

// 3. An arrow that calls the shared body: the arrow is new, the generator's class is shared.
const arrows = await run(() => fanOut((item) => spawn(() => double(item))));

assert.deepEqual([closures, generators, arrows], [expected, expected, expected]);
console.log("same result, three forms:", expected);
