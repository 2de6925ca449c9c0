/**
 * The Anthropic SDK against a node (its base URL is the node's root; it sends `x-api-key` and
 * `anthropic-version`): `messages.countTokens`, `messages.create` plain and streamed, on the node
 * that serves the model and on one that forwards to it.
 */
import Anthropic from "@anthropic-ai/sdk";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { killAllChildren } from "../../harness/children.ts";
import { hostAndEntry, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";

const MODEL = "tiny-q8_0";
/** Sent as `x-api-key`; the nodes need none (the key rules have their own tests). */
const KEY = "unused";
const nodes: MeshTestNode[] = [];
let host: MeshTestNode;
let entry: MeshTestNode;

beforeAll(async () => {
  ({ host, entry } = await hostAndEntry(MODEL, [...SMALL_LLAMA, "--model", await testModel("tiny", "q8_0")], SMALL_LLAMA, nodes));
}, 120_000);
afterAll(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  await killAllChildren();
});

const client = (node: MeshTestNode) => new Anthropic({ baseURL: node.url, apiKey: KEY, maxRetries: 0 });
const messages: Anthropic.MessageParam[] = [{ role: "user", content: "hello there" }];
// Greedy: random weights sampled at temperature 1 now and then pick the end-of-turn token first,
// and an answer with no text has no content_block_delta. Greedy gives the same tokens every run.
const GREEDY = { temperature: 0, top_k: 1 } as const;

describe.each([
  ["the serving node", () => host],
  ["a node that forwards", () => entry],
])("through %s", (_, node) => {
  test("messages.countTokens", async () => {
    const counted = await client(node()).messages.countTokens({ model: MODEL, messages });
    expect(counted.input_tokens).toBeGreaterThan(0);
  });

  test("messages.create", async () => {
    const msg = await client(node()).messages.create({ model: MODEL, max_tokens: 4, messages, ...GREEDY });
    expect(msg.type).toBe("message");
    expect(msg.role).toBe("assistant");
    expect(msg.usage.output_tokens).toBeGreaterThan(0);
  });

  test("an unknown model: NotFoundError in Anthropic's shape, its message the node's words", async () => {
    const err = await client(node()).messages.create({ model: "nowhere", max_tokens: 4, messages }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.NotFoundError);
    const e = err as InstanceType<typeof Anthropic.NotFoundError>;
    expect(e.error).toMatchObject({ type: "error", error: { type: "not_found_error", message: expect.stringContaining('model "nowhere"') } });
  });

  test("messages.create streamed, to message_stop", async () => {
    const stream = await client(node()).messages.create({ model: MODEL, max_tokens: 4, messages, stream: true, ...GREEDY });
    const types: string[] = [];
    for await (const event of stream) types.push(event.type);
    expect(types[0]).toBe("message_start");
    expect(types).toContain("content_block_delta");
    expect(types.at(-1)).toBe("message_stop");
  });
});
