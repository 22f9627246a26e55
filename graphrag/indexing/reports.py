"""The report stage: one report per community, and the community index kept beside them."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Optional

from graphrag.config import GraphRAGConfig
from graphrag.progress import Progress
from graphrag.stores import Stores

if TYPE_CHECKING:
    from graphrag.operators.community_reports import SummariesInFlight
    from graphrag.operators.extraction import LLMCall
    from graphrag.operators.format_failures import FormatFailures
    from graphrag.operators.tokenizer import Tokenizer

logger = logging.getLogger(__name__)


async def report_communities(stores: Stores, config: GraphRAGConfig, tokenizer: Tokenizer, llm: Optional[LLMCall],
                             max_tokens: int, schema: Optional[dict[str, Any]] = None,
                             in_flight: Optional[SummariesInFlight] = None, touched: Optional[set[str]] = None,
                             only: Optional[set[str]] = None) -> tuple[int, int, FormatFailures]:
    """One report per community; unchanged communities keep theirs without an LLM call.
    Returns the number of communities, of reports generated, and the tally
    (``FormatFailures``) of answers that held no readable report. ``llm`` None: extractive
    reports. ``touched``: the nodes this write changed (their communities alone are read
    again). ``only``: the communities ``schema`` is limited to (every other community's
    report stays as it is, unread); None: ``schema`` has every community."""
    from graphrag.operators.community_index import RECORD, communities_to_report, index_after, read_index, sizes_after
    from graphrag.operators.community_reports import generate_community_reports
    from graphrag.operators.format_failures import FormatFailures

    extractive = llm is None
    all_keys = await stores.community_reports.all_keys()
    index = await read_index(stores.index_meta)
    schema, only = await communities_to_report(stores.graph, stores.community_reports, schema, only,
                                               set(all_keys), index, extractive)
    sizes = sizes_after(index, schema, only)
    # A parent's report may be written from its sub-communities' reports.
    subs = {str(sub) for c in schema.values() for sub in c.get("sub_communities") or ()}
    read = all_keys if only is None else [k for k in all_keys if k in only or k in subs]
    existing = {k: v for k, v in zip(read, await stores.community_reports.get_by_ids(read)) if v}
    progress = Progress(len(schema), "Community reports", config.show_progress)
    failures = FormatFailures("community reports")
    try:
        records, generated = await generate_community_reports(
            schema, graph=stores.graph, llm=llm, tokenizer=tokenizer, max_tokens=max_tokens, existing=existing,
            llm_kwargs=config.special_community_report_llm_kwargs, extractive=extractive,
            on_progress=progress.update, in_flight=in_flight, failures=failures, touched=touched,
            small_component_max_entities=config.small_component_max_entities,
        )
    finally:
        progress.close()
    failures.log(logger, "Extractive reports stand in for them until their community changes; "
                 "a stronger model writes the JSON.", config.extraction_failure_warning_share)
    stale = [k for k in existing if k not in records and (only is None or k in only)]
    await stores.community_reports.delete(stale)
    # Only what changed is written (a database store would otherwise rewrite every report).
    await stores.community_reports.upsert({k: v for k, v in records.items() if existing.get(k) != v})
    new_index = index_after(index, sizes, records, only)
    if stores.index_meta is not None and new_index != index:
        await stores.index_meta.upsert({RECORD: new_index.as_record()})
    communities = len(records) if only is None else len(set(all_keys) - set(stale) | set(records))
    logger.info("Communities: %d (%d reports generated, %d reused, %d removed)",
                communities, generated, len(records) - generated, len(stale))
    return communities, generated, failures
