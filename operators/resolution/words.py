"""Words of English names, as data: each list is a closed or general class of the language
(articles, titles, connectors, heads of a kind of thing), never the words of one text. Name
keys (:mod:`.keys`) read them; a name in another language simply has none of them.
"""
from __future__ import annotations

# Articles, dropped before a name.
ARTICLES = frozenset("THE A AN".split())
# Titles and honorifics before a name, with the gender they say (None: either).
HONORIFICS = {
    **dict.fromkeys("""MR MISTER SIR LORD MASTER KING PRINCE DUKE UNCLE EMPEROR ARCHDUKE COUNT BARON EARL
        MARQUIS MARQUESS VISCOUNT TSAR CZAR SULTAN SHAH KAISER""".split(), "M"),
    **dict.fromkeys("""MRS MS MISS LADY MADAM MADAME DAME QUEEN PRINCESS DUCHESS AUNT EMPRESS ARCHDUCHESS
        COUNTESS BARONESS MARCHIONESS VISCOUNTESS TSARINA""".split(), "F"),
    **dict.fromkeys("""DR PROF PROFESSOR REV REVEREND CAPT CAPTAIN PRESIDENT SENATOR GOVERNOR MAYOR
        JUDGE BISHOP POPE CARDINAL CHANCELLOR ADMIRAL COLONEL SERGEANT LIEUTENANT""".split(), None),
}
# Words that describe a person rather than name them (OLD JACK is JACK): adjectives of age
# and affection written before a name; and words that open an English sentence before a
# name, so a capitalised span can start with them ("But Hale", "Perhaps Hale"): coordinating
# conjunctions, sentence adverbs and interjections (closed classes of the language).
DESCRIPTIVE = frozenset(
    """OLD YOUNG LATE ELDER POOR DEAR BUT YET SO THEN NOW THUS HENCE HOWEVER MOREOVER FURTHERMORE
    NEVERTHELESS OTHERWISE INDEED PERHAPS CERTAINLY SURELY MEANWHILE AFTERWARDS ALTHOUGH THOUGH
    WHILE WHEN OH AH ALAS""".split())
# Legal suffixes of a company name ("ACME CORP." is ACME).
CORPORATE = frozenset("INC CORP CORPORATION LTD LLC CO PLC GMBH LIMITED".split())
# Words that join two names into a third thing ("Hale and Morrow", "Ghost of Midsummer").
CONNECTORS = frozenset("AND & OF FOR AT IN ON TO WITH BY FROM DE DU DA DEL VON VAN".split())
# Heads that make a name a different kind of thing than its other words ("Northland
# Army" is no "Northland"; "Midsummer Day" no "Midsummer").
GENERIC_HEADS = frozenset(
    """ARMY NAVY COMPANY BANK UNIVERSITY COLLEGE SCHOOL ACADEMY CHURCH SOCIETY CLUB ASSOCIATION
    INSTITUTE COMMITTEE COUNCIL PARTY MINISTRY DEPARTMENT AGENCY FOUNDATION GROUP PRESS UNION
    COURT PARLIAMENT CONGRESS SENATE TEAM BAND FAMILY STREET ROAD LANE AVENUE SQUARE CITY TOWN
    VILLAGE RIVER LAKE MOUNTAIN MOUNT ISLAND ISLANDS COUNTY HALL HOUSE PARK BRIDGE CASTLE VALLEY
    SEA OCEAN BAY KINGDOM EMPIRE REPUBLIC PROVINCE STATE STATES FOREST HILL STATION AIRPORT
    WAR BATTLE FESTIVAL DAY EVE TIME YEAR REVOLUTION CONFERENCE OLYMPICS ELECTION FEAST AWARD
    AWARDS PRIZE CUP SERIES SEASON LEAGUE CHAMPIONSHIP ALBUM SONG FILM MOVIE SHOW BOOK NOVEL
    GAME GAMES MUSEUM LIBRARY HOSPITAL CENTER CENTRE STADIUM THEATRE THEATER GALLERY DISTRICT
    REGION EMPIRE DYNASTY ERA AGE LAW ACT TREATY PROJECT LICENSE SYSTEM NETWORK MAGAZINE MAGAZINES
    FILMS RECORDS PUBLICATIONS PUBLISHING STUDIOS PICTURES PRODUCTIONS ENTERTAINMENT INTERNATIONAL
    AIRLINES AIRWAYS LANGUAGE LANGUAGES SONATA SYMPHONY CONCERTO OPERA FICTION JOURNAL NEWSPAPER
    RADIO TELEVISION TV CHANNEL RAILWAY CLASS PRESS EDITION TOUR TRILOGY BEGINS RETURNS JANUARY
    FEBRUARY MARCH APRIL MAY JUNE JULY AUGUST SEPTEMBER OCTOBER NOVEMBER DECEMBER MONDAY TUESDAY
    WEDNESDAY THURSDAY FRIDAY SATURDAY SUNDAY SCIENCE MATHEMATICS HISTORY""".split()
)
# Words that make a nickname of a first name ("LITTLE NED", "LITTLE ANNE").
NICKNAME_WORDS = frozenset("TINY LITTLE BIG".split())
# Words that say what kind of thing a name is without making it another thing
# ("BRISK-MORROW PRODUCTIONS", "THE HARBOUR GAZETTE MAGAZINE").
CATEGORY_WORDS = frozenset("""PRODUCTIONS STUDIOS STUDIO PICTURES ENTERTAINMENT FILMS RECORDS RECORDINGS MAGAZINE
    NEWSPAPER RESORT BAND PUBLISHING PUBLISHERS""".split())
# Words that make a place or a thing another one ("West Bengal" is no "Bengal").
MODIFIERS = frozenset(
    """NORTH SOUTH EAST WEST NORTHERN SOUTHERN EASTERN WESTERN CENTRAL UPPER LOWER GREATER NEW
    HIGH LOW GREAT INNER OUTER MIDDLE GRAND ROYAL NATIONAL""".split()
)
# Generation suffixes of Western names: father and son share every other word.
GENERATIONS = frozenset("JR SR".split())
# English numbers and ordinals as words (the general class: words that count or rank).
NUMBER_VALUES = {word: i + 1 for i, word in enumerate(
    "ONE TWO THREE FOUR FIVE SIX SEVEN EIGHT NINE TEN ELEVEN TWELVE".split())}
NUMBER_VALUES.update({word: i + 1 for i, word in enumerate(
    "FIRST SECOND THIRD FOURTH FIFTH SIXTH SEVENTH EIGHTH NINTH TENTH ELEVENTH TWELFTH".split())})
