"""Entity resolution: one thing, one node, whatever names the extractions gave it.

Extractors name one thing several ways (``JAMES MORROW``, ``MORROW``, ``MR. MORROW``). This
stage finds such names and maps each alias to one canonical name; the merge then groups
contributions through that map (``merge.group_contributions``), so the graph stays a pure
function of the recorded extractions plus the user's manual decisions:

- **candidates** come from blocking, never from all pairs: a normalised key (case,
  punctuation, leading articles, honorifics and descriptive words, possessives, corporate
  suffixes), key tokens shared or contained, a designation's forms and head
  (:func:`owned`), character 3-gram MinHash/LSH buckets, what a description states a name
  is (:func:`description_claims`, kept per chunk so either name finds the other), and
  optionally the cosine of name-plus-description vectors (:func:`similar_pairs`); with a
  model, loose blocking also meets names sharing any word, whose relation (unsettled or
  none) is worked out only where their profiles could make the pair worth asking;
- **a pair's decision** is a function of the two names' profiles only (types, neighbours,
  description words, all read from the extractions), plus an optional cached model verdict
  for ambiguous pairs; so after a change only pairs touching a changed name are decided
  again, and the accepted pairs are those a fresh index would accept;
- **groups** are formed from all accepted pairs at once, in a fixed order, conservatively:
  a short name whose partners disagree (``BRANT`` with ``TOM`` and ``MRS. BRANT``) is
  left alone, as is a designation said of two people (``TOM'S SON``), and names of
  conflicting gender or a never-merge rule never share a group; an
  untyped part of a name (``EDWIN``) joins its fuller name when that group holds a title.

The package: :mod:`.keys` (names alone: keys, relations, look-alikes), :mod:`.candidates`
(blocking), :mod:`.evidence` (profiles, a pair's decision), :mod:`.judge` (the model's
verdicts), :mod:`.core` (manual decisions, derived state, grouping, exact regrouping) and
:mod:`.store` (the stage over the stores: state records, the pass, review). Only ``store``
touches a store (through the contracts).
"""
from __future__ import annotations

from .candidates import NameIndex, similar_pairs
from .core import RULES, AliasMap, ManualDecisions, ResolutionState, group_names, regroup
from .evidence import (
    NameProfile,
    PairDecision,
    chunk_claims,
    decide_pair,
    description_claims,
    name_profiles,
    raw_names,
)
from .judge import VERDICTS_RECORD, Judge, parse_verdicts
from .keys import UNSETTLED_RELATIONS, designation, gender, look_alike, name_key, name_relation, owned
from .store import (
    STATE_RECORD,
    EntityResolution,
    Resolution,
    ResolutionSettings,
    duplicate_groups,
    forget_derived_state,
    joined_state,
)

__all__ = [
    "AliasMap",
    "EntityResolution",
    "Judge",
    "ManualDecisions",
    "NameIndex",
    "NameProfile",
    "PairDecision",
    "RULES",
    "STATE_RECORD",
    "UNSETTLED_RELATIONS",
    "VERDICTS_RECORD",
    "Resolution",
    "ResolutionSettings",
    "ResolutionState",
    "chunk_claims",
    "decide_pair",
    "description_claims",
    "designation",
    "duplicate_groups",
    "forget_derived_state",
    "gender",
    "group_names",
    "joined_state",
    "look_alike",
    "name_key",
    "name_profiles",
    "name_relation",
    "owned",
    "parse_verdicts",
    "raw_names",
    "regroup",
    "similar_pairs",
]
