// A small graph drawing in SVG: nodes placed by a few hundred steps of a force layout, then
// drawn once. No library, so the page works offline.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";

class GraphView {
  constructor(svg, onNodeClick) {
    this.svg = svg;
    this.onNodeClick = onNodeClick;
    this.nodes = new Map(); // name -> {name, type, x, y, focus}
    this.edges = new Map(); // "a\u0000b" -> {source, target, description, weight}
  }

  clear() {
    this.nodes.clear();
    this.edges.clear();
    this.draw();
  }

  addNode(entity, near) {
    if (!this.nodes.has(entity.name)) {
      const width = this.svg.viewBox.baseVal.width, height = this.svg.viewBox.baseVal.height;
      const origin = near && this.nodes.get(near);
      const angle = Math.random() * 2 * Math.PI;
      this.nodes.set(entity.name, {
        name: entity.name, type: entity.type || "",
        x: origin ? origin.x + 60 * Math.cos(angle) : width / 2 + 40 * Math.cos(angle),
        y: origin ? origin.y + 60 * Math.sin(angle) : height / 2 + 40 * Math.sin(angle),
      });
    }
    return this.nodes.get(entity.name);
  }

  addEdge(relation) {
    const key = [relation.source, relation.target].sort().join("\u0000");
    if (this.nodes.has(relation.source) && this.nodes.has(relation.target) && !this.edges.has(key)) {
      this.edges.set(key, relation);
    }
  }

  layout(steps = 300) {
    const nodes = [...this.nodes.values()];
    const width = this.svg.viewBox.baseVal.width, height = this.svg.viewBox.baseVal.height;
    const ideal = Math.max(70, Math.min(160, 900 / Math.sqrt(nodes.length + 1)));
    for (let step = 0; step < steps; step++) {
      const cool = 1 - step / steps;
      const force = new Map(nodes.map(n => [n.name, {x: 0, y: 0}]));
      for (let i = 0; i < nodes.length; i++) {
        for (let j = i + 1; j < nodes.length; j++) {
          const a = nodes[i], b = nodes[j];
          let dx = a.x - b.x, dy = a.y - b.y;
          const d2 = Math.max(dx * dx + dy * dy, 1);
          const push = ideal * ideal / d2;
          force.get(a.name).x += dx * push / 10; force.get(a.name).y += dy * push / 10;
          force.get(b.name).x -= dx * push / 10; force.get(b.name).y -= dy * push / 10;
        }
      }
      for (const e of this.edges.values()) {
        const a = this.nodes.get(e.source), b = this.nodes.get(e.target);
        const dx = b.x - a.x, dy = b.y - a.y, d = Math.sqrt(dx * dx + dy * dy) || 1;
        const pull = (d - ideal) / d / 4;
        force.get(a.name).x += dx * pull; force.get(a.name).y += dy * pull;
        force.get(b.name).x -= dx * pull; force.get(b.name).y -= dy * pull;
      }
      for (const n of nodes) {
        const f = force.get(n.name);
        n.x += Math.max(-20, Math.min(20, f.x + (width / 2 - n.x) * 0.01)) * cool;
        n.y += Math.max(-20, Math.min(20, f.y + (height / 2 - n.y) * 0.01)) * cool;
        n.x = Math.max(30, Math.min(width - 30, n.x));
        n.y = Math.max(20, Math.min(height - 20, n.y));
      }
    }
  }

  draw(focus) {
    this.svg.replaceChildren();
    for (const e of this.edges.values()) {
      const a = this.nodes.get(e.source), b = this.nodes.get(e.target);
      const line = document.createElementNS(SVG_NS, "line");
      line.setAttribute("class", "edge");
      line.setAttribute("x1", a.x); line.setAttribute("y1", a.y);
      line.setAttribute("x2", b.x); line.setAttribute("y2", b.y);
      line.setAttribute("stroke-width", String(Math.min(6, 1 + Math.log1p(Number(e.weight) || 1))));
      const title = document.createElementNS(SVG_NS, "title");
      title.textContent = `${e.source} — ${e.target}: ${e.description || ""}`;
      line.appendChild(title);
      this.svg.appendChild(line);
    }
    for (const n of this.nodes.values()) {
      const g = document.createElementNS(SVG_NS, "g");
      g.setAttribute("class", "node" + (n.name === focus ? " focus" : ""));
      g.setAttribute("data-name", n.name);
      g.setAttribute("transform", `translate(${n.x},${n.y})`);
      const circle = document.createElementNS(SVG_NS, "circle");
      circle.setAttribute("r", n.name === focus ? 11 : 8);
      const label = document.createElementNS(SVG_NS, "text");
      label.setAttribute("x", 12); label.setAttribute("y", 4);
      label.textContent = n.name;
      const title = document.createElementNS(SVG_NS, "title");
      title.textContent = `${n.name} (${n.type})`;
      g.append(circle, label, title);
      g.addEventListener("click", () => this.onNodeClick(n.name));
      this.svg.appendChild(g);
    }
  }
}
