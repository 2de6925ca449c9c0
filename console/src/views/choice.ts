/**
 * The model a form's select shows: the one picked while it is still offered, else the first ready
 * one, else the first, so a select never points at a model that left the catalog.
 */
import { useState } from "preact/hooks";
import type { ConsoleModel } from "../../protocol.ts";

export function useChoice(models: readonly ConsoleModel[]): [string, (v: string) => void] {
  const [value, setValue] = useState("");
  const chosen = models.some((m) => m.name === value) ? value : ((models.find((m) => m.status === "ready") ?? models[0])?.name ?? "");
  return [chosen, setValue];
}
