/**
 * One download per mesh (issue 14): three real nodes all asked for a model by its Hugging Face
 * reference, which none of them has. One member pulls it from the (fake, loopback) Hub; the others
 * wait for it and copy it from that member over the mesh: the Hub sees one download of the file.
 * And when the member pulling it goes away before it is done, another one takes the job over.
 */
import { afterAll, afterEach, beforeAll, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { killAllChildren } from "../../harness/children.ts";
import { startFakeHub, type FakeHub } from "../../harness/fake-hub.ts";
import { meshStatus, startMeshNode, waitForFullMesh, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { waitFor } from "../../harness/wait.ts";

const REPO = "test-org/tiny-GGUF";
const FILE = "tiny-q8_0.gguf";
const REF = `${REPO}:Q8_0`;
/** What the pull names the model: the reference as typed. */
const MODEL = REF;

let hub: FakeHub;
const nodes: MeshTestNode[] = [];

beforeAll(async () => {
  hub = await startFakeHub({ repos: [{ repo: REPO, files: { [FILE]: { fromFile: await testModel("tiny", "q8_0") }, "README.md": new TextEncoder().encode("# tiny\n") } }] });
});
afterEach(async () => {
  hub.release();
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
});
afterAll(async () => {
  await killAllChildren();
  await hub?.stop();
});

async function node(args: string[]): Promise<MeshTestNode> {
  const n = await startMeshNode(["--model", REF, ...SMALL_LLAMA, ...args], { env: { HF_ENDPOINT: hub.endpoint } });
  nodes.push(n);
  return n;
}

interface Catalog {
  models: { catalog: { name: string; nodesOnDisk: string[]; ref?: string }[] };
}
const entryOn = async (n: MeshTestNode) => ((await meshStatus(n)) as unknown as Catalog).models.catalog.find((m) => m.name === MODEL);

/** Fresh downloads of the file the CDN was asked for: a resumed one asks with a Range. */
const freshDownloads = () => hub.cdnRequests(REPO, FILE).filter((r) => r.range === null).length;

/** Waits until every node lists each of `holders` with the model on disk. */
async function everyoneHasIt(all: MeshTestNode[], holders: MeshTestNode[]): Promise<void> {
  const want = holders.map((h) => h.nodeId).sort();
  await waitFor(
    async () => {
      for (const n of all) if (JSON.stringify((await entryOn(n))?.nodesOnDisk) !== JSON.stringify(want)) return false;
      return true;
    },
    { what: `every node to see the model on ${holders.length} nodes`, timeoutMs: 90_000 },
  );
}

/** The copy a member made: the model's file under its name, and models.json saying what it is. */
function expectCopied(n: MeshTestNode): void {
  expect(existsSync(join(n.modelsDir, `${MODEL}.gguf`))).toBe(true);
  const registry = JSON.parse(readFileSync(join(n.modelsDir, "models.json"), "utf8")) as Record<string, { file: string; ref?: string }>;
  expect(registry[MODEL]).toMatchObject({ file: `${MODEL}.gguf`, ref: `${REPO}/${FILE}` });
}

test("three nodes want a model none has: one pulls it, the others copy it within the mesh; the Hub serves it once", async () => {
  // The first node's download stalls after 1 KiB until the test lets it go, so both others are
  // in the mesh, assigned the model, while it is still being pulled.
  hub.cutNext(REPO, FILE, 1024, { hold: true });
  const a = await node([]);
  await a.child.waitForOutput(/fetching model model=\S+ from=test-org/, 60_000);
  const [b, c] = await Promise.all([node(["--join", a.token]), node(["--join", a.token])]);
  await waitForFullMesh([a, b, c]);
  // Both wait for the member that pulls it (even one that would rank first by its id).
  for (const n of [b, c]) await n.child.waitForOutput(new RegExp(`waiting for the model model=\\S+ why="node ${a.nodeId.slice(0, 10)} downloads it`), 60_000);
  expect(freshDownloads()).toBe(1);

  hub.release();
  await everyoneHasIt([a, b, c], [a, b, c]);
  expect(hub.downloads(REPO, FILE)).toBe(1);
  expect(freshDownloads()).toBe(1);
  // From the one that pulled it, or from the other once that one holds the same bytes (a later
  // copier may take either; a clean-clone CI saw c copy from b).
  const members = [a, b, c].map((n) => n.nodeId.slice(0, 10)).join("|");
  for (const n of [b, c]) {
    expect(n.child.output()).toMatch(new RegExp(`fetching model model=\\S+ from="?node (${members})`));
    expect(n.child.output()).not.toMatch(/fetching model model=\S+ from=test-org/);
    expectCopied(n);
  }
  // Every node names it by the exact reference of the files the mesh has.
  for (const n of [a, b, c]) expect((await entryOn(n))?.ref).toBe(`${REPO}/${FILE}`);

  // And it answers, through a node that did not pull it.
  const res = await fetch(`${c.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 4 }),
  });
  expect(res.status).toBe(200);
  expect(((await res.json()) as { choices: unknown[] }).choices.length).toBe(1);
}, 240_000);

test("the member pulling it leaves before it is done: another member pulls it, the last one copies it", async () => {
  hub.cutNext(REPO, FILE, 1024, { hold: true });
  const before = { fresh: freshDownloads(), done: hub.downloads(REPO, FILE) };
  const a = await node([]);
  await a.child.waitForOutput(/fetching model model=\S+ from=test-org/, 60_000);
  const [b, c] = await Promise.all([node(["--join", a.token]), node(["--join", a.token])]);
  await waitForFullMesh([a, b, c]);
  for (const n of [b, c]) await n.child.waitForOutput(/waiting for the model model=/, 60_000);

  // The puller goes with its download half done (held by the Hub).
  expect(await a.stop()).toBe(0);
  nodes.splice(nodes.indexOf(a), 1);
  await everyoneHasIt([b, c], [b, c]);

  // Exactly one of the two pulled it, from the Hub; the other copied it from that one.
  const pulled = [b, c].filter((n) => /fetching model model=\S+ from=test-org/.test(n.child.output()));
  expect(pulled).toHaveLength(1);
  const [puller] = pulled;
  const copier = puller === b ? c : b;
  expect(copier.child.output()).toMatch(new RegExp(`fetching model model=\\S+ from="?node ${puller!.nodeId.slice(0, 10)}`));
  expectCopied(copier);
  expect(freshDownloads() - before.fresh).toBe(2);
  expect(hub.downloads(REPO, FILE) - before.done).toBe(1);
}, 240_000);
