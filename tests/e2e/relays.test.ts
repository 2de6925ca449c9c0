/**
 * A mesh's own relays (`--relay URL`, the iroh 1.x line): the join token carries them, a joiner
 * told nothing else uses them and its state dir keeps them for its restarts; the 0.35 line, which
 * cannot be given relays, refuses at start. No
 * relay server can run here (iroh-relay is a Rust binary and nothing outside loopback is reachable),
 * so the relay named is a port where nothing listens: the nodes still meet over their direct
 * addresses, which is what a relay that is down must never break.
 */
import { afterAll, afterEach, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { decodeJoinToken } from "../../mesh/join-token.ts";
import { freePort } from "../../pool/free-port.ts";
import { killAllChildren } from "../../harness/children.ts";
import { meshReady, meshStatus, waitForFullMesh, type MeshTestNode } from "../../harness/mesh.ts";
import { startNode } from "../../harness/node.ts";

const nodes: { stop: () => Promise<unknown> }[] = [];
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
});
afterAll(killAllChildren);

async function node(args: string[], relay: string[]): Promise<MeshTestNode> {
  // On the line the test names, or the one the node decides: relays of one's own are an iroh1 thing.
  const started = await startNode(args, { relay, ownLine: true });
  nodes.push(started);
  return meshReady(started);
}

test("the mesh's own relays ride in its token; a joiner told nothing else uses them and the two meet", async () => {
  const relay = `http://127.0.0.1:${freePort()}`;
  const a = await node(["--transport", "iroh1"], [relay]);
  const token = decodeJoinToken(a.token);
  expect(token.line).toBe("iroh1");
  expect(token.relays).toEqual([relay]);
  const b = await node(["--join", a.token], []);
  expect(b.child.output()).toContain(`using the mesh's own relays, from the join token relays=${relay}`);
  expect(decodeJoinToken(b.token).relays).toEqual([relay]);
  await waitForFullMesh([a, b]);
  expect((await meshStatus(b)).relay).toContain(relay);
  // Restarted as a systemd unit restarts it (no --join): the state dir kept the mesh's relays.
  expect(await b.child.stop()).toBe(0);
  nodes.splice(nodes.indexOf(b), 1);
  const again = await node(["--state-dir", b.stateDir], []);
  nodes.push({ stop: async () => rmSync(b.stateDir, { recursive: true, force: true }) });
  expect(again.child.output()).toContain(`using the mesh's own relays, from the state dir relays=${relay}`);
  expect(decodeJoinToken(again.token)).toMatchObject({ line: "iroh1", relays: [relay] });
  await waitForFullMesh([a, again], 60_000);
}, 120_000);

test("relays of one's own on the 0.35 line are refused at start, saying which line takes them", async () => {
  // Before the node listens or builds anything.
  await expect(startNode(["--transport", "iroh035"], { relay: ["https://relay.example.org"] })).rejects.toThrow(/exited \(1\)[^]*relays of your own \(--relay URL\) need --transport iroh1/);
}, 120_000);
