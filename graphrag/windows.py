"""How much data each prompt may carry so that it fits the model's context window.

``best_model_max_token_size`` and ``cheap_model_max_token_size`` are the models' windows.
Every check here runs before the first LLM call, so a window too small fails the work
before anything is paid for, with the numbers and the option to change.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from graphrag.config import GraphRAGConfig
from graphrag.errors import ContextWindowError
from graphrag.query_param import QueryParam

if TYPE_CHECKING:
    from graphrag.operators.tokenizer import Tokenizer

# Of the best model's window, the tokens kept free for the answer to a community report or
# query prompt (a JSON report runs ~500-1500); and the least room a prompt must leave for its
# data, in either model's window.
ANSWER_TOKENS = 2000
MIN_PROMPT_DATA_TOKENS = 128
# At most this share of a query prompt's data room goes to a chat's earlier turns.
HISTORY_SHARE = 0.5
# What a chat message costs beside its text (role and separators in the chat template).
TURN_OVERHEAD_TOKENS = 4


class ModelWindows:
    def __init__(self, config: GraphRAGConfig, tokenizer: Tokenizer) -> None:
        self.config = config
        self.tokenizer = tokenizer

    def report_data_tokens(self) -> int:
        """Community data one report prompt carries: ``community_report_max_token_size``, or
        less where the best model's window leaves less room beside the prompt's own text and
        ``ANSWER_TOKENS``."""
        room = self._room("best_model_max_token_size", "community_report", ANSWER_TOKENS, input_text="")
        return min(self.config.community_report_max_token_size, room)

    def summary_input_tokens(self) -> int:
        """Descriptions one summary prompt carries: ``summary_input_budget``, or less where the
        cheap model's window leaves less room beside the prompt's text and the summary."""
        from graphrag.operators.merge import summary_input_budget

        return min(summary_input_budget(self.config.entity_summary_to_max_tokens), self.summary_room())

    def summary_room(self) -> int:
        return self._room("cheap_model_max_token_size", "summarize_entity_descriptions",
                          self.config.entity_summary_to_max_tokens, entity_name="", description_list="")

    def extraction_room(self) -> int:
        """Tokens of chunk an extraction prompt can carry."""
        return self._room("best_model_max_token_size", "entity_extraction", 0,
                          entity_types=", ".join(self.config.entity_types), input_text="")

    def check_indexing(self) -> None:
        """Every indexing prompt's window, before the first call."""
        self.summary_room()
        self.report_data_tokens()

    def check_chunks_fit_extraction(self, longest_chunk: int) -> None:
        """An extraction prompt carries a whole chunk: one longer than the room fails here, not
        at the server."""
        room = self.extraction_room()
        if longest_chunk > room:
            raise ContextWindowError(
                f"best_model_max_token_size={self.config.best_model_max_token_size} leaves {room} tokens for a "
                f"chunk in an extraction prompt, but chunks run to {longest_chunk} tokens: lower chunk_token_size "
                f"(now {self.config.chunk_token_size}) or raise the window to the model's")

    def fit_query(self, query: str, param: QueryParam) -> QueryParam:
        """``param`` with context budgets no larger than the best model's window leaves beside
        each of its mode's prompts, the question and ``ANSWER_TOKENS``."""
        from graphrag.operators.modes import get_mode
        from graphrag.operators.query_context import EMPTY_PROMPT_DATA, fit_to_room

        mode = get_mode(param.mode)
        templates = mode.cited_prompts if param.with_references else mode.prompts

        room = min(self._room("best_model_max_token_size", template, ANSWER_TOKENS, question=query,
                              response_type=param.response_type, **EMPTY_PROMPT_DATA)
                   for template in templates)
        if param.conversation_history == []:  # the usual case; anything else is checked below
            return fit_to_room(param, room)
        param = replace(param)  # checked again: a caller may have set a field after making it
        history, history_tokens = self._recent_turns(param.conversation_history, room)
        if len(history) < len(param.conversation_history):
            param = replace(param, conversation_history=history)
        # The turns' tokens come out of the data's room (a prompt's room is its window less
        # what it keeps for everything else); ``_recent_turns`` leaves it at least the minimum.
        return fit_to_room(param, room - history_tokens)

    def _recent_turns(self, history: list[dict[str, str]], room: int) -> tuple[list[dict[str, str]], int]:
        """The newest turns of a chat that fit in ``HISTORY_SHARE`` of ``room`` (the data the
        prompt could carry without them), and their tokens: the retrieved data answers the
        question, so earlier turns never crowd it out, and the oldest go first."""
        kept: list[dict[str, str]] = []
        total, limit = 0, min(int(room * HISTORY_SHARE), room - MIN_PROMPT_DATA_TOKENS)
        for turn in reversed(history):
            tokens = self.tokenizer.count(turn["content"]) + TURN_OVERHEAD_TOKENS
            if total + tokens > limit:
                break
            kept.append(turn)
            total += tokens
        return kept[::-1], total

    def _room(self, window_option: str, template: str, answer_tokens: int, question: str = "",
              **empty: str) -> int:
        from graphrag.prompts import room_for_data

        window = getattr(self.config, window_option)
        question_tokens = self.tokenizer.count(question) if question else 0
        room = room_for_data(self.tokenizer, template, window, answer_tokens + question_tokens, **empty)
        if room < MIN_PROMPT_DATA_TOKENS:
            asked = f", the question takes {question_tokens}" if question else ""
            raise ContextWindowError(
                f"{window_option}={window} leaves {max(room, 0)} tokens for the data of a '{template}' prompt "
                f"(at least {MIN_PROMPT_DATA_TOKENS} needed; {answer_tokens} are kept for the answer{asked}): "
                "raise it to the model's context window")
        return room
