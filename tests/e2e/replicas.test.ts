/**
 * Replicas with real nodes: a host with one slot under a burst of requests is pressed (requests
 * wait for its slot, as its announced demand says), so the other node, a standby in the model's
 * group with the file on its disk, loads a replica of it alone; the replica is listed as such
 * (`replicating`), among the model's servers, and is neither its host nor a change to its group;
 * once requests stop it is let go after `--replica-idle`, and the node stays in its group.
 */
import { afterAll, afterEach, expect, test } from "bun:test";
import { loaded } from "../../harness/api.ts";
import { killAllChildren } from "../../harness/children.ts";
import { meshStatus, startMeshNode, waitForFullMesh, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { waitFor } from "../../harness/wait.ts";
import { burst } from "../../harness/burst.ts";

const nodes: MeshTestNode[] = [];
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
});
afterAll(killAllChildren);

const MODEL = "tiny-q8_0";

interface ListedModel {
  id: string;
  mesh?: { status: string; host: string | null; servers?: string[] };
}
interface NodeModels {
  models: { assigned: string | null };
}

const listed = async (n: MeshTestNode) => ((await (await fetch(`${n.url}/v1/models`)).json()) as { data: ListedModel[] }).data.find((m) => m.id === MODEL);
const peer = async (of: MeshTestNode, id: string) => (await meshStatus(of)).peers.find((p) => p.nodeId === id);
const assigned = async (n: MeshTestNode) => ((await meshStatus(n)) as unknown as NodeModels).models.assigned;

test("a pressed host gets a replica on the standby node; the replica serves beside it, not as its host, and goes when idle", async () => {
  const file = await testModel("tiny", "q8_0");
  // More memory on the host: it stays the elected host whatever the replica does.
  const a = await startMeshNode([...SMALL_LLAMA, "--vram", "512MiB", "--model", MODEL], { models: { [`${MODEL}.gguf`]: file }, name: "a" });
  nodes.push(a);
  await waitFor(async () => (await loaded(a)).some((s) => s.model_name === MODEL && s.state === "ready"), { what: "a to serve the model", timeoutMs: 60_000 });
  const b = await startMeshNode([...SMALL_LLAMA, "--vram", "256MiB", "--replica-idle", "3s", "--join", a.token], { models: { [`${MODEL}.gguf`]: file }, name: "b" });
  nodes.push(b);
  await waitForFullMesh([a, b]);
  // b joins the model's group as a standby: the model is served by a alone.
  await waitFor(async () => (await assigned(b)) === MODEL, { what: "b to join the model's group" });
  expect((await peer(a, b.nodeId))?.serving).toEqual([]);

  const stop = new AbortController();
  const answeredBy = new Set<string>();
  const answered = burst(a, MODEL, 6, stop.signal, answeredBy);
  try {
    const replica = await waitFor(
      async () => {
        const seen = await peer(a, b.nodeId);
        return seen?.replicating?.includes(MODEL) && seen.serving.includes(MODEL) ? seen : undefined;
      },
      { what: "b to serve a replica of the model, as a sees it", timeoutMs: 90_000 },
    );
    expect(replica.replicating).toEqual([MODEL]);
    await b.child.waitForOutput(/adding a replica: every server of the model has requests waiting/, 5_000);
    // Both serve it; a stays its host and the model's status is its own.
    const entry = await waitFor(async () => {
      const m = await listed(a);
      return m?.mesh?.servers?.length === 2 ? m : undefined;
    }, { what: "the model's servers to list both nodes" });
    expect([...entry.mesh!.servers!].sort()).toEqual([a.nodeId, b.nodeId].sort());
    expect(entry.mesh).toMatchObject({ status: "ready", host: a.nodeId });
    expect((await listed(b))?.mesh).toMatchObject({ status: "ready", host: a.nodeId });
    // The replica takes its share of the requests sent to a.
    await waitFor(() => answeredBy.has(b.nodeId), { what: "a request sent to a to be answered by b's replica" });
    expect(answeredBy.has(a.nodeId)).toBe(true);
  } finally {
    stop.abort();
  }
  const statuses = await answered;
  expect(statuses.length).toBeGreaterThan(0);
  // Every answer is a 200, or a 429 should the host's queue be full: none lost to the replica coming and going.
  expect(statuses.filter((s) => s !== 200 && s !== 429)).toEqual([]);

  // Requests stopped: after --replica-idle the replica goes; b stays in the model's group and a hosts it.
  await b.child.waitForOutput(/releasing a replica: no request for the replica idle time/, 60_000);
  await waitFor(
    async () => {
      const seen = await peer(a, b.nodeId);
      return seen !== undefined && seen.replicating?.length === 0 && !seen.serving.includes(MODEL);
    },
    { what: "a to see b's replica gone", timeoutMs: 30_000 },
  );
  expect((await loaded(b)).map((s) => s.model_name)).not.toContain(MODEL);
  expect(await assigned(b)).toBe(MODEL);
  expect((await listed(a))?.mesh).toMatchObject({ status: "ready", host: a.nodeId });
  expect((await loaded(a)).map((s) => s.model_name)).toContain(MODEL);
}, 240_000);

test("a node hosting a model of its own, without the file, copies it from the host for its replica", async () => {
  const file = await testModel("tiny", "q8_0");
  const own = "tiny-f32";
  const a = await startMeshNode([...SMALL_LLAMA, "--vram", "512MiB", "--model", MODEL], { models: { [`${MODEL}.gguf`]: file }, name: "a" });
  nodes.push(a);
  await waitFor(async () => (await loaded(a)).some((s) => s.model_name === MODEL && s.state === "ready"), { what: "a to serve the model", timeoutMs: 60_000 });
  // b hosts a model of its own (so it fetches nothing for a group) and has room for one more beside it.
  const b = await startMeshNode([...SMALL_LLAMA, "--vram", "256MiB", "--max-loaded-models", "2", "--model", own, "--join", a.token], {
    models: { [`${own}.gguf`]: await testModel("tiny", "f32") },
    name: "b",
  });
  nodes.push(b);
  await waitForFullMesh([a, b]);
  await waitFor(async () => (await loaded(b)).some((s) => s.model_name === own && s.state === "ready"), { what: "b to serve its own model", timeoutMs: 60_000 });
  const stop = new AbortController();
  const answered = burst(a, MODEL, 6, stop.signal, new Set());
  try {
    await waitFor(
      async () => {
        const seen = await peer(a, b.nodeId);
        return seen?.replicating?.includes(MODEL) && seen.serving.includes(MODEL);
      },
      { what: "b to serve a replica it copied from a", timeoutMs: 90_000 },
    );
  } finally {
    stop.abort();
  }
  await answered;
  await b.child.waitForOutput(new RegExp(`adding a replica: .*copy_from=${a.nodeId.slice(0, 10)}`), 1_000);
  expect((await loaded(b)).map((s) => s.model_name).sort()).toEqual([own, MODEL].sort());
  expect(await assigned(b)).toBe(own);
  expect((await listed(a))?.mesh).toMatchObject({ status: "ready", host: a.nodeId });
}, 240_000);
