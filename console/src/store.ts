/**
 * What the page knows of its node (pure): the last state, the recent traffic samples and log
 * lines, folded from the events of the console stream. However long the page stays open it holds
 * at most `CONSOLE_LIMITS` samples and lines: `hello` replaces everything, `state` replaces the
 * state whole, a sample or line the page already has (by time or by seq) is skipped.
 */
import { CONSOLE_LIMITS, type ConsoleEvents, type ConsoleState, type LogLine, type TrafficSample } from "../protocol.ts";

export interface ConsoleView {
  state: ConsoleState | null;
  traffic: TrafficSample[];
  logs: LogLine[];
}

export type ConsoleAction = { [K in keyof ConsoleEvents]: { type: K; data: ConsoleEvents[K] } }[keyof ConsoleEvents];

export const emptyView = (): ConsoleView => ({ state: null, traffic: [], logs: [] });

/** The newest `max` of `items` (the same array when it already fits). */
export function keepLast<T>(items: T[], max: number): T[] {
  return items.length > max ? items.slice(items.length - max) : items;
}

export function reduce(view: ConsoleView, action: ConsoleAction): ConsoleView {
  switch (action.type) {
    case "hello":
      return {
        state: action.data.state,
        traffic: keepLast(action.data.traffic, CONSOLE_LIMITS.trafficSamples),
        logs: keepLast(action.data.logs, CONSOLE_LIMITS.logLines),
      };
    case "state":
      return { ...view, state: action.data };
    case "traffic": {
      const last = view.traffic.at(-1);
      if (last && action.data.at <= last.at) return view;
      return { ...view, traffic: keepLast([...view.traffic, action.data], CONSOLE_LIMITS.trafficSamples) };
    }
    case "log": {
      const last = view.logs.at(-1);
      if (last && action.data.seq <= last.seq) return view;
      return { ...view, logs: keepLast([...view.logs, action.data], CONSOLE_LIMITS.logLines) };
    }
  }
}

const EVENT_NAMES: ReadonlySet<string> = new Set(["hello", "state", "traffic", "log"] satisfies (keyof ConsoleEvents)[]);

/** A stream event as an action, or null for a name the page does not know or data that is not JSON of an object. */
export function toAction(event: string, data: string): ConsoleAction | null {
  if (!EVENT_NAMES.has(event)) return null;
  let value: unknown;
  try {
    value = JSON.parse(data);
  } catch {
    return null;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return null;
  // The node is the page's own server (same origin, same binary): its shapes are the protocol's.
  return { type: event, data: value } as ConsoleAction;
}
