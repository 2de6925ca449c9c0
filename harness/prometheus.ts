/**
 * Reading a Prometheus text exposition (format 0.0.4) in tests, with a parser of our own that is
 * strict where a scraper is: every sample belongs to a family declared by `# TYPE` with a name its
 * type allows, label values are quoted and escaped, values are numbers, and each histogram's
 * buckets only grow, up to a `+Inf` bucket that equals its count. Then one number per question.
 */

export type MetricType = "counter" | "gauge" | "histogram" | "summary" | "untyped";

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  type: MetricType;
  help: string;
  samples: Sample[];
}

export type Scrape = Map<string, Family>;

const NAME = "[a-zA-Z_:][a-zA-Z0-9_:]*";
const LABEL = `([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\\\\n]|\\\\[\\\\"n])*)"`;
const SAMPLE = new RegExp(`^(${NAME})(?:\\{((?:${LABEL},?)*)\\})? (\\S+)(?: -?\\d+)?$`);
const TYPE_LINE = new RegExp(`^# TYPE (${NAME}) (counter|gauge|histogram|summary|untyped)$`);
const HELP_LINE = new RegExp(`^# HELP (${NAME}) (.*)$`);

const unescape = (v: string) => v.replace(/\\(["\\n])/g, (_, c: string) => (c === "n" ? "\n" : c));

function number(text: string, line: string): number {
  if (text === "+Inf") return Infinity;
  if (text === "-Inf") return -Infinity;
  if (text === "NaN") return NaN;
  const v = Number(text);
  if (text === "" || Number.isNaN(v)) throw new Error(`not a number in ${JSON.stringify(line)}`);
  return v;
}

function familyOf(scrape: Scrape, sampleName: string): Family | undefined {
  const f = scrape.get(sampleName);
  if (f && f.type !== "histogram" && f.type !== "summary") return f;
  for (const suffix of ["_bucket", "_sum", "_count"]) {
    if (!sampleName.endsWith(suffix)) continue;
    const g = scrape.get(sampleName.slice(0, -suffix.length));
    if (g && (g.type === "histogram" || (g.type === "summary" && suffix !== "_bucket"))) return g;
  }
  return undefined;
}

function checkHistogram(f: Family): void {
  const series = new Map<string, { buckets: [number, number][]; count?: number }>();
  for (const s of f.samples) {
    const { le, ...rest } = s.labels;
    const key = JSON.stringify(Object.entries(rest).sort());
    let h = series.get(key);
    if (!h) series.set(key, (h = { buckets: [] }));
    if (s.name === `${f.name}_bucket`) {
      if (le === undefined) throw new Error(`${f.name}_bucket without le`);
      h.buckets.push([number(le, le), s.value]);
    } else if (s.name === `${f.name}_count`) h.count = s.value;
  }
  for (const [key, h] of series) {
    const sorted = [...h.buckets].sort((a, b) => a[0] - b[0]);
    for (let i = 1; i < sorted.length; i++) if (sorted[i]![1] < sorted[i - 1]![1]) throw new Error(`${f.name}${key}: buckets shrink`);
    const inf = sorted.at(-1);
    if (!inf || inf[0] !== Infinity || inf[1] !== h.count) throw new Error(`${f.name}${key}: the +Inf bucket is not the count`);
  }
}

export function parseScrape(text: string): Scrape {
  const scrape: Scrape = new Map();
  const help = new Map<string, string>();
  for (const line of text.split("\n")) {
    if (line === "") continue;
    if (line.startsWith("#")) {
      const t = TYPE_LINE.exec(line);
      if (t) {
        if (scrape.has(t[1]!)) throw new Error(`${t[1]} declared twice`);
        scrape.set(t[1]!, { name: t[1]!, type: t[2] as MetricType, help: help.get(t[1]!) ?? "", samples: [] });
      }
      const h = HELP_LINE.exec(line);
      if (h) help.set(h[1]!, h[2]!);
      continue;
    }
    const m = SAMPLE.exec(line);
    if (!m) throw new Error(`not a sample line: ${JSON.stringify(line)}`);
    const f = familyOf(scrape, m[1]!);
    if (!f) throw new Error(`sample ${m[1]} has no # TYPE before it`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(new RegExp(LABEL, "g"))) labels[l[1]!] = unescape(l[2]!);
    f.samples.push({ name: m[1]!, labels, value: number(m[5]!, line) });
  }
  for (const f of scrape.values()) if (f.type === "histogram") checkHistogram(f);
  return scrape;
}

function family(scrape: Scrape, name: string, type: MetricType): Family | undefined {
  const f = scrape.get(name);
  if (f && f.type !== type) throw new Error(`${name} is a ${f.type}, not a ${type}`);
  return f;
}

const matches = (labels: Record<string, string>, want: Record<string, string>) => Object.entries(want).every(([k, v]) => (labels[k] ?? "") === v);

/** Sum of a counter's (or gauge's) samples whose labels include `labels` (0 when none). */
export function valueOf(scrape: Scrape, name: string, labels: Record<string, string> = {}, type: MetricType = "counter"): number {
  const samples = family(scrape, name, type)?.samples ?? [];
  return samples.filter((s) => s.name === name && matches(s.labels, labels)).reduce((sum, s) => sum + s.value, 0);
}

/** Observations of a histogram whose labels include `labels` (0 when none). */
export function observationsOf(scrape: Scrape, name: string, labels: Record<string, string> = {}): number {
  const samples = family(scrape, name, "histogram")?.samples ?? [];
  return samples.filter((s) => s.name === `${name}_count` && matches(s.labels, labels)).reduce((sum, s) => sum + s.value, 0);
}

/** A histogram's bucket bounds (of its first series). */
export function bucketBounds(scrape: Scrape, name: string): string[] {
  const samples = family(scrape, name, "histogram")?.samples ?? [];
  const first = samples.find((s) => s.name === `${name}_bucket`);
  if (!first) return [];
  const { le: _, ...series } = first.labels;
  return samples.filter((s) => s.name === `${name}_bucket` && matches(s.labels, series)).map((s) => s.labels.le!);
}

/** Every label set of `name`'s samples. */
export const labelSets = (scrape: Scrape, name: string): Record<string, string>[] => (scrape.get(name)?.samples ?? []).filter((s) => s.name === name).map((s) => s.labels);
