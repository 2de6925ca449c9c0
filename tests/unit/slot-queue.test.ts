import { describe, expect, test } from "bun:test";
import { ModelQueueFull, retryAfterSeconds, SlotQueue, slotsFromArgv, slotsFromProps, WAIT_WINDOW_MS, httpThreadsFor, type Admission } from "../../pool/slot-queue.ts";

/** A queue on a clock the test moves, with every grant recorded in order. */
function harness(slots: number, maxQueue = 64) {
  let now = 1_000_000;
  const events = { waited: [] as number[], rejected: 0 };
  const q = new SlotQueue({
    model: "m",
    slots,
    maxQueue,
    now: () => now,
    observer: { waited: (_m, ms) => void events.waited.push(ms), rejected: () => void events.rejected++ },
  });
  const granted: string[] = [];
  const releases = new Map<string, () => void>();
  const failures = new Map<string, unknown>();
  const take = (source: string, id: string, signal?: AbortSignal) =>
    q.acquire(source, signal).then(
      (release) => {
        granted.push(id);
        releases.set(id, release);
      },
      (err: unknown) => void failures.set(id, err),
    );
  const tick = (ms: number) => void (now += ms);
  return { q, granted, releases, failures, take, tick, events };
}

/** Lets every settled promise's callbacks run. */
const settle = () => new Promise((r) => setImmediate(r));

describe("order across sources", () => {
  const cases: { name: string; slots: number; arrivals: [string, string][]; want: string[] }[] = [
    { name: "one source: first come first served", slots: 1, arrivals: [["a", "a1"], ["a", "a2"], ["a", "a3"]], want: ["a1", "a2", "a3"] },
    {
      name: "a source that sent many first does not keep the others waiting",
      slots: 1,
      arrivals: [["a", "a1"], ["a", "a2"], ["a", "a3"], ["a", "a4"], ["b", "b1"], ["c", "c1"], ["b", "b2"]],
      want: ["a1", "a2", "b1", "c1", "a3", "b2", "a4"],
    },
    {
      name: "round-robin with two slots, FIFO within each source",
      slots: 2,
      arrivals: [["x", "x1"], ["x", "x2"], ["x", "x3"], ["y", "y1"], ["y", "y2"], ["x", "x4"]],
      want: ["x1", "x2", "x3", "y1", "x4", "y2"],
    },
  ];
  test.each(cases)("$name", async ({ slots, arrivals, want }) => {
    const h = harness(slots);
    for (const [source, id] of arrivals) void h.take(source, id);
    await settle();
    // Release in grant order, one at a time: each release hands its slot to exactly one waiter.
    for (let i = 0; i < want.length; i++) {
      await settle();
      h.releases.get(h.granted[i]!)!();
    }
    await settle();
    expect(h.granted).toEqual(want);
    expect(h.q.figures()).toMatchObject({ inFlight: 0, queued: 0 });
  });
});

test("a release hands the slot to the next waiter directly: in flight never drops below the slots while some wait", async () => {
  const h = harness(2);
  for (const id of ["r1", "r2", "r3", "r4"]) void h.take("s", id);
  await settle();
  expect(h.q.figures()).toMatchObject({ slots: 2, inFlight: 2, queued: 2 });
  h.releases.get("r1")!();
  // Counted at once, before any promise callback ran.
  expect(h.q.figures()).toMatchObject({ inFlight: 2, queued: 1 });
  h.releases.get("r1")!();
  expect(h.q.figures()).toMatchObject({ inFlight: 2, queued: 1 });
  await settle();
  expect(h.granted).toEqual(["r1", "r2", "r3"]);
});

test("an aborted waiter leaves at once and frees its place; the others keep their turns", async () => {
  const h = harness(1, 2);
  void h.take("a", "a1");
  const abort = new AbortController();
  void h.take("b", "b1", abort.signal);
  void h.take("c", "c1");
  await settle();
  // The queue is full: a fourth is refused.
  await h.take("d", "d1");
  expect(h.failures.get("d1")).toBeInstanceOf(ModelQueueFull);
  abort.abort(new Error("client gone"));
  expect(h.q.figures()).toMatchObject({ inFlight: 1, queued: 1 });
  await settle();
  expect((h.failures.get("b1") as Error).message).toBe("client gone");
  // Its place is free again.
  void h.take("d", "d2");
  h.releases.get("a1")!();
  await settle();
  h.releases.get("c1")!();
  await settle();
  expect(h.granted).toEqual(["a1", "c1", "d2"]);
  // Aborting after the grant changes nothing.
  expect(h.q.figures()).toMatchObject({ inFlight: 1, queued: 0 });
});

test("a request already aborted never queues", async () => {
  const h = harness(1);
  void h.take("a", "a1");
  await h.take("b", "b1", AbortSignal.abort(new Error("gone")));
  expect(h.q.figures().queued).toBe(0);
  expect((h.failures.get("b1") as Error).message).toBe("gone");
});

describe("bound", () => {
  const cases = [
    { name: "no queue: refused as soon as the slots are taken", slots: 2, maxQueue: 0, sent: 3, granted: 2, refused: 1 },
    { name: "queue of 2 behind 2 slots: the 5th and 6th refused", slots: 2, maxQueue: 2, sent: 6, granted: 2, refused: 2 },
    { name: "within the bound nobody is refused", slots: 1, maxQueue: 64, sent: 65, granted: 1, refused: 0 },
  ];
  test.each(cases)("$name", async ({ slots, maxQueue, sent, granted, refused }) => {
    const h = harness(slots, maxQueue);
    const all = Array.from({ length: sent }, (_, i) => h.take(`s${i % 3}`, `r${i}`));
    await settle();
    await Promise.all(all.slice(slots + maxQueue));
    expect(h.granted.length).toBe(granted);
    expect(h.failures.size).toBe(refused);
    expect(h.events.rejected).toBe(refused);
    for (const err of h.failures.values()) {
      expect(err).toBeInstanceOf(ModelQueueFull);
      const full = err as ModelQueueFull;
      expect(full).toMatchObject({ status: 429, code: "model_queue_full" });
      expect(full.retryAfter).toBeGreaterThanOrEqual(1);
      expect(full.message).toContain("--max-queue");
    }
  });
});

describe("the bound is shared fairly between sources", () => {
  test("one key's waiters fill the queue; another key's request takes the place of its newest, which gets 429", async () => {
    const h = harness(1, 4);
    const greedy = ["a0", "a1", "a2", "a3", "a4"].map((id) => h.take("key:a", id));
    await settle();
    const other = h.take("key:b", "b0");
    await settle();
    await greedy[4];
    expect(h.failures.get("a4")).toBeInstanceOf(ModelQueueFull);
    expect((h.failures.get("a4") as Error).message).toContain("took its place");
    expect(h.failures.has("b0")).toBe(false);
    // Round-robin from there: b0 is served before a1's followers.
    for (const id of ["a0", "a1", "b0", "a2", "a3"]) {
      await settle();
      h.releases.get(id)?.();
    }
    await other;
    expect(h.granted).toEqual(["a0", "a1", "b0", "a2", "a3"]);
  });

  test.each([
    { name: "a lone client has the whole queue; only its own next request is refused", waiting: { a: 4 }, comer: "a", refused: "comer" },
    { name: "an even split: the newcomer of a third source still gets in", waiting: { a: 2, b: 2 }, comer: "c", refused: "a" },
    { name: "one more than the newcomer's own is not enough to give way", waiting: { a: 2, b: 2 }, comer: "b", refused: "comer" },
    { name: "the biggest line gives way", waiting: { a: 1, b: 3 }, comer: "a", refused: "b" },
  ])("$name", async ({ waiting, comer, refused }) => {
    const h = harness(1, 4);
    void h.take("hold", "hold");
    for (const [src, n] of Object.entries(waiting)) for (let i = 0; i < n; i++) void h.take(src, `${src}${i}`);
    await settle();
    void h.take(comer, "comer");
    await settle();
    expect([...h.failures.keys()].map((id) => (id === "comer" ? "comer" : id[0]))).toEqual([refused]);
  });
});

test.each([
  [0, 2, 100, 1],
  [64, 2, 1000, 32],
  [10, 1, 30_000, 60],
  [3, 4, 2500, 2],
  [8, 2, 2500, 10],
])("retryAfterSeconds(queued %p, slots %p, mean %p ms) = %p", (queued, slots, mean, want) => expect(retryAfterSeconds(queued, slots, mean)).toBe(want));

test("Retry-After follows the recent service times", async () => {
  const h = harness(1, 1);
  void h.take("a", "a1");
  void h.take("a", "a2");
  await settle();
  h.tick(8_000);
  h.releases.get("a1")!();
  void h.take("a", "a3");
  await h.take("a", "a4");
  expect((h.failures.get("a4") as ModelQueueFull).retryAfter).toBe(8);
});

test("waitMs is the longest wait among requests granted within the window", async () => {
  const h = harness(1);
  expect(h.q.figures().waitMs).toBe(0);
  void h.take("a", "a1");
  void h.take("a", "a2");
  void h.take("b", "b1");
  await settle();
  h.tick(3000);
  h.releases.get("a1")!(); // a2 waited 3 s
  await settle();
  h.tick(1000);
  h.releases.get("a2")!(); // b1 waited 4 s
  await settle();
  expect(h.q.figures().waitMs).toBe(4000);
  expect(h.events.waited).toEqual([0, 3000, 4000]);
  h.tick(WAIT_WINDOW_MS - 1);
  expect(h.q.figures().waitMs).toBe(4000);
  h.tick(2);
  expect(h.q.figures().waitMs).toBe(0);
  // A short wait after a long one: the long one counts until it leaves the window, then the short.
  void h.take("c", "c1");
  await settle();
  h.tick(5000);
  h.releases.get("b1")!();
  await settle();
  void h.take("d", "d1");
  await settle();
  h.tick(1000);
  h.releases.get("c1")!();
  await settle();
  expect(h.q.figures().waitMs).toBe(5000);
  h.tick(WAIT_WINDOW_MS - 500);
  expect(h.q.figures().waitMs).toBe(1000);
});

test("more slots reported later are taken by waiters at once", async () => {
  const h = harness(1);
  for (const id of ["r1", "r2", "r3"]) void h.take("s", id);
  await settle();
  h.q.setSlots(3);
  await settle();
  expect(h.granted).toEqual(["r1", "r2", "r3"]);
  expect(h.q.figures()).toMatchObject({ slots: 3, inFlight: 3, queued: 0 });
});

test("closing refuses the waiters and every later request", async () => {
  const h = harness(1);
  void h.take("s", "r1");
  void h.take("s", "r2");
  await settle();
  h.q.close(new Error("server gone"));
  await h.take("s", "r3");
  expect([...h.failures.keys()]).toEqual(["r2", "r3"]);
  expect(h.q.figures().queued).toBe(0);
});

test.each([
  [["llama-server", "--model", "m.gguf"], undefined],
  [["llama-server", "--parallel", "2"], 2],
  [["llama-server", "-np", "8"], 8],
  [["llama-server", "--parallel=3"], 3],
  [["llama-server", "-np", "2", "--parallel", "6"], 6],
  [["llama-server", "-np", "-1"], undefined],
  [["llama-server", "-np"], undefined],
  [["llama-server", "--parallel", "99999"], 4096],
] as [string[], number | undefined][])("slotsFromArgv(%p) = %p", (argv, want) => expect(slotsFromArgv(argv)).toBe(want));

test.each([
  [{ total_slots: 4 }, 4],
  [{ total_slots: 0 }, undefined],
  [{ total_slots: 1.5 }, undefined],
  [{ total_slots: "4" }, undefined],
  [{}, undefined],
  [null, undefined],
  ["text", undefined],
])("slotsFromProps(%p) = %p", (props, want) => expect(slotsFromProps(props)).toBe(want));

/** A queue whose requests are admitted with `admit` (sent ahead of a slot, one per slot), every admission recorded in order. */
function aheadHarness(slots: number, maxQueue = 64) {
  let now = 1_000_000;
  const events = { waited: [] as number[], rejected: 0 };
  const q = new SlotQueue({ model: "m", slots, maxQueue, now: () => now, observer: { waited: (_m, ms) => void events.waited.push(ms), rejected: () => void events.rejected++ } });
  const admitted: string[] = [];
  const held = new Map<string, Admission>();
  const failures = new Map<string, unknown>();
  const take = (source: string, id: string, signal?: AbortSignal) =>
    q.admit(source, signal).then(
      (a) => {
        admitted.push(id);
        held.set(id, a);
      },
      (err: unknown) => void failures.set(id, err),
    );
  const tick = (ms: number) => void (now += ms);
  return { q, admitted, held, failures, take, tick, events };
}

describe("admit: one request per slot sent ahead of it", () => {
  test("sent ahead at once, counted as waiting; a release gives it the slot and sends the next ahead", async () => {
    const h = aheadHarness(2);
    for (const id of ["r1", "r2", "r3", "r4", "r5"]) void h.take("s", id);
    await settle();
    expect(h.admitted).toEqual(["r1", "r2", "r3", "r4"]);
    expect(h.q.figures()).toMatchObject({ slots: 2, inFlight: 2, queued: 3 });
    // Running ones can never be displaced: they have no revoked signal.
    expect(h.held.get("r1")!.revoked).toBeUndefined();
    expect(h.held.get("r3")!.revoked).toBeDefined();
    h.tick(500);
    h.held.get("r1")!.release();
    expect(h.q.figures()).toMatchObject({ inFlight: 2, queued: 2 });
    await settle();
    expect(h.admitted).toEqual(["r1", "r2", "r3", "r4", "r5"]);
    // r3's wait ends when it gets the slot, not when it is sent.
    expect(h.events.waited).toEqual([0, 0, 500]);
    for (const id of ["r2", "r3", "r4", "r5"]) h.held.get(id)!.release();
    expect(h.q.figures()).toMatchObject({ inFlight: 0, queued: 0 });
  });

  test.each([
    { name: "no queue: none sent ahead, the third refused", slots: 2, maxQueue: 0, sent: 3, admitted: 2, refused: 1 },
    { name: "a queue of 1 behind 2 slots: one sent ahead, the fourth refused", slots: 2, maxQueue: 1, sent: 4, admitted: 3, refused: 1 },
    { name: "a queue of 4 behind 2 slots: two sent ahead, two wait, none refused", slots: 2, maxQueue: 4, sent: 6, admitted: 4, refused: 0 },
  ])("the bound counts those sent ahead: $name", async ({ slots, maxQueue, sent, admitted, refused }) => {
    const h = aheadHarness(slots, maxQueue);
    for (let i = 0; i < sent; i++) void h.take("s", `r${i}`);
    await settle();
    expect(h.admitted.length).toBe(admitted);
    expect(h.failures.size).toBe(refused);
    expect(h.q.figures().queued).toBe(sent - slots - refused);
  });

  test("sent in the order of turns: round-robin between sources as their turns come", async () => {
    const h = aheadHarness(1);
    for (const [source, id] of [["a", "a1"], ["a", "a2"], ["a", "a3"], ["a", "a4"], ["b", "b1"], ["c", "c1"], ["b", "b2"]] as const) void h.take(source, id);
    await settle();
    // a2 had its turn when it was alone, so a is first again when b and c come.
    for (let i = 0; i < 7; i++) {
      await settle();
      h.held.get(h.admitted[i]!)?.release();
    }
    await settle();
    expect(h.admitted).toEqual(["a1", "a2", "a3", "b1", "c1", "a4", "b2"]);
  });

  test("another source's request displaces the newest sent ahead by the biggest: its request is revoked with the 429", async () => {
    const h = aheadHarness(2, 2);
    for (const id of ["a0", "a1", "a2", "a3"]) void h.take("key:a", id);
    await settle();
    expect(h.q.figures()).toMatchObject({ inFlight: 2, queued: 2 });
    void h.take("key:b", "b0");
    await settle();
    const revoked = h.held.get("a3")!.revoked!;
    expect(revoked.aborted).toBe(true);
    expect(revoked.reason).toBeInstanceOf(ModelQueueFull);
    expect((revoked.reason as Error).message).toContain("took its place");
    expect(h.held.get("a2")!.revoked!.aborted).toBe(false);
    expect(h.admitted).toEqual(["a0", "a1", "a2", "a3", "b0"]);
    expect(h.q.figures()).toMatchObject({ inFlight: 2, queued: 2 });
    // Its release (the proxy's, after the abort) changes nothing more.
    h.held.get("a3")!.release();
    expect(h.q.figures()).toMatchObject({ inFlight: 2, queued: 2 });
  });

  test("one whose answer began is displaced no more", async () => {
    const h = aheadHarness(1, 1);
    void h.take("a", "a0");
    void h.take("a", "a1");
    await settle();
    h.held.get("a1")!.begun();
    await h.take("b", "b0");
    expect(h.failures.get("b0")).toBeInstanceOf(ModelQueueFull);
    expect(h.held.get("a1")!.revoked!.aborted).toBe(false);
  });

  test("one sent ahead whose client leaves gives its place back; the next is sent in its place", async () => {
    const h = aheadHarness(1);
    for (const id of ["r1", "r2", "r3"]) void h.take("s", id);
    await settle();
    expect(h.admitted).toEqual(["r1", "r2"]);
    h.held.get("r2")!.release();
    await settle();
    expect(h.admitted).toEqual(["r1", "r2", "r3"]);
    expect(h.q.figures()).toMatchObject({ inFlight: 1, queued: 1 });
    h.held.get("r1")!.release();
    expect(h.q.figures()).toMatchObject({ inFlight: 1, queued: 0 });
    // No service time from the one that left before its slot.
    h.held.get("r3")!.release();
    expect(h.q.figures()).toMatchObject({ inFlight: 0, queued: 0 });
  });

  test("a request waiting for a slot with acquire is never sent ahead, nor anyone behind it", async () => {
    const h = aheadHarness(1);
    void h.take("a", "a1");
    let acquired = false;
    void h.q.acquire("b").then(() => void (acquired = true));
    void h.take("c", "c1");
    await settle();
    expect(h.admitted).toEqual(["a1"]);
    h.held.get("a1")!.release();
    await settle();
    expect(acquired).toBe(true);
    expect(h.admitted).toEqual(["a1", "c1"]);
  });

  test("closing refuses the waiters; those sent ahead go on with their server", async () => {
    const h = aheadHarness(1);
    for (const id of ["r1", "r2", "r3"]) void h.take("s", id);
    await settle();
    h.q.close(new Error("server gone"));
    await settle();
    expect([...h.failures.keys()]).toEqual(["r3"]);
    expect(h.held.get("r2")!.revoked!.aborted).toBe(false);
  });
});

test.each([
  [4, 2, 1, 10],
  [1, 2, 1, 4],
  [4, 16, 1, 15],
  [2, 2, 0, 4],
  [8, 8, 1, 18],
])("httpThreadsFor(slots %p, cores %p, ready per slot %p) = %p", (slots, cores, ready, want) => expect(httpThreadsFor(slots, cores, ready)).toBe(want));
