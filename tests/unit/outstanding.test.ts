import { expect, test } from "bun:test";
import { Outstanding, untilBodyEnds, wholeBody } from "../../router/serving/outstanding.ts";

test("counts per (model, server); an end counts once; pairs at zero are forgotten", () => {
  const o = new Outstanding();
  const a1 = o.begin("m", "a");
  const a2 = o.begin("m", "a");
  const b = o.begin("m", "b");
  o.begin("n", "a");
  expect([o.count("m", "a"), o.count("m", "b"), o.count("n", "a"), o.count("n", "b")]).toEqual([2, 1, 1, 0]);
  a1();
  a1();
  expect(o.count("m", "a")).toBe(1);
  a2();
  b();
  expect(o.count("m", "a")).toBe(0);
  expect(o.size).toBe(1);
});

const streamOf = (chunks: string[], fail = false) => {
  const enc = new TextEncoder();
  let i = 0;
  return new ReadableStream<Uint8Array>({
    pull(c) {
      if (i < chunks.length) c.enqueue(enc.encode(chunks[i++]!));
      else if (fail) c.error(new Error("upstream reset"));
      else c.close();
    },
  });
};

test.each<[string, () => Response, (res: Response) => Promise<unknown>]>([
  ["a body read whole", () => new Response(streamOf(["a", "b"])), (res) => res.text()],
  ["a body the client cancels midway", () => new Response(streamOf(["a", "b", "c"])), async (res) => {
    const reader = res.body!.getReader();
    await reader.read();
    await reader.cancel();
  }],
  ["a body that fails", () => new Response(streamOf(["a"], true)), (res) => res.text().catch(() => undefined)],
  ["no body", () => new Response(null, { status: 204 }), async () => undefined],
])("the count ends with %s", async (_, make, consume) => {
  const o = new Outstanding();
  const res = untilBodyEnds(make(), o.begin("m", "a"));
  if (res.status !== 204) expect(o.count("m", "a")).toBe(1);
  await consume(res);
  expect(o.count("m", "a")).toBe(0);
});

test("the answer passes unchanged: status, headers, bytes in order", async () => {
  const res = untilBodyEnds(new Response(streamOf(["data: 1\n\n", "data: 2\n\n"]), { status: 201, headers: { "content-type": "text/event-stream", "x-mesh-node": "a" } }), () => undefined);
  expect(res.status).toBe(201);
  expect(res.headers.get("x-mesh-node")).toBe("a");
  expect(await res.text()).toBe("data: 1\n\ndata: 2\n\n");
});

test("a body already in memory whole (the proxy's JSON answers): the count ends at once and the same answer goes out", async () => {
  const o = new Outstanding();
  const answer = wholeBody(new Response('{"ok":true}', { status: 200, headers: { "content-type": "application/json" } }));
  const res = untilBodyEnds(answer, o.begin("m", "a"));
  expect(o.count("m", "a")).toBe(0);
  expect(res).toBe(answer);
  expect(await res.json()).toEqual({ ok: true });
});
