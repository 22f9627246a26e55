"""LLM-free extraction: names, sentence-start filtering, relations, hostile inputs."""
from __future__ import annotations

from graphrag.operators.extraction import normalize_entity_name
from graphrag.operators.nlp_extraction import extract_chunk_nlp, extract_chunks_nlp, split_sentences

TEXT = (
    "The Ghost of Christmas Past appeared at night. When Scrooge saw it, he trembled. "
    '"Bah!" said Scrooge. Mr. Fezziwig danced with Mrs. Fezziwig at the ball. '
    "Bob Cratchit worked for Scrooge. Scrooge's nephew laughed at Dickens' book. "
    "Later, Bob Cratchit and Scrooge met again."
)


def _names(result) -> set[str]:
    return {e["name"] for e in result["entities"]}


def _rel(result, a: str, b: str):
    key = tuple(sorted((a, b)))
    return next((r for r in result["relations"] if (r["source"], r["target"]) == key), None)


def test_names_and_multiword_names():
    names = _names(extract_chunk_nlp(TEXT))
    assert {"BOB CRATCHIT", "MR. FEZZIWIG", "MRS. FEZZIWIG", "GHOST OF CHRISTMAS PAST", "SCROOGE"} <= names


def test_possessives_are_stripped():
    names = _names(extract_chunk_nlp(TEXT))
    assert "DICKENS" in names
    assert not any("'" in n or "’" in n for n in names)


def test_sentence_start_function_words_are_not_entities():
    names = _names(extract_chunk_nlp(TEXT))
    assert not names & {"THE", "WHEN", "LATER", "BAH", "THE GHOST OF CHRISTMAS PAST"}


def test_sentence_start_word_seen_mid_sentence_is_an_entity():
    text = "Marley was dead. Nobody mourned. Everyone forgot Marley soon."
    names = _names(extract_chunk_nlp(text))
    assert "MARLEY" in names
    assert "NOBODY" not in names and "EVERYONE" not in names


def test_headings_and_roman_numerals_skipped():
    text = "CHAPTER II\n\nI saw Alice in London. Then I told Alice."
    names = _names(extract_chunk_nlp(text))
    assert "CHAPTER" not in names and "II" not in names and "I" not in names
    assert {"ALICE", "LONDON"} <= names


def test_a_roman_numeral_after_a_name_stays_in_it():
    text = ("Henry VIII's wives met Louis XIV in Versailles. King Henry VIII ruled England. "
            "World War I ended before World War II began. Later, Tom and I went to Paris.")
    names = _names(extract_chunk_nlp(text))
    assert {"HENRY VIII", "LOUIS XIV", "KING HENRY VIII", "WORLD WAR I", "WORLD WAR II"} <= names
    assert not names & {"HENRY", "KING HENRY", "LOUIS", "WORLD WAR", "TOM AND I", "I"}
    assert "TOM" in names


def test_relations_count_shared_sentences_and_are_symmetric():
    result = extract_chunk_nlp(TEXT)
    rel = _rel(result, "SCROOGE", "BOB CRATCHIT")
    assert rel is not None and rel["weight"] == 2.0
    assert rel["source"] < rel["target"]
    assert "Bob Cratchit worked for Scrooge." == rel["description"]
    assert _rel(result, "MR. FEZZIWIG", "MRS. FEZZIWIG")["weight"] == 1.0


def test_entity_types():
    by_name = {e["name"]: e["type"] for e in extract_chunk_nlp(
        "Mr. Fezziwig visited the Bank of England on Baker Street. Then came the Battle of Hastings."
    )["entities"]}
    assert by_name["MR. FEZZIWIG"] == "PERSON"
    assert by_name["BANK OF ENGLAND"] == "ORGANIZATION"
    assert by_name["BAKER STREET"] == "GEO"
    assert by_name["BATTLE OF HASTINGS"] == "EVENT"


def test_description_is_bounded_and_from_sentences():
    text = " ".join(f"Then Alice met Bob on day number {i} of the long trip." for i in range(50))
    result = extract_chunk_nlp(text, max_description_tokens=20)
    for e in result["entities"]:
        assert 0 < len(e["description"]) <= 80
    assert next(e for e in result["entities"] if e["name"] == "ALICE")["description"].startswith("Then Alice met Bob")


def test_output_shape_and_determinism():
    a = extract_chunk_nlp(TEXT)
    assert a == extract_chunk_nlp(TEXT)
    assert set(a) == {"entities", "relations"}
    for e in a["entities"]:
        assert set(e) == {"name", "type", "description"} and e["name"] == e["name"].upper()
        assert e["type"] == e["type"].upper()
    for r in a["relations"]:
        assert set(r) == {"source", "target", "description", "weight"} and isinstance(r["weight"], float)
    assert [e["name"] for e in a["entities"]] == sorted(e["name"] for e in a["entities"])


def test_hostile_inputs_do_not_crash():
    for text in ["", "   \n\n\t", "中文文本，没有大写字母。他说「北京」很好！", "😀 Alice 😀 met Alice 😀 Bob.",
                 "a\x00B\x01C Alice\x00 met Alice and Bob.", "x" * 1_000_000, "Ab" * 200_000,
                 "no capitals at all here. none.", ".!?" * 1000, "Mr. Mr. Mr."]:
        result = extract_chunk_nlp(text)
        assert isinstance(result["entities"], list) and isinstance(result["relations"], list)
        assert all(len(e["name"]) <= 400 for e in result["entities"])


def test_names_are_the_llm_extractors_names():
    """Both extractors name an entity through normalize_entity_name, so their records merge."""
    names = _names(extract_chunk_nlp(TEXT + " 他说「北京」很好。"))
    assert {"SCROOGE", "北京"} <= names and all(normalize_entity_name(n) == n for n in names)


def test_control_characters_separate_words():
    names = _names(extract_chunk_nlp("Then Alice\x0cBob went home. Later Alice\x85Bob slept."))
    assert "ALICE BOB" in names and not any("\x0c" in n or "\x85" in n or "ALICEBOB" in n for n in names)


def test_sentence_splitting_keeps_abbreviations():
    sents = split_sentences("Mr. Fezziwig laughed. Dr. Who left! Why? 他来了。她走了。")
    assert sents == ["Mr. Fezziwig laughed.", "Dr. Who left!", "Why?", "他来了。", "她走了。"]


def test_batch_helper():
    out = extract_chunks_nlp({"c1": {"content": TEXT}, "c0": {"content": ""}})
    assert list(out) == ["c1", "c0"]
    assert out["c1"] == extract_chunk_nlp(TEXT) and out["c0"] == {"entities": [], "relations": []}


def test_first_name_opening_a_sentence_stays_with_the_surname():
    names = {e["name"] for e in extract_chunk_nlp(
        "Ada Pennick designed a lens. Tobias Wren ground it. Old Fezziwig laughed. When Scrooge left, he sighed."
    )["entities"]}
    assert {"ADA PENNICK", "TOBIAS WREN", "FEZZIWIG", "SCROOGE"} <= names
    assert not names & {"PENNICK", "WREN", "OLD FEZZIWIG", "WHEN SCROOGE", "WHEN"}


def test_a_title_line_is_a_name_of_its_own():
    """A passage indexed as "title\\ntext": the title is a name even as one word opening the
    text, and it does not run into the name that starts the next line."""
    names = _names(extract_chunk_nlp("Wangliang\nWangliang is a spirit in Chinese folklore."))
    assert "WANGLIANG" in names and "WANGLIANG WANGLIANG" not in names
    names = _names(extract_chunk_nlp("Maximum Overdrive\nMaximum Overdrive is a film written by Stephen King."))
    assert {"MAXIMUM OVERDRIVE", "STEPHEN KING"} <= names and "MAXIMUM OVERDRIVE MAXIMUM OVERDRIVE" not in names
    names = _names(extract_chunk_nlp("Lilu (mythology)\nA lilu is a demon. It haunts deserts."))
    assert "LILU" in names
    names = _names(extract_chunk_nlp("Laie, Hawaii\nLaie is a town on Oahu."))
    assert {"LAIE", "HAWAII", "OAHU"} <= names and "HAWAII LAIE" not in names
    assert split_sentences("The Hukilau Song\nJack Owens wrote it.") == ["The Hukilau Song", "Jack Owens wrote it."]


def test_wrapped_prose_lines_are_not_headings():
    """Only a short title-case first line is a heading: a wrapped sentence stays one
    sentence and its opening word stays a sentence start."""
    text = "Bah and humbug were all Scrooge\nwould say to his nephew that day.\n\nDemon algorithm\nIt samples states."
    assert split_sentences(text) == ["Bah and humbug were all Scrooge\nwould say to his nephew that day.",
                                     "Demon algorithm\nIt samples states."]
    names = _names(extract_chunk_nlp(text))
    assert "SCROOGE" in names and not names & {"BAH", "DEMON"}
