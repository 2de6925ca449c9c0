/**
 * Issue 27, work without a bound per member: each forwarded request's body was bounded
 * (--max-body-size) but a member may open many streams, and 32 unfinished bodies grew a node by
 * 2.1 GiB. Now one member's streams hold at most two bodies' worth at once (and every member
 * together four): the streams beyond get 503 with Retry-After before more is read, and the node
 * serves its own clients throughout. A real node; the member is built from our own modules.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { decodeJoinToken } from "../../mesh/join-token.ts";
import { encodeFrame, readFrame, StreamKind } from "../../streams/wire.ts";
import { killAllChildren } from "../../harness/children.ts";
import { startMeshNode, type MeshTestNode } from "../../harness/mesh.ts";
import { rogueHttp } from "../../harness/rogue-http.ts";
import { RoguePeer, type RogueMembership } from "../../harness/rogue-peer.ts";
import { waitFor, withDeadline } from "../../harness/wait.ts";
import { FORWARDED_HEADER } from "../../mesh/mesh-headers.ts";

const LIMIT = 1024 * 1024;
const STREAMS = 8;
let node: MeshTestNode;
let rogue: RoguePeer;
let member: RogueMembership;
beforeAll(async () => {
  [node, rogue] = await Promise.all([startMeshNode(["--max-body-size", String(LIMIT)]), RoguePeer.start()]);
  member = await rogue.member(decodeJoinToken(node.token));
});
afterAll(async () => {
  member?.close();
  await Promise.all([node?.stop(), rogue?.close()]);
  await killAllChildren();
});

/** A request whose body is nearly --max-body-size and never finishes; resolves with the node's answer head, if it gives one. */
async function unfinished() {
  const stream = await member.openStream(StreamKind.HTTP);
  const head = encodeFrame({ method: "POST", path: "/v1/chat/completions", headers: { "content-type": "application/json", [FORWARDED_HEADER]: "1" } });
  await stream.send.writeAll(Buffer.concat([head, new Uint8Array(LIMIT - 1024).fill(0x20)])).catch(() => undefined);
  const answer = readFrame(stream.recv).then(
    (h) => h as { status: number; headers: Record<string, string> } | null,
    () => null,
  );
  return { stream, answer };
}

test(`${STREAMS} unfinished bodies of nearly --max-body-size from one member: two are held, the rest get 503 at once; the node serves throughout`, async () => {
  const streams = await Promise.all(Array.from({ length: STREAMS }, unfinished));
  try {
    const answered = await withDeadline(
      (async () => {
        const heads: { status: number; headers: Record<string, string> }[] = [];
        // The held ones never answer while their bodies are open: collect the refusals as they come.
        await new Promise<void>((resolve) => {
          for (const s of streams)
            void s.answer.then((h) => {
              if (h) heads.push(h);
              if (heads.length === STREAMS - 2) resolve();
            });
        });
        return heads;
      })(),
      30_000,
      `${STREAMS - 2} of the streams to be refused`,
    );
    expect(answered.map((h) => h.status)).toEqual(Array(STREAMS - 2).fill(503));
    expect(answered.every((h) => h.headers["retry-after"] === "1")).toBe(true);
    expect((await fetch(`${node.url}/health`)).status).toBe(200);
    expect((await fetch(`${node.url}/v1/models`)).status).toBe(200);
  } finally {
    for (const s of streams) await s.stream.send.reset(0).catch(() => undefined);
  }
  // The bytes held come back with the streams: a body as large is read whole again (and refused for what it is).
  const again = await waitFor(
    async () => {
      const a = await rogueHttp(member, { method: "POST", path: "/v1/chat/completions", body: " ".repeat(LIMIT - 1024) });
      return "status" in a && a.status !== 503 ? a : undefined;
    },
    { what: "the member's held bytes to come back" },
  );
  expect(again.status).toBe(400);
});
