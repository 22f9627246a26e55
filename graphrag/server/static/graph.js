// The interactive graph, drawn on a canvas by Cytoscape.js (vendored: cytoscape.min.js, MIT,
// see cytoscape.LICENSE.txt; it makes no network requests). Nodes are coloured by type and sized
// by degree; labels keep one size on screen whatever the zoom, and only nodes drawn large enough
// (or picked, or highlighted) carry one, so a zoomed-out graph stays readable. Names are drawn on
// the canvas as text, never as markup.
"use strict";

const LABEL_PX = 13;        // a label's height on screen
const MIN_LABELLED_PX = 9;  // nodes drawn smaller than this carry no label (unless picked)
const NODE_SIZE = [14, 56]; // model units, by degree

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
      style: this.style(),
    });
    let frame = 0;
    this.cy.on("zoom", () => {  // labels re-sized once per frame, not per wheel event
      if (!frame) frame = requestAnimationFrame(() => { frame = 0; this.cy.style().update(); });
    });
    this.cy.on("tap", "node", event => onPick(event.target.id()));
    this.cy.on("dbltap", "node", event => onExpand(event.target.id()));
    container.addEventListener("keydown", event => this.key(event));
  }

  style() {
    const zoom = () => this.cy ? this.cy.zoom() : 1;
    const size = node => node.data("size");
    return [
      {selector: "node", style: {
        "background-color": "data(colour)", width: size, height: size,
        label: node => (size(node) * zoom() >= MIN_LABELLED_PX || node.selected() || node.hasClass("why"))
          ? node.data("label") : "",
        "font-size": () => LABEL_PX / zoom(), "text-valign": "bottom", "text-margin-y": () => 2 / zoom(),
        "text-outline-color": "#fff", "text-outline-width": () => 2.5 / zoom(), color: "#1d2430",
        "text-max-width": () => 220 / zoom(), "text-wrap": "ellipsis", "min-zoomed-font-size": 0,
      }},
      {selector: "edge", style: {
        "curve-style": "haystack", "line-color": "#9aa6b8", opacity: 0.7,
        width: edge => 0.6 + Math.min(edge.data("weight") || 1, 10) * 0.35,
      }},
      {selector: "node:selected", style: {"border-width": () => 3 / zoom(), "border-color": "#111"}},
      {selector: ".faded", style: {opacity: 0.18}},
      {selector: "node.why", style: {"border-width": () => 4 / zoom(), "border-color": "#e8a317"}},
      {selector: "edge.why", style: {"line-color": "#e8a317", opacity: 1, width: 3, "z-index": 9}},
    ];
  }

  // Entities ({name, type, degree}) and relations ({source, target, weight, description}) added;
  // returns the names of the nodes new to the graph.
  add(entities, relations = [], near = null) {
    const added = [];
    const origin = near && this.cy.getElementById(near).nonempty() ? this.cy.getElementById(near).position() : null;
    this.cy.batch(() => {
      for (const e of entities) {
        const node = this.cy.getElementById(e.name);
        if (node.nonempty()) {
          if (e.degree !== undefined && e.degree !== null) node.data("degree", e.degree);
          continue;
        }
        const position = origin ? {x: origin.x + (Math.random() - 0.5) * 80, y: origin.y + (Math.random() - 0.5) * 80}
                                : {x: Math.random() * 800, y: Math.random() * 600};
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

  // A force layout over what is drawn; nodes placed before keep their places as its start.
  layout(fit = true) {
    const n = this.cy.nodes().length;
    if (!n) return Promise.resolve();
    const layout = this.cy.layout({
      name: "cose", animate: false, randomize: false, fit, padding: 30,
      numIter: n > 400 ? 300 : 1000, nodeRepulsion: () => 9000, idealEdgeLength: () => 70,
      nodeDimensionsIncludeLabels: false,
    });
    const done = layout.promiseOn("layoutstop");
    layout.run();
    return done.then(() => this.changed());
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
      if (why.nonempty()) this.cy.fit(why, 40);
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
    else if (event.key === "0") this.cy.fit(undefined, 30);
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
