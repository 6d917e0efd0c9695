"""What French, Spanish, Italian and Portuguese share: decimal commas with the fraction read as a number
("tres coma catorce"), "de X a Y" ranges, "un millón de dólares", numbers agreeing with feminine nouns, and
a number before any other noun agreeing with the gender its ending suggests ("duas pessoas")."""

from __future__ import annotations

import re

from .language import Language, Noun, Rule, noun, spell

_COUNT_BEFORE_WORD = re.compile(r"(?<![0-9.,\-−])(?P<n>[0-9]{1,9})(?![0-9.,])(?=\s+(?P<word>[^\W\d_]{3,}))")
_NOT_NOUNS = {
    "del", "des", "dos", "das", "dei", "por", "para", "per", "pour", "que", "che", "della", "delle", "degli",
    "avec", "con", "com", "sin", "sem", "sur", "sous", "entre", "mil", "mille",
}  # fmt: skip
_MASCULINE_IN_A = {
    "día", "días", "dia", "dias", "mapa", "mapas", "problema", "problemas", "problemi", "sistema", "sistemas",
    "sistemi", "tema", "temas", "temi", "programa", "programas", "programma", "programmi", "idioma", "idiomas",
    "clima", "planeta", "planetas", "pianeta", "cinema",
}  # fmt: skip


class Romance(Language):
    decimal_mark = ","
    group_marks = ".\u00a0\u202f"  # and no plain space: "912 345 678" is a Spanish phone number
    range_from = "de"
    date_of = ""  # "quince de enero de ..." in Spanish and Portuguese
    first_day = ""  # how the 1st of a month is said
    prepositions: frozenset[str] = frozenset()  # after which a range is "3 a 5", not "de 3 a 5"
    feminine_endings: tuple[str, ...] = ()  # of nouns in the singular, for 1
    feminine_plural_endings: tuple[str, ...] = ()

    def cardinal(self, n: int, gender: str = "") -> str:
        words = spell(n, self.code).replace(",", "")
        return self.agree(words, gender) if gender else words

    def agree(self, words: str, gender: str) -> str:
        """A cardinal before a noun: "un"/"una" rather than "uno"."""
        return words

    def fraction_digits(self, digits: str) -> str:
        return self.number_after_zeros(digits) if len(digits) <= 3 else self.digits(digits)

    def range(self, first: str, last: str, unit: Noun | None, before: str = "") -> str:
        head = self.number(first, unit.gender if unit else "")
        tail = self.amount(last, unit) if unit else self.number(last)
        start = "" if before in self.prepositions else f"{self.range_from} "
        return f"{start}{head} {self.range_word} {tail}"

    def date(self, year: int, month: int, day: int, before: str) -> str:
        said_day = self.first_day if day == 1 else self.cardinal(day)
        return f"{said_day} {self.date_of}{self.months[month - 1]} {self.date_of}{self.year(year)}"

    def fraction_name(self, denominator: int, plural: bool) -> str:
        return spell(denominator, self.code, to="ordinal") + ("s" if plural else "")

    def fraction(self, numerator: int, denominator: int) -> str:
        return f"{self.cardinal(numerator, 'm')} {self.fraction_name(denominator, numerator > 1)}"

    def count_before_word(self, match: re.Match[str]) -> str:
        word, n = match["word"].lower(), match["n"]
        if word in _NOT_NOUNS or any(said.startswith(word) for said in self.symbols.values()):
            return match.group()  # "1 + 2" has become "1 más 2"
        endings = self.feminine_endings if n == "1" else self.feminine_plural_endings
        feminine = word.endswith(endings) and word not in _MASCULINE_IN_A
        return self.whole(n, "f" if feminine else "m")

    def late_rules(self) -> tuple[Rule, ...]:
        return (Rule(_COUNT_BEFORE_WORD, self.count_before_word),)


def units(masculine: dict[str, tuple[str, str]], female: dict[str, tuple[str, str]]) -> dict[str, Noun]:
    """Unit tables by gender -> one table of nouns."""
    return {key: noun(*forms) for key, forms in masculine.items()} | {
        key: noun(*forms, gender="f") for key, forms in female.items()
    }
