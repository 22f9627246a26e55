"""CLI commands over the graph API: ``graph entity|neighbors|paths|subgraph``, ``retrieve`` and
``export``. Registered by :func:`add_commands` from ``cli.build_parser``."""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING, Callable, Union

from graphrag.cli_common import EXIT_OK, EXIT_USAGE, CLIError, existing_working_dir, open_rag
from graphrag.operators.modes import describe_modes, mode_names
from graphrag.records import Chunk, CommunityReport, Entity, Path, Relation, Subgraph

if TYPE_CHECKING:
    from graphrag.graphrag import GraphRAG
    from graphrag.schema import JSONValue


def _rag(args: argparse.Namespace) -> GraphRAG:
    return open_rag(existing_working_dir(args.working_dir), offline=True)


def _print_json(value: JSONValue) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=2))


def _sources(record: Union[Chunk, Entity, Relation, CommunityReport]) -> str:
    return ", ".join(d.source or d.id for d in record.documents) or "-"


def _entity_line(e: Entity) -> str:
    hop = f"[{e.distance}] " if e.distance is not None else ""
    via = f"  via: {e.via.description[:80]!r}" if e.via is not None else ""
    return f"{hop}{e.name} ({e.type}, degree {e.degree}) from {_sources(e)}{via}"


def _hop_line(r: Relation) -> str:
    return f"  {r.source} -> {r.target} (weight {r.weight:g}, {_sources(r)}): {r.description[:100]}"


def cmd_graph(args: argparse.Namespace) -> int:
    kg = _rag(args).knowledge_graph
    if args.graph_command == "entity":
        entity = kg.entity(args.name)
        if args.json:
            _print_json(asdict(entity))
        else:
            print(_entity_line(entity))
            print(f"  communities: {', '.join(entity.communities) or '-'}")
            print(f"  {entity.description}")
    elif args.graph_command == "neighbors":
        found = kg.neighbors(args.name, depth=args.depth, direction=args.direction, relation=args.relation,
                             entity_type=args.type, min_weight=args.min_weight, limit=args.limit)
        if args.json:
            _print_json([asdict(e) for e in found])
        else:
            print("\n".join(_entity_line(e) for e in found) or "no neighbours")
    elif args.graph_command == "paths":
        paths: list[Path] = kg.paths(args.source, args.target, max_depth=args.max_depth, k=args.k)
        if args.json:
            _print_json([{"entities": list(p.entities), "hops": [asdict(h) for h in p.hops]} for p in paths])
        else:
            for p in paths:
                print(" -> ".join(p.entities))
                print("\n".join(_hop_line(h) for h in p.hops))
            if not paths:
                print(f"no path of at most {args.max_depth} hops")
    else:
        sub: Subgraph = kg.subgraph(args.names, depth=args.depth, max_nodes=args.max_nodes)
        if args.json:
            _print_json(asdict(sub))
        else:
            print(f"{len(sub.entities)} entities, {len(sub.relations)} relations, {len(sub.communities)} communities"
                  + (" (cut short by --max-nodes)" if sub.truncated else ""))
            print("\n".join(_entity_line(e) for e in sub.entities))
    return EXIT_OK


def cmd_retrieve(args: argparse.Namespace) -> int:
    from graphrag.query_param import QueryParam

    if not args.question.strip():
        raise CLIError("the question is empty", EXIT_USAGE)
    param = QueryParam(mode=args.mode, **({"top_k": args.top_k} if args.top_k is not None else {}))
    result = _rag(args).retrieve(args.question, param)
    if args.json:
        _print_json(asdict(result))
        return EXIT_OK
    for chunk in result.chunks:
        print(f"chunk {chunk.id} (score {chunk.score}) from {_sources(chunk)}: {chunk.content[:100]!r}")
    for entity in result.entities:
        print(f"entity {entity.name} from {_sources(entity)}")
    for relation in result.relations:
        print(f"relation {relation.source} -> {relation.target} from {_sources(relation)}")
    for report in result.reports:
        print(f"report {report.community.id} {report.title!r} from {_sources(report)}")
    if not result.context:
        print("nothing retrieved")
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    from graphrag.export import export

    kg = _rag(args).knowledge_graph
    if args.around:
        sub = kg.subgraph(args.around, depth=args.depth, max_nodes=args.max_nodes or 200)
    else:
        if args.depth != 1:
            raise CLIError("--depth needs --around", EXIT_USAGE)
        sub = kg.whole(max_nodes=args.max_nodes)
    text = export(sub, args.format)
    if args.output in (None, "-"):
        sys.stdout.write(text)
    else:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {len(sub.entities)} entities and {len(sub.relations)} relations to {args.output}"
              + (" (cut short by --max-nodes)" if sub.truncated else ""), file=sys.stderr)
    return EXIT_OK


def add_commands(add: Callable[..., argparse.ArgumentParser], common: argparse.ArgumentParser,
                 wd: argparse.ArgumentParser) -> None:
    out = argparse.ArgumentParser(add_help=False)
    out.add_argument("--json", action="store_true", help="machine-readable output")

    p = add("graph", "explore the knowledge graph: an entity, its neighbours, paths, a subgraph", [common])
    sub = p.add_subparsers(dest="graph_command", metavar="WHAT", required=True)
    q = sub.add_parser("entity", help="one entity (any case or punctuation)", parents=[common, wd, out])
    q.add_argument("name")
    q = sub.add_parser("neighbors", help="entities within --depth hops", parents=[common, wd, out])
    q.add_argument("name")
    q.add_argument("--depth", type=int, default=1)
    q.add_argument("--direction", choices=("both", "out", "in"), default="both")
    q.add_argument("--relation", metavar="WORDS", help="only relations whose description holds these words")
    q.add_argument("--type", metavar="TYPE", help="only neighbours of this entity type")
    q.add_argument("--min-weight", type=float, default=0.0)
    q.add_argument("--limit", type=int, default=50)
    q = sub.add_parser("paths", help="the shortest paths between two entities", parents=[common, wd, out])
    q.add_argument("source")
    q.add_argument("target")
    q.add_argument("--max-depth", type=int, default=4)
    q.add_argument("-k", type=int, default=3, help="how many paths (default 3)")
    q = sub.add_parser("subgraph", help="entities around some entities, and the relations among them",
                       parents=[common, wd, out])
    q.add_argument("names", nargs="+", metavar="NAME")
    q.add_argument("--depth", type=int, default=1)
    q.add_argument("--max-nodes", type=int, default=200)
    p.set_defaults(func=cmd_graph)

    p = add("retrieve", "what a query retrieves, as records with their documents (no LLM call)", [common, wd, out])
    p.add_argument("question")
    p.add_argument("--mode", choices=mode_names(), default="local", help=describe_modes())
    p.add_argument("--top-k", type=int, metavar="K")
    p.set_defaults(func=cmd_retrieve)

    p = add("export", "write the graph (or the part around some entities) as GraphML, JSON, Mermaid or HTML",
            [common, wd])
    p.add_argument("--format", choices=("graphml", "json", "mermaid", "html"), default="graphml")
    p.add_argument("--around", nargs="+", metavar="NAME", help="only the entities within --depth hops of these")
    p.add_argument("--depth", type=int, default=1)
    p.add_argument("--max-nodes", type=int, help="at most this many entities (the best connected)")
    p.add_argument("--output", "-o", metavar="FILE", help="write here (default: standard output)")
    p.set_defaults(func=cmd_export)
