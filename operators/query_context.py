"""Helpers shared by the query modes: CSV tables, and packing them under token budgets.

Every budget is checked by counting the finished text with the engine tokenizer, so a
section never exceeds its budget whatever the tokenizer does at row boundaries.
"""
from __future__ import annotations

import csv
import io
import itertools
import logging
import re
import string
import sys
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, Iterator, Optional, Sequence, TypeVar

from graphrag.prompts import load as load_prompt
from graphrag.prompts import render as render_prompt

from .modes import get_mode
from .text_cache import TextCache
from .tokenizer import Tokenizer

if TYPE_CHECKING:
    from graphrag.query_param import QueryParam
    from graphrag.schema import JSONValue

    from .extraction import LLMCall

logger = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

# Every data placeholder of the answer prompts, for measuring a template's own text.
EMPTY_PROMPT_DATA: dict[str, str] = {"content_data": "", "context_data": "", "report_data": ""}


def fit_to_room(param: QueryParam, room: int) -> QueryParam:
    """``param`` with its mode's context budgets (``QueryMode.budgets``) cut so the data of
    each answer prompt is at most ``room`` tokens; a context of several sections shares
    ``room`` among them in their set proportions (less 8 tokens for the blank lines between)."""
    names = get_mode(param.mode).budgets
    budgets = {name: getattr(param, name) for name in names}
    if len(budgets) == 1:
        return replace(param, **{name: min(budget, room) for name, budget in budgets.items()})
    total, room = sum(budgets.values()), room - 8
    if total <= room:
        return param
    return replace(param, **{name: budget * room // total for name, budget in budgets.items()})


def fail_response() -> str:
    """The canned answer given when the index holds nothing that answers the question."""
    return load_prompt("fail_response").strip()


async def answer_from_context(query: str, context: Optional[str], param: QueryParam, llm: LLMCall, template: str,
                              context_field: str) -> str:
    """The last step every mode shares: no context -> the fail text; context only -> it;
    otherwise one answer call with the context in the system prompt (and a chat's earlier turns,
    ``param.conversation_history``, before the question)."""
    if context is None:
        return fail_response()
    if param.only_need_context:
        return context
    system_prompt = render_prompt(template, **{context_field: context}, response_type=param.response_type)
    # A caller streaming the answer (graphrag/querying/streaming.py) hands an llm whose ``final_answer``
    # streams this call, and only this one: a global query's map calls are not the answer.
    answer = getattr(llm, "final_answer", llm)
    # A chat's earlier turns go before the question; without them the call (and its cache key)
    # is what it always was.
    history = {"history_messages": list(param.conversation_history)} if param.conversation_history else {}
    return await answer(query, stage="query", system_prompt=system_prompt, **history)


def _cell(value: JSONValue) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _written_line(cells: Sequence[str]) -> str:
    """What the csv module writes for ``cells``, standard quoting, without the newline."""
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_MINIMAL, lineterminator="\n").writerow(cells)
    return buf.getvalue()[:-1]


def _quoting_rule() -> Optional[re.Pattern[str]]:
    """The characters that make this Python's csv writer quote a field, as a pattern, when the
    writer does nothing else to fields (no escapes, quotes doubled, cells joined by commas):
    then a row is written by a string join, ~6x faster than a writer per row. None if not."""
    probes = [chr(i) for i in range(128)] + ["\x85", "\u2028", "é", "中"]
    quoted = [c for c in probes if _written_line(["a" + c + "b", "x"]) != "a" + c + "b,x"]
    rule = re.compile("[" + re.escape("".join(quoted)) + "]")
    samples = [[c, c + c, ""] for c in probes] + [["", ""], [" a ", "b"], ['"', '""'], ["a\r\nb", "\n"]]
    return rule if all(_joined(cells, rule) == _written_line(cells) for cells in samples) else None


def _joined(cells: Sequence[str], quoted: re.Pattern[str]) -> str:
    """``cells`` joined by commas, each holding a ``quoted`` character quoted, quotes doubled."""
    return ",".join(['"' + c.replace('"', '""') + '"' if quoted.search(c) else c for c in cells])


_QUOTED = _quoting_rule()


def _render_line(row: Sequence[Any]) -> str:
    """One row as a CSV line, standard quoting, without its newline."""
    cells = [_cell(v) for v in row]
    if _QUOTED is None or len(cells) < 2:  # a lone cell has rules of its own (an empty one is quoted)
        return _written_line(cells)
    return _joined(cells, _QUOTED)


# A row's line after its number, by the row's other cells as text: the same records' rows come
# back in every query, numbered differently. Sized as twice the line: the cells it keeps are the
# same text again.
_RESTS: TextCache[tuple[str, ...], str] = TextCache(1 << 24, lambda _, rest: 2 * sys.getsizeof(rest))


def _numbered(row: Sequence[Any]) -> Optional[tuple[str, str]]:
    """``(number, rest)`` of a row whose first cell is an int, its line being ``number + rest``
    (rest starts with the comma; cells are quoted one by one); None for any other row."""
    if len(row) < 2 or type(row[0]) is not int:
        return None
    cells = tuple([_cell(v) for v in row[1:]])
    return str(row[0]), _RESTS.get(cells, lambda: _render_line(("0", *cells))[1:])


class _Lines:
    """The rows of a table, each split into its number and rest (:func:`_numbered`) once, when
    first asked: packing reads a row's parts for its own cost, for the section's count and for
    the section's text. ``rows`` may grow (a section read batch by batch); rows are not changed."""

    def __init__(self, rows: Sequence[Sequence[Any]]) -> None:
        self.rows = rows
        self._parts: list[Optional[tuple[str, str]]] = []

    def parts(self, i: int) -> Optional[tuple[str, str]]:
        parts = self._parts
        while len(parts) <= i:
            parts.append(_numbered(self.rows[len(parts)]))
        return parts[i]

    def line(self, i: int) -> str:
        parts = self.parts(i)
        return _render_line(self.rows[i]) if parts is None else parts[0] + parts[1]

    def table(self, header: Sequence[str], n: int) -> str:
        """:func:`rows_to_csv_table` of the first ``n`` rows."""
        # As one writer writes it: the lines one after another, trailing newlines dropped.
        return (_render_line(header) + "".join(["\n" + self.line(i) for i in range(n)])).rstrip("\n")

    def section(self, title: str, header: Sequence[str], n: int) -> str:
        """:func:`csv_section` of the first ``n`` rows."""
        return f"-----{title}-----\n```csv\n{self.table(header, n)}\n```"

    def cost(self, i: int, tokenizer: Tokenizer) -> int:
        """:func:`row_cost` of row ``i``."""
        parts = self.parts(i) if getattr(tokenizer, "counts_add_by_line", False) else None
        if parts is None:
            return tokenizer.count(rows_to_csv_table([], [self.rows[i]]))
        return tokenizer.count("\n") + tokenizer.count(parts[0]) + _count_rest(parts[1], tokenizer, newline=False)


def rows_to_csv_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A CSV table (header first) with standard quoting for commas, quotes and newlines."""
    return _Lines(rows).table(header, len(rows))


def csv_section(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """``-----Title-----`` followed by a fenced CSV table: the shape the answer prompts expect."""
    return _Lines(rows).section(title, header, len(rows))


def largest_fitting_prefix(
    n_items: int,
    render: Callable[[int], str],
    max_tokens: int,
    tokenizer: Tokenizer,
    estimate: Optional[int] = None,
    count: Optional[Callable[[int], int]] = None,
) -> tuple[int, str]:
    """The largest ``k <= n_items`` whose ``render(k)`` counts at most ``max_tokens`` tokens.

    ``estimate`` (an upper guess) bounds the search; each candidate is counted for real,
    so the returned text always fits. Returns ``(-1, "")`` when not even ``render(0)`` fits.
    ``count``: the tokens of ``render(k)`` for ``k >= 1`` without rendering and encoding it.
    """
    hi = n_items if estimate is None else max(0, min(n_items, estimate))
    texts = {0: render(0)}  # what was rendered to be counted; with ``count``, only the answer is
    if tokenizer.count(texts[0]) > max_tokens:
        return -1, ""

    def fitting(k: int) -> bool:
        if count is not None:
            return count(k) <= max_tokens
        texts[k] = render(k)
        return tokenizer.count(texts[k]) <= max_tokens

    best_k = 0
    if estimate is not None and hi >= 3:
        # Callers' estimates (per-item counts, plus 2) are nearly always right: count upwards
        # from estimate - 2 instead of a binary search that counts a whole table ~log2(n) times.
        # An estimate of every item mostly means they all fit: one count settles that first.
        upper = hi
        if hi == n_items:
            if fitting(hi):
                return hi, texts[hi] if hi in texts else render(hi)
            upper = hi - 1
        if fitting(hi - 2):
            best_k = hi - 2
            for k in range(hi - 1, upper + 1):
                if not fitting(k):
                    break
                best_k = k
            return best_k, texts[best_k] if best_k in texts else render(best_k)
        hi -= 3
    lo = 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if fitting(mid):
            best_k = mid
            lo = mid + 1
        else:
            hi = mid - 1
    return best_k, texts[best_k] if best_k in texts else render(best_k)


# ASCII punctuation but the apostrophe (which opens the pre-tokenizers' "'s"-style endings).
_PUNCTUATION = "".join(c for c in string.punctuation if c != "'")


def _rest_parts(rest: str) -> tuple[str, str]:
    """``rest`` as ``(head, tail)``: the tail is its trailing ASCII punctuation (a quoted cell's
    closing quote, a full stop), cut off only where an ASCII letter or digit precedes it,
    else ``""``. The bundled pre-tokenizers cut there, and a newline after the tail joins the
    tail's piece, not the head's: so the head is counted once for both the rest and the rest
    with its newline (a passage's row is counted both ways while packing)."""
    head = rest.rstrip(_PUNCTUATION)
    if len(head) < len(rest) and head[-1:].isascii() and head[-1:].isalnum():
        return head, rest[len(head):]
    return rest, ""


def _count_rest(rest: str, tokenizer: Tokenizer, newline: bool) -> int:
    """Tokens of ``rest`` (with ``newline``: of ``rest`` and a newline) for a tokenizer that
    ``counts_add_by_line``."""
    head, tail = _rest_parts(rest)
    if not tail:
        return tokenizer.count(rest + "\n" if newline else rest)
    return tokenizer.count(head) + tokenizer.count(tail + "\n" if newline else tail)


def section_counter(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]],
                    tokenizer: Tokenizer) -> Callable[[int], int]:
    """:func:`_section_counter` of ``rows``."""
    return _section_counter(title, header, _Lines(rows), tokenizer)


def _section_counter(title: str, header: Sequence[str], lines: _Lines, tokenizer: Tokenizer) -> Callable[[int], int]:
    """``k -> tokens of csv_section(title, header, rows[:k])`` for ``k >= 1``, from counts of
    its lines, each line counted once as the section grows: the section is its head (title,
    fence, header line), each row's line with its newline, and the closing fence. For a
    tokenizer with ``counts_add_by_line`` the count of a text cut there is the sum of its
    parts' counts: every row starts with its number, and its pre-tokenizer never joins a
    newline with a digit or a backtick after it; nor a number with the comma after it, so a
    row's line counts as its number plus the rest, which the tokenizer remembers per record."""
    head = tokenizer.count(f"-----{title}-----\n```csv\n{rows_to_csv_table(header, [])}\n")
    sums = [head + tokenizer.count("```")]
    newline = tokenizer.count("\n")

    def count(k: int) -> int:
        while len(sums) <= k:
            parts = lines.parts(len(sums) - 1)
            if parts is None:
                line = tokenizer.count(_render_line(lines.rows[len(sums) - 1]) + "\n")
            else:
                number, rest = parts
                # Nor a newline with an ASCII letter or digit before it (a row ending in its rank).
                ends_apart = rest[-1:].isascii() and rest[-1:].isalnum()
                line = tokenizer.count(number) + (tokenizer.count(rest) + newline if ends_apart
                                                  else _count_rest(rest, tokenizer, newline=True))
            sums.append(sums[-1] + line)
        return sums[k]

    return count


def row_cost(row: Sequence[Any], tokenizer: Tokenizer) -> int:
    """A row's own tokens, as a table of it alone counts them: what packing estimates from."""
    return _Lines([row]).cost(0, tokenizer)


def _estimate(n_items: int, fixed: int, costs: Iterable[int], max_tokens: int) -> int:
    """A cheap upper guess for :func:`largest_fitting_prefix`: how many items fit when each
    adds its own cost to ``fixed``. ``costs`` is read only up to the first overflow."""
    total, fitting = fixed, 0
    for cost in costs:
        total += cost
        if total > max_tokens:
            break
        fitting += 1
    # Token counts of joined items can differ a little from the sum of their parts.
    return min(n_items, fitting + 2)


def pack_csv_section(
    title: str,
    header: Sequence[str],
    rows: Sequence[Sequence[Any]],
    max_tokens: int,
    tokenizer: Tokenizer,
    cut_column: Optional[int] = None,
    row_tokens: Sequence[int] = (),
) -> tuple[str, int, int]:
    """As many leading ``rows`` as fit, rendered by :func:`csv_section` within ``max_tokens``.

    The title line, fences and header count against the budget. Rows are kept whole,
    except that when not even the first row fits and ``cut_column`` is given, that
    column of the first row is cut short so the section still carries the best row.
    Returns the section text (``""`` when even an empty table does not fit), how many
    rows it holds and its tokens (known from the packing where its lines were counted, so
    a caller budgeting the next section need not count it). ``row_tokens``:
    :func:`row_cost` of the leading rows, when the caller counted them already.
    """
    return _pack(title, _Lines(rows), header, max_tokens, tokenizer, cut_column, row_tokens)


def _pack(title: str, lines: _Lines, header: Sequence[str], max_tokens: int, tokenizer: Tokenizer,
          cut_column: Optional[int], row_tokens: Sequence[int]) -> tuple[str, int, int]:
    """:func:`pack_csv_section` of ``lines.rows``."""
    if max_tokens <= 0:
        return "", 0, 0
    rows = lines.rows
    costs = itertools.chain(row_tokens, (lines.cost(i, tokenizer) for i in range(len(row_tokens), len(rows))))
    estimate = _estimate(len(rows), tokenizer.count(csv_section(title, header, [])), costs, max_tokens)
    count = _section_counter(title, header, lines, tokenizer) if getattr(tokenizer, "counts_add_by_line", False) else None
    k, text = largest_fitting_prefix(
        len(rows), lambda n: lines.section(title, header, n), max_tokens, tokenizer, estimate, count
    )
    if k < 0:
        return "", 0, 0
    if k == 0 and rows and cut_column is not None:
        cut = _cut_row_to_fit(title, header, rows[0], cut_column, max_tokens, tokenizer)
        if cut is not None:
            return cut, 1, tokenizer.count(cut)
    return text, k, count(k) if count is not None and k > 0 else tokenizer.count(text)


def _cut_row_to_fit(
    title: str, header: Sequence[str], row: Sequence[Any], column: int, max_tokens: int, tokenizer: Tokenizer
) -> Optional[str]:
    """The section holding ``row`` alone with ``row[column]`` shortened to fit, or None."""
    row = list(row)
    full = _cell(row[column])
    keep = tokenizer.count(full)
    for _ in range(32):
        text = csv_section(title, header, [row])
        over = tokenizer.count(text) - max_tokens
        if over <= 0:
            return text if keep > 0 else None
        if keep <= 0:
            return None
        keep = max(0, keep - over)
        row[column] = tokenizer.truncate(full, keep) + "..."
    return None


_WORD_GAP = re.compile(r"[A-Za-z] [A-Za-z]")


def _word_gaps(text: str) -> Optional[tuple[int, int]]:
    """The first and last place in ``text`` where a space stands between two ASCII letters
    (the space's index), or None. The bundled pre-tokenizers always cut before such a space
    (a run of letters ends there; the space opens the next word's piece), whatever text
    comes before or after: a text joined to others counts as its part between the two
    places plus the joins around it."""
    first = _WORD_GAP.search(text)
    if first is None:
        return None
    last = len(text)
    while True:
        last = text.rfind(" ", 0, last)
        if last >= 1 and _WORD_GAP.match(text, last - 1):
            return first.start() + 1, last


class _JoinedCounts:
    """Token counts of texts and of their joins by ``separator``, for a tokenizer that
    ``counts_add_by_line``: a text is its lead (to its first word gap, :func:`_word_gaps`), its
    middle and its end (from its last gap), so its middle is encoded once, for its own count
    and for every join it is in, and a join adds only the text around each separator."""

    def __init__(self, texts: Sequence[str], gaps: list[tuple[int, int]], separator: str,
                 tokenizer: Tokenizer) -> None:
        self.texts, self.gaps, self.separator, self.tokenizer = texts, gaps, separator, tokenizer
        self._parts: list[tuple[int, int, int]] = []  # (lead, middle, end) of the texts counted so far
        self._joined = [0]  # tokens of the first k texts joined

    @classmethod
    def of(cls, texts: Sequence[str], separator: str, tokenizer: Tokenizer) -> Optional[_JoinedCounts]:
        """None unless the tokenizer ``counts_add_by_line`` and every text has a word gap."""
        if not getattr(tokenizer, "counts_add_by_line", False):
            return None
        gaps = [_word_gaps(text) for text in texts]
        return None if any(g is None for g in gaps) else cls(texts, gaps, separator, tokenizer)  # type: ignore[arg-type]

    def _part(self, i: int) -> tuple[int, int, int]:
        while len(self._parts) <= i:
            text, (first, last) = self.texts[len(self._parts)], self.gaps[len(self._parts)]
            count = self.tokenizer.count
            self._parts.append((count(text[:first]), count(text[first:last]), count(text[last:])))
        return self._parts[i]

    def text(self, i: int) -> int:
        """Tokens of ``texts[i]``."""
        return sum(self._part(i))

    def joined(self, k: int) -> int:
        """Tokens of ``separator.join(texts[:k])``, ``k >= 1``."""
        while len(self._joined) <= k:
            i = len(self._joined) - 1  # the text joined next
            lead, middle, end = self._part(i)
            if i == 0:
                self._joined.append(lead + middle + end)
                continue
            join = self.texts[i - 1][self.gaps[i - 1][1]:] + self.separator + self.texts[i][:self.gaps[i][0]]
            self._joined.append(self._joined[-1] - self._part(i - 1)[2] + self.tokenizer.count(join) + middle + end)
        return self._joined[k]


def pack_texts(texts: Sequence[str], separator: str, max_tokens: int, tokenizer: Tokenizer) -> tuple[str, int]:
    """Leading ``texts`` joined by ``separator`` within ``max_tokens``; whole texts only."""
    if max_tokens <= 0 or not texts:
        return "", 0
    sep_cost = tokenizer.count(separator)  # n texts hold n - 1 separators
    joined = _JoinedCounts.of(texts, separator, tokenizer)
    counts = (joined.text(i) for i in range(len(texts))) if joined is not None else map(tokenizer.count, texts)
    estimate = _estimate(len(texts), -sep_cost, (n + sep_cost for n in counts), max_tokens)
    k, text = largest_fitting_prefix(
        len(texts), lambda n: separator.join(texts[:n]), max_tokens, tokenizer, estimate,
        joined.joined if joined is not None else None)
    return (text, k) if k > 0 else ("", 0)


async def pack_while_reading(title: str, header: list[str], batches: Iterable[list[T]],
                             read: Callable[[list[T]], Awaitable[list[tuple[R, list[Any]]]]], budget: int,
                             tokenizer: Tokenizer, first_id: int = 0, cut_column: int = 1) -> tuple[str, list[R]]:
    """A section of ``[i, *cells]`` rows (``i`` from ``first_id``; ``read`` gives each item's
    cells), reading the batches in rank order only until it is full; returns the section and
    the items its rows came from. ``cut_column``: as :func:`pack_csv_section`'s.

    Packing keeps the longest prefix of rows that fits, so once it keeps fewer rows than
    were read, what comes after cannot change it: a hub entity's hundreds of chunks,
    communities and relations are not all read for the few that fit.
    """
    items: list[tuple[R, list[Any]]] = []
    rows: list[list[Any]] = []
    lines = _Lines(rows)  # grows with ``rows``
    costs: list[int] = []
    fixed = tokenizer.count(csv_section(title, header, []))
    text, kept, packed = "", 0, True
    for batch in batches:
        items += await read(batch)
        rows += [[first_id + i, *cells] for i, (_, cells) in enumerate(items[len(rows):], start=len(rows))]
        # While the rows' own counts add up to less than the budget, every row read so far
        # would be kept, so the section is packed (counted whole) only once they do not, or
        # when the batches run out. Packing a longer list when the sum misjudged by a token
        # keeps the same prefix: the rows after it do not change which prefix fits.
        total = fixed + sum(costs)
        while len(costs) < len(rows) and total <= budget:
            costs.append(lines.cost(len(costs), tokenizer))
            total += costs[-1]
        packed = total > budget
        if packed:
            text, kept, _ = _pack(title, lines, header, budget, tokenizer, cut_column, costs)
            if kept < len(items):
                break
    if not packed:
        text, kept, _ = _pack(title, lines, header, budget, tokenizer, cut_column, costs)
    return text, [item for item, _ in items[:kept]]


def doubling_slices(ids: list[T], first: int = 8) -> Iterator[list[T]]:
    start, size = 0, first
    while start < len(ids):
        yield ids[start:start + size]
        start, size = start + size, size * 2
