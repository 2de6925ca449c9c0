/**
 * The API key prompt, shown when the node answers 401: the key is checked against the node before
 * it is kept (in this tab's sessionStorage only), so a wrong one is said on the form at once.
 */
import { useState } from "preact/hooks";
import { apiFetch, describeError, ensureOk, setKey, Unauthorized } from "../api.ts";

export function KeyForm({ onAccepted }: { onAccepted: () => void }) {
  const [value, setValue] = useState("");
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);

  async function submit(e: Event) {
    e.preventDefault();
    const key = value.trim();
    if (!key) return;
    setBusy(true);
    setError("");
    try {
      // Kept only once the node took it: a 5xx says nothing about the key.
      const res = await ensureOk(await apiFetch("/api/console/state", { key }));
      await res.body?.cancel();
      setKey(key);
      setValue("");
      onAccepted();
    } catch (err) {
      setError(err instanceof Unauthorized ? "This key was refused. Check it and try again." : describeError(err));
    } finally {
      setBusy(false);
    }
  }

  return (
    <section class="card key-card" aria-labelledby="key-title">
      <h2 id="key-title">API key needed</h2>
      <p class="muted">This node asks for an API key. It is kept in this tab only and sent with each request to the node.</p>
      <form data-testid="key-form" onSubmit={(e) => void submit(e)}>
        <label for="key-input">API key</label>
        <div class="row">
          <input
            id="key-input"
            data-testid="key-input"
            type="password"
            autocomplete="off"
            autoFocus
            value={value}
            aria-invalid={error ? true : undefined}
            aria-describedby={error ? "key-error" : undefined}
            onInput={(e) => setValue(e.currentTarget.value)}
          />
          <button type="submit" class="btn btn-primary" data-testid="key-submit" disabled={busy}>
            {busy ? "Checking…" : "Use key"}
          </button>
        </div>
        {error && (
          <p id="key-error" data-testid="key-error" class="err-text" role="alert">
            {error}
          </p>
        )}
      </form>
    </section>
  );
}
