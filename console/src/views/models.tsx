/**
 * The Models tab: every model of the catalog with its status and what the status needs said
 * (loading time, fetch progress, missing memory, failure), its host and group with each member's
 * share of the layers, its facts, and load / unload / pin buttons. Those act on this node's pool,
 * so they are enabled only where this node has the model's file; elsewhere they say who hosts it.
 */
import { useState } from "preact/hooks";
import type { ConsoleModel, ConsoleModelStatus, ConsoleNode, ConsoleState } from "../../protocol.ts";
import { describeError, postJson } from "../api.ts";
import { DASH, formatBytes, formatDuration, formatPercent, shortId } from "../format.ts";
import { Card, Cell, Empty, Pill, Table, type Tone } from "./parts.tsx";
import { PullForm } from "./pull.tsx";

/** What a model can be asked beyond text, as a reader of the list says it. */
const capabilityWords = (cap: string): string => (cap === "vision" ? "reads images" : cap === "tools" ? "calls tools" : cap);

const STATUS_TONE: Record<ConsoleModelStatus, Tone> = {
  ready: "ok",
  loading: "info",
  fetching: "info",
  "needs-capacity": "warn",
  failed: "err",
  unloaded: "muted",
};

type NameOf = (id: string) => string;

function StatusDetail({ m, nameOf }: { m: ConsoleModel; nameOf: NameOf }) {
  switch (m.status) {
    case "loading":
      return <div class="sub">for {formatDuration(m.loadingForS ?? null)}</div>;
    case "fetching":
      if (!m.fetch) return null;
      return (
        <div class="sub">
          <progress max={m.fetch.total || 1} value={m.fetch.bytes} aria-label={`fetching ${m.name}`} />
          <div>
            {formatBytes(m.fetch.bytes)} / {formatBytes(m.fetch.total)} to {nameOf(m.fetch.node)}
            {m.fetch.from ? ` from ${m.fetch.from}` : ""}
          </div>
        </div>
      );
    case "needs-capacity":
      return <div class="sub">needs {formatBytes(m.missingBytes ?? null)} more</div>;
    case "failed":
      return m.failure ? (
        <div class="sub err-text">
          {m.failure.error}
          {m.failure.retryInS > 0 ? ` · retry in ${formatDuration(m.failure.retryInS)}` : ""}
        </div>
      ) : null;
    default:
      return null;
  }
}

/** A member's share of the layers (0 to 1), as a percentage. */
const shareText = (share: number) => formatPercent(share);

function ModelRow({ m, nameOf }: { m: ConsoleModel; nameOf: NameOf }) {
  const [busy, setBusy] = useState<"" | "load" | "unload" | "pin">("");
  const [error, setError] = useState("");
  const hostName = m.host ? nameOf(m.host) : null;
  const why = m.onThisNode ? undefined : `This node does not have ${m.name}'s file${hostName ? `; ${hostName} hosts it` : ""}.`;

  async function act(kind: "load" | "unload" | "pin") {
    setBusy(kind);
    setError("");
    try {
      if (kind === "unload") await postJson("/api/v1/unload", { model_name: m.name });
      else if (kind === "pin") await postJson("/api/v1/load", { model_name: m.name, pinned: !m.pinned });
      else await postJson("/api/v1/load", { model_name: m.name });
    } catch (err) {
      setError(describeError(err));
    } finally {
      setBusy("");
    }
  }

  return (
    <tr data-testid="model-row" data-model={m.name} data-status={m.status}>
      <Cell label="Model">
        <span class="mono strong">{m.name}</span>{" "}
        {m.pinned && <Pill tone="accent">pinned</Pill>}
        <div class="sub">
          {[m.type ?? "unknown type", ...(m.caps ?? []).map(capabilityWords), m.quant, formatBytes(m.sizeBytes)].filter(Boolean).join(" · ")}
        </div>
        {m.origin && (
          <div class="sub ellipsis mono" title={m.origin}>
            {m.origin}
          </div>
        )}
      </Cell>
      <Cell label="Status">
        <Pill tone={STATUS_TONE[m.status]}>{m.status}</Pill>
        <StatusDetail m={m} nameOf={nameOf} />
      </Cell>
      <Cell label="Host">
        <span data-testid="model-host" data-host={m.host ?? ""} class="mono" title={m.host ?? undefined}>
          {hostName ?? DASH}
        </span>
        {m.servedBy && m.servedBy !== m.host && <div class="sub">served by {nameOf(m.servedBy)}</div>}
      </Cell>
      <Cell label="Group">
        {m.members.length === 0 ? (
          DASH
        ) : (
          <ul class="members">
            {m.members.map((mem) => (
              <li key={mem.id}>
                <span class="mono" title={mem.id}>
                  {nameOf(mem.id)}
                </span>{" "}
                <span class="muted">{mem.role}</span> {mem.role !== "standby" && <span>{shareText(mem.share)}</span>}
              </li>
            ))}
          </ul>
        )}
        <div class="sub">needs {formatBytes(m.needBytes)}{m.split ? " · split" : ""}</div>
      </Cell>
      <Cell label="Actions">
        <div class="actions">
          <button type="button" class="btn" data-testid="model-load" disabled={!m.onThisNode || m.loadedHere || busy !== ""} title={why} onClick={() => void act("load")}>
            {busy === "load" ? "Loading…" : "Load"}
          </button>
          <button type="button" class="btn" data-testid="model-unload" disabled={!m.onThisNode || (!m.loadedHere && m.status !== "loading") || busy !== ""} title={why} onClick={() => void act("unload")}>
            {busy === "unload" ? "Unloading…" : "Unload"}
          </button>
          <button
            type="button"
            class="btn"
            data-testid="model-pin"
            aria-pressed={m.pinned}
            disabled={!m.onThisNode || busy !== ""}
            title={why ?? (m.pinned ? "Let the pool evict it again" : "Keep it loaded: the pool never evicts it")}
            onClick={() => void act("pin")}
          >
            {m.pinned ? "Unpin" : "Pin"}
          </button>
        </div>
        {error && (
          <p class="err-text" data-testid="model-error" role="alert">
            {error}
          </p>
        )}
      </Cell>
    </tr>
  );
}

export function ModelsView({ state }: { state: ConsoleState | null }) {
  if (!state) return <Empty>Waiting for the node…</Empty>;
  const nodes = new Map<string, ConsoleNode>(state.nodes.map((n) => [n.id, n]));
  const nameOf: NameOf = (id) => nodes.get(id)?.shortId ?? shortId(id);
  return (
    <div class="stack">
      <Card title="Models" actions={<span class="muted">{state.models.length} in the catalog</span>}>
        {state.models.length === 0 ? (
          <Empty>No models yet: pull one below, or put a GGUF file in a models directory.</Empty>
        ) : (
          <Table columns={["Model", "Status", "Host", "Group", "Actions"]}>
            {state.models.map((m) => (
              <ModelRow key={m.name} m={m} nameOf={nameOf} />
            ))}
          </Table>
        )}
      </Card>
      <PullForm />
    </div>
  );
}
