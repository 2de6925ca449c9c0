/**
 * The console's leak-rate check: a page kept busy at several times a user's pace for a minute
 * grows no faster than what its bounded stores allow. One node with two tiny models; a chat
 * completion every 250 ms, a load or unload of the second model every 5 s, another tab every
 * second; the page is measured after a warm-up and every 15 s (elements in the document, JS heap
 * after a full GC, event listeners, log lines). A page that keeps what it is sent, or a view that
 * leaves listeners or elements behind when it goes, grows with each of those events, and they
 * come fast here. The long soak (ten minutes and more at a user's pace) is bench/console-soak.ts.
 */
import { afterAll, beforeAll, expect } from "bun:test";
import { CONSOLE_LIMITS } from "../../console/protocol.ts";
import { killAllChildren } from "../../harness/children.ts";
import { growthPerMinute, soakPage, soakTable, startSoakNode } from "../../harness/console-soak.ts";
import type { MeshTestNode } from "../../harness/mesh.ts";
import { browserSuite, byTestId, waitForAttr } from "../../harness/browser.ts";

const { skip, browserTest, open } = browserSuite("tests/browser/console-soak.test.ts");

/** Long enough for the page to have drawn every tab, opened its charts and loaded the second model. */
const WARMUP_S = 20;
const WINDOW_S = 60;
const PACE = { chatEveryMs: 250, toggleEveryMs: 5_000, tabEveryMs: 1_000, measureEveryMs: 15_000 };
/**
 * What the page may still gain per minute after the warm-up, heap after GC: its traffic history
 * (30 more samples a minute, ~2.3 KiB each as measured by the ten-minute soak) and its log (at most
 * CONSOLE_LIMITS.logLines, ~0.3 MiB in all) are the only stores that fill, both bounded; V8's
 * own slack between two collections is well under 0.2 MiB. 1 MiB a minute is a page that keeps
 * about 4 KiB of each chat it saw (240 a minute here) or 15 KiB of each tab it left.
 */
const HEAP_MIB_PER_MIN = 1;

let node: MeshTestNode;
beforeAll(async () => {
  if (skip) return;
  node = await startSoakNode("soak");
}, 120_000);
afterAll(async () => {
  try {
    await node?.stop();
  } finally {
    await killAllChildren();
  }
});

browserTest(
  "a console page kept busy for a minute grows no faster than its bounded stores allow",
  async () => {
    const { page, errors } = await open(node.url, { route: "#/traffic" });
    await waitForAttr(byTestId(page, "live-status"), "data-state", (v) => v === "live", "the page to go live", 20_000);
    const { samples, activity } = await soakPage(page, node, { seconds: WARMUP_S + WINDOW_S, firstMeasureS: WARMUP_S, pace: PACE });
    const warm = samples[0]!;
    const end = samples[samples.length - 1]!;
    const growth = growthPerMinute(warm, end);
    console.log(
      `\nconsole leak rate, ${WINDOW_S} s after a ${WARMUP_S} s warm-up: heap ${growth.heapMiB.toFixed(3)} MiB/min, DOM ${growth.dom.toFixed(1)} elements/min, listeners ${growth.listeners.toFixed(1)}/min\n${soakTable(samples)}`,
    );

    expect(activity.failed).toEqual([]);
    expect(errors).toEqual([]);
    // Enough happened for a leak to show: most of the paced events ran even on a loaded machine.
    expect(end.requests - warm.requests).toBeGreaterThanOrEqual(60);
    expect(end.tabs - warm.tabs).toBeGreaterThanOrEqual(20);
    expect(end.toggles - warm.toggles).toBeGreaterThanOrEqual(4);
    expect(growth.heapMiB).toBeLessThanOrEqual(HEAP_MIB_PER_MIN);
    // The DOM of #/traffic does not grow with data at all (canvases): 20% plus 50 elements covers
    // text that changes length (figures, ages), nothing that accumulates; event listeners likewise.
    expect(end.dom).toBeLessThanOrEqual(warm.dom * 1.2 + 50);
    expect(end.listeners).toBeLessThanOrEqual(warm.listeners * 1.2 + 20);
    expect(end.logLines).toBeLessThanOrEqual(CONSOLE_LIMITS.logLines);
  },
  (WARMUP_S + WINDOW_S + 120) * 1000,
);
