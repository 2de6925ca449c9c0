/**
 * Issue 45: one registry of peer protocols. Each registers once (kind, direct purpose, cap,
 * handler); the mesh connection's streams and the direct path both dispatch through it.
 */
import { expect, test } from "bun:test";
import { PeerProtocols } from "../../node/peer-protocols.ts";
import type { Stream } from "../../streams/stream.ts";
import { StreamKind } from "../../streams/wire.ts";

/** A stream that records whether it was reset, and with what code. */
function stream(): Stream & { resetWith?: number } {
  const s: Stream & { resetWith?: number } = {
    send: { writeAll: async () => undefined, finish: async () => undefined, reset: async (code: number) => void (s.resetWith = code) },
    recv: { read: async () => null, readExact: async () => undefined, stop: async () => undefined },
  };
  return s;
}

function registry(served: string[]) {
  return new PeerProtocols()
    .register({ name: "rpc", kind: StreamKind.RPC, serve: (peer) => served.push(`rpc ${peer}`) })
    .register({ name: "model", kind: StreamKind.MODEL, direct: { purpose: "model", perMember: 4 }, serve: (peer) => served.push(`model ${peer}`) });
}

test.each([
  ["a registered kind goes to its handler", StreamKind.RPC, ["rpc p1"], undefined],
  ["another registered kind to its own", StreamKind.MODEL, ["model p1"], undefined],
  ["a kind nobody registered is reset", StreamKind.KV, [], 2],
  ["the control stream's kind is never a protocol's", StreamKind.CONTROL, [], 2],
  ["a byte no kind has is reset", 200, [], 2],
])("%s", async (_, kind, expected, resetWith) => {
  const served: string[] = [];
  const s = stream();
  registry(served).dispatch("p1", kind, s);
  await Bun.sleep(0);
  expect(served).toEqual(expected);
  expect(s.resetWith).toBe(resetWith);
});

test("the direct path finds a protocol by its purpose, with its cap; a purpose nobody serves is closed", () => {
  const served: string[] = [];
  const protocols = registry(served);
  const model = protocols.forPurpose("model")!;
  expect(model.perMember).toBe(4);
  model.serve("p2", stream());
  expect(served).toEqual(["model p2"]);
  expect(protocols.forPurpose("kv")).toBeUndefined();
});

test.each([
  ["a kind taken twice", { name: "again", kind: StreamKind.RPC, serve: () => undefined }, "stream kind 2 (again) is taken"],
  ["the control stream's kind", { name: "control", kind: StreamKind.CONTROL, serve: () => undefined }, "stream kind 1 (control) is taken"],
  ["a direct purpose taken twice", { name: "copy2", kind: StreamKind.KV, direct: { purpose: "model" as const, perMember: 1 }, serve: () => undefined }, "direct purpose model (copy2) is taken"],
])("registering %s is refused", (_, p, why) => {
  expect(() => registry([]).register(p)).toThrow(why);
});
