/**
 * The message of an error the node answered with (pure): its JSON in either of the node's shapes
 * (`{error: {message}}`, `{status: "error", message}`, or `{error: "..."}` of a pull), else a
 * short text body, else the status line.
 */

export function errorText(status: number, statusText: string, body: string): string {
  try {
    const v: unknown = JSON.parse(body);
    if (typeof v === "object" && v !== null) {
      const o = v as { error?: unknown; message?: unknown };
      if (typeof o.error === "object" && o.error !== null) {
        const m = (o.error as { message?: unknown }).message;
        if (typeof m === "string" && m) return m;
      }
      if (typeof o.error === "string" && o.error) return o.error;
      if (typeof o.message === "string" && o.message) return o.message;
    }
  } catch {
    // Not JSON: fall back to the text itself when it is short enough to read.
  }
  const text = body.trim();
  if (text && text.length <= 300) return text;
  return `HTTP ${status}${statusText ? ` ${statusText}` : ""}`;
}

