// A workflow's DAG as SVG: dagre lays the graph out (ranks left to right), Preact draws it.
// Each node is a focusable button showing its id and its state in words (the colour only repeats
// the word), so the drawing reads the same without colour; a table of the nodes follows it.
import { useMemo } from "preact/hooks";
import dagre from "@dagrejs/dagre";
import { html } from "./ui.js";

//: Fill (pale) and stroke (dark) per node state; the text is always dark on the pale fill.
export const NODE_COLOURS = {
  pending: ["#f4f6f8", "#59636e"],
  queued: ["#e3efff", "#0b5cad"],
  running: ["#efe7fb", "#6f42c1"],
  retrying: ["#fff3d6", "#7a4d00"],
  succeeded: ["#e3f4e8", "#1a6b32"],
  failed: ["#fde8e8", "#a4161a"],
  upstream_failed: ["#fdeee0", "#8a3b00"],
  skipped: ["#f7f0e3", "#6b5428"],
  cancelled: ["#eceef1", "#4a5360"],
  none: ["#ffffff", "#4a5360"],
};

const NODE_HEIGHT = 46;
const CHAR = 7.6; // an average character of the node text at 13px, for the node's width

// dagre's layout of the nodes ({id, depends_on}): {nodes: {id: {x, y, width, height}}, edges, width, height}.
export function layout(nodes) {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: "LR", nodesep: 24, ranksep: 56, marginx: 8, marginy: 8 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const node of nodes) {
    const width = Math.max(96, Math.ceil(Math.max(node.id.length, 15) * CHAR) + 24);
    g.setNode(node.id, { width, height: NODE_HEIGHT });
  }
  for (const node of nodes) for (const parent of node.depends_on || []) g.setEdge(parent, node.id);
  dagre.layout(g);
  const placed = Object.fromEntries(g.nodes().map((id) => [id, g.node(id)]));
  const edges = g.edges().map((e) => ({ from: e.v, to: e.w, points: g.edge(e).points }));
  const { width, height } = g.graph();
  return { nodes: placed, edges, width: Math.ceil(width), height: Math.ceil(height) };
}

const path = (points) => points.map((p, i) => `${i ? "L" : "M"}${p.x.toFixed(1)},${p.y.toFixed(1)}`).join(" ");

/**
 * nodes: [{id, depends_on, state?}] (state absent: the definition, drawn without states);
 * selected: a node id or null; onSelect(id): a node was clicked or chosen with Enter/Space.
 */
export function Dag({ nodes, selected, onSelect, label }) {
  const shape = JSON.stringify(nodes.map((n) => [n.id, n.depends_on || []]));
  const laid = useMemo(() => layout(nodes), [shape]);
  const choose = (id) => onSelect && onSelect(id);
  const key = (id) => (event) => {
    if (event.key === "Enter" || event.key === " ") { event.preventDefault(); choose(id); }
  };
  return html`<div class="dag" data-testid="dag">
    <svg role="group" aria-label=${label} width=${laid.width} height=${laid.height}
      viewBox=${`0 0 ${laid.width} ${laid.height}`}>
      <defs><marker id="dag-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
        <path d="M 0 0 L 10 5 L 0 10 z" fill="#4a5360" /></marker></defs>
      ${laid.edges.map((e) => html`<path key=${e.from + ">" + e.to} class="dag-edge" d=${path(e.points)}
        fill="none" stroke="#4a5360" stroke-width="1.5" marker-end="url(#dag-arrow)" aria-hidden="true" />`)}
      ${nodes.map((node) => {
        const box = laid.nodes[node.id];
        if (!box) return null;
        const state = node.state || "none";
        const [fill, stroke] = NODE_COLOURS[state] || NODE_COLOURS.none;
        const x = box.x - box.width / 2, y = box.y - box.height / 2;
        const words = node.state ? node.state.replace("_", " ") : "";
        const name = `Node ${node.id}${node.state ? ": " + words : ""}`;
        return html`<g key=${node.id} class=${"dag-node state-" + state} role=${onSelect ? "button" : "img"} tabindex=${onSelect ? "0" : undefined}
          aria-label=${name} aria-pressed=${onSelect ? String(selected === node.id) : undefined}
          data-node=${node.id} data-state=${state}
          onClick=${() => choose(node.id)} onKeyDown=${key(node.id)}>
          <rect x=${x} y=${y} width=${box.width} height=${box.height} rx="6" fill=${fill} stroke=${stroke}
            stroke-width=${selected === node.id ? 4 : 2} />
          <text x=${box.x} y=${node.state ? box.y - 4 : box.y + 5} text-anchor="middle" class="dag-id">${node.id}</text>
          ${node.state && html`<text x=${box.x} y=${box.y + 14} text-anchor="middle" class="dag-state" fill=${stroke}>${words}</text>`}
        </g>`;
      })}
    </svg>
  </div>`;
}
