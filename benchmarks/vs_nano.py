"""Side by side with nano-graphrag: insert, cold start, query p50 per mode and a one-document
update, each implementation in its own interpreter, interleaved over rounds, on one mock server.

    python benchmarks/vs_nano.py CORPUS [--questions FILE] [--rounds 3] [--queries 20]
        --impl ours=.venv/bin/python --impl before=/path/to/old/.venv/bin/python
        --impl nano=/path/to/nano-venv/bin/python:nano

An ``--impl`` is ``LABEL=PYTHON`` (this engine, as installed in that interpreter: compare two
versions by pointing at two virtualenvs) or ``LABEL=PYTHON:nano`` (nano-graphrag as installed
there: ``pip install nano-graphrag`` into a virtualenv of its own, since it pins numpy < 2,
then ``pip install --no-deps -e .`` of this checkout beside it for the embedding and the
prompt templates). Both use the same 384-d hash embedding in process (``graphrag.embedding``)
and the mock LLM at ``--latency`` seconds per call, with 16 calls in flight at most. Each round runs every implementation in turn, the order rotated
per round, and each step is a fresh process:

- insert: open an empty dir, insert the corpus; wall, CPU and peak RSS of the process, the
  mock's CPU meanwhile and the model calls made, by prompt kind;
- cold: import, open the dir and answer one local query, context only (the cold start, wall
  and the process's CPU), then ``--queries`` questions per mode after one warm-up each; p50
  per mode, wall and CPU;
- update: open the dir and insert one new document; wall and LLM calls.

Prints one JSON record per step on stdout as it goes, then the medians over rounds and each
implementation's ratio to the last ``--impl``.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench import NEW_DOCUMENT, load_corpus, log, peak_rss_mb, proc_cpu_s, start_server  # noqa: E402

MAX_ASYNC = 16
DIM = 384
OURS_MODES = ("local", "hybrid", "global", "naive")
NANO_MODES = ("local", "global", "naive")


# --------------------------------------------------------------------------- children


def hash_embed() -> Any:
    from graphrag.embedding import hash_embedding

    return hash_embedding(DIM)


def open_ours(working_dir: str, base_url: str) -> Any:
    from graphrag import GraphRAG

    return GraphRAG(working_dir=working_dir, embedding_func=hash_embed(), llm_base_url=base_url,
                    llm_api_key="k", best_model_max_async=MAX_ASYNC, cheap_model_max_async=MAX_ASYNC,
                    llm_max_async_total=MAX_ASYNC, show_progress=False)


class NanoCalls:
    """nano-graphrag's model functions over the mock server, counting the calls they make.

    The mock answers this engine's prompts, which it recognises by their templates' fixed
    text. nano-graphrag words its prompts differently but fills the same kinds (extraction,
    gleaning, summary, report, global map) with the same data, so each message is read back
    against nano-graphrag's own template of the kind (its ``PROMPTS``) and sent as this
    engine's template filled with that data: one call for one call, a prompt of about the
    same size, and an answer in the delimiters both parse.
    """

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.calls = 0
        self.client: Any = None
        self.templates = nano_templates()

    def translate(self, text: str) -> str:
        for pattern, ours in self.templates:
            found = pattern.fullmatch(text.strip())
            if found:
                from graphrag import prompts

                return prompts.render(ours, **found.groupdict())
        return text

    async def complete(self, prompt: str, system_prompt: Any = None, history_messages: Any = None,
                       **kwargs: Any) -> str:
        from openai import AsyncOpenAI

        if self.client is None:
            self.client = AsyncOpenAI(base_url=self.base_url, api_key="k")
        kwargs.pop("hashing_kv", None)
        messages = ([{"role": "system", "content": system_prompt}] if system_prompt else [])
        messages += list(history_messages or []) + [{"role": "user", "content": prompt}]
        messages = [{**m, "content": self.translate(str(m.get("content") or ""))} for m in messages]
        self.calls += 1
        reply = await self.client.chat.completions.create(model="mock", messages=messages, **kwargs)
        return reply.choices[0].message.content or ""


def nano_templates() -> list[tuple[Any, str]]:
    """(a pattern matching nano-graphrag's template as rendered, capturing its data; the name
    of this engine's template of the same kind), for every kind both have."""
    import re
    import string

    from nano_graphrag.prompt import PROMPTS

    from graphrag import prompts

    out = []
    for name, template in PROMPTS.items():
        ours = name.replace("entiti_", "entity_")  # nano-graphrag's spelling of two names
        if not isinstance(template, str) or ours not in prompts.PROMPT_KINDS:
            continue
        regex, seen = "", set()
        for literal, field, _spec, _conversion in string.Formatter().parse(template.strip()):
            regex += re.escape(literal)
            if field in PROMPTS and isinstance(PROMPTS[field], str):  # nano's delimiter defaults
                regex += re.escape(PROMPTS[field])
            elif field:
                regex += f"(?P={field})" if field in seen else f"(?P<{field}>.*?)"
                seen.add(field)
        out.append((re.compile(regex, re.DOTALL), ours))
    return out


def open_nano(working_dir: str, calls: Any) -> Any:
    from nano_graphrag import GraphRAG
    from nano_graphrag._utils import wrap_embedding_func_with_attrs

    embed = hash_embed()

    @wrap_embedding_func_with_attrs(embedding_dim=DIM, max_token_size=8192)
    async def nano_embed(texts: list[str]) -> Any:
        return await embed(texts)

    return GraphRAG(working_dir=working_dir, embedding_func=nano_embed, best_model_func=calls.complete,
                    cheap_model_func=calls.complete, best_model_max_async=MAX_ASYNC,
                    cheap_model_max_async=MAX_ASYNC, enable_naive_rag=True, enable_llm_cache=False)


def child(args: argparse.Namespace) -> dict[str, Any]:
    """One step in this process: the interpreter decides which implementation it is."""
    started = time.perf_counter()  # before the implementation is imported: cold start counts it
    nano = args.kind == "nano"
    calls = NanoCalls(args.base_url) if nano else None
    if nano:
        from nano_graphrag import QueryParam
    else:
        from graphrag import QueryParam

    def opened() -> Any:
        return open_nano(args.working_dir, calls) if nano else open_ours(args.working_dir, args.base_url)

    out: dict[str, Any] = {}
    if args.step == "insert":
        docs = load_corpus(args.corpus)
        rag = opened()
        wall, cpu = time.perf_counter(), time.process_time()
        rag.insert(docs)
        out = {"insert_wall_s": time.perf_counter() - wall, "insert_cpu_s": time.process_time() - cpu,
               "insert_peak_rss_mb": peak_rss_mb()}
    elif args.step == "update":
        rag = opened()
        wall = time.perf_counter()
        rag.insert([NEW_DOCUMENT])
        out = {"update_wall_s": time.perf_counter() - wall}
        out["update_llm_calls"] = calls.calls if nano else sum(
            s.get("calls", 0) for s in (rag.last_insert_stats or {}).get("llm", {}).values())
    else:
        questions = json.loads(args.questions)
        rag = opened()
        out["open_s"] = time.perf_counter() - started
        rag.query(questions[0], QueryParam(mode="local", only_need_context=True))
        out["cold_start_s"] = time.perf_counter() - started
        out["cold_start_cpu_s"] = time.process_time()  # the process's CPU, its start-up included
        for mode in NANO_MODES if nano else OURS_MODES:
            rag.query(questions[-1], QueryParam(mode=mode, only_need_context=True))  # warm-up
            times, cpu = [], []
            for q in questions:
                t, c = time.perf_counter(), time.process_time()
                rag.query(q, QueryParam(mode=mode, only_need_context=True))
                times.append(time.perf_counter() - t)
                cpu.append(time.process_time() - c)
            out[f"{mode}_p50_ms"] = statistics.median(times) * 1000
            out[f"{mode}_p50_cpu_ms"] = statistics.median(cpu) * 1000
        out["query_peak_rss_mb"] = peak_rss_mb()
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in out.items()}


# --------------------------------------------------------------------------- driver


def calls_by_kind(base_url: str) -> dict[str, int]:
    """The chat requests the mock has answered so far, by prompt kind (it reads both
    implementations' prompts as this engine's kinds)."""
    import urllib.request

    with urllib.request.urlopen(base_url.rstrip("/") + "/mock/stats", timeout=10) as reply:
        return json.loads(reply.read())["calls_by_kind"]


def run_step(impl: tuple[str, str, str], step: str, working_dir: str, args: argparse.Namespace,
             server: subprocess.Popen, base_url: str, questions: list[str]) -> dict[str, Any]:
    """One step in a fresh process; an insert also reports the model calls it made by kind and
    the mock's CPU meanwhile (it shares the machine's cores)."""
    label, python, kind = impl
    cmd = [python, os.path.abspath(__file__), "--child", step, "--kind", kind, "--working-dir", working_dir,
           "--base-url", base_url, "--questions-json", json.dumps(questions), args.corpus]
    calls_before, server_cpu = calls_by_kind(base_url), proc_cpu_s(server.pid)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, cwd=tempfile.gettempdir())
    if proc.returncode != 0:
        raise RuntimeError(f"{label} {step} failed:\n{proc.stderr[-4000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    if step == "insert":
        server_cpu_after = proc_cpu_s(server.pid)
        if server_cpu is not None and server_cpu_after is not None:
            out["insert_mock_cpu_s"] = round(server_cpu_after - server_cpu, 3)
        made = {k: n - calls_before.get(k, 0) for k, n in calls_by_kind(base_url).items()}
        out.update({f"insert_calls_{k}": n for k, n in sorted(made.items()) if n})
        out["insert_calls"] = sum(made.values())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", nargs="?")
    ap.add_argument("--questions", help="JSON list of questions (strings or {'question': ...})")
    ap.add_argument("--impl", action="append", default=[], help="LABEL=PYTHON[:nano]")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--latency", type=float, default=0.0)
    ap.add_argument("--steps", default="insert,cold,update")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--kind", default="ours", help=argparse.SUPPRESS)
    ap.add_argument("--working-dir", help=argparse.SUPPRESS)
    ap.add_argument("--base-url", help=argparse.SUPPRESS)
    ap.add_argument("--questions-json", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        args.step, args.questions = args.child, args.questions_json
        print(json.dumps(child(args)))
        return
    impls = []
    for spec in args.impl:
        label, _, rest = spec.partition("=")
        python, _, kind = rest.partition(":")
        impls.append((label, python, kind or "ours"))
    with open(args.questions, encoding="utf-8") as f:
        raw = json.load(f)
    questions = [q if isinstance(q, str) else q["question"] for q in raw][: args.queries]
    server, base_url = start_server(args.latency)
    root = tempfile.mkdtemp(prefix="vs_nano_")
    results: dict[str, list[dict[str, Any]]] = {label: [] for label, _, _ in impls}
    try:
        for rnd in range(args.rounds):
            order = impls[rnd % len(impls):] + impls[: rnd % len(impls)]
            for impl in order:
                label = impl[0]
                working_dir = os.path.join(root, f"{label}_{rnd}")
                record: dict[str, Any] = {"impl": label, "round": rnd}
                for step in args.steps.split(","):
                    record.update(run_step(impl, step, working_dir, args, server, base_url, questions))
                    log(f"{label} round {rnd} {step} done")
                print(json.dumps(record), flush=True)
                results[label].append(record)
                shutil.rmtree(working_dir, ignore_errors=True)
    finally:
        server.terminate()
        server.wait(timeout=10)
        shutil.rmtree(root, ignore_errors=True)
    medians = {label: {k: round(statistics.median(r[k] for r in recs if k in r), 4)
                       for k in dict.fromkeys(k for r in recs for k in r) if k not in ("impl", "round")}
               for label, recs in results.items()}
    reference = medians[impls[-1][0]]
    print(json.dumps({"medians": medians, "ratio_to_" + impls[-1][0]: {
        label: {k: round(v / reference[k], 3) for k, v in m.items() if reference.get(k)}
        for label, m in medians.items()}}, indent=1))


if __name__ == "__main__":
    main()
