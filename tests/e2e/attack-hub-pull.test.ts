/**
 * Attacks on pulling from the Hub (issue 14), on real nodes:
 * - a mesh member announces a model by a Hugging Face reference whose file is no GGUF (anyone can
 *   publish such a repository): the node assigned it must give up after a few tries, not download
 *   from the Hub again every half minute for as long as it runs, its one fetch slot held for good;
 * - the node's Hugging Face token, under either name the Hub's tools read it by, must not reach the
 *   children it starts (the rpc-server mesh members talk to, llama-server).
 */
import { afterAll, afterEach, expect, test } from "bun:test";
import { decodeJoinToken } from "../../mesh/join-token.ts";
import { killAllChildren } from "../../harness/children.ts";
import { startFakeHub, type FakeHub } from "../../harness/fake-hub.ts";
import { startMeshNode, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA, startNode, type TestNode } from "../../harness/node.ts";
import { descendantsOf } from "../../harness/processes.ts";
import { RoguePeer } from "../../harness/rogue-peer.ts";
import { waitFor } from "../../harness/wait.ts";

const nodes: TestNode[] = [];
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
});
afterAll(killAllChildren);

const gaveUp = (node: MeshTestNode, model: string) => node.child.output().includes(`giving up on the assigned model; choosing another model=${model} `);

test("a member's reference to a Hub file that is no GGUF: the node gives up after a few tries instead of downloading it again forever", async () => {
  const REPO = "evil-org/not-a-model";
  const FILE = "evil-Q4_K_M.gguf";
  const hub: FakeHub = await startFakeHub({ repos: [{ repo: REPO, files: { [FILE]: new TextEncoder().encode(`<html>${"not a model ".repeat(4096)}</html>`) } }] });
  cleanups.push(() => hub.stop());
  // An idle node with no models: once it has a peer, it takes a model of the catalog, which holds only this one.
  const victim = await startMeshNode(SMALL_LLAMA, { name: "victim", env: { HF_ENDPOINT: hub.endpoint } });
  nodes.push(victim);
  const rogue = await RoguePeer.start();
  cleanups.push(() => rogue.close());
  const member = await rogue.member(decodeJoinToken(victim.token));
  cleanups.push(() => member.close());
  member.mine.seeds = [{ name: "evil", ref: `${REPO}:Q4_K_M` }];

  // The backoff reaches 30 s by the sixth try: a node that does not give up is still at it then.
  const tries = () => hub.cdnRequests(REPO, FILE).length;
  await waitFor(() => gaveUp(victim, "evil") || tries() > 5, { what: "the victim to give up on the model", timeoutMs: 90_000 });
  expect(victim.child.output()).toContain("is not a GGUF model file");
  expect(gaveUp(victim, "evil")).toBe(true);
  expect(tries()).toBeLessThanOrEqual(3);
}, 120_000);


test("the Hugging Face token, as HF_TOKEN or HUGGING_FACE_HUB_TOKEN, is in no child's environment", async () => {
  const secrets = { HF_TOKEN: "hf_secret_in_HF_TOKEN_0123", HUGGING_FACE_HUB_TOKEN: "hf_secret_in_HUB_TOKEN_4567" };
  const node = await startNode(SMALL_LLAMA, { models: { "tiny.gguf": await testModel("tiny", "q8_0") }, env: secrets });
  nodes.push(node);
  // A request loads the model: a llama-server beside the rpc-server.
  const res = await fetch(`${node.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "tiny", messages: [{ role: "user", content: "hi" }], max_tokens: 2 }),
  });
  expect(res.status).toBe(200);
  await res.body?.cancel();
  const children = await waitFor(
    () => {
      const c = descendantsOf(node.child.proc.pid);
      return c.some((p) => p.cmdline.includes("rpc-server")) && c.some((p) => p.cmdline.includes("llama-server")) ? c : undefined;
    },
    { what: "the node's rpc-server and llama-server", timeoutMs: 60_000 },
  );
  for (const child of children) {
    for (const [name, value] of Object.entries(secrets)) expect({ child: child.cmdline, [name]: child.environ.includes(value) }).toEqual({ child: child.cmdline, [name]: false });
  }
}, 120_000);
