/**
 * A host killed with kill -9 and started again (its own state dir, its own models) serves its model
 * again; meanwhile the member left in its group, which does not fetch models and has no copy, never
 * becomes the model's host (it could not load it, and every node would answer "being fetched by" it).
 */
import { afterAll, afterEach, beforeAll, expect, test } from "bun:test";
import { killAllChildren } from "../../harness/children.ts";
import { meshStatus, startMeshNode, waitForFullMesh, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { waitFor } from "../../harness/wait.ts";

const nodes: MeshTestNode[] = [];
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
});
afterAll(killAllChildren);

// Two models on the host's disk: it serves one (allocation rule 2), and could take the other
// instead when it comes back.
const MODELS = ["tiny-q8_0", "tiny-f32"];
let files: Record<string, string>;
beforeAll(async () => {
  files = { "tiny-q8_0.gguf": await testModel("tiny", "q8_0"), "tiny-f32.gguf": await testModel("tiny", "f32") };
});
const modelArgs = MODELS.flatMap((m) => ["--model", m]);

interface Listed {
  id: string;
  mesh?: { host: string | null; status: string };
}
const listed = async (n: MeshTestNode, model: string) => ((await (await fetch(`${n.url}/v1/models`)).json()) as { data: Listed[] }).data.find((m) => m.id === model);
const assigned = async (n: MeshTestNode) => ((await meshStatus(n)) as unknown as { models: { assigned: string | null } }).models.assigned;

async function chat(via: MeshTestNode, model: string): Promise<{ status: number; text: string }> {
  const res = await fetch(`${via.url}/v1/chat/completions`, {
    method: "POST",
    body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }], max_tokens: 2 }),
    signal: AbortSignal.timeout(30_000),
  });
  return { status: res.status, text: await res.text() };
}

test("a host back after kill -9 serves its model again; a member that cannot get the model never hosts it", async () => {
  const a = await startMeshNode([...SMALL_LLAMA, ...modelArgs], { models: files, name: "a" });
  nodes.push(a);
  const BIG = await waitFor(async () => (await assigned(a)) ?? undefined, { what: "a to take a model" });
  const b = await startMeshNode([...SMALL_LLAMA, "--fetch", "off", "--join", a.token], { name: "b" });
  nodes.push(b);
  await waitForFullMesh([a, b]);
  // b lends to the group of the model a serves: it has no copy and fetches none.
  await waitFor(async () => (await assigned(b)) === BIG, { what: "b to join the group of a's model" });
  await waitFor(async () => (await chat(b, BIG)).status === 200, { what: "b to answer through a", timeoutMs: 60_000 });

  a.child.proc.kill("SIGKILL");
  await waitFor(async () => (await meshStatus(b)).peers.length === 0, { what: "b to drop a", timeoutMs: 60_000 });
  // Alone in the group, b is not its host: no node can load it.
  const orphan = await listed(b, BIG);
  expect(orphan?.mesh?.host).toBeNull();
  const meanwhile = await chat(b, BIG);
  expect(meanwhile).toMatchObject({ status: 503 });
  expect(meanwhile.text).not.toContain("being fetched");

  // a again, as itself (same state dir, same models), joining b.
  const back = await startMeshNode([...SMALL_LLAMA, ...modelArgs, "--join", b.token], { models: files, name: "a-again", stateDir: a.stateDir });
  nodes.push(back);
  await waitFor(async () => (await assigned(back)) === BIG, { what: "a, back, to take its model again", timeoutMs: 60_000 });
  await waitFor(async () => (await chat(b, BIG)).status === 200, { what: "b to answer through a again", timeoutMs: 60_000 });
  expect((await chat(back, BIG)).status).toBe(200);
}, 240_000);
