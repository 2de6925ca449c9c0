/**
 * Images by URL: the node the client called fetches them itself, under the rule
 * (`router/serving/image-fetch.ts`), and sends the request on with each image inline, so no member
 * and no llama-server ever fetches anything. A loopback image server the test runs logs every
 * request it gets: a node without `--media-hosts` refuses it (a private address) and asks nothing;
 * nodes with `--media-hosts 127.0.0.1` fetch the PNG, once, on the node the client called (the
 * entry, never the host its request is forwarded to), through the OpenAI client, Responses and the
 * Anthropic SDK, and the model sees the image (its projector's tokens in the prompt count); a file
 * that is no image, and a redirect to a refused address, are the client's 400; a member's request
 * naming a URL stays refused even on a node that allows the host.
 */
import Anthropic from "@anthropic-ai/sdk";
import { afterAll, beforeAll, beforeEach, expect, test } from "bun:test";
import OpenAI from "openai";
import { killAllChildren } from "../../harness/children.ts";
import { hostAndEntry, startMeshNode, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel, testProjector } from "../../harness/models.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { gradientPng } from "../../harness/png.ts";
import { rogueHttp } from "../../harness/rogue-http.ts";
import { RoguePeer, type RogueMembership } from "../../harness/rogue-peer.ts";
import { decodeJoinToken } from "../../mesh/join-token.ts";
import { imageTokens, projectorShape } from "../../scripts/test-model/projector.ts";
import { presetShape } from "../../scripts/test-model/presets.ts";

const VISION = "vision-f32";
const IMAGE_TOKENS = imageTokens(projectorShape(presetShape("vision", "f32").nEmbd));
const PNG = gradientPng(64, 48);
const ASK = "what is in this picture?";
const GREEDY = { temperature: 0 } as const;

/** Every request the image server got: its path and who it said it was. */
const seen: { path: string; host: string | null; agent: string | null }[] = [];
const images = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch: (req) => {
    const path = new URL(req.url).pathname;
    seen.push({ path, host: req.headers.get("host"), agent: req.headers.get("user-agent") });
    if (path === "/x.png") return new Response(PNG, { headers: { "content-type": "application/octet-stream" } });
    if (path === "/junk.png") return new Response("hello, not an image", { headers: { "content-type": "image/png" } });
    if (path === "/to-metadata") return new Response(null, { status: 302, headers: { location: "http://169.254.169.254/latest/meta-data/x.png" } });
    if (path === "/to-png") return new Response(null, { status: 302, headers: { location: "/x.png" } });
    return new Response("no", { status: 404 });
  },
});
const at = (path: string) => `http://127.0.0.1:${images.port}${path}`;

const nodes: MeshTestNode[] = [];
let host: MeshTestNode;
let entry: MeshTestNode;
/** A node without --media-hosts and no model: the rule refuses before any routing. */
let plain: MeshTestNode;
let rogue: RoguePeer | undefined;
let member: RogueMembership | undefined;

beforeAll(async () => {
  const vision = await testModel("vision");
  const models = { [`${VISION}.gguf`]: vision, [`mmproj-${VISION}.gguf`]: testProjector(vision) };
  const allow = ["--media-hosts", "127.0.0.1"];
  [{ host, entry }, plain] = await Promise.all([
    hostAndEntry(VISION, [...SMALL_LLAMA, "--model", VISION, ...allow], [...SMALL_LLAMA, ...allow], nodes, { models }),
    startMeshNode(SMALL_LLAMA),
  ]);
  nodes.push(plain);
}, 120_000);
beforeEach(() => void (seen.length = 0));
afterAll(async () => {
  member?.close();
  await Promise.all([...nodes.map((n) => n.stop()), rogue?.close()]);
  images.stop(true);
  await killAllChildren();
});

const openai = (node: MeshTestNode) => new OpenAI({ baseURL: `${node.url}/v1`, apiKey: "unused", maxRetries: 0 });
const anthropic = (node: MeshTestNode) => new Anthropic({ baseURL: node.url, apiKey: "unused", maxRetries: 0 });
const chat = (node: MeshTestNode, url?: string) =>
  openai(node).chat.completions.create({
    model: VISION,
    messages: [{ role: "user", content: [{ type: "text", text: ASK }, ...(url ? [{ type: "image_url" as const, image_url: { url } }] : [])] }],
    max_tokens: 4,
    ...GREEDY,
  });

test("a node without --media-hosts refuses a loopback URL (a private address) and asks nothing", async () => {
  for (const [path, body] of [
    ["/v1/chat/completions", { messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: at("/x.png") } }] }] }],
    ["/v1/messages", { max_tokens: 4, messages: [{ role: "user", content: [{ type: "image", source: { type: "url", url: at("/x.png") } }] }] }],
    ["/v1/responses", { input: [{ role: "user", content: [{ type: "input_image", image_url: at("/x.png") }] }] }],
  ] as const) {
    const res = await fetch(`${plain.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: VISION, ...body }) });
    expect(res.status).toBe(400);
    const text = await res.text();
    // Anthropic's error shape has no code: its message says the same.
    if (path !== "/v1/messages") expect(text).toContain("remote_media_refused");
    expect(text).toContain(at("/x.png"));
    expect(text).toContain("127.0.0.1 is not a public address: loopback (127.0.0.0/8)");
  }
  expect(seen).toEqual([]);
});

test("OpenAI chat through the entry: the entry fetches the image, once, and the host's model sees it", async () => {
  const text = await chat(entry);
  expect(seen).toEqual([]);
  const image = await chat(entry, at("/x.png"));
  expect(image.usage!.prompt_tokens).toBeGreaterThan(IMAGE_TOKENS);
  expect(image.usage!.prompt_tokens - text.usage!.prompt_tokens).toBe(IMAGE_TOKENS);
  // One request, by the node the client called, naming the host as the URL did.
  expect(seen).toEqual([{ path: "/x.png", host: `127.0.0.1:${images.port}`, agent: "mesh" }]);
  // The host answered it: the request crossed the mesh with the image inline.
  expect(image.model).toBe(VISION);
});

test("OpenAI Responses through the entry: an input_image by URL", async () => {
  const ask = (url?: string) =>
    openai(entry).responses.create({
      model: VISION,
      input: [{ role: "user", content: [{ type: "input_text", text: ASK }, ...(url ? [{ type: "input_image" as const, image_url: url, detail: "auto" as const }] : [])] }],
      max_output_tokens: 4,
      ...GREEDY,
    });
  const [text, image] = [await ask(), await ask(at("/x.png"))];
  expect(image.usage!.input_tokens - text.usage!.input_tokens).toBe(IMAGE_TOKENS);
  expect(seen.map((s) => s.path)).toEqual(["/x.png"]);
});

test("the Anthropic SDK on the host itself: an image block with a url source, and one followed through a redirect", async () => {
  const prompt = (usage: Anthropic.Usage) => usage.input_tokens + (usage.cache_read_input_tokens ?? 0) + (usage.cache_creation_input_tokens ?? 0);
  const ask = (url: string) =>
    anthropic(host).messages.create({ model: VISION, max_tokens: 4, messages: [{ role: "user", content: [{ type: "text", text: ASK }, { type: "image", source: { type: "url", url } }] }], ...GREEDY });
  expect(prompt((await ask(at("/x.png"))).usage)).toBeGreaterThan(IMAGE_TOKENS);
  expect(prompt((await ask(at("/to-png"))).usage)).toBeGreaterThan(IMAGE_TOKENS);
  expect(seen.map((s) => s.path)).toEqual(["/x.png", "/to-png", "/x.png"]);
});

test("a file that is no image: the dialect's 400, \"not an image\"", async () => {
  const err = await chat(entry, at("/junk.png")).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(OpenAI.BadRequestError);
  expect((err as Error).message).toContain(`the image at ${at("/junk.png")} is not an image`);

  const inAnthropic = await anthropic(entry)
    .messages.create({ model: VISION, max_tokens: 4, messages: [{ role: "user", content: [{ type: "image", source: { type: "url", url: at("/junk.png") } }] }] })
    .catch((e: unknown) => e);
  expect(inAnthropic).toBeInstanceOf(Anthropic.BadRequestError);
  expect((inAnthropic as InstanceType<typeof Anthropic.BadRequestError>).error).toMatchObject({ type: "error", error: { type: "invalid_request_error", message: expect.stringContaining("is not an image") } });
  // Asked by the entry only, once per request.
  expect(seen.map((s) => s.path)).toEqual(["/junk.png", "/junk.png"]);
});

test("a redirect to a refused address is refused, and that address is never asked", async () => {
  const err = await chat(entry, at("/to-metadata")).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(OpenAI.BadRequestError);
  expect((err as Error).message).toContain("it redirects to http://169.254.169.254/latest/meta-data/x.png: its host 169.254.169.254 is not a public address: link-local");
  expect(seen.map((s) => s.path)).toEqual(["/to-metadata"]);
});

test("a member's request naming a URL stays refused on a node that allows the host: a member makes it fetch nothing", async () => {
  rogue = await RoguePeer.start();
  member = await rogue.member(decodeJoinToken(host.token));
  const bodies = [
    { model: VISION, messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: at("/x.png") } }] }], max_tokens: 4 },
    { model: VISION, max_tokens: 4, messages: [{ role: "user", content: [{ type: "image", source: { type: "url", url: at("/x.png") } }] }] },
  ];
  for (const [path, body] of [["/v1/chat/completions", bodies[0]], ["/v1/messages", bodies[1]]] as const) {
    const answer = await rogueHttp(member, { method: "POST", path, body: JSON.stringify(body) });
    expect("status" in answer && answer.status).toBe(400);
    expect("body" in answer && answer.body).toContain("media by URL is not fetched");
  }
  expect(seen).toEqual([]);
}, 60_000);
