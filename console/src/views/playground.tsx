/**
 * Small forms for the models that do not chat: an embedding model's vector for a text (its
 * dimensions and first values) and a reranking model's scores of documents for a query.
 */
import { useState } from "preact/hooks";
import type { ConsoleModel } from "../../protocol.ts";
import { describeError, postJson } from "../api.ts";
import { useChoice } from "./choice.ts";
import { Card } from "./parts.tsx";

function ModelSelect({ id, models, value, onChange, none }: { id: string; models: readonly ConsoleModel[]; value: string; onChange: (v: string) => void; none: string }) {
  return (
    <div class="field">
      <label for={id}>Model</label>
      <select id={id} data-testid={id} value={value} onChange={(e) => onChange(e.currentTarget.value)} disabled={models.length === 0}>
        {models.length === 0 && <option value="">{none}</option>}
        {models.map((m) => (
          <option key={m.name} value={m.name}>
            {m.name} ({m.status})
          </option>
        ))}
      </select>
    </div>
  );
}

interface EmbeddingAnswer {
  data?: { embedding?: number[] }[];
}

export function EmbedForm({ models }: { models: readonly ConsoleModel[] }) {
  const [current, setModel] = useChoice(models);
  const [text, setText] = useState("");
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState<{ ok: boolean; text: string } | null>(null);

  async function submit(e: Event) {
    e.preventDefault();
    setBusy(true);
    try {
      const answer = await postJson<EmbeddingAnswer>("/v1/embeddings", { model: current, input: text });
      const v = answer.data?.[0]?.embedding ?? [];
      const head = v.slice(0, 8).map((x) => x.toFixed(4)).join(", ");
      setResult({ ok: true, text: `${v.length} dimensions: [${head}${v.length > 8 ? ", …" : ""}]` });
    } catch (err) {
      setResult({ ok: false, text: describeError(err) });
    } finally {
      setBusy(false);
    }
  }

  return (
    <Card title="Embeddings">
      <form onSubmit={(e) => void submit(e)}>
        <ModelSelect id="embed-model" models={models} value={current} onChange={setModel} none="No embedding models in the mesh" />
        <div class="field">
          <label for="embed-input">Text</label>
          <textarea id="embed-input" data-testid="embed-input" rows={2} value={text} onInput={(e) => setText(e.currentTarget.value)} />
        </div>
        <button type="submit" class="btn btn-primary" data-testid="embed-submit" disabled={busy || !current || text.trim() === ""}>
          {busy ? "Embedding…" : "Embed"}
        </button>
        <output data-testid="embed-result" class={`result mono ${result && !result.ok ? "err-text" : ""}`}>
          {result?.text ?? ""}
        </output>
      </form>
    </Card>
  );
}

interface RerankAnswer {
  results?: { index: number; relevance_score?: number; score?: number }[];
}

export function RerankForm({ models }: { models: readonly ConsoleModel[] }) {
  const [current, setModel] = useChoice(models);
  const [query, setQuery] = useState("");
  const [docs, setDocs] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  const [scores, setScores] = useState<{ doc: string; score: number }[]>([]);

  async function submit(e: Event) {
    e.preventDefault();
    const documents = docs.split("\n").map((d) => d.trim()).filter(Boolean);
    setBusy(true);
    setError("");
    try {
      const answer = await postJson<RerankAnswer>("/v1/rerank", { model: current, query, documents });
      const rows = (answer.results ?? []).map((r) => ({ doc: documents[r.index] ?? `#${r.index}`, score: r.relevance_score ?? r.score ?? 0 }));
      setScores(rows.sort((a, b) => b.score - a.score));
    } catch (err) {
      setScores([]);
      setError(describeError(err));
    } finally {
      setBusy(false);
    }
  }

  return (
    <Card title="Rerank">
      <form onSubmit={(e) => void submit(e)}>
        <ModelSelect id="rerank-model" models={models} value={current} onChange={setModel} none="No reranking models in the mesh" />
        <div class="field">
          <label for="rerank-query">Query</label>
          <input id="rerank-query" data-testid="rerank-query" type="text" value={query} onInput={(e) => setQuery(e.currentTarget.value)} />
        </div>
        <div class="field">
          <label for="rerank-docs">Documents, one per line</label>
          <textarea id="rerank-docs" data-testid="rerank-docs" rows={3} value={docs} onInput={(e) => setDocs(e.currentTarget.value)} />
        </div>
        <button type="submit" class="btn btn-primary" data-testid="rerank-submit" disabled={busy || !current || !query.trim() || !docs.trim()}>
          {busy ? "Ranking…" : "Rerank"}
        </button>
        <div data-testid="rerank-result" class="result" role="status">
          {error && <p class="err-text">{error}</p>}
          {scores.length > 0 && (
            <ol class="scores">
              {scores.map((s, i) => (
                <li key={i}>
                  <span class="mono score">{s.score.toFixed(4)}</span> {s.doc}
                </li>
              ))}
            </ol>
          )}
        </div>
      </form>
    </Card>
  );
}
