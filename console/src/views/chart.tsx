/**
 * One uPlot chart of rates over time. The plot is made once per set of series (and colour
 * scheme) and then fed with `setData` as samples arrive, never rebuilt per sample; it follows its
 * box's width through a ResizeObserver and is destroyed, observer and all, when it goes away.
 */
import { useEffect, useRef, useState } from "preact/hooks";
import uPlot from "uplot";
import type { Rates } from "../rates.ts";
import { colorAt } from "./parts.tsx";

const HEIGHT = 170;

export type ChartName = "requests" | "tokens" | "ttft" | "tunnel";

/** The page's colour scheme, following the system's as it changes. */
export function useColorScheme(): "light" | "dark" {
  const query = "(prefers-color-scheme: dark)";
  const [dark, setDark] = useState(() => window.matchMedia(query).matches);
  useEffect(() => {
    const mq = window.matchMedia(query);
    const on = () => setDark(mq.matches);
    mq.addEventListener("change", on);
    return () => mq.removeEventListener("change", on);
  }, []);
  return dark ? "dark" : "light";
}

const toData = (r: Rates): uPlot.AlignedData => [r.x, ...r.series.map((s) => s.values)];

function cssVar(name: string): string {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || "#888";
}

interface ChartProps {
  name: ChartName;
  title: string;
  rates: Rates;
  /** A value as the legend and axis show it. */
  format: (v: number) => string;
  /** A value as the y axis shows it (short: the unit is in the title). */
  axisFormat: (v: number) => string;
  labelOf: (key: string) => string;
  /** Series that belong together (a model's tokens in and out) share a colour; `dashed` tells them apart. */
  styleOf?: (key: string, index: number) => { color: string; dashed?: boolean };
  /** Join values across gaps (a mean that had no answers in some intervals), with its points shown. */
  spanGaps?: boolean;
}

export function Chart({ name, title, rates, format, axisFormat, labelOf, styleOf, spanGaps = false }: ChartProps) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const scheme = useColorScheme();
  const keys = rates.series.map((s) => s.key).join("\n");
  const latest = useRef(rates);
  latest.current = rates;

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const fg = cssVar("--fg-muted");
    const grid = cssVar("--grid");
    const axis = (values: uPlot.Axis["values"]): uPlot.Axis => ({ stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 }, values });
    const opts: uPlot.Options = {
      width: Math.max(el.clientWidth, 200),
      height: HEIGHT,
      series: [
        {},
        ...latest.current.series.map((s, i) => {
          const style = styleOf?.(s.key, i) ?? { color: colorAt(i) };
          return {
          label: labelOf(s.key),
          stroke: style.color,
          dash: style.dashed ? [5, 4] : undefined,
          width: 1.5,
          spanGaps,
          points: { show: spanGaps, size: 4 },
          value: (_u: uPlot, v: number | null) => (v === null ? "—" : format(v)),
          };
        }),
      ],
      axes: [axis(undefined), { ...axis((_u, splits) => splits.map((v) => axisFormat(v))), size: 52 }],
      scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] } },
      legend: { live: true },
      cursor: { drag: { x: false, y: false } },
    };
    const u = new uPlot(opts, toData(latest.current), el);
    plot.current = u;
    const ro = new ResizeObserver(() => {
      const w = el.clientWidth;
      if (w > 0 && w !== u.width) u.setSize({ width: w, height: HEIGHT });
    });
    ro.observe(el);
    return () => {
      ro.disconnect();
      u.destroy();
      plot.current = null;
    };
    // Rebuilt only when the lines themselves change; new samples go through setData below.
  }, [keys, scheme]);

  useEffect(() => {
    plot.current?.setData(toData(rates));
  }, [rates]);

  return (
    <figure class="chart card" data-testid="traffic-chart" data-chart={name}>
      <figcaption>{title}</figcaption>
      <div ref={box} class="chart-box" />
      {rates.series.length === 0 && <p class="empty chart-empty">No traffic yet.</p>}
    </figure>
  );
}
