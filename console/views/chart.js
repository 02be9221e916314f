// A time-series chart (uPlot, vendored as a global script), redrawn as points arrive.
import { useEffect, useRef } from "preact/hooks";
import { html } from "../ui.js";

export function Chart({ title, series, points, unit }) {
  const box = useRef(null);
  const plot = useRef(null);
  useEffect(() => {
    const uPlot = window.uPlot;
    if (!uPlot || !box.current) return undefined;
    const colors = ["#2563eb", "#dc2626", "#059669", "#d97706"];
    plot.current = new uPlot({
      width: Math.max(280, box.current.clientWidth || 480),
      height: 180,
      legend: { show: true },
      axes: [{}, { size: 60, values: (u, vals) => vals.map((v) => `${v}${unit ? ` ${unit}` : ""}`) }],
      series: [{}, ...series.map((name, i) => ({ label: name, stroke: colors[i % colors.length], width: 2 }))],
    }, [[], ...series.map(() => [])], box.current);
    return () => plot.current?.destroy();
  }, []);
  useEffect(() => {
    if (!plot.current) return;
    const data = [points.map((p) => p.t / 1000), ...series.map((_, i) => points.map((p) => p.values[i]))];
    plot.current.setData(data);
  }, [points]);
  const last = points[points.length - 1];
  const summary = last ? series.map((name, i) => `${name} ${last.values[i].toFixed(2)}${unit ? ` ${unit}` : ""}`).join(", ")
    : "no data yet";
  return html`<figure class="chart">
    <figcaption>${title}</figcaption>
    <div ref=${box} role="img" aria-label=${`${title}: ${summary}`}></div>
  </figure>`;
}
