#!/usr/bin/env bun
/**
 * A console page left open through long mesh activity at a user's pace: one node with two tiny
 * models, a small chat completion every 2 s, the second model loaded or unloaded every 30 s, the
 * page moving to another tab every 10 s; measured after a warm-up and every minute (elements in
 * the document, JS heap after a full GC, event listeners, log lines). Prints the samples and the
 * growth per minute after the warm-up; the suite's short leak-rate check is
 * tests/browser/console-soak.test.ts.
 *
 *   bun bench/console-soak.ts [--seconds 600]
 */
import { parseArgs } from "node:util";
import { chromium } from "playwright-core";
import { provideChromium } from "../scripts/chromium-dev.ts";
import { provideDevLlama } from "../scripts/llama-dev.ts";
import { killAllChildren } from "../harness/children.ts";
import { byTestId, DESKTOP, waitForAttr } from "../harness/console-page.ts";
import { growthPerMinute, soakPage, soakTable, startSoakNode } from "../harness/console-soak.ts";
import type { MeshTestNode } from "../harness/mesh.ts";
import { printTable } from "./report.ts";

const { values } = parseArgs({ options: { seconds: { type: "string", default: "600" } } });
const SECONDS = Number(values.seconds);
/** Long enough for the page to have drawn every tab, opened its charts and filled its first caches. */
const WARMUP_S = Math.min(60, Math.round(SECONDS / 5));
const PACE = { chatEveryMs: 2_000, toggleEveryMs: 30_000, tabEveryMs: 10_000, measureEveryMs: 60_000 };

process.env.MESH_LLAMA_DIR = (await provideDevLlama()).dir;
const found = await provideChromium();
if (!("path" in found)) throw new Error(`no Chromium: ${found.missing}`);
const browser = await chromium.launch({ executablePath: found.path, args: ["--no-sandbox"], headless: true, timeout: 60_000 });
let node: MeshTestNode | undefined;
try {
  node = await startSoakNode("soak-bench");
  const context = await browser.newContext({ viewport: DESKTOP, reducedMotion: "reduce" });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(`${node.url}/#/traffic`, { waitUntil: "domcontentloaded", timeout: 30_000 });
  await waitForAttr(byTestId(page, "live-status"), "data-state", (v) => v === "live", "the page to go live", 20_000);
  const { samples, activity } = await soakPage(page, node, { seconds: SECONDS, firstMeasureS: WARMUP_S, pace: PACE });
  console.log(`console soak, ${SECONDS} s (warm-up ${WARMUP_S} s), one node, the page on each tab for ${PACE.tabEveryMs / 1000} s:\n`);
  console.log(soakTable(samples));
  const warm = samples[0]!;
  const end = samples[samples.length - 1]!;
  const g = growthPerMinute(warm, end);
  console.log("");
  printTable(
    ["after warm-up", "heap MiB", "DOM elements", "JS listeners", "failed requests", "page errors"],
    [
      ["change", (end.heapMiB - warm.heapMiB).toFixed(2), String(end.dom - warm.dom), String(end.listeners - warm.listeners), String(activity.failed.length), String(errors.length)],
      ["per minute", g.heapMiB.toFixed(3), g.dom.toFixed(1), g.listeners.toFixed(1), "", ""],
    ],
  );
} finally {
  await browser.close();
  await node?.stop();
  await killAllChildren();
}
