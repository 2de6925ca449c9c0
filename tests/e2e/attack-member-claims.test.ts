/**
 * Issue 27, claims acted on as facts: a member that announces more memory than anyone and a server
 * of the model a node runs is elected its host, and the node hands its model over and sends its
 * own clients' prompts there. With `--hosts` the operator names the nodes that may serve its
 * clients: the node keeps its model and serves its clients itself, and no prompt reaches the
 * member. Alike for a member that claims its copy of the node's text model reads images: it is
 * elected, yet the node's clients are told their model reads none, by the node's own copy. A real
 * node; the member is built from our own modules.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { decodeJoinToken } from "../../mesh/join-token.ts";
import { StreamKind } from "../../streams/wire.ts";
import { loaded, server } from "../../harness/api.ts";
import { killAllChildren } from "../../harness/children.ts";
import { startMeshNode, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { gradientPng, pngDataUrl } from "../../harness/png.ts";
import { RoguePeer, type RogueMembership } from "../../harness/rogue-peer.ts";
import { waitFor } from "../../harness/wait.ts";
import { ANSWERED_BY_HEADER } from "../../mesh/mesh-headers.ts";

const TINY = "tiny-q8_0";
let node: MeshTestNode;
let rogue: RoguePeer;
let member: RogueMembership;
beforeAll(async () => {
  const tiny = await testModel("tiny", "q8_0");
  [node, rogue] = await Promise.all([startMeshNode([...SMALL_LLAMA, "--model", TINY, "--hosts", "self"], { models: { [`${TINY}.gguf`]: tiny } }), RoguePeer.start()]);
  await waitFor(async () => (await loaded(node)).some((s) => s.model_name === TINY && s.state === "ready"), { what: "tiny to load", timeoutMs: 120_000 });
  member = await rogue.member(decodeJoinToken(node.token));
  member.recordStreams();
});
afterAll(async () => {
  member?.close();
  await Promise.all([node?.stop(), rogue?.close()]);
  await killAllChildren();
});

interface Listed {
  id: string;
  mesh?: { host: string | null; nodes_serving: string[] };
}

test("a member claiming to run the model with a terabyte of memory: with --hosts self the node keeps its model and serves its clients; no prompt reaches the member", async () => {
  const running = await server(node, TINY);
  const need = await waitFor(async () => member.announcement?.modelsOnDisk.find((m) => m.name === TINY), { what: "the node to announce tiny" });
  // The claims: a server of tiny, hosting it for its group, far more memory than the node.
  Object.assign(member.mine, { role: "host", vramBytes: 2 ** 40, assigned: TINY, hosting: true, serving: [TINY], modelsOnDisk: [{ name: TINY, size: need.size, need: need.need }], rpcProtocol: member.announcement!.rpcProtocol, keepsLayouts: true });
  const rogueId = rogue.transport.nodeId;
  // The node hears the claims and elects the member in its catalog, as the rules say...
  await waitFor(
    async () => {
      const list = (await (await fetch(`${node.url}/v1/models`)).json()) as { data: Listed[] };
      return list.data.find((m) => m.id === TINY)?.mesh?.host === rogueId;
    },
    { what: "the node to elect the claiming member as tiny's host" },
  );
  // ...yet its clients are served here, by the same server, and nothing went to the member.
  for (let i = 0; i < 3; i++) {
    const res = await fetch(`${node.url}/v1/chat/completions`, { method: "POST", body: JSON.stringify({ model: TINY, messages: [{ role: "user", content: "a secret prompt" }], max_tokens: 2 }) });
    expect(res.status).toBe(200);
    expect(res.headers.get(ANSWERED_BY_HEADER)).toBe(node.nodeId);
    await res.arrayBuffer();
  }
  expect((await server(node, TINY)).pid).toBe(running.pid);
  expect(member.streamsFromNode.filter((k) => k === StreamKind.HTTP)).toEqual([]);
  expect(node.child.output()).not.toContain("another node hosts the model now; unloading ours");
});

test("a member claiming its copy of the node's text model reads images: with --hosts self the node keeps its model, tells its clients the model reads no images, and no image reaches the member", async () => {
  const running = await server(node, TINY);
  const need = await waitFor(async () => member.announcement?.modelsOnDisk.find((m) => m.name === TINY), { what: "the node to announce tiny" });
  // The claim: its copy of tiny has a projector (so the election ranks it first), and it serves tiny.
  Object.assign(member.mine, { role: "host", vramBytes: 2 ** 20, assigned: TINY, hosting: true, serving: [TINY], modelsOnDisk: [{ name: TINY, size: need.size, need: need.need, type: "llm", caps: ["vision"] }], rpcProtocol: member.announcement!.rpcProtocol, keepsLayouts: true });
  const rogueId = rogue.transport.nodeId;
  await waitFor(
    async () => {
      const list = (await (await fetch(`${node.url}/v1/models`)).json()) as { data: Listed[] };
      return list.data.find((m) => m.id === TINY)?.mesh?.host === rogueId;
    },
    { what: "the node to elect the member whose copy claims a projector" },
  );
  // Its clients' images: refused here by the copy that answers them, the node's own; none crosses to the member.
  const image = { type: "image_url", image_url: { url: pngDataUrl(gradientPng(8, 8)) } };
  const res = await fetch(`${node.url}/v1/chat/completions`, { method: "POST", body: JSON.stringify({ model: TINY, messages: [{ role: "user", content: [image] }], max_tokens: 2 }) });
  expect(res.status).toBe(400);
  const said = (await res.json()) as { error: { code: string; message: string } };
  expect(said.error).toMatchObject({ code: "model_not_vision", message: expect.stringContaining("its copy has no projector") });
  expect((await server(node, TINY)).pid).toBe(running.pid);
  expect(member.streamsFromNode.filter((k) => k === StreamKind.HTTP)).toEqual([]);
});
