/**
 * A console page kept busy: one node with two tiny models, a loop that sends small chat
 * completions, loads and unloads the second model and cycles the page's tabs, each at its own
 * pace, and measures the page through CDP as it goes (elements in the document, JS heap after a
 * full GC, event listeners, log lines). The suite's leak-rate check (tests/browser/console-soak)
 * runs it fast for a minute; bench/console-soak.ts runs it for as long as it is told.
 */
import type { Page } from "playwright-core";
import { chat, post } from "./api.ts";
import { byTestId, consoleState, domSize, goTab, heapAfterGc } from "./console-page.ts";
import { startMeshNode, type MeshTestNode } from "./mesh.ts";
import { testModel } from "./models.ts";
import { SMALL_LLAMA } from "./node.ts";
import { waitFor } from "./wait.ts";

export const SOAK_TABS = ["traffic", "mesh", "models", "logs", "chat"] as const;
export const SOAK_MODEL = "tiny-q8_0";
/** The model loaded and unloaded while the page watches. */
export const SOAK_TOGGLED = "tiny-f32";

export interface SoakPace {
  chatEveryMs: number;
  toggleEveryMs: number;
  tabEveryMs: number;
  measureEveryMs: number;
}

export interface SoakSample {
  t: number;
  dom: number;
  heapMiB: number;
  listeners: number;
  logLines: number;
  requests: number;
  toggles: number;
  tabs: number;
}

export interface SoakActivity {
  requests: number;
  toggles: number;
  tabs: number;
  failed: string[];
}

/** A node serving the soak's two models, the first one ready. */
export async function startSoakNode(name: string): Promise<MeshTestNode> {
  const [tiny, tinyF32] = await Promise.all([testModel("tiny", "q8_0"), testModel("tiny", "f32")]);
  const node = await startMeshNode([...SMALL_LLAMA, "--model", SOAK_MODEL, "--max-loaded-models", "2"], { models: { [`${SOAK_MODEL}.gguf`]: tiny, [`${SOAK_TOGGLED}.gguf`]: tinyF32 }, name });
  await waitFor(async () => (await consoleState(node.url)).models.find((m) => m.name === SOAK_MODEL)?.status === "ready", { what: `${SOAK_MODEL} ready`, timeoutMs: 90_000 });
  return node;
}

/** The page measured on #/traffic (charts are canvases: its DOM does not grow with samples), heap after GC. */
async function measure(page: Page, t: number, activity: SoakActivity): Promise<SoakSample> {
  await goTab(page, "logs");
  const logLines = await byTestId(page, "log-line").count();
  await goTab(page, "traffic");
  await byTestId(page, "traffic-chart").first().waitFor({ state: "visible", timeout: 10_000 });
  const heap = await heapAfterGc(page);
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("Performance.enable");
  const metrics = (await cdp.send("Performance.getMetrics")).metrics;
  await cdp.detach();
  const listeners = metrics.find((m) => m.name === "JSEventListeners")?.value ?? -1;
  return { t, dom: await domSize(page), heapMiB: heap / 2 ** 20, listeners, logLines, requests: activity.requests, toggles: activity.toggles, tabs: activity.tabs };
}

/**
 * Drives the page and the node for `seconds`, measuring first at `firstMeasureS` and then every
 * `pace.measureEveryMs`, and once more at the end. Bounded by time and by count.
 */
export async function soakPage(page: Page, node: MeshTestNode, opts: { seconds: number; firstMeasureS: number; pace: SoakPace }): Promise<{ samples: SoakSample[]; activity: SoakActivity }> {
  const { pace } = opts;
  const started = performance.now();
  const elapsed = () => (performance.now() - started) / 1000;
  const activity: SoakActivity = { requests: 0, toggles: 0, tabs: 0, failed: [] };
  const samples: SoakSample[] = [];
  let nextChat = 0;
  let nextToggle = pace.toggleEveryMs;
  let nextTab = pace.tabEveryMs;
  let nextMeasure = opts.firstMeasureS * 1000;
  let tab = 0;
  let toggledLoaded = false;
  const maxRequests = Math.ceil((opts.seconds * 1000) / pace.chatEveryMs) + 1;
  while (elapsed() < opts.seconds && activity.requests < maxRequests) {
    const now = elapsed() * 1000;
    if (now >= nextChat) {
      nextChat += pace.chatEveryMs;
      const res = await chat(node, SOAK_MODEL, 4);
      await res.arrayBuffer();
      activity.requests++;
      if (res.status !== 200) activity.failed.push(`chat ${res.status}`);
    }
    if (now >= nextToggle) {
      nextToggle += pace.toggleEveryMs;
      const res = await post(node, toggledLoaded ? "/api/v1/unload" : "/api/v1/load", { model_name: SOAK_TOGGLED }, { signal: AbortSignal.timeout(60_000) });
      await res.arrayBuffer();
      activity.toggles++;
      if (res.status === 200) toggledLoaded = !toggledLoaded;
      else activity.failed.push(`${toggledLoaded ? "unload" : "load"} ${res.status}`);
    }
    if (now >= nextTab) {
      nextTab += pace.tabEveryMs;
      tab = (tab + 1) % SOAK_TABS.length;
      await goTab(page, SOAK_TABS[tab]!);
      activity.tabs++;
    }
    if (now >= nextMeasure) {
      nextMeasure += pace.measureEveryMs;
      samples.push(await measure(page, Math.round(elapsed()), activity));
      await goTab(page, SOAK_TABS[tab]!);
    }
    // Pacing, not waiting on a condition: the activity runs at a fixed rate. A step that ran late
    // (a loaded machine) is not made up in a burst.
    const next = Math.min(nextChat, nextToggle, nextTab, nextMeasure);
    await Bun.sleep(Math.max(0, Math.min(next - elapsed() * 1000, 1_000)));
  }
  samples.push(await measure(page, Math.round(elapsed()), activity));
  return { samples, activity };
}

/** How fast the page grew from one sample to another, per minute. */
export function growthPerMinute(from: SoakSample, to: SoakSample): { heapMiB: number; dom: number; listeners: number } {
  const minutes = Math.max(to.t - from.t, 1) / 60;
  return { heapMiB: (to.heapMiB - from.heapMiB) / minutes, dom: (to.dom - from.dom) / minutes, listeners: (to.listeners - from.listeners) / minutes };
}

export const soakTable = (rows: SoakSample[]) =>
  [
    "   t s | DOM elements | heap after GC MiB | JS listeners | log lines | chats | loads/unloads | tab changes",
    ...rows.map(
      (r) =>
        `${String(r.t).padStart(6)} | ${String(r.dom).padStart(12)} | ${r.heapMiB.toFixed(2).padStart(17)} | ${String(r.listeners).padStart(12)} | ${String(r.logLines).padStart(9)} | ${String(r.requests).padStart(5)} | ${String(r.toggles).padStart(13)} | ${String(r.tabs).padStart(11)}`,
    ),
  ].join("\n");
