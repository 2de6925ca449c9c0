/**
 * Images through the mesh, in every dialect's official client, on the node that serves a vision
 * model (the `vision` test model with its projector beside it) and on one that forwards to it: each
 * image reaches the model as its projector's tokens (the answer's prompt count grows by them). An
 * image sent to a model without a projector is refused before anything loads, naming the vision
 * model; an image that is not one gets the dialect's 400 and the server stays up; both nodes say
 * which model reads images.
 */
import Anthropic from "@anthropic-ai/sdk";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Ollama } from "ollama";
import OpenAI from "openai";
import { killAllChildren } from "../../harness/children.ts";
import { hostAndEntry, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel, testProjector } from "../../harness/models.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { gradientPng, pngDataUrl } from "../../harness/png.ts";
import { imageTokens, projectorShape } from "../../scripts/test-model/projector.ts";
import { presetShape } from "../../scripts/test-model/presets.ts";

const VISION = "vision-f32";
/** A text model on the host's disk, never loaded here. */
const TEXT = "tiny-q8_0";
/** What the projector makes of any image. */
const IMAGE_TOKENS = imageTokens(projectorShape(presetShape("vision", "f32").nEmbd));
const PNG = gradientPng(64, 48);
const PNG_B64 = Buffer.from(PNG).toString("base64");
const JUNK_B64 = Buffer.from("hello, not an image").toString("base64");
const ASK = "what is in this picture?";
/** First words no two questions share: a cached prefix then counts the same for both (Ollama's and Anthropic's counts leave cached tokens out). */
const FIRST_WORDS = "one two three four five six seven eight nine ten red green blue black white water fire earth air light dark".split(" ");
const asked = () => `${FIRST_WORDS.shift() ?? "hello"} ${ASK}`;
/**
 * The image's tokens in a prompt count, where the two questions' first words and the cached prefix
 * before them may differ by a token or two, and a text put beside an image as a list of parts gains
 * a separator: the projector's tokens, give or take a few (a text-only prompt here is under 30).
 */
const expectImageTokens = (withImage: number, without: number) => {
  expect(withImage - without).toBeGreaterThanOrEqual(IMAGE_TOKENS - 4);
  expect(withImage - without).toBeLessThan(IMAGE_TOKENS + 8);
};
const GREEDY = { temperature: 0 } as const;

const nodes: MeshTestNode[] = [];
let host: MeshTestNode;
let entry: MeshTestNode;

beforeAll(async () => {
  const vision = await testModel("vision");
  const models = { [`${VISION}.gguf`]: vision, [`mmproj-${VISION}.gguf`]: testProjector(vision), [`${TEXT}.gguf`]: await testModel("tiny", "q8_0") };
  ({ host, entry } = await hostAndEntry(VISION, [...SMALL_LLAMA, "--model", VISION], SMALL_LLAMA, nodes, { models }));
}, 120_000);
afterAll(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  await killAllChildren();
});

const through = [
  ["the serving node", () => host],
  ["a node that forwards", () => entry],
] as const;

describe.each(through)("through %s", (_, node) => {
  const openai = () => new OpenAI({ baseURL: `${node().url}/v1`, apiKey: "unused", maxRetries: 0 });
  const anthropic = () => new Anthropic({ baseURL: node().url, apiKey: "unused", maxRetries: 0 });
  const ollama = () => new Ollama({ host: node().url });

  test("OpenAI chat: an image_url data URL, whole and streamed", async () => {
    const ask = (image: boolean) =>
      openai().chat.completions.create({
        model: VISION,
        messages: [{ role: "user", content: [{ type: "text", text: ASK }, ...(image ? [{ type: "image_url" as const, image_url: { url: pngDataUrl(PNG) } }] : [])] }],
        max_tokens: 4,
        ...GREEDY,
      });
    const [text, image] = [await ask(false), await ask(true)];
    expect(image.usage!.prompt_tokens - text.usage!.prompt_tokens).toBe(IMAGE_TOKENS);

    const stream = await openai().chat.completions.create({
      model: VISION,
      messages: [{ role: "user", content: [{ type: "text", text: ASK }, { type: "image_url", image_url: { url: pngDataUrl(PNG) } }] }],
      max_tokens: 4,
      stream: true,
      stream_options: { include_usage: true },
      ...GREEDY,
    });
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) usage = chunk.usage ?? usage;
    expect(usage!.prompt_tokens).toBe(image.usage!.prompt_tokens);
  });

  test("OpenAI Responses: an input_image", async () => {
    const ask = (image: boolean) =>
      openai().responses.create({
        model: VISION,
        input: [{ role: "user", content: [{ type: "input_text", text: ASK }, ...(image ? [{ type: "input_image" as const, image_url: pngDataUrl(PNG), detail: "auto" as const }] : [])] }],
        max_output_tokens: 4,
        ...GREEDY,
      });
    const [text, image] = [await ask(false), await ask(true)];
    expect(image.usage!.input_tokens - text.usage!.input_tokens).toBe(IMAGE_TOKENS);
  });

  test("Anthropic messages: a base64 image block, whole and streamed", async () => {
    const content = (image: boolean): Anthropic.ContentBlockParam[] => [
      { type: "text", text: asked() },
      ...(image ? [{ type: "image" as const, source: { type: "base64" as const, media_type: "image/png" as const, data: PNG_B64 } }] : []),
    ];
    const ask = (image: boolean) => anthropic().messages.create({ model: VISION, max_tokens: 4, messages: [{ role: "user", content: content(image) }], ...GREEDY });
    // Anthropic's input_tokens leave out what was read from the cache.
    const prompt = (usage: Anthropic.Usage) => usage.input_tokens + (usage.cache_read_input_tokens ?? 0) + (usage.cache_creation_input_tokens ?? 0);
    const [text, image] = [await ask(false), await ask(true)];
    expectImageTokens(prompt(image.usage), prompt(text.usage));

    const streamed = await anthropic().messages.stream({ model: VISION, max_tokens: 4, messages: [{ role: "user", content: content(true) }], ...GREEDY }).finalMessage();
    expectImageTokens(prompt(streamed.usage), prompt(text.usage));
  });

  test("Ollama: images on /api/chat and /api/generate", async () => {
    // Ollama's prompt_eval_count leaves out the cached prefix: each question starts with a word of its own.
    const chat = (images: string[]) => ollama().chat({ model: VISION, messages: [{ role: "user", content: asked(), images }], stream: false, options: { num_predict: 4, temperature: 0 } });
    const [text, image] = [await chat([]), await chat([PNG_B64])];
    expectImageTokens(image.prompt_eval_count, text.prompt_eval_count);

    const generate = (images: string[]) => ollama().generate({ model: VISION, prompt: asked(), images, stream: false, options: { num_predict: 4, temperature: 0 } });
    const [plain, seen] = [await generate([]), await generate([PNG_B64])];
    expectImageTokens(seen.prompt_eval_count, plain.prompt_eval_count);
  });

  test("a model without a projector: a 400 naming the vision model, from the node (llama-server's own would be a 500 naming no model)", async () => {
    const err = await openai()
      .chat.completions.create({ model: TEXT, messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: pngDataUrl(PNG) } }] }], max_tokens: 4 })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as Error).message).toContain(`model "${TEXT}" does not read images (it has no projector); models of the mesh that do: ${VISION}`);

    const inAnthropic = await anthropic()
      .messages.create({ model: TEXT, max_tokens: 4, messages: [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: PNG_B64 } }] }] })
      .catch((e: unknown) => e);
    expect(inAnthropic).toBeInstanceOf(Anthropic.BadRequestError);
    expect((inAnthropic as InstanceType<typeof Anthropic.BadRequestError>).error).toMatchObject({ type: "error", error: { type: "invalid_request_error", message: expect.stringContaining(VISION) } });

    const inOllama = await ollama()
      .chat({ model: TEXT, messages: [{ role: "user", content: ASK, images: [PNG_B64] }], stream: false })
      .catch((e: unknown) => e);
    expect((inOllama as Error).message).toContain("does not read images");
  });

  test("an image that is not one: the dialect's 400, and the vision model still answers", async () => {
    const bad = await openai()
      .chat.completions.create({ model: VISION, messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: `data:image/png;base64,${JUNK_B64}` } }] }], max_tokens: 4 })
      .catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
    expect((bad as Error).message).toContain("the image at messages[0].content[0] is not an image");

    const inAnthropic = await anthropic()
      .messages.create({ model: VISION, max_tokens: 4, messages: [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: JUNK_B64 } }] }] })
      .catch((e: unknown) => e);
    expect(inAnthropic).toBeInstanceOf(Anthropic.BadRequestError);

    const inOllama = await ollama()
      .generate({ model: VISION, prompt: ASK, images: [JUNK_B64], stream: false })
      .catch((e: unknown) => e);
    expect((inOllama as Error).message).toContain("is not an image");

    const after = await openai().chat.completions.create({ model: VISION, messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: pngDataUrl(PNG) } }] }], max_tokens: 2 });
    expect(after.usage!.prompt_tokens).toBeGreaterThan(IMAGE_TOKENS);
  });

  test("/v1/models and /api/show say which model reads images", async () => {
    const models = (await (await fetch(`${node().url}/v1/models`)).json()) as { data: { id: string; capabilities: string[]; labels: string[] }[] };
    const of = (id: string) => models.data.find((m) => m.id === id);
    expect(of(VISION)).toMatchObject({ capabilities: ["completion", "vision"], labels: expect.arrayContaining(["vision"]) });
    expect(of(TEXT)?.capabilities).toEqual(["completion"]);
    expect((await ollama().show({ model: VISION })).capabilities).toEqual(["completion", "vision"]);
    expect((await ollama().show({ model: TEXT })).capabilities).toEqual(["completion"]);
  });
});
