/**
 * The tab in the address: `#/mesh` (the default), `#/models`, `#/traffic`, `#/chat`, `#/logs`.
 */
import { useEffect, useState } from "preact/hooks";

export const TABS = ["mesh", "models", "traffic", "chat", "logs"] as const;
export type Tab = (typeof TABS)[number];

export function tabOf(hash: string): Tab {
  const name = hash.replace(/^#\/?/, "").split(/[/?]/)[0] ?? "";
  return (TABS as readonly string[]).includes(name) ? (name as Tab) : "mesh";
}

export function useTab(): Tab {
  const [tab, setTab] = useState<Tab>(() => tabOf(window.location.hash));
  useEffect(() => {
    const on = () => setTab(tabOf(window.location.hash));
    window.addEventListener("hashchange", on);
    return () => window.removeEventListener("hashchange", on);
  }, []);
  return tab;
}
