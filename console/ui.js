// Shared pieces: htm bound to Preact, data loading hooks, tabs, forms, formatting.
import { h } from "preact";
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import htm from "htm";

export const html = htm.bind(h);

// Load `fetcher()` now and whenever `deps` change; `reload()` loads again.
export function useLoad(fetcher, deps) {
  const [state, setState] = useState({ loading: true, data: undefined, error: null });
  const [round, setRound] = useState(0);
  useEffect(() => {
    let live = true;
    setState((s) => ({ ...s, loading: true }));
    fetcher().then(
      (data) => live && setState({ loading: false, data, error: null }),
      (error) => live && setState({ loading: false, data: undefined, error }),
    );
    return () => {
      live = false;
    };
  }, [...deps, round]);
  const reload = useCallback(() => setRound((r) => r + 1), []);
  return { ...state, reload };
}

// Call `tick()` every `ms` while mounted (and at once).
export function usePoll(tick, ms, deps) {
  const saved = useRef(tick);
  saved.current = tick;
  useEffect(() => {
    let stopped = false;
    let timer = null;
    const run = async () => {
      try {
        await saved.current();
      } finally {
        if (!stopped) timer = setTimeout(run, ms);
      }
    };
    run();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [ms, ...deps]);
}

export function ErrorNote({ error }) {
  if (!error) return null;
  const status = error.status ? ` (${error.status})` : "";
  return html`<p class="error" role="alert">${error.reason || error.message}${status}</p>`;
}

export function Loading({ what }) {
  return html`<p class="muted" aria-busy="true">Loading ${what || ""}…</p>`;
}

// What an action did: its refusal, or a confirmation, read out by screen readers.
export function Outcome({ outcome }) {
  if (!outcome) return html`<div aria-live="polite"></div>`;
  return html`<div aria-live="polite">
    ${outcome.error
      ? html`<p class="error" role="alert">${outcome.error.reason || outcome.error.message}</p>`
      : html`<p class="ok">${outcome.ok}</p>`}
  </div>`;
}

// Run an action, keep its outcome; `then` runs after a success (a reload).
export function useAction() {
  const [outcome, setOutcome] = useState(null);
  const [busy, setBusy] = useState(false);
  const run = useCallback(async (action, okText, then) => {
    setBusy(true);
    try {
      await action();
      setOutcome({ ok: okText });
      if (then) then();
    } catch (error) {
      setOutcome({ error });
    } finally {
      setBusy(false);
    }
  }, []);
  return { outcome, busy, run, clear: () => setOutcome(null) };
}

// WAI-ARIA tabs: arrow keys move between tabs, the selected one owns the panel.
export function Tabs({ tabs, selected, onSelect, label }) {
  const refs = useRef({});
  const keys = (event, index) => {
    const step = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
    if (event.key === "Home" || event.key === "End" || step) {
      event.preventDefault();
      const next = event.key === "Home" ? 0 : event.key === "End" ? tabs.length - 1
        : (index + step + tabs.length) % tabs.length;
      onSelect(tabs[next].id);
      refs.current[tabs[next].id]?.focus();
    }
  };
  return html`<div role="tablist" aria-label=${label} class="tabs">
    ${tabs.map((tab, index) => html`<button role="tab" id=${`tab-${tab.id}`} aria-selected=${tab.id === selected}
        aria-controls=${`panel-${tab.id}`} tabindex=${tab.id === selected ? 0 : -1}
        ref=${(el) => (refs.current[tab.id] = el)} onClick=${() => onSelect(tab.id)}
        onKeyDown=${(e) => keys(e, index)}>${tab.label}</button>`)}
  </div>`;
}

export function TabPanel({ id, children }) {
  return html`<div role="tabpanel" id=${`panel-${id}`} aria-labelledby=${`tab-${id}`} class="panel">${children}</div>`;
}

let fieldIds = 0;
export function useFieldId(prefix) {
  const ref = useRef(null);
  if (ref.current === null) ref.current = `${prefix}-${++fieldIds}`;
  return ref.current;
}

// A labelled input; `value`/`onValue` as strings.
export function Field({ label, value, onValue, type = "text", hint, ...rest }) {
  const id = useFieldId("field");
  return html`<div class="field">
    <label for=${id}>${label}</label>
    <input id=${id} type=${type} value=${value} onInput=${(e) => onValue(e.currentTarget.value)}
      aria-describedby=${hint ? `${id}-hint` : undefined} ...${rest} />
    ${hint && html`<small id=${`${id}-hint`} class="muted">${hint}</small>`}
  </div>`;
}

export function Select({ label, value, onValue, options }) {
  const id = useFieldId("select");
  return html`<div class="field">
    <label for=${id}>${label}</label>
    <select id=${id} value=${value} onChange=${(e) => onValue(e.currentTarget.value)}>
      ${options.map(([v, text]) => html`<option value=${v} selected=${v === value}>${text}</option>`)}
    </select>
  </div>`;
}

// A button that asks again before doing something that cannot be undone.
export function ConfirmButton({ label, confirmLabel, onConfirm, disabled, danger = true }) {
  const [asking, setAsking] = useState(false);
  const yes = useRef(null);
  const first = useRef(null);
  const wasAsking = useRef(false);
  useEffect(() => {  // the focus follows the question, and comes back when it is answered
    if (asking) yes.current?.focus();
    else if (wasAsking.current) first.current?.focus();
    wasAsking.current = asking;
  }, [asking]);
  if (!asking) {
    return html`<button ref=${first} class=${danger ? "danger" : ""} disabled=${disabled}
      onClick=${() => setAsking(true)}>${label}</button>`;
  }
  return html`<span class="confirm" role="group" aria-label=${`Confirm: ${label}`}>
    <button ref=${yes} class="danger" onClick=${() => { setAsking(false); onConfirm(); }}>${confirmLabel || `Yes, ${label.toLowerCase()}`}</button>
    <button onClick=${() => setAsking(false)}>Cancel</button>
  </span>`;
}

export function fmtNumber(value, digits = 0) {
  if (value === undefined || value === null || Number.isNaN(value)) return "–";
  return Number(value).toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: 0 });
}

export function fmtBytes(bytes) {
  if (bytes === undefined || bytes === null || bytes < 0) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${fmtNumber(value, unit ? 1 : 0)} ${units[unit]}`;
}

export function fmtTime(ms) {
  if (!ms) return "–";
  return new Date(ms).toISOString().replace("T", " ").replace("Z", " UTC");
}

export function link(...parts) {
  return `#/${parts.map((p) => encodeURIComponent(p)).join("/")}`;
}
