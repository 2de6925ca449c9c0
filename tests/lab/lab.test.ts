/**
 * The lab's own basics with real nodes, each in its own network namespace: a mesh formed by join
 * tokens over real addresses, a split across three namespaces over the direct TLS path, and a
 * bandwidth cap that holds a model copy back (measured, not asserted).
 */
import { expect, test } from "bun:test";
import { statSync } from "node:fs";
import { join } from "node:path";
import { meshStatus, waitForFullMesh } from "../../harness/mesh.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { waitFor } from "../../harness/wait.ts";
import { decodeJoinToken } from "../../mesh/join-token.ts";
import { ask, fetchedMs, modelName, readyServer, vramFor } from "./lab-mesh.ts";
import { delayingRelay, type Lab, type LabNode } from "../../harness/lab/lab.ts";
import { labSuite } from "./lab-suite.ts";

const { labTest, models, newLab } = labSuite("tests/lab/lab.test.ts", { tiny: ["tiny", "q8_0"], wide: ["wide", "q8_0"] });

interface Tunnels {
  tunnels: Record<string, { fromPeerHost: { bytes: number }; direct: boolean }>;
}
const tunnels = async (n: LabNode) => ((await (await fetch(`${n.url}/api/status`)).json()) as Tunnels).tunnels;

/** Two workers and a host with `--model tiny`, by `--vram` a split over all three; resolves once it runs. */
async function splitLab(l: Lab) {
  const workerArgs = [...SMALL_LLAMA, ...(await vramFor(models.tiny, 0.35))];
  const w1 = await l.addNode(workerArgs, { name: "w1" });
  const w2 = await l.addNode([...workerArgs, "--join", w1.token], { name: "w2" });
  const host = await l.addNode([...SMALL_LLAMA, ...(await vramFor(models.tiny, 0.4)), "--join", w1.token, "--model", models.tiny], { name: "host" });
  return { w1, w2, host, name: modelName(models.tiny) };
}

labTest("three nodes in namespaces form a mesh by join token; tokens and /api/status carry their lab addresses, no loopback", async () => {
  const l = await newLab();
  const { w1, w2, host } = await splitLab(l);
  await waitForFullMesh([w1, w2, host]);
  for (const n of [w1, w2, host]) {
    const token = decodeJoinToken(n.token);
    expect(token.addr.nodeId).toBe(n.nodeId);
    expect(token.addr.addresses.length).toBeGreaterThan(0);
    expect(token.addr.addresses.every((a) => a.startsWith(`${n.address}:`))).toBe(true);
    expect(n.url).toBe(`http://${n.address}:${n.port}`);
    for (const p of (await meshStatus(n)).peers) {
      const peer = l.nodes.find((o) => o.nodeId === p.nodeId)!;
      expect(p.addresses.length).toBeGreaterThan(0);
      expect(p.addresses.every((a) => a.startsWith(`${peer.address}:`))).toBe(true);
    }
  }
});

labTest("a model split over three namespaces answers through a worker; the host reaches both workers over the direct TLS path", async () => {
  const lab = await newLab();
  const { w1, w2, host, name } = await splitLab(lab);
  await waitForFullMesh([w1, w2, host]);
  await waitFor(async () => (await readyServer(host, name))?.rpc_workers?.length === 3, { what: "the host's model to run across 3 rpc-servers", timeoutMs: 90_000 });
  const answer = await ask(w1, name);
  expect(answer.status).toBe(200);
  expect(answer.by).toBe(host.nodeId);
  const hostView = await tunnels(host);
  for (const w of [w1, w2]) {
    expect(hostView[w.nodeId]?.direct).toBe(true);
    expect((await tunnels(w))[host.nodeId]!.fromPeerHost.bytes).toBeGreaterThan(10_000);
  }
  console.log(`split chat through a worker: ${Math.round(answer.ms)} ms`);
  // lab.kill is kill -9 of the mesh process alone: its llama-server and rpc-server must go with it.
  expect(lab.processesLeft().filter((p) => p.ns === host.ns).length).toBeGreaterThanOrEqual(3);
  await lab.kill(host);
  await waitFor(() => lab.processesLeft().every((p) => p.ns !== host.ns), { what: "nothing left in the killed host's namespace", timeoutMs: 10_000 });
});

labTest("a link capped with tc tbf holds a model copy back; the copy completes and the model is served", async () => {
  const lab = await newLab();
  const wide = models.wide;
  const name = modelName(wide);
  const size = statSync(wide).size;
  const seeder = await lab.addNode([...SMALL_LLAMA, "--model", name], { models: { [`${name}.gguf`]: wide }, name: "seeder" });
  await waitFor(async () => readyServer(seeder, name), { what: "the seeder to serve wide", timeoutMs: 60_000 });
  const copies: { link: string; ms: number }[] = [];
  for (const capMbit of [undefined, 200]) {
    const n = await lab.addNode([...SMALL_LLAMA, "--join", seeder.token, "--model", name], { name: `copier-${capMbit ?? "free"}`, capMbit });
    const ms = await fetchedMs(n, name, 60_000);
    expect(statSync(join(n.modelsDir, `${name}.gguf`)).size).toBe(size);
    copies.push({ link: capMbit ? `tbf ${capMbit} Mbit/s` : "uncapped veth", ms });
    await waitFor(async () => (await ask(n, name)).status === 200, { what: `${name} served to the node that copied it`, timeoutMs: 60_000 });
    await lab.stopNode(n);
  }
  console.log(
    [`model copy of ${(size / 2 ** 20).toFixed(0)} MiB between namespaces:`, "| link | copy | MB/s |", "|---|---|---|", ...copies.map((c) => `| ${c.link} | ${(c.ms / 1000).toFixed(1)} s | ${(size / 1e6 / (c.ms / 1000)).toFixed(1)} |`)].join("\n"),
  );
});

test("the delaying relay holds each direction delayMs, keeps every byte in order, and passes the close on", async () => {
  const echo = Bun.listen<undefined>({ hostname: "127.0.0.1", port: 0, socket: { data: (s, d) => void s.write(d), close: () => undefined } });
  const relay = await delayingRelay({ listen: { host: "127.0.0.1" }, target: { host: "127.0.0.1", port: echo.port }, delayMs: 100 });
  try {
    const payload = crypto.getRandomValues(new Uint8Array(1 << 20));
    const chunks: Uint8Array[] = [];
    let received = 0;
    let closed!: () => void;
    const gone = new Promise<void>((r) => (closed = r));
    let all!: () => void;
    const complete = new Promise<void>((r) => (all = r));
    const started = performance.now();
    const socket = await Bun.connect<undefined>({
      hostname: "127.0.0.1",
      port: relay.port,
      socket: {
        data: (_, d) => {
          chunks.push(new Uint8Array(d));
          received += d.length;
          if (received >= payload.length) all();
        },
        close: () => closed(),
      },
    });
    let sent = 0;
    while (sent < payload.length) {
      sent += socket.write(payload.subarray(sent));
      if (sent < payload.length) await Bun.sleep(5);
    }
    await complete;
    const roundTrip = performance.now() - started;
    expect(Buffer.concat(chunks).equals(Buffer.from(payload))).toBe(true);
    // Correctness, not speed: a round trip crosses the relay twice, so it cannot be shorter than 2 × delayMs.
    expect(roundTrip).toBeGreaterThanOrEqual(200);
    console.log(`1 MiB echoed through a 100 ms relay in ${Math.round(roundTrip)} ms`);
    socket.end();
    await gone;
  } finally {
    await relay.close();
    echo.stop(true);
  }
});
