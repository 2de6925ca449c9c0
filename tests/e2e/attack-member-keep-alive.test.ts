/**
 * Issue 28's `x-mesh-keep-alive`, the one header through which a member's request acts on the node
 * that answers it (an Ollama client's keep_alive, carried by the node it called), attacked as a
 * rogue member would: values that are not whole milliseconds, the header on requests that fail, the
 * same header (and the forwarded marker) from a client outside the mesh, and on a pinned model.
 * None of them unloads, reloads or changes the idle unload of anything. A valid 0 acts only on the
 * model its own request named, after that request's answer has gone whole, and members' unloads of
 * a model come once per few minutes (its next request reloads it); a negative one pins nothing. A real node, real
 * llama-servers, the rogue on the same iroh transport as a node; loopback only.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { decodeJoinToken } from "../../mesh/join-token.ts";
import { loaded, post } from "../../harness/api.ts";
import { killAllChildren } from "../../harness/children.ts";
import { startMeshNode, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { rogueHttp, type RogueAnswer } from "../../harness/rogue-http.ts";
import { RoguePeer, type RogueMembership } from "../../harness/rogue-peer.ts";
import { waitFor } from "../../harness/wait.ts";
import { FORWARDED_HEADER, KEEP_ALIVE_HEADER } from "../../mesh/mesh-headers.ts";

const MODEL = "tiny-q8_0";
const EMBED = "embed";

let node: MeshTestNode;
let rogue: RoguePeer;
let member: RogueMembership;

beforeAll(async () => {
  [node, rogue] = await Promise.all([startMeshNode([...SMALL_LLAMA, "--model", await testModel("tiny", "q8_0")], { models: { [`${EMBED}.gguf`]: await testModel("embed") } }), RoguePeer.start()]);
  // The mesh loads its model once more when the group settles: after that, pids hold still.
  await node.child.waitForOutput(new RegExp(`hosting the model model=${MODEL}`), 60_000);
  await waitFor(async () => (await loaded(node)).some((s) => s.model_name === MODEL && s.state === "ready"), { what: `${MODEL} to load`, timeoutMs: 120_000 });
  expect((await post(node, "/api/v1/load", { model_name: EMBED })).status).toBe(200);
  member = await rogue.member(decodeJoinToken(node.token));
});
afterAll(async () => {
  member?.close();
  await Promise.all([node?.stop(), rogue?.close()]);
  await killAllChildren();
});

const statusOf = (a: RogueAnswer) => ("status" in a ? a.status : `reset (${a.reset})`);
const chatBody = (model = MODEL) => JSON.stringify({ model, messages: [{ role: "user", content: "hi" }], max_tokens: 1, temperature: 0 });
const memberChat = (keepAlive: string, body = chatBody()) => rogueHttp(member, { method: "POST", path: "/v1/chat/completions", headers: { [KEEP_ALIVE_HEADER]: keepAlive }, body });
/** Each loaded server's pid, by model: a reload or an unload changes it. */
const pids = async () => Object.fromEntries((await loaded(node)).map((s) => [s.model_name, `${s.pid}:${s.state}`]));
const unloadsOf = (model: string) => [...node.child.output().matchAll(new RegExp(`unloading model model=${model} `, "g"))].length;
/** When /api/ps says the model unloads, in ms from now. */
async function expiresInMs(model: string): Promise<number> {
  const ps = (await (await fetch(`${node.url}/api/ps`)).json()) as { models: { name: string; expires_at: string }[] };
  return new Date(ps.models.find((m) => m.name === `${model}:latest`)!.expires_at).getTime() - Date.now();
}

test("values that are not whole milliseconds are ignored: nothing unloads, the idle unload stays the node's", async () => {
  const before = await pids();
  expect(Object.keys(before).sort()).toEqual([EMBED, MODEL]);
  for (const junk of ["", "-", "abc", "0s", "5m", "0,0", "0;0", "1e3", "0x0", "1.5", "+0", "99999999999999", "NaN", "-Infinity", "0".repeat(20)]) {
    expect([junk, statusOf(await memberChat(junk))]).toEqual([junk, 200]);
  }
  expect(await pids()).toEqual(before);
  expect(unloadsOf(MODEL)).toBe(0);
  // The node's --idle-unload (30 min), not something a value was read as.
  expect(await expiresInMs(MODEL)).toBeGreaterThan(20 * 60_000);
});

test("a 0 on a request that fails acts on nothing", async () => {
  const before = await pids();
  for (const body of [chatBody("nowhere"), "{not json", JSON.stringify({ messages: [] }), JSON.stringify({ model: MODEL, messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "http://169.254.169.254/x.png" } }] }] })]) {
    const answer = await memberChat("0", body);
    expect(typeof statusOf(answer) === "number" && (statusOf(answer) as number) >= 400).toBe(true);
  }
  expect(await pids()).toEqual(before);
  expect(unloadsOf(MODEL)).toBe(0);
});

test("from outside the mesh the header counts for nothing, the forwarded marker with it or not", async () => {
  const before = await pids();
  const forged: Record<string, string>[] = [{ [KEEP_ALIVE_HEADER]: "0" }, { [KEEP_ALIVE_HEADER]: "0", [FORWARDED_HEADER]: "1" }];
  for (const headers of forged) {
    const res = await fetch(`${node.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: chatBody() });
    expect(res.status).toBe(200);
    await res.json();
  }
  // One more answered request: an unload the first ones had started would have the model loading again by now.
  expect((await fetch(`${node.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: chatBody() })).status).toBe(200);
  expect(await pids()).toEqual(before);
  expect(unloadsOf(MODEL)).toBe(0);
});

test("a 0 acts only on the model its own request named", async () => {
  const tiny = (await pids())[MODEL];
  const answer = await rogueHttp(member, { method: "POST", path: "/v1/embeddings", headers: { [KEEP_ALIVE_HEADER]: "0" }, body: JSON.stringify({ model: EMBED, input: "x" }) });
  expect(statusOf(answer)).toBe(200);
  await waitFor(async () => !(await loaded(node)).some((s) => s.model_name === EMBED), { what: "the embed model to unload after the member's keep-alive 0" });
  expect((await pids())[MODEL]).toBe(tiny);
});

test("a pinned model ignores it; unpinned, a 0 unloads it after the member's answer has gone whole", async () => {
  expect((await post(node, "/api/v1/load", { model_name: MODEL, pinned: true })).status).toBe(200);
  await waitFor(async () => (await loaded(node)).some((s) => s.model_name === MODEL && s.state === "ready" && s.pinned), { what: "the model pinned and ready" });
  const pinned = await pids();
  const unloadsBefore = unloadsOf(MODEL);
  expect(statusOf(await memberChat("0"))).toBe(200);
  // A second answered request after it: had the first begun an unload, this one would have loaded it again.
  expect(statusOf(await memberChat("-1"))).toBe(200);
  expect(await pids()).toEqual(pinned);
  expect(unloadsOf(MODEL)).toBe(unloadsBefore);

  expect((await post(node, "/api/v1/load", { model_name: MODEL, pinned: false })).status).toBe(200);
  await waitFor(async () => (await loaded(node)).some((s) => s.model_name === MODEL && s.state === "ready" && !s.pinned), { what: "the model unpinned and ready" });
  const answer = await memberChat("0");
  expect(statusOf(answer)).toBe(200);
  const whole = JSON.parse((answer as { body: string }).body) as { usage: { completion_tokens: number }; choices: unknown[] };
  expect(whole.usage.completion_tokens).toBe(1);
  expect(whole.choices.length).toBe(1);
  await waitFor(async () => !(await loaded(node)).some((s) => s.model_name === MODEL), { what: "the model to unload after the member's keep-alive 0" });

  // Loaded again by the next request; members' next 0 within MEMBER_UNLOAD_EVERY_MS unloads nothing.
  expect(statusOf(await memberChat("0"))).toBe(200);
  const again = await pids();
  const unloadsNow = unloadsOf(MODEL);
  expect(statusOf(await memberChat("0"))).toBe(200);
  expect(await pids()).toEqual(again);
  expect(unloadsOf(MODEL)).toBe(unloadsNow);
  // A negative one pins nothing: the node's own idle unload stays (30 min, not "never").
  expect(statusOf(await memberChat("-1"))).toBe(200);
  expect(await expiresInMs(MODEL)).toBeLessThan(31 * 60_000);
});
