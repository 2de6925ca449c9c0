/**
 * The page: a header with this node, the live indicator and the tabs, then the tab's view. It
 * holds the one live connection and the state it folds; the Models and Chat views stay mounted
 * while hidden, so a pull or an answer in flight goes on when the reader looks at another tab.
 */
import { useEffect, useReducer, useState } from "preact/hooks";
import { onUnauthorized } from "./api.ts";
import { startLive, type LiveState } from "./live.ts";
import { useTab, type Tab } from "./route.ts";
import { emptyView, reduce, type ConsoleView } from "./store.ts";
import { ChatView } from "./views/chat.tsx";
import { KeyForm } from "./views/key-form.tsx";
import { LogsView } from "./views/logs.tsx";
import { MeshView } from "./views/mesh.tsx";
import { ModelsView } from "./views/models.tsx";
import { TrafficView } from "./views/traffic.tsx";
import { shortId } from "./format.ts";

const TAB_TITLES: Record<Tab, string> = { mesh: "Mesh", models: "Models", traffic: "Traffic", chat: "Chat", logs: "Logs" };

const LIVE_TEXT: Record<LiveState, string> = { connecting: "connecting", live: "live", unauthorized: "key needed" };

export function App() {
  const [view, dispatch] = useReducer(reduce, undefined, emptyView);
  const [live, setLive] = useState<LiveState>("connecting");
  const [needKey, setNeedKey] = useState(false);
  const tab = useTab();

  useEffect(() => startLive({ onAction: dispatch, onState: setLive }), []);
  useEffect(() => {
    const off = onUnauthorized(() => setNeedKey(true));
    return () => void off();
  }, []);
  useEffect(() => {
    document.title = `${TAB_TITLES[tab]} · mesh console`;
  }, [tab]);

  const state = view.state;
  const self = state?.nodes.find((n) => n.self);
  const showKey = needKey || live === "unauthorized";

  return (
    <div class="shell">
      <header class="topbar">
        <div class="brand">
          <span class="logo" aria-hidden="true">
            ◈
          </span>
          <span class="brand-name">mesh</span>
          {state?.self && (
            <span class="node-id mono" title={state.self}>
              {self?.shortId ?? shortId(state.self)}
            </span>
          )}
          {state?.version && <span class="muted small">v{state.version}</span>}
        </div>
        <span class={`live live-${live}`} data-testid="live-status" data-state={live} role="status" aria-live="polite">
          <span class="live-dot" aria-hidden="true" />
          {LIVE_TEXT[live]}
        </span>
        <nav class="tabs" aria-label="Sections">
          {(Object.keys(TAB_TITLES) as Tab[]).map((t) => (
            <a key={t} href={`#/${t}`} data-testid={`nav-${t}`} class={t === tab ? "tab active" : "tab"} aria-current={t === tab ? "page" : undefined}>
              {TAB_TITLES[t]}
            </a>
          ))}
        </nav>
      </header>
      <main class="content">
        {showKey && <KeyForm onAccepted={() => setNeedKey(false)} />}
        {!(showKey && !state) && <Views tab={tab} view={view} />}
      </main>
    </div>
  );
}

function Views({ tab, view }: { tab: Tab; view: ConsoleView }) {
  const state = view.state;
  return (
    <>
      {tab === "mesh" && <MeshView state={state} />}
      <div hidden={tab !== "models"}>
        <ModelsView state={state} />
      </div>
      {tab === "traffic" && <TrafficView traffic={view.traffic} />}
      <div hidden={tab !== "chat"}>
        <ChatView state={state} />
      </div>
      {tab === "logs" && <LogsView logs={view.logs} />}
    </>
  );
}
