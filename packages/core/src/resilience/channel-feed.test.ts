/** Feeding a channel from callback code (`trySend`) and from an iterable (`feed`). */
import {
  ChannelClosedError,
  createChannel,
  feed,
  sleep,
  spawn,
  suspend,
  TaskCancelledError,
} from "@keel/core";
import { createHarness } from "@keel/testing";
import { describe, expect, it } from "vitest";

/** 0, 1, 2, … forever, logging when it is closed. */
function* endless(log: string[]): Generator<number> {
  try {
    for (let n = 0; ; n++) yield n;
  } finally {
    log.push("source closed");
  }
}

describe("channel.trySend", () => {
  it("takes values while there is room and says false when full, without waiting", () => {
    const ch = createChannel<number>({ capacity: 2 });
    expect([ch.trySend(1), ch.trySend(2), ch.trySend(3)]).toEqual([true, true, false]);
    expect(ch.size).toBe(2);
  });

  it("called from callback code outside any task, wakes a waiting receiver", async () => {
    const h = createHarness();
    const ch = createChannel<string>({ capacity: 1 });
    const consumer = h.run(function* consumer() {
      const got: string[] = [];
      for (let r = yield* ch.next(); !r.done; r = yield* ch.next()) got.push(`${r.value}@${h.clock.now()}`);
      return got;
    });
    const taken: boolean[] = [];
    h.clock.schedule(10, () => taken.push(ch.trySend("a")));
    h.clock.schedule(20, () => {
      taken.push(ch.trySend("b"), ch.trySend("c"));
      ch.close();
    });

    expect(await consumer).toEqual(["a@10", "b@20"]);
    expect(taken).toEqual([true, true, false]);
    await h.expectClean();
  });

  it("says false while senders queue, so it never jumps ahead of them", async () => {
    const h = createHarness();
    const ch = createChannel<string>({ capacity: 1 });
    const seen: string[] = [];
    await h.run(function* () {
      yield* ch.send("first");
      yield* spawn(() => ch.send("queued"));
      yield* sleep(1);
      seen.push(`trySend while one queues: ${ch.trySend("jumper")}`);
      seen.push((yield* ch.receive()) as string);
      yield* sleep(1);
      seen.push((yield* ch.receive()) as string);
    });
    expect(seen).toEqual(["trySend while one queues: false", "first", "queued"]);
    await h.expectClean();
  });

  it("throws KEEL_CHANNEL_CLOSED once closed, as send does", () => {
    const ch = createChannel<number>({ name: "jobs", capacity: 1 });
    ch.close();
    expect(() => ch.trySend(1)).toThrow(ChannelClosedError);
    expect(() => ch.trySend(1)).toThrow("jobs.trySend(): the channel is closed");
  });
});

describe("feed", () => {
  it("pipes an async generator with backpressure: it reads no further ahead than the channel holds", async () => {
    const h = createHarness();
    const ch = createChannel<number>({ capacity: 2 });
    let pulled = 0;
    let received = 0;
    let maxAhead = 0;
    async function* numbers(): AsyncGenerator<number> {
      for (let n = 1; n <= 10; n++) {
        pulled++;
        maxAhead = Math.max(maxAhead, pulled - received);
        yield n;
      }
    }
    const result = await h.run(function* () {
      const producer = yield* spawn(() => feed(ch, numbers()));
      let sum = 0;
      for (let r = yield* ch.next(); !r.done; r = yield* ch.next()) {
        received++;
        yield* sleep(5);
        sum += r.value;
      }
      return { sum, sent: yield* producer };
    });

    expect(result).toEqual({ sum: 55, sent: 10 });
    expect(maxAhead).toBe(3); // the channel's 2, and the one the feed holds while it waits for room
    expect(ch.closed).toBe(true);
    await h.expectClean();
  });

  it("with close: false leaves the channel open for other producers", async () => {
    const h = createHarness();
    const ch = createChannel<string>({ capacity: 5 });
    const sent = await h.run(() => feed(ch, new Set(["a", "b"]), { close: false }));
    expect(sent).toBe(2);
    expect(ch.closed).toBe(false);
    expect(ch.size).toBe(2);
    await h.expectClean();
  });

  it("stops quietly when the consumer closes the channel, and closes the source", async () => {
    const h = createHarness();
    const ch = createChannel<number>({ capacity: 1 });
    const log: string[] = [];
    const result = await h.run(function* () {
      const producer = yield* spawn(() => feed(ch, endless(log)));
      const taken = [yield* ch.receive(), yield* ch.receive(), yield* ch.receive()];
      ch.close();
      return { taken, sent: yield* producer };
    });

    expect(result.taken).toEqual([0, 1, 2]);
    expect(result.sent).toBe(4); // 3 taken, 1 left in the buffer when the consumer closed
    expect(log).toEqual(["source closed"]);
    await h.expectClean();
  });

  it("a source that fails fails the feed and leaves the channel open: a broken stream is not a finished one", async () => {
    const h = createHarness();
    const ch = createChannel<number>({ capacity: 5 });
    const broken = new Error("the socket reset");
    async function* lines(): AsyncGenerator<number> {
      yield 1;
      throw broken;
    }
    const task = h.run(() => feed(ch, lines()));
    await expect(task).rejects.toBe(broken);
    expect(ch.closed).toBe(false);
    expect(ch.size).toBe(1);
    await h.expectClean();
  });

  it("cancelled while it waits for room, it closes the source and leaves the channel open", async () => {
    const h = createHarness();
    const ch = createChannel<number>({ capacity: 1 });
    const log: string[] = [];
    const task = h.run(() => feed(ch, endless(log)));
    h.clock.schedule(10, () => void task.cancel());

    await expect(task).rejects.toBeInstanceOf(TaskCancelledError);
    expect(log).toEqual(["source closed"]);
    expect(ch.closed).toBe(false);
    expect(ch.waiting.senders).toBe(0);
    await h.expectClean();
  });

  it("rejects a channel, items or options of the wrong kind, naming them", () => {
    const ch = createChannel<number>({ capacity: 1 });
    expect(() => feed({} as never, [1])).toThrow(/^feed\(channel\): expected a channel/);
    expect(() => feed(ch, 42 as never)).toThrow(
      /^feed\(channel, items\): expected an iterable or an async iterable/,
    );
    expect(() => feed(ch, [1], { close: "yes" as never })).toThrow(
      /^feed\(channel, items, \{ close \}\): expected a boolean/,
    );
    expect(() => feed(ch, [1], suspend as never)).toThrow(
      /^feed\(channel, items, options\): expected an object/,
    );
  });
});
