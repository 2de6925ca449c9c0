/**
 * The Traffic tab: requests, tokens in and out, time to first token and tunnel bytes over the last
 * minutes, drawn from the node's cumulative counters, and the latest rates per model and per peer.
 */
import { useMemo } from "preact/hooks";
import type { TrafficSample } from "../../protocol.ts";
import { formatByteRate, formatBytes, formatCompact, formatMs, formatRate } from "../format.ts";
import {
  latest,
  merge,
  pickForwarded,
  pickRequests,
  pickTokensIn,
  pickTokensOut,
  pickTunnelIn,
  pickTunnelOut,
  rates,
  ttftMeans,
  type Rates,
} from "../rates.ts";
import { Chart } from "./chart.tsx";
import { Card, Cell, Empty, Table, colorAt } from "./parts.tsx";

const PEER = "peer:";
const IN = "in:";
const OUT = "out:";

interface Derived {
  requests: Rates;
  tokens: Rates;
  ttft: Rates;
  tunnel: Rates;
  perModel: Rates[];
  perPeer: Rates[];
}

function derive(samples: readonly TrafficSample[]): Derived {
  const req = rates(samples, pickRequests);
  const tin = rates(samples, pickTokensIn);
  const tout = rates(samples, pickTokensOut);
  const ttft = ttftMeans(samples);
  const fwd = rates(samples, pickForwarded);
  const bin = rates(samples, pickTunnelIn);
  const bout = rates(samples, pickTunnelOut);
  return {
    requests: merge([
      { prefix: "", rates: req },
      { prefix: PEER, rates: fwd },
    ]),
    tokens: merge([
      { prefix: IN, rates: tin },
      { prefix: OUT, rates: tout },
    ]),
    ttft,
    tunnel: merge([
      { prefix: IN, rates: bin },
      { prefix: OUT, rates: bout },
    ]),
    perModel: [req, tin, tout, ttft],
    perPeer: [fwd, bin, bout],
  };
}

const valueOf = (r: Rates, key: string) => latest(r.series.find((s) => s.key === key)?.values ?? []);

/** Peers are named by the short ids the samples key them by. */
export function TrafficView({ traffic }: { traffic: readonly TrafficSample[] }) {
  const d = useMemo(() => derive(traffic), [traffic]);
  const label = (key: string) => {
    if (key.startsWith(PEER)) return `→ ${key.slice(PEER.length)}`;
    if (key.startsWith(IN)) return `in ${key.slice(IN.length)}`;
    if (key.startsWith(OUT)) return `out ${key.slice(OUT.length)}`;
    return key;
  };
  const tunnelLabel = (key: string) => (key.startsWith(IN) ? `↓ ${key.slice(IN.length)}` : `↑ ${key.slice(OUT.length)}`);
  const last = traffic.at(-1);
  const [req, tin, tout, ttft] = d.perModel as [Rates, Rates, Rates, Rates];
  const [fwd, bin, bout] = d.perPeer as [Rates, Rates, Rates];
  const models = Object.keys(last?.models ?? {}).sort();
  const peers = Object.keys(last?.peers ?? {}).sort();
  const modelKeys = d.perModel[0]!.series.map((s) => s.key);
  const peerKeys = d.perPeer[1]!.series.map((s) => s.key);

  return (
    <div class="stack">
      <div class="charts">
        <Chart name="requests" title="Requests / s" rates={d.requests} format={(v) => formatRate(v, "/s")} axisFormat={formatCompact} labelOf={label} />
        <Chart
          name="tokens"
          title="Tokens / s (dashed: in, solid: out)"
          rates={d.tokens}
          format={(v) => formatRate(v, "tok/s")}
          axisFormat={formatCompact}
          labelOf={label}
          styleOf={(key) => pairStyle(key, modelKeys)}
        />
        <Chart name="ttft" title="Time to first token (mean, s)" rates={d.ttft} format={(v) => formatMs(v * 1000)} axisFormat={(v) => `${formatCompact(v)}s`} labelOf={label} spanGaps />
        <Chart
          name="tunnel"
          title="Tunnel bytes / s (dashed: received, solid: sent)"
          rates={d.tunnel}
          format={formatByteRate}
          axisFormat={formatCompact}
          labelOf={tunnelLabel}
          styleOf={(key) => pairStyle(key, peerKeys)}
        />
      </div>
      {traffic.length < 2 && <Empty>Rates appear after two samples (one every 2 s).</Empty>}
      <Card title="Per model">
        {models.length === 0 ? (
          <Empty>No requests answered yet.</Empty>
        ) : (
          <Table columns={["Model", "Requests/s", "Tokens in/s", "Tokens out/s", "TTFT", "Requests"]}>
            {models.map((m) => (
              <tr key={m}>
                <Cell label="Model" class="mono strong">
                  {m}
                </Cell>
                <Cell label="Requests/s">{formatRate(valueOf(req, m), "/s")}</Cell>
                <Cell label="Tokens in/s">{formatRate(valueOf(tin, m), "tok/s")}</Cell>
                <Cell label="Tokens out/s">{formatRate(valueOf(tout, m), "tok/s")}</Cell>
                <Cell label="TTFT">{formatMs(mul(valueOf(ttft, m), 1000))}</Cell>
                <Cell label="Requests">{last?.models[m]?.requests ?? 0}</Cell>
              </tr>
            ))}
          </Table>
        )}
      </Card>
      <Card title="Per peer">
        {peers.length === 0 ? (
          <Empty>No peers exchanged traffic with this node yet.</Empty>
        ) : (
          <Table columns={["Peer", "Forwarded/s", "Tunnel in", "Tunnel out", "Forwarded", "Tunnel total"]}>
            {peers.map((p) => {
              const c = last?.peers[p];
              return (
                <tr key={p}>
                  <Cell label="Peer" class="mono strong" title={p}>
                    {p}
                  </Cell>
                  <Cell label="Forwarded/s">{formatRate(valueOf(fwd, p), "/s")}</Cell>
                  <Cell label="Tunnel in">{formatByteRate(valueOf(bin, p))}</Cell>
                  <Cell label="Tunnel out">{formatByteRate(valueOf(bout, p))}</Cell>
                  <Cell label="Forwarded">{c?.forwarded ?? 0}</Cell>
                  <Cell label="Tunnel total">
                    ↓ {formatBytes(c?.tunnelIn ?? 0)} ↑ {formatBytes(c?.tunnelOut ?? 0)}
                  </Cell>
                </tr>
              );
            })}
          </Table>
        )}
      </Card>
      <KvCard kv={last?.kv} />
    </div>
  );
}

/** Moved conversations whose KV cache this node fetched from the member that held it, and what that saved. */
function KvCard({ kv }: { kv: TrafficSample["kv"] }) {
  return (
    <Card title="Moved conversations' KV caches">
      {!kv || kv.hits + kv.misses + kv.declined + kv.failed + kv.sentBytes === 0 ? (
        <Empty>No conversation moved to or from this node with a cache worth fetching yet.</Empty>
      ) : (
        <Table columns={["Fetched", "None to give", "Read again", "Failed", "Bytes fetched", "Bytes sent", "Reading saved"]}>
          <tr>
            <Cell label="Fetched">{kv.hits}</Cell>
            <Cell label="None to give">{kv.misses}</Cell>
            <Cell label="Read again">{kv.declined}</Cell>
            <Cell label="Failed">{kv.failed}</Cell>
            <Cell label="Bytes fetched">{formatBytes(kv.fetchedBytes)}</Cell>
            <Cell label="Bytes sent">{formatBytes(kv.sentBytes)}</Cell>
            <Cell label="Reading saved">{formatMs(kv.savedS * 1000)}</Cell>
          </tr>
        </Table>
      )}
    </Card>
  );
}

/** An `in:`/`out:` series coloured by what it is of (its model or peer), dashed when it is the `in` half. */
function pairStyle(key: string, of: readonly string[]): { color: string; dashed: boolean } {
  const dashed = key.startsWith(IN);
  const base = key.slice(dashed ? IN.length : OUT.length);
  return { color: colorAt(Math.max(0, of.indexOf(base))), dashed };
}

const mul = (v: number | null, k: number) => (v === null ? null : v * k);
