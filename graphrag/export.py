"""A subgraph written out: GraphML, JSON, Mermaid, or one self-contained HTML page.

The HTML page draws the graph itself (inline SVG built by a few lines of script from the
data embedded in the page): no CDN, no library, so it opens offline and from an email.
Node positions are computed here (networkx's seeded spring layout), so the page only draws;
nodes are coloured by their coarsest community and hovering one shows its description.
"""
from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Callable
from xml.sax.saxutils import escape, quoteattr

from graphrag.records import Subgraph

if TYPE_CHECKING:
    from graphrag.schema import JSONValue

# Colour-blind-safe palette (Okabe-Ito), then a few more; communities cycle through it.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#999999",
           "#882255", "#44AA99", "#117733", "#AA4499")
NO_COMMUNITY = "#BBBBBB"


def to_json(sub: Subgraph) -> str:
    return json.dumps({"entities": [asdict(e) for e in sub.entities], "relations": [asdict(r) for r in sub.relations],
                       "communities": [asdict(c) for c in sub.communities], "truncated": sub.truncated},
                      ensure_ascii=False, indent=2)


def to_graphml(sub: Subgraph) -> str:
    keys = [("d0", "node", "entity_type"), ("d1", "node", "description"), ("d2", "node", "communities"),
            ("d3", "edge", "description"), ("d4", "edge", "weight"), ("d5", "node", "source_id"),
            ("d6", "edge", "source_id")]
    out = ['<?xml version="1.0" encoding="utf-8"?>',
           '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">']
    out += [f'  <key id="{k}" for="{kind}" attr.name="{name}" attr.type="{"double" if name == "weight" else "string"}"/>'
            for k, kind, name in keys]
    out.append('  <graph edgedefault="undirected">')
    for e in sub.entities:
        out.append(f"    <node id={quoteattr(e.name)}>"
                   f'<data key="d0">{escape(e.type)}</data><data key="d1">{escape(e.description)}</data>'
                   f'<data key="d2">{escape(",".join(e.communities))}</data>'
                   f'<data key="d5">{escape(",".join(e.source_chunk_ids))}</data></node>')
    for r in sub.relations:
        out.append(f"    <edge source={quoteattr(r.source)} target={quoteattr(r.target)}>"
                   f'<data key="d3">{escape(r.description)}</data><data key="d4">{r.weight}</data>'
                   f'<data key="d6">{escape(",".join(r.source_chunk_ids))}</data></edge>')
    out += ["  </graph>", "</graphml>"]
    return "\n".join(out) + "\n"


def to_mermaid(sub: Subgraph, label_chars: int = 40) -> str:
    """A ``graph LR`` flowchart: Mermaid ids are n0, n1...; labels keep their text, quoted."""
    ids = {e.name: f"n{i}" for i, e in enumerate(sub.entities)}

    def label(text: str) -> str:
        text = " ".join(text.split())
        text = text if len(text) <= label_chars else text[:label_chars - 1] + "…"
        return text.replace('"', "#quot;")

    lines = ["graph LR"] + [f'    {ids[e.name]}["{label(e.name)}"]' for e in sub.entities]
    lines += [f'    {ids[r.source]} ---|"{label(r.description)}"| {ids[r.target]}'
              for r in sub.relations if r.source in ids and r.target in ids]
    return "\n".join(lines) + "\n"


def community_colours(sub: Subgraph) -> dict[str, str]:
    """Each entity's colour: that of its coarsest community, in order of first appearance."""
    order: dict[str, int] = {}
    colours = {}
    for e in sub.entities:
        if e.communities:
            index = order.setdefault(e.communities[0], len(order))
            colours[e.name] = PALETTE[index % len(PALETTE)]
        else:
            colours[e.name] = NO_COMMUNITY
    return colours


def layout(sub: Subgraph, size: int = 1000) -> dict[str, tuple[float, float]]:
    """Node positions in a ``size`` square, the same for the same subgraph."""
    import networkx as nx

    graph = nx.Graph()
    graph.add_nodes_from(sorted(e.name for e in sub.entities))
    graph.add_edges_from((r.source, r.target) for r in sub.relations)
    if graph.number_of_nodes() == 1:
        return {next(iter(graph.nodes)): (size / 2, size / 2)}
    positions = nx.spring_layout(graph, seed=7, iterations=100)
    margin = size * 0.06
    return {n: (margin + (x + 1) / 2 * (size - 2 * margin), margin + (y + 1) / 2 * (size - 2 * margin))
            for n, (x, y) in positions.items()}


def to_html(sub: Subgraph, title: str = "Knowledge graph") -> str:
    """One self-contained page drawing ``sub``; the script writes ``data-drawn`` on the
    ``<svg>`` with the number of nodes it drew."""
    positions, colours = layout(sub), community_colours(sub)
    data: JSONValue = {
        "nodes": [{"name": e.name, "type": e.type, "description": e.description, "x": round(positions[e.name][0], 1),
                   "y": round(positions[e.name][1], 1), "colour": colours[e.name],
                   "community": e.communities[0] if e.communities else "",
                   "documents": [d.source or d.id for d in e.documents]} for e in sub.entities],
        "edges": [{"source": r.source, "target": r.target, "description": r.description, "weight": r.weight}
                  for r in sub.relations],
    }
    return render(_PAGE, TITLE=html.escape(title), DATA=script_json(data))


_SCRIPT_ESCAPES = {ord(c): f"\\u{ord(c):04x}" for c in "<>&"}


def script_json(value: JSONValue) -> str:
    """``value`` as JSON safe inside a ``<script type="application/json">`` block: ``<``, ``>``
    and ``&`` written as ``\\u003c``-style escapes, so no text in it (``</script>``, ``<!--``)
    can end the block or change how the HTML parser reads it; ``JSON.parse`` gives the same value."""
    return json.dumps(value, ensure_ascii=False).translate(_SCRIPT_ESCAPES)


def render(template: str, **values: str) -> str:
    """``template`` with each ``%NAME%`` replaced by ``values[NAME]`` in one pass: a value is
    never scanned again, so text in one value cannot pull another in. Values come escaped for
    where they go; a placeholder without a value is an error."""
    return re.sub(r"%([A-Z_]+)%", lambda m: values[m.group(1)], template)


def csp_hash(text: str) -> str:
    """A Content-Security-Policy source allowing exactly this inline script or style."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


_STYLE = """
body{margin:0;font:14px system-ui,sans-serif;display:flex;height:100vh}
#graph{flex:1}svg{width:100%;height:100%}
.edge{stroke:#999;stroke-opacity:.6}.node circle{stroke:#fff;stroke-width:1.5}
.node text{font-size:11px;pointer-events:none}.node:hover circle{stroke:#000;stroke-width:2.5}
#info{width:300px;padding:12px;border-left:1px solid #ddd;overflow:auto}
"""

_SCRIPT = """
(function () {
  var data = JSON.parse(document.getElementById("graph-data").textContent);
  var svg = document.getElementById("canvas"), NS = "http://www.w3.org/2000/svg";
  var info = document.getElementById("info"), at = {};
  function el(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    parent.appendChild(e); return e;
  }
  data.nodes.forEach(function (n) { at[n.name] = n; });
  data.edges.forEach(function (e) {
    var a = at[e.source], b = at[e.target]; if (!a || !b) return;
    var line = el("line", {"class": "edge", x1: a.x, y1: a.y, x2: b.x, y2: b.y,
                           "stroke-width": Math.min(6, 1 + Math.log(1 + e.weight))}, svg);
    el("title", {}, line).textContent = e.source + " \\u2014 " + e.target + ": " + e.description;
  });
  data.nodes.forEach(function (n) {
    var g = el("g", {"class": "node", "data-name": n.name, "data-community": n.community,
                     transform: "translate(" + n.x + "," + n.y + ")"}, svg);
    el("circle", {r: 9, fill: n.colour}, g);
    el("title", {}, g).textContent = n.name + " (" + n.type + ")\\n" + n.description;
    el("text", {x: 12, y: 4}, g).textContent = n.name;
    g.addEventListener("mouseover", function () {
      info.replaceChildren();
      el2("h3", n.name); el2("p", n.type + (n.community ? " \\u00b7 community " + n.community : ""));
      el2("p", n.description); el2("p", "Documents: " + n.documents.join(", "));
    });
  });
  function el2(tag, text) { var e = document.createElement(tag); e.textContent = text; info.appendChild(e); }
  svg.setAttribute("data-drawn", String(data.nodes.length));
})();
"""

# The page's only script and style are these two, allowed by their hashes: nothing else runs,
# whatever the data holds (the server sends the same policy as a header).
DRAWING_SOURCES = {"script-src": csp_hash(_SCRIPT), "style-src": csp_hash(_STYLE)}
_POLICY = (f"default-src 'none'; script-src {DRAWING_SOURCES['script-src']}; "
           f"style-src {DRAWING_SOURCES['style-src']}; img-src data:")

# The page around the data: the constants are joined in here, the title and data by ``render``.
_PAGE = "".join([
    '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n',
    f'<meta http-equiv="Content-Security-Policy" content="{html.escape(_POLICY)}">\n',
    "<title>%TITLE%</title>\n<style>", _STYLE, "</style></head>\n",
    '<body><div id="graph"><svg id="canvas" viewBox="0 0 1000 1000" role="img" aria-label="%TITLE%"></svg></div>\n',
    '<div id="info"><h3>%TITLE%</h3><p>Hover over an entity to read its description.</p></div>\n',
    '<script type="application/json" id="graph-data">%DATA%</script>\n',
    "<script>", _SCRIPT, "</script></body></html>\n",
])

FORMATS: dict[str, Callable[[Subgraph], str]] = {
    "graphml": to_graphml, "json": to_json, "mermaid": to_mermaid, "html": to_html,
}


def export(sub: Subgraph, fmt: str, **options: Any) -> str:
    return FORMATS[fmt](sub, **options)
