/**
 * A request that names an image or file by URL would make llama-server download it (the pinned
 * build fetches plain http: loopback, metadata, the LAN). Performed as an attacker would, from a
 * client and through another node: every API's shape of it is refused before any model sees it,
 * and the URL is never asked for.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { killAllChildren } from "../../harness/children.ts";
import { startMeshNode, waitForFullMesh, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { waitFor } from "../../harness/wait.ts";

let host: MeshTestNode;
let entry: MeshTestNode;
let hits = 0;
const target = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => (hits++, new Response("not an image")) });
const url = `http://127.0.0.1:${target.port}/x.png`;

beforeAll(async () => {
  host = await startMeshNode([...SMALL_LLAMA, "--model", await testModel("tiny", "q8_0")]);
  entry = await startMeshNode([...SMALL_LLAMA, "--join", host.token]);
  await waitForFullMesh([host, entry]);
  await waitFor(async () => {
    const models = (await (await fetch(`${entry.url}/v1/models`)).json()) as { data: { id: string; status: string }[] };
    return models.data.some((m) => m.id === "tiny-q8_0" && m.status === "loaded");
  }, { what: "the entry node to see the host's model" });
});
afterAll(async () => {
  await Promise.all([host?.stop(), entry?.stop()]);
  target.stop(true);
  await killAllChildren();
});

const bodies: [string, string, Record<string, unknown>][] = [
  ["chat image_url", "/v1/chat/completions", { messages: [{ role: "user", content: [{ type: "text", text: "what is this" }, { type: "image_url", image_url: { url } }] }] }],
  ["responses input_image", "/v1/responses", { input: [{ role: "user", content: [{ type: "input_image", image_url: url }] }] }],
  ["anthropic image by url", "/v1/messages", { max_tokens: 4, messages: [{ role: "user", content: [{ type: "image", source: { type: "url", url } }] }] }],
  ["chat video_url", "/v1/chat/completions", { messages: [{ role: "user", content: [{ type: "video_url", video_url: { url } }] }] }],
  ["chat input_video by url", "/v1/chat/completions", { messages: [{ role: "user", content: [{ type: "input_video", input_video: { url } }] }] }],
  ["chat input_audio whose data is a URL", "/v1/chat/completions", { messages: [{ role: "user", content: [{ type: "input_audio", input_audio: { data: url, format: "wav" } }] }] }],
  ["apply-template", "/apply-template", { messages: [{ role: "user", content: [{ type: "image_url", image_url: url }] }] }],
  ["count_tokens", "/v1/messages/count_tokens", { messages: [{ role: "user", content: [{ type: "image", source: { type: "url", url } }] }] }],
];

for (const via of ["the node serving the model", "another node of the mesh"] as const) {
  test.each(bodies)(`${via}: %s naming a URL is refused, and the URL is never fetched`, async (_, path, body) => {
    const node = via === "the node serving the model" ? host : entry;
    const res = await fetch(`${node.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "tiny-q8_0", ...body }) });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { code: string; message: string } }).error).toMatchObject({ code: "remote_media_refused", message: expect.stringContaining(url) });
    expect(hits).toBe(0);
  });
}

test("an inline image is not refused by the check (the tiny model has no projector, so llama-server says so)", async () => {
  const res = await fetch(`${host.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "tiny-q8_0", messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgo=" } }] }] }),
  });
  expect(((await res.json()) as { error?: { code?: string } }).error?.code).not.toBe("remote_media_refused");
  expect(hits).toBe(0);
});
