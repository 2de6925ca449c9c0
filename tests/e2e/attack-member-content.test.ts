/**
 * Issue 27, a name is not the bytes: a member that announces a model's name and serves other bytes
 * under it never has a node install them. A copy is taken only from a holder announcing the content
 * identity the mesh agrees on, and the files it lists are checked against that identity before a
 * byte is written; a holder that lied is not asked again. Two contents under one name: nobody's
 * copy is taken until one is left. A real joiner and a real honest holder; the member is built from
 * our own modules and serves its own files.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { decodeJoinToken } from "../../mesh/join-token.ts";
import { StreamKind } from "../../streams/wire.ts";
import { contentIdentity } from "../../models/content-identity.ts";
import { killAllChildren } from "../../harness/children.ts";
import { startMeshNode, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { RoguePeer, type RogueMembership } from "../../harness/rogue-peer.ts";
import { sha256, tempDirs } from "../../harness/transfer.ts";
import { waitFor } from "../../harness/wait.ts";

const TINY = "tiny-q8_0";
const dirs = tempDirs("mesh-content-");
let joiner: MeshTestNode;
let holder: MeshTestNode | undefined;
let rogue: RoguePeer;
let member: RogueMembership;
let real: Uint8Array;
let fake: string;

beforeAll(async () => {
  const tiny = await testModel("tiny", "q8_0");
  real = readFileSync(tiny);
  // The member's file: as large as the model, other bytes.
  fake = join(dirs.fresh("rogue"), `${TINY}.gguf`);
  writeFileSync(fake, Buffer.concat([real.subarray(0, 4), randomBytes(real.length - 4)]));
  // A node with no model: once it has a peer it takes a model of the mesh's and copies it from whoever the mesh says has it.
  [joiner, rogue] = await Promise.all([startMeshNode([...SMALL_LLAMA]), RoguePeer.start()]);
  member = await rogue.member(decodeJoinToken(joiner.token));
  member.recordStreams((model) => (model === TINY ? { files: [fake] } : undefined));
});
afterAll(async () => {
  member?.close();
  await Promise.all([joiner?.stop(), holder?.stop(), rogue?.close()]);
  await killAllChildren();
  dirs.remove();
});

const identityOf = (bytes: Uint8Array) => contentIdentity([{ name: `${TINY}.gguf`, size: bytes.length, sha256: sha256(bytes) }]);
/** What `node` lists of tiny's content: the identity its holders agree on, and whether they disagree. */
async function contentOf(node: MeshTestNode) {
  const list = (await (await fetch(`${node.url}/v1/models`)).json()) as { data: { id: string; mesh?: { content_sha256: string | null; contested: boolean } }[] };
  const mesh = list.data.find((m) => m.id === TINY)?.mesh;
  return mesh && { content_sha256: mesh.content_sha256, contested: mesh.contested };
}

/** Every file under the joiner's models dir (parts of copies included), with its bytes' hash. */
const filesOf = (dir: string) =>
  (readdirSync(dir, { recursive: true }) as string[]).filter((f) => statSync(join(dir, f)).isFile() && f !== "models.json").map((f) => [f, sha256(readFileSync(join(dir, f)))]);

test("a member naming the real content and serving other bytes, then announcing its own content beside an honest holder: no byte of its file lands; the honest copy is taken once it is gone", async () => {
  const need = real.length * 2;
  // 1. It claims the real model's identity, and serves its own file.
  Object.assign(member.mine, { modelsOnDisk: [{ name: TINY, size: real.length, need, identity: identityOf(real) }] });
  await waitFor(async () => joiner.child.output().includes("a member offered other files than the model's content"), { what: "the joiner to refuse the member's files", timeoutMs: 60_000 });
  expect(member.streamsFromNode).toContain(StreamKind.MODEL);
  expect(filesOf(joiner.modelsDir)).toEqual([]);

  // 2. It announces its own file's content now (the joiner hears it); an honest holder of the real one joins.
  const its = identityOf(readFileSync(fake));
  Object.assign(member.mine, { modelsOnDisk: [{ name: TINY, size: real.length, need, identity: its }] });
  await waitFor(async () => (await contentOf(joiner))?.content_sha256 === its, { what: "the joiner to hear the member's new claim" });
  holder = await startMeshNode([...SMALL_LLAMA, "--model", TINY, "--join", joiner.token], { models: { [`${TINY}.gguf`]: await testModel("tiny", "q8_0") } });
  await waitFor(async () => joiner.child.output().includes("members announce different contents under its name"), { what: "the joiner to see two contents under the name and copy neither", timeoutMs: 60_000 });
  expect(await contentOf(joiner)).toEqual({ content_sha256: null, contested: true });
  expect(filesOf(joiner.modelsDir)).toEqual([]);

  // 3. The member goes: one content is left, the honest holder's, and the joiner copies it.
  member.close();
  const arrived = join(joiner.modelsDir, `${TINY}.gguf`);
  await waitFor(async () => existsSync(arrived), { what: "the joiner to copy tiny from the honest holder", timeoutMs: 90_000 });
  expect(sha256(readFileSync(arrived))).toBe(sha256(real));
  expect(await contentOf(joiner)).toEqual({ content_sha256: identityOf(real), contested: false });
  expect(filesOf(joiner.modelsDir).map(([, h]) => h)).not.toContain(sha256(readFileSync(fake)));
});
