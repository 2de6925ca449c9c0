/**
 * Routing across a model's servers and the one retry, with real nodes: two nodes both serve the
 * same model (its host, and a node that loaded it through its own API), so the catalog lists two
 * servers; requests through a third node, which serves it not, spread over both (a node serving
 * the model answers its own clients itself while it has a free slot), a user's requests go to one
 * server (the same one every node would pick), and when the server a request is routed to dies
 * before answering (a server's llama-server, or the host node itself, killed with SIGKILL) the
 * client gets one answer, from the other server.
 */
import { afterAll, expect, test } from "bun:test";
import { loaded, post } from "../../harness/api.ts";
import { killAllChildren } from "../../harness/children.ts";
import { startMeshNode, waitForFullMesh, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { waitFor } from "../../harness/wait.ts";
import { rankFor } from "../../placement/pick-server.ts";
import { ANSWERED_BY_HEADER, RETRIED_FROM_HEADER } from "../../mesh/mesh-headers.ts";

const nodes: MeshTestNode[] = [];
afterAll(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  await killAllChildren();
});

const MODEL = "tiny-q8_0";
// No replicas of their own: the test decides who serves what.
const ARGS = [...SMALL_LLAMA, "--replicas", "off"];

interface Listed {
  id: string;
  mesh?: { servers: string[] };
}
const servers = async (n: MeshTestNode) =>
  ((await (await fetch(`${n.url}/v1/models`)).json()) as { data: Listed[] }).data.find((m) => m.id === MODEL)?.mesh?.servers.slice().sort() ?? [];

/** A chat as `user` through `via`: its status, who answered, and who failed it first (if anyone). */
async function ask(via: MeshTestNode, user: string) {
  const res = await post(via, "/v1/chat/completions", { model: MODEL, user, messages: [{ role: "user", content: "hi" }], max_tokens: 2 }, { signal: AbortSignal.timeout(60_000) });
  const body = await res.text();
  return { status: res.status, by: res.headers.get(ANSWERED_BY_HEADER), retriedFrom: res.headers.get(RETRIED_FROM_HEADER), body };
}

/** The server every node picks for `user` when both are idle. */
const preferred = (user: string, ids: string[]) => rankFor(`u:${user}`, ids.map((nodeId) => ({ nodeId })))[0]!.nodeId;

test("two servers of one model: spread by user with affinity, and a request whose server is killed before answering gets one answer from the other", async () => {
  const file = await testModel("tiny", "q8_0");
  const a = await startMeshNode([...ARGS, "--model", MODEL], { models: { [`${MODEL}.gguf`]: file }, name: "a" });
  nodes.push(a);
  // b runs a model of its own (so it is in no group of MODEL's) and loads MODEL beside it on request.
  const own = await testModel("tiny", "f32");
  const b = await startMeshNode([...ARGS, "--model", "tiny-f32", "--max-loaded-models", "2", "--join", a.token], { models: { [`${MODEL}.gguf`]: file, "tiny-f32.gguf": own }, name: "b" });
  nodes.push(b);
  // c serves nothing (no models, fetches none): its clients' requests go to the servers the catalog lists.
  const c = await startMeshNode([...ARGS, "--fetch", "off", "--join", a.token], { name: "c" });
  nodes.push(c);
  await waitForFullMesh([a, b, c]);
  await waitFor(async () => (await loaded(a)).some((s) => s.model_name === MODEL && s.state === "ready"), { what: "a to serve the model", timeoutMs: 60_000 });
  const loadOnB = async () => {
    const res = await post(b, "/api/v1/load", { model_name: MODEL });
    expect(res.status).toBe(200);
    const both = [a.nodeId, b.nodeId].sort();
    await waitFor(async () => JSON.stringify(await servers(c)) === JSON.stringify(both), { what: "c's catalog to list both servers", timeoutMs: 30_000 });
  };
  await loadOnB();
  const ids = [a.nodeId, b.nodeId];

  // Spread: each user to the server the rendezvous hash prefers, again on every turn; both serve.
  const users = Array.from({ length: 12 }, (_, i) => `user-${i}`);
  const byUser = new Map<string, string | null>();
  for (const user of users) {
    const r = await ask(c, user);
    expect(r.status).toBe(200);
    byUser.set(user, r.by);
  }
  expect(new Set(byUser.values())).toEqual(new Set(ids));
  for (const user of users) expect(byUser.get(user)).toBe(preferred(user, ids));
  for (const user of users.slice(0, 4)) expect((await ask(c, user)).by).toBe(byUser.get(user)!);
  const toB = users.find((u) => byUser.get(u) === b.nodeId)!;

  // b's llama-server killed while it holds a request for a user b serves, before any byte of the
  // answer: stopped first (SIGSTOP), so the request is surely there when it is killed.
  const onB = (await loaded(b)).find((s) => s.model_name === MODEL)!;
  process.kill(onB.pid, "SIGSTOP");
  const pending = ask(c, toB);
  await waitFor(async () => (await loaded(b)).some((s) => s.model_name === MODEL && s.is_busy), { what: "b's server to hold the request" });
  process.kill(onB.pid, "SIGKILL");
  expect(await pending).toMatchObject({ status: 200, by: a.nodeId, retriedFrom: b.nodeId });

  // The host itself killed (the whole node): c hears nothing from it for seconds, so a request
  // through c for a user the host serves goes there, fails when c gives the connection up, and is
  // answered by b's server.
  await waitFor(async () => (await loaded(b)).every((s) => s.model_name !== MODEL || s.state !== "ready"), { what: "b to see its server gone" });
  await loadOnB();
  await waitFor(async () => JSON.stringify(await servers(c)) === JSON.stringify(ids.slice().sort()), { what: "c's catalog to list both servers" });
  const toA = users.find((u) => byUser.get(u) === a.nodeId)!;
  a.child.proc.kill("SIGKILL");
  const afterHostKill = await ask(c, toA);
  expect(afterHostKill).toMatchObject({ status: 200, by: b.nodeId, retriedFrom: a.nodeId });
  expect(JSON.parse(afterHostKill.body).choices).toHaveLength(1);
  // And the mesh goes on with one server.
  await waitFor(async () => JSON.stringify(await servers(c)) === JSON.stringify([b.nodeId]), { what: "c's catalog to drop the host" });
  expect(await ask(c, toA)).toMatchObject({ status: 200, by: b.nodeId, retriedFrom: null });
}, 240_000);
