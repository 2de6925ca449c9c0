/**
 * The Chat tab: a playground for any chat model of the mesh, streamed token by token, with the
 * node that answered (`x-mesh-node`) and the answer's timings (llama-server's, and the time to
 * first token as this page measured it). Embedding and reranking models get their own small forms.
 */
import { useEffect, useRef, useState } from "preact/hooks";
import type { ConsoleModel, ConsoleState } from "../../protocol.ts";
import { describeError } from "../api.ts";
import { appendMessage, parseChunk, type ChatMessage, type Timings } from "../chat-stream.ts";
import { DASH, formatMs, formatRate, shortId } from "../format.ts";
import { postSse } from "../stream.ts";
import { Card } from "./parts.tsx";
import { useChoice } from "./choice.ts";
import { EmbedForm, RerankForm } from "./playground.tsx";
import { ANSWERED_BY_HEADER } from "../../../mesh/mesh-headers.ts";

interface AnswerMeta {
  node: string | null;
  timings: Timings | null;
  ttftMs: number | null;
  error: string;
}

const noMeta = (): AnswerMeta => ({ node: null, timings: null, ttftMs: null, error: "" });

export const isChatModel = (m: ConsoleModel) => m.type === "llm" || m.type === null;

export function ChatView({ state }: { state: ConsoleState | null }) {
  const all = state?.models ?? [];
  const chatModels = all.filter(isChatModel);
  const [model, setModel] = useChoice(chatModels);
  const [input, setInput] = useState("");
  const [messages, setMessages] = useState<ChatMessage[]>([]);
  const [streaming, setStreaming] = useState<string | null>(null);
  const [meta, setMeta] = useState<AnswerMeta>(noMeta);
  const ctrl = useRef<AbortController | null>(null);
  const end = useRef<HTMLDivElement>(null);
  useEffect(() => () => ctrl.current?.abort(), []);
  useEffect(() => end.current?.scrollIntoView?.({ block: "nearest" }), [messages.length, streaming]);
  const nodeName = (id: string) => state?.nodes.find((n) => n.id === id)?.shortId ?? shortId(id);

  async function send() {
    const text = input.trim();
    if (!text || !model || ctrl.current) return;
    const history = appendMessage(messages, { role: "user", content: text });
    setMessages(history);
    setInput("");
    setStreaming("");
    const c = new AbortController();
    ctrl.current = c;
    const started = performance.now();
    let answer = "";
    let m: AnswerMeta = noMeta();
    setMeta(m);
    try {
      await postSse(
        "/v1/chat/completions",
        { model, messages: history, stream: true, stream_options: { include_usage: true } },
        c.signal,
        (res) => {
          m = { ...m, node: res.headers.get(ANSWERED_BY_HEADER) };
          setMeta(m);
        },
        (ev) => {
          const part = parseChunk(ev.data);
          if (part.content || part.reasoning) {
            if (m.ttftMs === null) m = { ...m, ttftMs: performance.now() - started };
            answer += part.content;
            setStreaming(answer);
          }
          if (part.timings) m = { ...m, timings: part.timings };
          if (part.error) m = { ...m, error: part.error };
          setMeta(m);
        },
      );
    } catch (err) {
      m = { ...m, error: describeError(err) };
      setMeta(m);
    } finally {
      ctrl.current = null;
      setStreaming(null);
      if (answer) setMessages((ms) => appendMessage(ms, { role: "assistant", content: answer }));
    }
  }

  const lastIsAnswer = streaming === null && messages.at(-1)?.role === "assistant";
  const t = meta.timings;
  const busy = streaming !== null;

  return (
    <div class="stack">
      <Card
        title="Chat"
        actions={
          <button type="button" class="btn btn-small" disabled={busy || messages.length === 0} onClick={() => (setMessages([]), setMeta(noMeta()))}>
            Clear
          </button>
        }
      >
        <div class="field">
          <label for="chat-model">Model</label>
          <select id="chat-model" data-testid="chat-model" value={model} onChange={(e) => setModel(e.currentTarget.value)} disabled={chatModels.length === 0}>
            {chatModels.length === 0 && <option value="">No chat models in the mesh</option>}
            {chatModels.map((cm) => (
              <option key={cm.name} value={cm.name}>
                {cm.name} ({cm.status})
              </option>
            ))}
          </select>
        </div>
        <div class="transcript" aria-live="polite">
          {messages.length === 0 && !busy && <p class="empty">Ask something; the answer streams in as it is generated.</p>}
          {messages.map((msg, i) => (
            <div key={i} class={`bubble bubble-${msg.role}`}>
              <span class="bubble-role">{msg.role === "user" ? "you" : "model"}</span>
              <div class="bubble-text" data-testid={lastIsAnswer && i === messages.length - 1 ? "chat-output" : undefined}>
                {msg.content}
              </div>
            </div>
          ))}
          {busy && (
            <div class="bubble bubble-assistant">
              <span class="bubble-role">model</span>
              <div class="bubble-text" data-testid="chat-output">
                {streaming || <span class="typing">…</span>}
              </div>
            </div>
          )}
          <div ref={end} />
        </div>
        {(meta.node || t || meta.ttftMs !== null) && (
          <p class="answer-meta">
            <span>
              answered by{" "}
              <span class="mono" data-testid="chat-answered-by" title={meta.node ?? undefined}>
                {meta.node ? nodeName(meta.node) : DASH}
              </span>
            </span>
            <span data-testid="chat-timings">
              {formatRate(t?.predicted_per_second ?? null, "tok/s")} · ttft {formatMs(meta.ttftMs)}
              {t?.predicted_n !== undefined ? ` · ${t.predicted_n} tokens` : ""}
              {t?.prompt_n !== undefined ? ` · prompt ${t.prompt_n} in ${formatMs(t.prompt_ms ?? null)}` : ""}
            </span>
          </p>
        )}
        {meta.error && (
          <p class="err-text" role="alert">
            {meta.error}
          </p>
        )}
        <form
          class="chat-form"
          onSubmit={(e) => {
            e.preventDefault();
            void send();
          }}
        >
          <label for="chat-input" class="visually-hidden">
            Message
          </label>
          <textarea
            id="chat-input"
            data-testid="chat-input"
            rows={3}
            placeholder="Message (Enter sends, Shift+Enter for a new line)"
            value={input}
            onInput={(e) => setInput(e.currentTarget.value)}
            onKeyDown={(e) => {
              if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
                e.preventDefault();
                void send();
              }
            }}
          />
          <div class="actions">
            <button type="submit" class="btn btn-primary" data-testid="chat-send" disabled={busy || !model || input.trim() === ""}>
              Send
            </button>
            <button type="button" class="btn" data-testid="chat-stop" disabled={!busy} onClick={() => ctrl.current?.abort()}>
              Stop
            </button>
          </div>
        </form>
      </Card>
      <div class="two-col">
        <EmbedForm models={all.filter((m) => m.type === "embedding")} />
        <RerankForm models={all.filter((m) => m.type === "reranking")} />
      </div>
    </div>
  );
}
