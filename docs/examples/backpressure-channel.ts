/**
 * A bounded channel between a fast producer and a slow consumer: `send` suspends while the buffer is
 * full, so the producer runs at the consumer's pace and memory stays bounded by `capacity`. `close()`
 * ends the stream: buffered values are still delivered, waiting senders fail.
 */
import assert from "node:assert/strict";
import {
  all,
  ChannelClosedError,
  createChannel,
  formatTaskTree,
  run,
  sleep,
  snapshot,
  type Task,
} from "@keel/core";
import { createVirtualClock } from "@keel/testing";

// 1. Capacity 2. The producer could emit five jobs at once; the consumer takes 100 ms per job. The
//    producer gets two jobs ahead (three once the consumer has taken the first) and then waits.
{
  const clock = createVirtualClock();
  const jobs = createChannel<number>({ capacity: 2, name: "jobs" });
  const log: string[] = [];
  let tree = "";
  const pipeline: Task<unknown> = run(
    () =>
      all([
        function* producer() {
          for (let n = 1; n <= 5; n++) {
            yield* jobs.send(n);
            log.push(`sent ${n}@${clock.now()} (buffered ${jobs.size})`);
          }
          jobs.close();
        },
        function* consumer() {
          for (let r = yield* jobs.next(); !r.done; r = yield* jobs.next()) {
            log.push(`took ${r.value}@${clock.now()}`);
            yield* sleep(100);
          }
          log.push(`drained@${clock.now()}`);
        },
        function* inspector() {
          yield* sleep(50);
          tree = formatTaskTree(snapshot(pipeline));
        },
      ]),
    { clock },
  );
  await pipeline;
  console.log(log.join("\n"));
  assert.deepEqual(log, [
    "sent 1@0 (buffered 1)",
    "sent 2@0 (buffered 2)",
    "took 1@0",
    "sent 3@0 (buffered 2)",
    "took 2@100",
    "sent 4@100 (buffered 2)",
    "took 3@200",
    "sent 5@200 (buffered 2)",
    "took 4@300",
    "took 5@400",
    "drained@500",
  ]);
  // At 50 the producer is suspended in send(4): the task tree says so.
  console.log(tree);
  assert.match(tree, /producer#\d+ .*waiting on jobs: send, full \(2\/2, 1 sending\)/);
}

// 2. After close(): a send fails at once, a waiting sender fails, buffered values are still received,
//    and `receive()` on a closed, drained channel throws (`next()` returns `{ done: true }` instead).
{
  const clock = createVirtualClock();
  const ch = createChannel<string>({ capacity: 1, name: "events" });
  const log: string[] = [];
  await run(
    () =>
      all([
        function* sender() {
          yield* ch.send("first");
          try {
            yield* ch.send("second"); // the buffer is full: waits
          } catch (e) {
            assert.ok(e instanceof ChannelClosedError);
            log.push(`waiting sender: ${e.code}@${clock.now()}`);
          }
        },
        function* closer() {
          yield* sleep(10);
          ch.close();
          log.push(`received ${yield* ch.receive()}@${clock.now()}`);
          const end = yield* ch.next();
          log.push(`next() after the last value: done ${end.done}`);
          try {
            yield* ch.send("late");
          } catch (e) {
            log.push(`send after close: ${(e as Error).message}`);
          }
        },
      ]),
    { clock },
  );
  console.log(log.join("\n"));
  assert.deepEqual(log, [
    "received first@10",
    "next() after the last value: done true",
    "send after close: events.send(): the channel is closed",
    "waiting sender: KEEL_CHANNEL_CLOSED@10",
  ]);
}
console.log("backpressure-channel: ok");
