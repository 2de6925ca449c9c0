/**
 * A host that dies mid-stream, seen through the node that forwarded to it: each client hears the
 * end of its stream in its own dialect and raises its own error (the OpenAI SDK an APIError from the
 * error data line of a chat stream and from the `error` event of a Responses stream, the Anthropic
 * SDK an APIError from `event: error`, the Ollama client the `error` line; with MESH_PYTHON, the
 * Python SDK's `responses.stream` helper raises its APIError too), never a stream that just stops,
 * and never an event cut in half.
 */
import Anthropic from "@anthropic-ai/sdk";
import { afterAll, expect, test } from "bun:test";
import { Ollama } from "ollama";
import OpenAI from "openai";
import { loaded } from "../../harness/api.ts";
import { killAllChildren, spawnChild } from "../../harness/children.ts";
import { meshStatus, startMeshNode, waitForFullMesh, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { pythonUnavailable } from "../../harness/python.ts";
import { waitFor } from "../../harness/wait.ts";

const nodes: MeshTestNode[] = [];
afterAll(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  await killAllChildren();
});

const MODEL = "wide-q8_0";
// Room for five long answers at once (four JS clients and the Python one): one slot each, each far
// from its end when the host dies. The wide model writes about 120 tokens a second on one thread
// (tiny writes 900): a stream outlives the seconds the Python client takes to start on a loaded machine.
const HOST_LLAMA = ["--ctx-size", "10240", "--llamacpp-args", "--threads 1 --threads-batch 1 --parallel 5", "--rpc-threads", "1", "--rpc-direct", "off"];
const LONG = 1500;
const prompt = "hello there";

/** The Python SDK's Responses stream helper, as its users write it: says when text came, then how the stream ended. */
const PYTHON_RESPONSES_STREAM = `
import sys, openai
client = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="unused", max_retries=0)
said = False
try:
    with client.responses.stream(model=sys.argv[2], input=sys.argv[3], max_output_tokens=int(sys.argv[4]), temperature=0, extra_body={"ignore_eos": True}) as stream:
        for event in stream:
            if event.type == "response.output_text.delta" and not said:
                said = True
                print("first", flush=True)
    print("ended without raising", flush=True)
except Exception as e:
    print(f"raised {type(e).__name__}: {e}", flush=True)
`;

/** Reads `stream` until its first piece, then hands back the rest as a promise of how it ended. */
async function afterFirst<T>(stream: AsyncIterable<T>): Promise<() => Promise<{ pieces: number; error?: unknown }>> {
  const it = stream[Symbol.asyncIterator]();
  const first = await it.next();
  expect(first.done).toBe(false);
  return async () => {
    let pieces = 1;
    try {
      while (!(await it.next()).done) pieces++;
      return { pieces };
    } catch (error) {
      return { pieces, error };
    }
  };
}

test("the host killed mid-stream: OpenAI (chat and Responses), Anthropic and Ollama clients on the forwarding node each get their dialect's error", async () => {
  const host = await startMeshNode([...HOST_LLAMA, "--model", await testModel("wide", "q8_0")], { name: "host" });
  nodes.push(host);
  // It forwards and copies nothing (the model is 91 MiB).
  const entry = await startMeshNode(["--ctx-size", "512", "--rpc-threads", "1", "--fetch", "off", "--join", host.token], { name: "entry" });
  nodes.push(entry);
  await waitForFullMesh([host, entry]);
  await waitFor(async () => (await loaded(host)).some((s) => s.model_name === MODEL && s.state === "ready"), { what: "the host to serve the model", timeoutMs: 60_000 });
  await waitFor(async () => (await meshStatus(entry)).peers.some((p) => p.serving.includes(MODEL)), { what: "the entry to see the model" });

  // Greedy, with the end of text never picked: the answers run until the host dies.
  const openai = new OpenAI({ baseURL: `${entry.url}/v1`, apiKey: "unused", maxRetries: 0 });
  const chat = await afterFirst(
    await openai.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: prompt }], max_tokens: LONG, stream: true, temperature: 0, ...{ ignore_eos: true } }),
  );
  const responses = await afterFirst(await openai.responses.create({ model: MODEL, input: prompt, max_output_tokens: LONG, stream: true, ...{ temperature: 0, ignore_eos: true } }));
  const anthropic = new Anthropic({ baseURL: entry.url, apiKey: "unused", maxRetries: 0 });
  const messages = await afterFirst(
    await anthropic.messages.create({ model: MODEL, max_tokens: LONG, messages: [{ role: "user", content: prompt }], stream: true, ...{ temperature: 0, ignore_eos: true } }),
  );
  const ollama = new Ollama({ host: entry.url });
  const ollamaChat = await afterFirst(await ollama.chat({ model: MODEL, messages: [{ role: "user", content: prompt }], stream: true, options: { num_predict: LONG, temperature: 0 } }));
  const python = pythonUnavailable() ? undefined : spawnChild("python-responses", [process.env.MESH_PYTHON!, "-c", PYTHON_RESPONSES_STREAM, entry.url, MODEL, prompt, String(LONG)]);
  await python?.waitForOutput(/^first$/m, 60_000);

  host.child.proc.kill("SIGKILL");
  const [c, r, m, o] = await Promise.all([chat(), responses(), messages(), ollamaChat()]);

  expect(c.error).toBeInstanceOf(OpenAI.APIError);
  expect((c.error as InstanceType<typeof OpenAI.APIError>).message).toContain("went away mid-stream");
  expect(r.error).toBeInstanceOf(OpenAI.APIError);
  expect((r.error as InstanceType<typeof OpenAI.APIError>).message).toContain("went away mid-stream");
  expect(m.error).toBeInstanceOf(Anthropic.APIError);
  expect((m.error as InstanceType<typeof Anthropic.APIError>).message).toContain("went away mid-stream");
  expect(o.error).toBeInstanceOf(Error);
  expect((o.error as Error).message).toContain("went away mid-stream");
  if (python) {
    const ended = (await python.waitForOutput(/^(raised .*|ended without raising)$/m, 60_000))[1];
    expect(ended).toStartWith("raised APIError: ");
    expect(ended).toContain("went away mid-stream");
  } else console.log(`SKIP the Python SDK's Responses stream: ${pythonUnavailable()}`);
}, 180_000);
