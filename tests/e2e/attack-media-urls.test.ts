/**
 * A request that names an image or file by URL would make llama-server download it (the pinned
 * build fetches plain http: loopback, metadata, the LAN). Performed as an attacker would, from a
 * client and through another node: every API's shape of it is refused before any model sees it,
 * and the URL is never asked for. An image by URL the node the client called would fetch itself
 * (`tests/e2e/image-urls.test.ts`), but not from a loopback address these nodes' operators did not
 * allow (`--media-hosts`): the refusal says so.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { killAllChildren } from "../../harness/children.ts";
import { startMeshNode, waitForFullMesh, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel, testProjector } from "../../harness/models.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { waitFor } from "../../harness/wait.ts";

const MODEL = "vision-f32";
let host: MeshTestNode;
let entry: MeshTestNode;
let hits = 0;
const target = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => (hits++, new Response("not an image")) });
const url = `http://127.0.0.1:${target.port}/x.png`;

beforeAll(async () => {
  // A model that reads images, so that an image by URL meets the address rule, not the refusal of an image for a text model.
  const vision = await testModel("vision");
  host = await startMeshNode([...SMALL_LLAMA, "--model", MODEL], { models: { [`${MODEL}.gguf`]: vision, [`mmproj-${MODEL}.gguf`]: testProjector(vision) } });
  entry = await startMeshNode([...SMALL_LLAMA, "--join", host.token]);
  await waitForFullMesh([host, entry]);
  await waitFor(async () => {
    const models = (await (await fetch(`${entry.url}/v1/models`)).json()) as { data: { id: string; status: string }[] };
    return models.data.some((m) => m.id === MODEL && m.status === "loaded");
  }, { what: "the entry node to see the host's model" });
});
afterAll(async () => {
  await Promise.all([host?.stop(), entry?.stop()]);
  target.stop(true);
  await killAllChildren();
});

/** The shapes of an image by URL: the node would fetch them from a public address, and says why not this one. */
const IMAGES = new Set(["chat image_url", "responses input_image", "anthropic image by url", "apply-template", "count_tokens"]);

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
  test.each(bodies)(`${via}: %s naming a URL is refused, and the URL is never fetched`, async (kind, path, body) => {
    const node = via === "the node serving the model" ? host : entry;
    const res = await fetch(`${node.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: MODEL, ...body }) });
    expect(res.status).toBe(400);
    const { error } = (await res.json()) as { error: { code?: string; message: string } };
    // Anthropic's error shape carries no code.
    if (path !== "/v1/messages" && path !== "/v1/messages/count_tokens") expect(error.code).toBe("remote_media_refused");
    expect(error.message).toContain(url);
    expect(error.message).toContain(IMAGES.has(kind) ? "127.0.0.1 is not a public address: loopback" : "media by URL is not fetched");
    expect(hits).toBe(0);
  });
}

test("an inline image is not refused by the URL rule (these bytes are no whole image: the image check says so)", async () => {
  const res = await fetch(`${host.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgo=" } }] }] }),
  });
  expect(((await res.json()) as { error?: { code?: string } }).error?.code).toBe("invalid_image");
  expect(hits).toBe(0);
});
