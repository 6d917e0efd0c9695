"""The rules every language shares, in the order they are tried (after the language's own rules). Each is a
pattern over written text and a function saying a match through the language's methods and tables.

Numerals follow the language's convention: "1,234.5" in English, "1.234,5" in German, "1 234,5" in French;
a point decimal ("3.14") is also understood where the comma is the decimal mark, as it cannot be a group.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .language import Currency, Language, Rule
from .web_addresses import NARROW_LETTER

# Letters and digits of the scripts that space their words: a number or sign written right after Chinese,
# Japanese or Korean text still starts there ("气温-5°C", "请拨打+86 ...", "联系@user").
_SPACED_LETTER = "A-Za-z\u00c0-\u024f\u0370-\u03ff\u0400-\u04ff"
_SPACED_ALNUM = _SPACED_LETTER + "0-9"
_NOT_AFTER_WORD = rf"(?<![{_SPACED_ALNUM}.,\-−])"
_DASH = "[-–~〜～]"
_NUMBER_NEXT = re.compile(r"\s?[0-9]")
_SENTENCE_NEXT = re.compile(r"\s*(?:$|\n|[A-ZÀ-ÖØ-ÞА-ЯЁ])")


def numeral(language: Language, name: str) -> str:
    """A numeral with an optional minus, in named groups NAME_sign, NAME_grouped/NAME_gfrac, NAME_int/NAME_frac."""
    group = "[" + re.escape(language.group_marks) + "]"
    mark = re.escape(language.decimal_mark)
    decimal = "[.,]" if language.decimal_mark == "," else mark
    return (  # the lookahead first: most positions fail on it at once
        rf"(?=[-−0-9])(?P<{name}_sign>{_NOT_AFTER_WORD}[-−](?=[0-9]))?(?<![0-9])"
        rf"(?:(?P<{name}_grouped>[0-9]{{1,3}}(?:{group}[0-9]{{3}})+)(?![0-9])(?:{mark}(?P<{name}_gfrac>[0-9]+))?"
        rf"|(?P<{name}_int>[0-9]+)(?:{decimal}(?P<{name}_frac>[0-9]+))?)(?![0-9])"
    )


def plain(match: re.Match[str], name: str) -> str:
    """The numeral matched as NAME, as "-1234.5"."""
    grouped = match[f"{name}_grouped"]
    whole = "".join(filter(str.isdigit, grouped)) if grouped else match[f"{name}_int"]
    fraction = match[f"{name}_gfrac"] if grouped else match[f"{name}_frac"]
    sign = "-" if match[f"{name}_sign"] else ""
    return f"{sign}{whole}.{fraction}" if fraction else sign + whole


def alternation(words: Iterable[str]) -> str:
    """Longest first; a word ending in a letter must not run on into a letter of a spaced script (one
    lookahead for them all: a class with the CJK ranges takes milliseconds to compile)."""
    items = sorted(set(words), key=len, reverse=True)
    ending_in_letter = "|".join(re.escape(word) for word in items if word[-1].isalpha())
    others = "|".join(re.escape(word) for word in items if not word[-1].isalpha())
    return f"(?:{ending_in_letter})(?!{NARROW_LETTER})" + (f"|{others}" if others else "")


def word_before(match: re.Match[str]) -> str:
    """The word in front of a match, lowercase, for rules whose words agree with it."""
    words = match.string[max(match.start() - 40, 0) : match.start()].split()
    return words[-1].lower() if words else ""


def shared_rules(language: Language) -> tuple[Rule, ...]:
    """The language's own rules, then these: the more specific pattern always before the more general."""
    alternatives, slashes = _slashes(language)
    return (
        alternatives,
        *language.rules(),
        _status_code(language),
        *_dates(language),
        _time(language),
        *_phones(language),
        _dotted(language),
        *_money(language),
        _quantity(language),
        _fraction(language),
        _range(language),
        slashes,
        _symbols(language),
        *_signs(language),
        *language.late_rules(),
        _number(language),
    )


def _status_code(language: Language) -> Rule:
    pattern = re.compile(r"(?=[Hh])(?<![A-Za-z])(HTTP\s+(?:(?:status|error|code)\s+)?)([1-5][0-9]{2})(?![0-9])", re.I)
    return Rule(pattern, lambda m: m[1] + language.status_code(m[2]))


def _valid_date(year: int, month: int, day: int) -> bool:
    return 1 <= month <= 12 and 1 <= day <= 31 and year > 0


def _dates(language: Language) -> tuple[Rule, ...]:
    year_first = re.compile(
        r"(?=[0-9])(?<![0-9.,/-])(?P<y>[0-9]{4})(?P<sep>[-/.])(?P<m>[0-9]{1,2})(?P=sep)(?P<d>[0-9]{1,2})(?![0-9]|[-/.][0-9])"
    )
    year_last = re.compile(
        r"(?=[0-9])(?<![0-9.,/-])(?P<a>[0-9]{1,2})(?P<sep>[/.])(?P<b>[0-9]{1,2})(?P=sep)(?P<y>[0-9]{4})(?![0-9])"
    )

    def say(match: re.Match[str], year: int, month: int, day: int) -> str:
        if not _valid_date(year, month, day):
            return match.group()
        return language.date(year, month, day, word_before(match))

    def say_year_last(match: re.Match[str]) -> str:
        day, month = int(match["a"]), int(match["b"])
        if not language.day_first and day <= 12:
            day, month = month, day
        return say(match, int(match["y"]), month, day)

    chinese_style = re.compile(r"(?=[0-9])(?<![0-9])(?P<y>[0-9]{4})年(?P<m>[0-9]{1,2})月(?P<d>[0-9]{1,2})日")
    return (
        Rule(year_first, lambda m: say(m, int(m["y"]), int(m["m"]), int(m["d"]))),
        Rule(year_last, say_year_last),
        Rule(chinese_style, lambda m: say(m, int(m["y"]), int(m["m"]), int(m["d"]))),
    )


def _time(language: Language) -> Rule:
    pattern = re.compile(r"(?=[0-9])(?<![0-9:.,])([0-9]{1,2}):([0-5][0-9])(?::([0-5][0-9]))?(?![0-9]|:[0-9])")

    def say(match: re.Match[str]) -> str:
        hour, second = int(match[1]), match[3]
        if hour > 24:
            return match.group()
        return language.time(hour, int(match[2]), int(second) if second else None)

    return Rule(pattern, say)


def _phones(language: Language) -> tuple[Rule, ...]:
    international = re.compile(
        rf"\+(?<![{_SPACED_ALNUM}_+]\+)([0-9]{{1,3}})((?:[ .-]?\(?[0-9]{{1,5}}\)?){{1,6}})(?![0-9])"
    )
    local = re.compile(
        rf"(?=[(0-9])(?<![{_SPACED_ALNUM}_+.,/-])(\([0-9]{{2,5}}\)\s?|[0-9]{{2,5}}[ .-])"
        r"((?:[0-9]{2,5}[ .-]){0,3}[0-9]{2,8})"
        r"(?![0-9]|[.,][0-9])"
    )

    def say_international(match: re.Match[str]) -> str:
        groups = [match[1], *re.findall("[0-9]+", match[2])]
        digits = sum(map(len, groups))
        return language.phone(True, groups) if 7 <= digits <= 15 else match.group()

    def say_local(match: re.Match[str]) -> str:
        head, rest = match[1], match[2]
        groups = [*re.findall("[0-9]+", head), *re.findall("[0-9]+", rest)]
        separators = set(re.findall("[^0-9]", rest)) | {head[-1]}
        looks_like_number = separators <= set(language.group_marks) and all(len(g) == 3 for g in groups[1:])
        enough = len(groups) > 2 or head.startswith(("(", "0"))
        if looks_like_number or not enough or not 7 <= sum(map(len, groups)) <= 15:
            return match.group()
        return language.phone(False, groups)

    return Rule(international, say_international), Rule(local, say_local)


def _dotted(language: Language) -> Rule:
    """Versions (1.2.3: numbers) and IP addresses (192.168.0.1: digits)."""
    pattern = re.compile(r"(?=[0-9])(?<![0-9.,])[0-9]+(?:\.[0-9]+){2,}(?![0-9]|\.[0-9])")

    def say(match: re.Match[str]) -> str:
        parts = match.group().split(".")
        if "." in language.group_marks and len(parts[0]) <= 3 and all(len(part) == 3 for part in parts[1:]):
            return match.group()
        say_part = language.digits if len(parts) == 4 else language.whole
        return f" {language.web_words['.']} ".join(say_part(part) for part in parts)

    return Rule(pattern, say)


def _money(language: Language) -> tuple[Rule, ...]:
    if not language.currencies:
        return ()
    symbols = alternation(language.currencies)
    scales = "|".join(language.scales)
    scale = rf"(?:\s(?P<scale>{scales})\b)?" if scales else ""
    first_characters = "".join(sorted({re.escape(sign[0]) for sign in language.currencies}))
    before = re.compile(
        rf"(?=[{first_characters}])(?<!{NARROW_LETTER})(?P<cur>{symbols})\s?{numeral(language, 'a')}"
        rf"(?:{_DASH}{numeral(language, 'b')})?{scale}"
    )
    after = re.compile(rf"{numeral(language, 'a')}(?:\s?{_DASH}\s?{numeral(language, 'b')})?\s?(?P<cur>{symbols})")
    return Rule(before, lambda m: _say_money(language, m)), Rule(after, lambda m: _say_money(language, m))


def _say_money(language: Language, match: re.Match[str]) -> str:
    currency: Currency = language.currencies[match["cur"]]
    amount = plain(match, "a")
    if match["b_int"] or match["b_grouped"]:
        return language.range(amount, plain(match, "b"), currency.unit, word_before(match))
    scale = match.groupdict().get("scale") or ""
    return language.money(amount, currency, scale)


def _quantity(language: Language) -> Rule:
    units = alternation(language.units)
    pattern = re.compile(
        rf"{numeral(language, 'a')}(?:\s?{_DASH}\s?{numeral(language, 'b')})?\s?(?P<unit>{units})(?![0-9])"
    )

    def say(match: re.Match[str]) -> str:
        unit = language.units[match["unit"]]
        if match["b_int"] or match["b_grouped"]:
            return language.range(plain(match, "a"), plain(match, "b"), unit, word_before(match))
        return language.amount(plain(match, "a"), unit)

    return Rule(pattern, say)


def _fraction(language: Language) -> Rule:
    pattern = re.compile(r"(?=[0-9])(?<![0-9/.,])([0-9]{1,2})/([0-9]{1,2})(?![0-9]|/[0-9])")

    def say(match: re.Match[str]) -> str:
        numerator, denominator = int(match[1]), int(match[2])
        if not 0 < numerator < denominator <= 10:
            return match.group()
        return language.fraction(numerator, denominator)

    return Rule(pattern, say)


def _range(language: Language) -> Rule:
    pattern = re.compile(rf"{numeral(language, 'a')}(?:{_DASH}|\s[–~〜～]\s){numeral(language, 'b')}(?!{_DASH}[0-9])")
    return Rule(pattern, lambda m: language.range(plain(m, "a"), plain(m, "b"), None, word_before(m)))


def _slashes(language: Language) -> tuple[Rule, ...]:
    """Slashes between numbers: "24/7" is said with the language's slash, "1st/2nd" with its "or"."""
    between_numbers = re.compile(r"/(?<=[0-9]/)(?=[0-9])")
    after_ordinal = re.compile(r"/(?=[0-9])(?:(?<=[0-9][^\W\d_]/)|(?<=[0-9][^\W\d_]{2}/))")
    return (
        Rule(after_ordinal, lambda m: f" {language.alternative} "),
        Rule(between_numbers, lambda m: f" {language.web_words['/']} "),
    )


def _signs(language: Language) -> tuple[Rule, ...]:
    """#1, #tag and @user (after a digit too: a second pass would find it after the digit's words)."""
    number_sign = re.compile(rf"#(?<![{_SPACED_ALNUM}_&#]#)\s?{numeral(language, 'a')}")
    hashtag = re.compile(rf"#(?<![{_SPACED_LETTER}_&#]#)(?=[^\W\d_])")
    mention = re.compile(rf"@(?<![{_SPACED_LETTER}_.@]@)(?=\w)")
    return (
        Rule(number_sign, lambda m: language.number_sign.format(language.number(plain(m, "a")))),
        Rule(hashtag, lambda m: f"{language.hashtag} ", needs_digit=False),
        Rule(mention, lambda m: f"{language.mention} ", needs_digit=False),
    )


def abbreviations(
    table: dict[str, str], before_number: frozenset[str] = frozenset(), sentence_final: frozenset[str] = frozenset()
) -> Rule:
    """Written abbreviations (keys as written, with their dot); those in `before_number` ("No.") only expand
    before a number; those in `sentence_final` ("etc.") keep their dot where they end a sentence."""
    keys = "|".join(re.escape(key) for key in sorted(table, key=len, reverse=True))
    pattern = re.compile(rf"(?<![^\W\d_])(?<!\.)({keys})(?![^\W\d_])")

    def say(match: re.Match[str]) -> str:
        key, text, end = match[1], match.string, match.end()
        if key in before_number and not _NUMBER_NEXT.match(text, end):
            return key
        ends = key in sentence_final and _SENTENCE_NEXT.match(text, end)
        return table[key] + ("." if ends else "")

    return Rule(pattern, say, needs_digit=False)


def _number(language: Language) -> Rule:
    def say(match: re.Match[str]) -> str:
        whole = match["a_int"] or ""
        if len(whole) >= 10 and not match["a_frac"] and not match["a_sign"]:
            return language.phone(False, [whole])  # an identifier or a phone number written without spaces
        return language.number(plain(match, "a"))

    return Rule(re.compile(numeral(language, "a")), say)


def _symbols(language: Language) -> Rule:
    """& + = and the like, wherever they stand."""
    pattern = re.compile("|".join(map(re.escape, language.symbols)))
    return Rule(pattern, lambda m: language.symbols[m.group()], needs_digit=False)
