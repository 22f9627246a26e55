// The interactive graph, drawn on a canvas by Cytoscape.js (vendored: cytoscape.min.js, MIT,
// see cytoscape.LICENSE.txt; it makes no network requests). Nodes are coloured by type and sized
// by degree, labels sized with their node: zoomed out, a label drawn smaller than legible is left
// out (the small nodes' first), except on picked and highlighted nodes; zoomed in, labels shrink
// by powers of two so they stay near one size on screen. Names are drawn on the canvas as text,
// never as markup. The layout is our own (below): Cytoscape's force layout takes tens of seconds
// at a thousand nodes.
"use strict";

const LABEL_RATIO = 0.3;    // a label's height, of its node's size (at zoom 1)
const LABEL_FLOOR = 10;     // the smallest label, model units
const LABEL_MIN_PX = 9;     // the smallest label drawn
const NODE_SIZE = [18, 60]; // model units, by degree
const SPACING = 70;         // the layout's ideal edge length, model units
const FIT_ZOOM = 1.3;       // the closest a fit comes
const CELL_KEY = 1 << 20;   // a grid cell's key: column * CELL_KEY + row (rows stay far below it)

// A type's colour: its name hashed to a hue, so a type keeps its colour across graphs and pages.
function typeColour(type) {
  let h = 0;
  for (const c of String(type || "")) h = (h * 31 + c.codePointAt(0)) >>> 0;
  return `hsl(${h % 360}, 62%, ${42 + (h >> 9) % 12}%)`;
}

class GraphView {
  constructor(container, {onPick, onExpand, onChange}) {
    this.container = container;
    this.onChange = onChange;
    this.maxDegree = 1;
    this.cy = cytoscape({
      container,
      minZoom: 0.02,
      maxZoom: 10,
      boxSelectionEnabled: false,
      textureOnViewport: true,    // panning and zooming move a snapshot: smooth at a thousand nodes
      hideEdgesOnViewport: true,
      style: this.style(),
    });
    this.labelScale = 1;
    this.cy.on("zoom", () => {  // restyled only when the zoom passes a power of two
      const scale = 2 ** Math.max(0, Math.round(Math.log2(this.cy.zoom())));
      if (scale !== this.labelScale) { this.labelScale = scale; this.cy.style().update(); }
    });
    this.cy.on("tap", "node", event => onPick(event.target.id()));
    this.cy.on("dbltap", "node", event => onExpand(event.target.id()));
    container.addEventListener("keydown", event => this.key(event));
  }

  style() {
    const scale = () => this.labelScale || 1;
    return [
      {selector: "node", style: {
        "background-color": "data(colour)", width: "data(size)", height: "data(size)", label: "data(label)",
        "font-size": node => Math.max(LABEL_FLOOR, node.data("size") * LABEL_RATIO) / scale(), "text-valign": "bottom",
        "text-outline-color": "#fff", "text-outline-width": () => 2 / scale(), color: "#1d2430",
        "text-max-width": () => 360 / scale(), "text-wrap": "ellipsis", "min-zoomed-font-size": LABEL_MIN_PX,
      }},
      {selector: "node:selected, node.why", style: {"min-zoomed-font-size": 0, "z-index": 9}},
      {selector: "edge", style: {
        "curve-style": "haystack", "line-color": "#9aa6b8", opacity: 0.7,
        width: edge => 0.6 + Math.min(edge.data("weight") || 1, 10) * 0.35,
      }},
      {selector: "node:selected", style: {"border-width": 3, "border-color": "#111"}},
      {selector: ".faded", style: {opacity: 0.18}},
      {selector: "node.why", style: {"border-width": 4, "border-color": "#e8a317"}},
      {selector: "edge.why", style: {"line-color": "#e8a317", opacity: 1, width: 3, "z-index": 9}},
    ];
  }

  // Entities ({name, type, degree}) and relations ({source, target, weight, description}) added;
  // returns the names of the nodes new to the graph.
  add(entities, relations = [], near = null) {
    const added = [];
    const origin = near && this.cy.getElementById(near).nonempty() ? this.cy.getElementById(near).position() : null;
    const side = SPACING * Math.sqrt(this.cy.nodes().length + entities.length);  // room for all
    this.cy.batch(() => {
      for (const e of entities) {
        const node = this.cy.getElementById(e.name);
        if (node.nonempty()) {
          if (e.degree !== undefined && e.degree !== null) node.data("degree", e.degree);
          continue;
        }
        const position = origin ? {x: origin.x + (Math.random() - 0.5) * 80, y: origin.y + (Math.random() - 0.5) * 80}
                                : {x: Math.random() * side, y: Math.random() * side};
        this.cy.add({group: "nodes", position, data: {
          id: e.name, label: e.name, type: e.type || "UNKNOWN", degree: e.degree || 0,
          description: e.description || "", colour: typeColour(e.type || "UNKNOWN")}});
        added.push(e.name);
      }
      for (const r of relations) {
        if (this.cy.getElementById(r.source).empty() || this.cy.getElementById(r.target).empty()) continue;
        const id = [r.source, r.target].sort().join("\u0000");
        if (this.cy.getElementById(id).nonempty()) continue;
        this.cy.add({group: "edges", data: {id, source: r.source, target: r.target, weight: r.weight || 1,
                                            description: r.description || ""}});
      }
      this.resize();
    });
    return added;
  }

  // Size by degree (the stored degree, or the edges drawn when none is known), against the
  // largest degree in the graph.
  resize() {
    const degree = node => Math.max(node.data("degree") || 0, node.degree(false));
    this.maxDegree = Math.max(1, ...this.cy.nodes().map(degree));
    const [small, large] = NODE_SIZE;
    this.cy.nodes().forEach(node => {
      node.data("size", small + (large - small) * Math.sqrt(degree(node) / this.maxDegree));
    });
  }

  // A force layout over what is drawn (Fruchterman and Reingold's forces, the ideal distance of
  // two nodes SPACING plus their radii; nodes repel only those in the grid cells around them, so
  // a step costs about n, not n squared). Nodes placed before start where they are.
  layout(fit = true) {
    const nodes = this.cy.nodes();
    const n = nodes.length;
    if (!n) return Promise.resolve(this.changed());
    const index = new Map(), xs = new Float64Array(n), ys = new Float64Array(n), rs = new Float64Array(n);
    nodes.forEach((node, i) => {
      index.set(node.id(), i);
      ({x: xs[i], y: ys[i]} = node.position());
      rs[i] = node.data("size") / 2;
    });
    const edges = this.cy.edges().map(e => [index.get(e.source().id()), index.get(e.target().id())]);
    const k = SPACING, cell = 2 * (k + NODE_SIZE[1]), steps = 160;
    let heat = k * Math.sqrt(n) / 4;
    const dx = new Float64Array(n), dy = new Float64Array(n);
    for (let step = 0; step < steps; step++, heat *= 0.97) {
      dx.fill(0); dy.fill(0);
      const grid = new Map();
      for (let i = 0; i < n; i++) {
        const key = Math.floor(xs[i] / cell) * CELL_KEY + Math.floor(ys[i] / cell);
        (grid.get(key) || grid.set(key, []).get(key)).push(i);
      }
      for (let i = 0; i < n; i++) {
        const gx = Math.floor(xs[i] / cell), gy = Math.floor(ys[i] / cell);
        for (let ox = -1; ox <= 1; ox++) for (let oy = -1; oy <= 1; oy++) {
          for (const j of grid.get((gx + ox) * CELL_KEY + gy + oy) || []) {
            if (j === i) continue;
            let ddx = xs[i] - xs[j], ddy = ys[i] - ys[j], d2 = ddx * ddx + ddy * ddy;
            if (d2 < 0.01) { ddx = Math.random() - 0.5; ddy = Math.random() - 0.5; d2 = 0.5; }
            if (d2 > cell * cell) continue;
            const ideal = k + rs[i] + rs[j], f = ideal * ideal / d2;
            dx[i] += ddx * f; dy[i] += ddy * f;
          }
        }
      }
      for (const [a, b] of edges) {
        const ddx = xs[a] - xs[b], ddy = ys[a] - ys[b], d = Math.sqrt(ddx * ddx + ddy * ddy) || 0.1;
        const f = d / (k + rs[a] + rs[b]);
        dx[a] -= ddx * f; dy[a] -= ddy * f; dx[b] += ddx * f; dy[b] += ddy * f;
      }
      for (let i = 0; i < n; i++) {
        const d = Math.sqrt(dx[i] * dx[i] + dy[i] * dy[i]) || 1, move = Math.min(d, heat);
        xs[i] += dx[i] / d * move; ys[i] += dy[i] / d * move;
      }
    }
    this.cy.batch(() => nodes.forEach((node, i) => node.position({x: xs[i], y: ys[i]})));
    if (fit) this.fit();
    this.changed();
    return Promise.resolve();
  }

  // The whole graph in view, but a small one no closer than FIT_ZOOM (its labels would be huge).
  fit(elements) {
    const target = elements || this.cy.elements();
    this.cy.fit(target, 30);
    if (this.cy.zoom() > FIT_ZOOM) {
      this.cy.zoom(FIT_ZOOM);
      this.cy.center(target);
    }
  }

  clear() {
    this.cy.elements().remove();
    this.changed();
  }

  pick(name) {
    const node = this.cy.getElementById(name);
    if (node.empty()) return;
    this.cy.nodes(":selected").unselect();
    node.select();
    this.cy.animate({center: {eles: node}, duration: 200});
    this.cy.style().update();
  }

  // The entities and relations an answer rested on, added if missing and outlined; the rest faded.
  highlight(entities, relations) {
    this.unhighlight();
    this.add(entities, relations);
    const keys = new Set(relations.map(r => [r.source, r.target].sort().join("\u0000")));
    const names = new Set(entities.map(e => e.name));
    this.cy.batch(() => {
      this.cy.nodes().forEach(n => n.addClass(names.has(n.id()) ? "why" : "faded"));
      this.cy.edges().forEach(e => e.addClass(keys.has(e.id()) ? "why" : "faded"));
    });
    this.cy.style().update();
    return this.layout(false).then(() => {
      const why = this.cy.elements(".why");
      if (why.nonempty()) this.fit(why);
      this.changed();
    });
  }

  unhighlight() {
    this.cy.elements().removeClass("why faded");
    this.changed();
  }

  nodes() {
    return this.cy.nodes().map(n => ({name: n.id(), type: n.data("type"), degree: n.data("degree"),
                                      why: n.hasClass("why"), selected: n.selected()}));
  }

  types() {
    return [...new Set(this.cy.nodes().map(n => n.data("type")))].sort();
  }

  // Keys on the focused canvas: arrows pan, + and - zoom, 0 fits the graph.
  key(event) {
    const step = 60, factor = 1.25;
    const centre = {x: this.container.clientWidth / 2, y: this.container.clientHeight / 2};
    const moves = {ArrowLeft: {x: step, y: 0}, ArrowRight: {x: -step, y: 0}, ArrowUp: {x: 0, y: step},
                   ArrowDown: {x: 0, y: -step}};
    if (moves[event.key]) this.cy.panBy(moves[event.key]);
    else if (event.key === "+" || event.key === "=") this.cy.zoom({level: this.cy.zoom() * factor, renderedPosition: centre});
    else if (event.key === "-") this.cy.zoom({level: this.cy.zoom() / factor, renderedPosition: centre});
    else if (event.key === "0") this.fit();
    else return;
    event.preventDefault();
  }

  changed() {
    this.container.dataset.nodes = String(this.cy.nodes().length);
    this.container.dataset.edges = String(this.cy.edges().length);
    this.container.dataset.highlighted = String(this.cy.nodes(".why").length);
    if (this.onChange) this.onChange();
  }
}
