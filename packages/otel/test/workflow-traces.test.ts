/**
 * One trace per workflow execution: a `workflow <name>` span per run of the body (claimed, then
 * parked, ended, handed back or lost), a `step <key>` span per step under the run that ran or
 * replayed it, and a trace id derived from the execution's id, so that every run of it (in any
 * process) lands in one trace. On the virtual clock, through `@keel/testing/workflow`.
 */
import { createHash } from "node:crypto";
import { constant, run, sleep } from "@keel/core";
import { workflowTraceId } from "@keel/otel";
import { createVirtualClock } from "@keel/testing";
import { testWorkflow } from "@keel/testing/workflow";
import {
  createMemoryStore,
  LeaseLostError,
  sleepFor,
  startWorkflowEngine,
  step,
  type WorkflowStore,
  workflow,
} from "@keel/workflow";
import { SpanStatusCode } from "@opentelemetry/api";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { describe, expect, it } from "vitest";
import { byName, idOf, parentOf, tree, useOtel } from "./support/otel.js";

const otel = useOtel();

const traceOf = (s: ReadableSpan) => s.spanContext().traceId;
const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");
/** Spans of the engine's own tasks and of the body's task, which must not exist. */
const MACHINERY = /^(workflowEngine|poller|lease|execution |workflow \S+ \S+$)/;

/** The run spans, oldest first, each with its step spans in start order. */
function runsOf(spans: ReadableSpan[], name: string) {
  const runs = byName(spans, `workflow ${name}`).sort(byStart);
  return runs.map((run) => ({
    run,
    steps: spans.filter((s) => parentOf(s) === idOf(run) && s.name.startsWith("step ")).sort(byStart),
  }));
}
const byStart = (a: ReadableSpan, b: ReadableSpan) =>
  a.startTime[0] - b.startTime[0] || a.startTime[1] - b.startTime[1];

describe("@keel/otel: one trace per workflow execution", () => {
  it("a workflow run to its end: a run span, a span per step under it (attempts, ok, error), what a step does under its step", async () => {
    let declines = 0;
    const order = workflow("order", function* (cents: number) {
      const charge = yield* step(
        "charge",
        function* chargeCard() {
          yield* sleep(5);
          if (declines++ === 0) throw new Error("card network busy");
          return `ch_${cents}`;
        },
        { retry: { attempts: 3, backoff: constant(10), retryOn: () => true } },
      );
      let reserved = "none";
      try {
        reserved = yield* step("reserve", function* () {
          throw new Error("out of stock");
        });
      } catch {}
      const receipt = yield* step("receipt", function* () {
        return `receipt for ${charge}`;
      });
      return { charge, reserved, receipt };
    });
    const r = await testWorkflow(order, 500, { id: "order-7" });
    expect(r.status).toBe("completed");

    const spans = otel.spans();
    expect(spans.filter((s) => MACHINERY.test(s.name)).map((s) => s.name)).toEqual([]);
    const [only, ...others] = runsOf(spans, "order");
    expect(others).toEqual([]);
    const { run, steps } = only!;
    // The trace is the execution's: its id derived from the execution's, its parent the
    // execution's stand-in (never exported), the same in every process.
    expect(traceOf(run)).toBe(sha256("order-7").slice(0, 32));
    expect(traceOf(run)).toBe(workflowTraceId("order-7"));
    expect(parentOf(run)).toBe(sha256("order-7").slice(32, 48));
    expect(run.attributes).toMatchObject({
      "keel.workflow.name": "order",
      "keel.workflow.execution.id": "order-7",
      "keel.workflow.run.replayed": 0,
      "keel.workflow.run.outcome": "complete",
    });
    expect(run.status.code).toBe(SpanStatusCode.UNSET);
    // Everything in the trace hangs from the run; nothing of the execution is outside it.
    const inTrace = spans.filter((s) => traceOf(s) === traceOf(run));
    expect(inTrace.every((s) => isUnder(spans, s, run))).toBe(true);
    expect(spans.filter((s) => isUnder(spans, s, run))).toHaveLength(inTrace.length);

    expect(steps.map((s) => s.name)).toEqual(["step charge#1", "step reserve#1", "step receipt#1"]);
    const [charge, reserve, receipt] = steps;
    expect(charge!.attributes).toMatchObject({
      "keel.workflow.step.key": "charge#1",
      "keel.workflow.step.attempts": 2,
      "keel.workflow.step.ok": true,
      "keel.workflow.step.replayed": false,
    });
    // The step's retry and its attempts hang from the step's span (the step's task has none).
    const underCharge = tree(spans, charge!).slice(1);
    expect(underCharge.some((line) => /attempt 2$/.test(line))).toBe(true);
    expect(byName(spans, "step charge#1")).toHaveLength(1);

    expect(reserve!.attributes).toMatchObject({
      "keel.workflow.step.attempts": 1,
      "keel.workflow.step.ok": false,
    });
    expect(reserve!.status).toEqual({ code: SpanStatusCode.ERROR, message: "out of stock" });
    expect(reserve!.events.find((e) => e.name === "exception")?.attributes?.["exception.message"]).toBe(
      "out of stock",
    );
    expect(receipt!.attributes["keel.workflow.step.ok"]).toBe(true);

    const points = await otel.metricPoints();
    const steps_ = points.get("keel.workflow.steps")!;
    const count = (outcome: string) =>
      steps_.find((p) => p.attributes["keel.workflow.step.outcome"] === outcome)?.value;
    expect([count("ok"), count("error"), count("replayed")]).toEqual([2, 1, undefined]);
    expect(points.get("keel.workflow.executions")).toEqual([
      { attributes: { "keel.workflow.name": "order", "keel.workflow.status": "completed" }, value: 1 },
    ]);
    expect(points.get("keel.workflow.step.duration")?.length).toBe(2);
  });

  it("crashed inside step 2 and replayed: both runs in one trace, step 1 replayed as a span of no duration, step 2 interrupted then run", async () => {
    const three = workflow("three", function* (x: number) {
      const a = yield* step("one", function* () {
        return x + 1;
      });
      const b = yield* step("two", function* () {
        yield* sleep(50);
        return a * 2;
      });
      return yield* step("three", function* () {
        return `${b}!`;
      });
    });
    const r = await testWorkflow(three, 4, { id: "three-1", crashAt: "step:two#1" });
    expect(r.result).toBe("10!");
    expect(r.ranAgain).toEqual(["two#1"]);

    const spans = otel.spans();
    expect(spans.filter((s) => MACHINERY.test(s.name)).map((s) => s.name)).toEqual([]);
    const runs = runsOf(spans, "three");
    expect(runs).toHaveLength(2);
    const [crashed, resumed] = runs as [(typeof runs)[0], (typeof runs)[0]];
    const traceId = workflowTraceId("three-1");
    for (const { run, steps } of runs) {
      expect(traceOf(run)).toBe(traceId);
      // Siblings under the execution's stand-in parent.
      expect(parentOf(run)).toBe(sha256("three-1").slice(32, 48));
      for (const s of steps) expect(traceOf(s)).toBe(traceId);
    }

    // The first "process" ran step one and died as step two's outcome was written (the kit's
    // crash: its engine's scope ends, handing the execution back): step two never reported an
    // end, and says so.
    expect(crashed.run.attributes).toMatchObject({
      "keel.workflow.run.replayed": 0,
      "keel.workflow.run.outcome": "hand-back",
    });
    expect(crashed.steps.map((s) => [s.name, s.attributes["keel.workflow.step.ok"]])).toEqual([
      ["step one#1", true],
      ["step two#1", undefined],
    ]);
    expect(crashed.steps[1]!.attributes).toMatchObject({
      "keel.workflow.step.interrupted": true,
      "keel.workflow.interrupted_by": expect.stringMatching(/handed back|claim was lost/),
    });

    // The second replayed step one (a span of no duration, marked) and ran two and three.
    expect(resumed.run.attributes).toMatchObject({
      "keel.workflow.run.replayed": 1,
      "keel.workflow.run.outcome": "complete",
    });
    expect(
      resumed.steps.map((s) => [
        s.name,
        s.attributes["keel.workflow.step.replayed"],
        s.attributes["keel.workflow.step.attempts"],
      ]),
    ).toEqual([
      ["step one#1", true, undefined],
      ["step two#1", false, 1],
      ["step three#1", false, 1],
    ]);
    const replayed = resumed.steps[0]!;
    expect(replayed.duration).toEqual([0, 0]);
    expect(replayed.attributes["keel.workflow.step.ok"]).toBe(true);

    const points = await otel.metricPoints();
    const outcomes = Object.fromEntries(
      points.get("keel.workflow.steps")!.map((p) => [p.attributes["keel.workflow.step.outcome"], p.value]),
    );
    // one (ran), two (ran in the resumed run: the crashed run's never ended), three; one replayed.
    expect(outcomes).toEqual({ ok: 3, replayed: 1 });
  });

  it("a parked execution: a run span per claim (parked, then ended), one trace", async () => {
    const reminder = workflow("reminder", function* () {
      yield* step("note", function* () {
        return "noted";
      });
      yield* sleepFor(3 * 24 * 3600_000);
      return yield* step("remind", function* () {
        return "reminded";
      });
    });
    const r = await testWorkflow(reminder, null, { id: "reminder-1" });
    expect(r.status).toBe("completed");
    const runs = runsOf(otel.spans(), "reminder");
    expect(runs.map(({ run }) => run.attributes["keel.workflow.run.outcome"])).toEqual(["park", "complete"]);
    expect(new Set(runs.map(({ run }) => traceOf(run)))).toEqual(new Set([workflowTraceId("reminder-1")]));
    expect(runs.map(({ steps }) => steps.map((s) => s.name))).toEqual([
      ["step note#1"],
      ["step note#1", "step remind#1"],
    ]);
    expect(runs[1]!.run.attributes["keel.workflow.run.replayed"]).toBe(2);
  });

  it("a run whose claim is lost mid-body: the run's span ends lost, in error; the step in flight ends interrupted", async () => {
    const memory = createMemoryStore();
    // Another process took the execution over as step b's outcome was written.
    const store: WorkflowStore = {
      ...memory,
      async append(id, lease, entries) {
        if (entries.some((e) => e.key === "step:b#1"))
          throw new LeaseLostError(id, lease.owner, lease.generation);
        return memory.append(id, lease, entries);
      },
    };
    const two = workflow("two", function* () {
      yield* step("a", function* () {
        return 1;
      });
      return yield* step("b", function* () {
        return 2;
      });
    });
    await run(
      function* takenOver() {
        const engine = yield* startWorkflowEngine({ store, workflows: [two], leaseMs: 3_600_000 });
        yield* engine.start(two, null, { id: "two-1" });
        yield* sleep(1000);
      },
      { clock: createVirtualClock() },
    );
    const [only, ...others] = runsOf(otel.spans(), "two");
    expect(others).toEqual([]);
    const { run: lost, steps } = only!;
    expect(lost.attributes["keel.workflow.run.outcome"]).toBe("lost");
    expect(lost.status.code).toBe(SpanStatusCode.ERROR);
    expect(lost.status.message).toMatch(/the claim of .* is no longer current/);
    expect(
      steps.map((s) => [
        s.name,
        s.attributes["keel.workflow.step.ok"],
        s.attributes["keel.workflow.step.interrupted"],
      ]),
    ).toEqual([
      ["step a#1", true, undefined],
      ["step b#1", undefined, true],
    ]);
  });
});

/** Whether `s` is `root` or hangs (at any depth) from it. */
function isUnder(spans: ReadableSpan[], s: ReadableSpan, root: ReadableSpan): boolean {
  for (let cur: ReadableSpan | undefined = s; cur; ) {
    if (idOf(cur) === idOf(root)) return true;
    const parent = parentOf(cur);
    cur = spans.find((x) => idOf(x) === parent);
  }
  return false;
}
