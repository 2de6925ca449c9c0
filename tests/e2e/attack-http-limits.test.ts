/**
 * Issue 12, hole 4 (HTTP): unauthenticated memory and connection exhaustion. Chunked uploads with
 * a wrong key must cost the node no memory (the key is checked before any body byte is read);
 * stalled bodies must be cut by the idle timeout, and beyond --max-connections the node answers
 * 503 instead of going quiet. A model that works longer than the idle timeout is not cut.
 */
import { afterAll, afterEach, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import net from "node:net";
import { chat, post, startStream } from "../../harness/api.ts";
import { killAllChildren } from "../../harness/children.ts";
import { frozen } from "../../harness/freeze.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA, startNode, type TestNode } from "../../harness/node.ts";
import { waitFor, withDeadline } from "../../harness/wait.ts";

const nodes: TestNode[] = [];
const sockets: net.Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
});
afterAll(killAllChildren);

async function node(args: string[], opts: Parameters<typeof startNode>[1] = {}): Promise<TestNode> {
  const n = await startNode(args, opts);
  nodes.push(n);
  return n;
}

const MIB = 2 ** 20;
const rssBytes = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) * 1024;

/** A chunked upload of `bytes` zeros, made as it is sent (the client never holds it). */
function zeros(bytes: number): ReadableStream<Uint8Array> {
  const chunk = new Uint8Array(MIB);
  let sent = 0;
  return new ReadableStream<Uint8Array>({
    pull(c) {
      if (sent >= bytes) return c.close();
      sent += chunk.length;
      c.enqueue(chunk);
    },
  });
}

test("4 concurrent 64 MiB chunked uploads with a wrong key: 401 each, and the node's memory barely moves", async () => {
  const n = await node(["--api-key", "right-key"]);
  const pid = n.child.proc.pid;
  await n.child.waitForOutput(/mesh endpoint up/, 60_000);
  // Settled: the same work (one refused request) done once before measuring.
  expect((await fetch(`${n.url}/v1/models`, { headers: { authorization: "Bearer wrong" } })).status).toBe(401);
  const before = rssBytes(pid);
  let peak = before;
  const sampler = setInterval(() => (peak = Math.max(peak, rssBytes(pid))), 20);
  const upload = async () => {
    try {
      const res = await fetch(`${n.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: "Bearer wrong-key", "content-type": "application/json" },
        body: zeros(64 * MIB),
        duplex: "half",
      } as RequestInit);
      return res.status;
    } catch (err) {
      // The node may answer and close before the upload is done: that is the point.
      return `closed early (${(err as Error).message.split(".")[0]})`;
    }
  };
  const results = await withDeadline(Promise.all([upload(), upload(), upload(), upload()]), 60_000, "the 4 uploads");
  clearInterval(sampler);
  const after = rssBytes(pid);
  peak = Math.max(peak, after);
  console.log(`node RSS: before ${(before / MIB).toFixed(0)} MiB, peak ${(peak / MIB).toFixed(0)} MiB, after ${(after / MIB).toFixed(0)} MiB; answers: ${results.join(", ")}`);
  for (const r of results) expect(r === 401 || String(r).startsWith("closed early")).toBe(true);
  expect(results).toContain(401);
  expect(peak - before).toBeLessThan(100 * MIB);
  // And the right key still gets in.
  expect((await fetch(`${n.url}/v1/models`, { headers: { authorization: "Bearer right-key" } })).status).toBe(200);
});

interface Stalled {
  socket: net.Socket;
  /** Resolves with what the node sent back once the connection is closed (the test closes none before afterEach). */
  closed: Promise<{ received: string }>;
}

/** A request whose head says 1000 bytes of body follow, and only a few ever do. */
function stalledUpload(port: number): Stalled {
  const socket = net.connect(port, "127.0.0.1");
  sockets.push(socket);
  let received = "";
  socket.on("data", (d) => (received += d.toString()));
  const closed = new Promise<{ received: string }>((resolve) => {
    socket.on("error", () => undefined);
    socket.on("close", () => resolve({ received }));
  });
  socket.on("connect", () =>
    socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"model":`),
  );
  return { socket, closed };
}

/** /health answers (200, or 503 at the cap) within 5 s. */
async function healthAnswers(n: TestNode): Promise<number> {
  const res = await fetch(`${n.url}/health`, { signal: AbortSignal.timeout(5_000) });
  return res.status;
}

describe("with --max-connections 20 --idle-timeout 2s", () => {
  test("40 stalled bodies: the node keeps answering, refuses beyond the cap with 503, and closes every stalled one", async () => {
    const n = await node(["--max-connections", "20", "--idle-timeout", "2s"]);
    const stalled = Array.from({ length: 40 }, () => stalledUpload(n.port));
    await waitFor(() => stalled.every((s) => s.socket.bytesWritten > 0), { what: "every stalled upload to be sent" });

    // While they hang: every probe is answered in time.
    const probes: number[] = [];
    for (let i = 0; i < 3; i++) probes.push(await healthAnswers(n));
    for (const p of probes) expect([200, 503]).toContain(p);

    const ends = await withDeadline(Promise.all(stalled.map((s) => s.closed)), 30_000, "the node to close every stalled upload");
    const refused = ends.filter((e) => e.received.startsWith("HTTP/1.1 503"));
    console.log(`stalled uploads: ${ends.length} closed by the node, ${refused.length} of them answered 503 first; /health meanwhile: ${probes.join(", ")}`);
    expect(refused.length).toBeGreaterThanOrEqual(40 - 20 - 1);
    expect(refused[0]!.received).toMatch(/retry-after: 1/i);
    expect(refused[0]!.received).toContain('"code":"too_many_connections"');
    // Everything they held is free again.
    expect(await healthAnswers(n)).toBe(200);
  });

  test("a model that works longer than the idle timeout is not cut: plain and streamed answers complete", async () => {
    const n = await node([...SMALL_LLAMA, "--idle-timeout", "2s"], { models: { "chat.gguf": await testModel("tiny", "q8_0") } });
    const held = await frozen(n, "chat");
    try {
      const plain = chat(n, "chat", 2);
      const streamed = startStream(n, "chat", 4);
      // Well past the idle timeout (Bun's timer ticks in seconds) with no byte moving.
      await Bun.sleep(6_000);
      held.thaw();
      expect((await plain).status).toBe(200);
      const stream = await streamed;
      expect(stream.status).toBe(200);
      expect(await stream.text()).toContain("[DONE]");
      // A management request that waits works too.
      expect((await post(n, "/api/v1/unload", {})).status).toBe(200);
    } finally {
      held.thaw();
    }
  });
});
