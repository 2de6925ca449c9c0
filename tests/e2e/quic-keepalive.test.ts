/**
 * Issue 46: the watch ring (`mesh/watch-ring.ts`) judges a member it does not watch by QUIC's own
 * keep-alives, which iroh 1.x sends on an idle connection every 5 s without our code running. A
 * binding that stopped sending them would have every such member dropped as silent: this holds
 * the assumption. Two endpoints on loopback, relays off, a connection left idle.
 */
import { afterAll, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { TEST_LINE } from "../../harness/node.ts";
import { waitFor } from "../../harness/wait.ts";
import { Transport, type PeerConnection } from "../../mesh/transport.ts";
import { QUIC_KEEPALIVE_MS, UNWATCHED_SILENCE_MS } from "../../mesh/watch-ring.ts";

const started: Transport[] = [];
afterAll(async () => void (await Promise.all(started.map((t) => t.close()))));

test.if(TEST_LINE === "iroh1")("an idle iroh 1.x connection carries a datagram each way well within the limit for a member not watched", async () => {
  const bind = () => Transport.bind({ secretKey: Uint8Array.from(randomBytes(32)), ipv4Addr: "127.0.0.1:0", relay: "disabled", line: "iroh1", onConnection: () => undefined });
  const [a, b] = await Promise.all([bind(), bind()]);
  started.push(a, b);
  const conn: PeerConnection = await b.dial(a.addr());
  const stream = await conn.openStream();
  await stream.send.writeAll(Uint8Array.of(1));
  // From here nothing of ours is sent: every datagram counted is QUIC's own.
  let last = conn.datagrams!();
  let lastRx = performance.now();
  let lastTx = lastRx;
  const gaps = { rx: 0, tx: 0 };
  const began = performance.now();
  await waitFor(
    () => {
      const now = performance.now();
      const seen = conn.datagrams!();
      if (seen.received !== last.received) [gaps.rx, lastRx] = [Math.max(gaps.rx, now - lastRx), now];
      if (seen.sent !== last.sent) [gaps.tx, lastTx] = [Math.max(gaps.tx, now - lastTx), now];
      last = seen;
      return now - began > 3 * QUIC_KEEPALIVE_MS;
    },
    { what: "three keep-alive periods", timeoutMs: 4 * QUIC_KEEPALIVE_MS + 10_000, intervalMs: 100 },
  );
  const end = performance.now();
  const worst = { rx: Math.max(gaps.rx, end - lastRx), tx: Math.max(gaps.tx, end - lastTx) };
  // Room for a loaded machine's late timers; without keep-alives the gap would be the whole 15 s.
  expect(worst.rx).toBeLessThan(UNWATCHED_SILENCE_MS - 2_000);
  expect(worst.tx).toBeLessThan(UNWATCHED_SILENCE_MS - 2_000);
}, 60_000);
