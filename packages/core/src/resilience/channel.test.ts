import {
  type Channel,
  ChannelClosedError,
  createChannel,
  isKeelError,
  sleep,
  snapshot,
  type Task,
  TaskCancelledError,
  TimeoutError,
  timeout,
} from "@keel/core";
import { createHarness, type Harness } from "@keel/testing";
import { describe, expect, it } from "vitest";
import { rejection } from "../../test/support/errors.js";

/** The channel's books in one string. */
function books(ch: Channel<unknown>): string {
  return `size ${ch.size}, senders ${ch.waiting.senders}, receivers ${ch.waiting.receivers}`;
}

/** A root task that sleeps `at`, sends `value` and logs when the send returned. */
function senderAt<T>(h: Harness, ch: Channel<T>, at: number, value: T): Task<void> {
  return h.run(function* sender() {
    yield* sleep(at);
    yield* ch.send(value);
    h.mark(`sent ${String(value)}`);
  });
}

/** A root task that sleeps `at`, receives one value and logs it. */
function receiverAt<T>(h: Harness, ch: Channel<T>, at: number, who: string): Task<T> {
  return h.run(
    function* receiver() {
      yield* sleep(at);
      const v = yield* ch.receive();
      h.mark(`${who} got ${String(v)}`);
      return v;
    },
    { name: who },
  );
}

/** Calls `fn` at virtual time `at` and records `books(ch)` as `text@at`. */
function probeAt(h: Harness, ch: Channel<unknown>, at: number, into: string[]): void {
  h.clock.schedule(at, () => into.push(`${books(ch)}@${at}`));
}

describe("createChannel", () => {
  it("send, next, receive and close work detached from their channel", async () => {
    const h = createHarness();
    const ch = createChannel<number>({ capacity: 2 });
    const { send, next, receive, close } = ch;
    const got = await h.run(function* () {
      for (const op of [1, 2].map(send)) yield* op;
      close();
      const first = yield* receive();
      const second = yield* next();
      const third = yield* next();
      return [first, second, third];
    });
    expect(got).toEqual([1, { done: false, value: 2 }, { done: true, value: undefined }]);
    await h.expectClean();
  });

  describe("backpressure", () => {
    it("send suspends while the channel is full and returns when a receiver makes room", async () => {
      const h = createHarness();
      const ch = createChannel<number>({ capacity: 2 });
      const probes: string[] = [];
      const producer = h.run(function* producer() {
        for (let i = 1; i <= 4; i++) {
          yield* ch.send(i);
          h.mark(`sent ${i}`);
        }
      });
      const consumer = h.run(function* consumer() {
        yield* sleep(100);
        for (let i = 0; i < 4; i++) {
          h.mark(`got ${yield* ch.receive()}`);
          yield* sleep(50);
        }
      });
      probeAt(h, ch, 50, probes);

      await Promise.all([producer, consumer]);
      expect(h.log).toEqual([
        "sent 1@0",
        "sent 2@0",
        "got 1@100",
        "sent 3@100",
        "got 2@150",
        "sent 4@150",
        "got 3@200",
        "got 4@250",
      ]);
      expect(probes).toEqual(["size 2, senders 1, receivers 0@50"]);
      expect(books(ch)).toBe("size 0, senders 0, receivers 0");
      await h.expectClean();
    });

    it("a waiting sender's task-tree entry says the channel is full", async () => {
      const h = createHarness();
      const ch = createChannel<string>({ capacity: 1, name: "jobs" });
      const first = senderAt(h, ch, 0, "a");
      const second = senderAt(h, ch, 10, "b");
      let waitingOn: string | null = null;
      h.clock.schedule(50, () => {
        waitingOn = snapshot(second).waitingOn;
      });
      const drain = receiverAt(h, ch, 100, "R1");
      const drain2 = receiverAt(h, ch, 110, "R2");

      await Promise.all([first, second, drain, drain2]);
      expect(waitingOn).toBe("jobs: send, full (1/1, 1 sending)");
      expect(h.log).toEqual(["sent a@0", "R1 got a@100", "sent b@100", "R2 got b@110"]);
      await h.expectClean();
    });
  });

  describe("order", () => {
    it("values come out in the order they were sent, waiting senders included", async () => {
      const h = createHarness();
      const ch = createChannel<string>({ capacity: 1 });
      const senders = [
        senderAt(h, ch, 0, "x"),
        senderAt(h, ch, 10, "a"),
        senderAt(h, ch, 20, "b"),
        senderAt(h, ch, 30, "c"),
      ];
      const got: string[] = [];
      const consumer = h.run(function* consumer() {
        yield* sleep(100);
        for (let i = 0; i < 4; i++) got.push(yield* ch.receive());
      });

      await Promise.all([...senders, consumer]);
      expect(got).toEqual(["x", "a", "b", "c"]);
      expect(h.log).toEqual(["sent x@0", "sent a@100", "sent b@100", "sent c@100"]);
      expect(books(ch)).toBe("size 0, senders 0, receivers 0");
      await h.expectClean();
    });

    it("waiting receivers are served in the order they arrived", async () => {
      const h = createHarness();
      const ch = createChannel<number>({ capacity: 1 });
      const receivers = [
        receiverAt(h, ch, 0, "R1"),
        receiverAt(h, ch, 10, "R2"),
        receiverAt(h, ch, 20, "R3"),
      ];
      const probes: string[] = [];
      probeAt(h, ch, 50, probes);
      const producer = h.run(function* producer() {
        yield* sleep(100);
        for (const v of [1, 2, 3]) yield* ch.send(v);
      });

      expect(await Promise.all(receivers)).toEqual([1, 2, 3]);
      await producer;
      expect(probes).toEqual(["size 0, senders 0, receivers 3@50"]);
      expect(h.log).toEqual(["R1 got 1@100", "R2 got 2@100", "R3 got 3@100"]);
      await h.expectClean();
    });

    it("a pipeline of sends and next() delivers every value once, in order", async () => {
      const h = createHarness();
      const ch = createChannel<number>({ capacity: 2 });
      const received = await h.run(function* pipeline() {
        const producer = h.run(function* producer() {
          for (let i = 1; i <= 5; i++) {
            yield* ch.send(i);
            yield* sleep(i % 2 === 0 ? 10 : 0);
          }
          ch.close();
        });
        const values: number[] = [];
        for (let r = yield* ch.next(); !r.done; r = yield* ch.next()) values.push(r.value);
        yield* producer;
        return values;
      });

      expect(received).toEqual([1, 2, 3, 4, 5]);
      expect(h.clock.now()).toBe(20);
      await h.expectClean();
    });
  });

  describe("close", () => {
    it("buffered values are still received after close, then next() gives done and receive() throws", async () => {
      const h = createHarness();
      const ch = createChannel<string>({ capacity: 3 });
      const seen: unknown[] = [];
      let caught: unknown;
      await h.run(function* user() {
        yield* ch.send("a");
        yield* ch.send("b");
        ch.close();
        seen.push(ch.closed);
        seen.push(yield* ch.receive());
        seen.push(yield* ch.next());
        seen.push(yield* ch.next());
        seen.push(yield* ch.next());
        try {
          yield* ch.receive();
        } catch (e) {
          caught = e;
        }
      });

      expect(seen).toEqual([
        true,
        "a",
        { done: false, value: "b" },
        { done: true, value: undefined },
        { done: true, value: undefined },
      ]);
      expect(caught).toBeInstanceOf(ChannelClosedError);
      expect((caught as ChannelClosedError).code).toBe("KEEL_CHANNEL_CLOSED");
      await h.expectClean();
    });

    it("close fails waiting senders with ChannelClosedError, and a later send fails at once", async () => {
      const h = createHarness();
      const ch = createChannel<string>({ capacity: 1 });
      const first = senderAt(h, ch, 0, "kept");
      const blocked = [senderAt(h, ch, 10, "b1"), senderAt(h, ch, 20, "b2")];
      const probes: string[] = [];
      probeAt(h, ch, 30, probes);
      h.clock.schedule(50, () => ch.close());
      const late = senderAt(h, ch, 60, "late");
      const drained: unknown[] = [];
      const drainer = h.run(function* drainer() {
        yield* sleep(100);
        drained.push(yield* ch.next());
        drained.push(yield* ch.next());
      });

      await first;
      const errors = await Promise.all([...blocked, late].map(rejection));
      await drainer;
      for (const e of errors) {
        expect(e).toBeInstanceOf(ChannelClosedError);
        expect(isKeelError(e) && e.code).toBe("KEEL_CHANNEL_CLOSED");
      }
      expect(probes).toEqual(["size 1, senders 2, receivers 0@30"]);
      expect(
        h
          .eventsOf("task:settle")
          .filter((e) => e.state === "failed")
          .map((e) => e.at),
      ).toEqual([50, 50, 60]);
      expect(drained).toEqual([
        { done: false, value: "kept" },
        { done: true, value: undefined },
      ]);
      expect(h.log).toEqual(["sent kept@0"]);
      expect(books(ch)).toBe("size 0, senders 0, receivers 0");
      await h.expectClean();
    });

    it("close wakes waiting receivers: next() with done, receive() with ChannelClosedError", async () => {
      const h = createHarness();
      const ch = createChannel<number>({ capacity: 1 });
      const nexts: unknown[] = [];
      const nexter = h.run(function* nexter() {
        nexts.push(yield* ch.next());
        h.mark("next returned");
      });
      const receiver = receiverAt(h, ch, 10, "R");
      h.clock.schedule(40, () => {
        ch.close();
        ch.close();
      });

      await nexter;
      expect(await rejection(receiver)).toBeInstanceOf(ChannelClosedError);
      expect(nexts).toEqual([{ done: true, value: undefined }]);
      expect(h.log).toEqual(["next returned@40"]);
      expect(h.eventsOf("task:settle").find((e) => e.taskId === receiver.id)?.at).toBe(40);
      expect(books(ch)).toBe("size 0, senders 0, receivers 0");
      await h.expectClean();
    });
  });

  describe("cancellation", () => {
    it("a value handed to a receiver cancelled in the same instant goes to the next receiver", async () => {
      const h = createHarness();
      const ch = createChannel<string>({ capacity: 1 });
      const r1 = receiverAt(h, ch, 0, "R1");
      const r2 = receiverAt(h, ch, 10, "R2");
      const producer = h.run(function* producer() {
        yield* sleep(100);
        yield* ch.send("v");
        void r1.cancel();
      });

      expect(await rejection(r1)).toBeInstanceOf(TaskCancelledError);
      expect(await r2).toBe("v");
      await producer;
      expect(h.log).toEqual(["R2 got v@100"]);
      expect(books(ch)).toBe("size 0, senders 0, receivers 0");
      await h.expectClean();
    });

    it("values stay in order when a value handed to a cancelled receiver goes back", async () => {
      const h = createHarness();
      const ch = createChannel<string>({ capacity: 1 });
      const r1 = receiverAt(h, ch, 0, "R1");
      const got: string[] = [];
      const r2 = h.run(function* R2() {
        yield* sleep(10);
        got.push(`${yield* ch.receive()}@${h.clock.now()}`);
        got.push(`${yield* ch.receive()}@${h.clock.now()}`);
      });
      const producer = h.run(function* producer() {
        yield* sleep(100);
        yield* ch.send("v");
        void r1.cancel();
        yield* ch.send("w");
      });

      expect(await rejection(r1)).toBeInstanceOf(TaskCancelledError);
      await Promise.all([r2, producer]);
      // "v" was sent first, so it must come out first: "Values come out in order".
      expect(got).toEqual(["v@100", "w@100"]);
      expect(books(ch)).toBe("size 0, senders 0, receivers 0");
      await h.expectClean();
    });

    it("a value put back by a cancelled receiver never overfills the buffer", async () => {
      const h = createHarness();
      const ch = createChannel<string>({ capacity: 1 });
      const r1 = receiverAt(h, ch, 0, "R1");
      const sizes: string[] = [];
      const producer = h.run(function* producer() {
        yield* sleep(100);
        yield* ch.send("v");
        void r1.cancel();
        yield* ch.send("w");
      });
      // Reads at the end of instant 100, once R1 has unwound.
      const probe = h.run(function* probe() {
        yield* sleep(100);
        yield* sleep(0);
        sizes.push(`size ${ch.size} of ${ch.capacity}@${h.clock.now()}`);
      });
      const got: string[] = [];
      const consumer = h.run(function* consumer() {
        yield* sleep(200);
        got.push(yield* ch.receive());
        got.push(yield* ch.receive());
      });

      expect(await rejection(r1)).toBeInstanceOf(TaskCancelledError);
      await Promise.all([producer, probe, consumer]);
      expect(sizes).toEqual(["size 1 of 1@100"]);
      expect(got).toEqual(["v", "w"]);
      expect(books(ch)).toBe("size 0, senders 0, receivers 0");
      await h.expectClean();
    });

    it("a value handed to the only receiver, cancelled in the same instant, stays in the buffer", async () => {
      const h = createHarness();
      const ch = createChannel<string>({ capacity: 1 });
      const r1 = receiverAt(h, ch, 0, "R1");
      const seen: string[] = [];
      const producer = h.run(function* producer() {
        yield* sleep(100);
        yield* ch.send("v");
        void r1.cancel();
      });
      const later = h.run(function* later() {
        yield* sleep(200);
        seen.push(`before: ${books(ch)}`);
        seen.push(`got ${yield* ch.receive()}`);
      });

      expect(await rejection(r1)).toBeInstanceOf(TaskCancelledError);
      await Promise.all([producer, later]);
      expect(seen).toEqual(["before: size 1, senders 0, receivers 0", "got v"]);
      expect(books(ch)).toBe("size 0, senders 0, receivers 0");
      await h.expectClean();
    });

    it("a cancelled waiting sender leaves the queue at once and its value is never delivered", async () => {
      const h = createHarness();
      const ch = createChannel<string>({ capacity: 1 });
      const first = senderAt(h, ch, 0, "a");
      const cancelled = senderAt(h, ch, 10, "dropped");
      const third = senderAt(h, ch, 20, "c");
      const probes: string[] = [];
      probeAt(h, ch, 30, probes);
      h.clock.schedule(40, () => void cancelled.cancel());
      probeAt(h, ch, 41, probes);
      const got: string[] = [];
      const consumer = h.run(function* consumer() {
        yield* sleep(100);
        got.push(yield* ch.receive());
        got.push(yield* ch.receive());
        ch.close();
        const r = yield* ch.next();
        got.push(r.done ? "done" : r.value);
      });

      expect(await rejection(cancelled)).toBeInstanceOf(TaskCancelledError);
      await Promise.all([first, third, consumer]);
      expect(probes).toEqual(["size 1, senders 2, receivers 0@30", "size 1, senders 1, receivers 0@41"]);
      expect(got).toEqual(["a", "c", "done"]);
      expect(books(ch)).toBe("size 0, senders 0, receivers 0");
      await h.expectClean();
    });

    it("a cancelled waiting receiver leaves the queue at once", async () => {
      const h = createHarness();
      const ch = createChannel<number>({ capacity: 1 });
      const r1 = receiverAt(h, ch, 0, "R1");
      const r2 = receiverAt(h, ch, 10, "R2");
      const probes: string[] = [];
      probeAt(h, ch, 20, probes);
      h.clock.schedule(30, () => void r1.cancel());
      probeAt(h, ch, 31, probes);
      const producer = senderAt(h, ch, 50, 7);

      expect(await rejection(r1)).toBeInstanceOf(TaskCancelledError);
      expect(await r2).toBe(7);
      await producer;
      expect(probes).toEqual(["size 0, senders 0, receivers 2@20", "size 0, senders 0, receivers 1@31"]);
      expect(new Set(h.log)).toEqual(new Set(["R2 got 7@50", "sent 7@50"]));
      await h.expectClean();
    });

    it("an enclosing timeout bounds a send into a full channel and a receive from an empty one", async () => {
      const h = createHarness();
      const ch = createChannel<string>({ capacity: 1 });
      const outcomes: string[] = [];
      await h.run(function* user() {
        yield* ch.send("fill");
        try {
          yield* timeout(30, ch.send("no room"));
        } catch (e) {
          if (!(e instanceof TimeoutError)) throw e;
          outcomes.push(`send timed out after ${e.timeoutMs}@${h.clock.now()}: ${books(ch)}`);
        }
        yield* ch.receive();
        try {
          yield* timeout(40, ch.receive());
        } catch (e) {
          if (!(e instanceof TimeoutError)) throw e;
          outcomes.push(`receive timed out after ${e.timeoutMs}@${h.clock.now()}: ${books(ch)}`);
        }
      });

      expect(outcomes).toEqual([
        "send timed out after 30@30: size 1, senders 0, receivers 0",
        "receive timed out after 40@70: size 0, senders 0, receivers 0",
      ]);
      await h.expectClean();
    });
  });

  describe("bad input", () => {
    it.each([0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, "2", undefined])(
      "capacity %s is a RangeError naming capacity",
      (capacity) => {
        const make = () => createChannel({ capacity: capacity as number });
        expect(make).toThrow(RangeError);
        expect(make).toThrow(/capacity/);
        expect(make).toThrow(expect.objectContaining({ code: "KEEL_INVALID_ARGUMENT" }));
      },
    );

    it("a missing options object is a RangeError naming capacity", () => {
      const make = () => createChannel(undefined as never);
      expect(make).toThrow(RangeError);
      expect(make).toThrow(/capacity/);
    });
  });
});
