"""German: num2words for numbers, "1.234,5" numerals, ordinals written "15." inflected by the word before."""

from __future__ import annotations

import re

from .language import CURRENCY_SIGNS, UNIT_SIGNS, Currency, Language, Rule, by_sign, noun, spell
from .shared_rules import abbreviations, word_before

_MONTHS = [
    "Januar", "Februar", "März", "April", "Mai", "Juni", "Juli", "August", "September", "Oktober", "November",
    "Dezember"
]  # fmt: skip
_WEAK = frozenset(
    ["am", "im", "vom", "zum", "beim", "zur", "dem", "den", "des", "einem", "einen", "eines", "ab", "seit", "bis"]
)  # -> fünfzehnten
_STRONG = frozenset(["der", "die", "das"])  # -> fünfzehnte; no article: fünfzehnter
_YEAR_CUES = frozenset(["jahr", "jahre", "jahres", "seit", "bis", "von", "ab", "um", "anno", "im"]) | {
    m.lower() for m in _MONTHS
}
_ABBREVIATIONS = {
    "Dr.": "Doktor", "Prof.": "Professor", "Hr.": "Herr", "Fr.": "Frau", "St.": "Sankt", "Str.": "Straße",
    "z.B.": "zum Beispiel", "z. B.": "zum Beispiel", "d.h.": "das heißt", "d. h.": "das heißt",
    "bzw.": "beziehungsweise", "usw.": "und so weiter", "ca.": "circa", "evtl.": "eventuell",
    "ggf.": "gegebenenfalls", "inkl.": "inklusive", "u.a.": "unter anderem", "Nr.": "Nummer", "vs.": "versus",
    "Mio.": "Millionen", "Mrd.": "Milliarden",
}  # fmt: skip

_CURRENCIES = {
    "USD": Currency(noun("Dollar", "Dollar"), noun("Cent", "Cent")),
    "EUR": Currency(noun("Euro", "Euro"), noun("Cent", "Cent")),
    "GBP": Currency(noun("Pfund", "Pfund", gender="n"), noun("Penny", "Pence")),
    "JPY": Currency(noun("Yen", "Yen")),
    "CNY": Currency(noun("Yuan", "Yuan")),
    "KRW": Currency(noun("Won", "Won")),
    "RUB": Currency(noun("Rubel", "Rubel"), noun("Kopeke", "Kopeken", gender="f")),
    "INR": Currency(noun("Rupie", "Rupien", gender="f"), noun("Paisa", "Paise")),
    "BRL": Currency(noun("Real", "Reais"), noun("Centavo", "Centavos")),
}
_FEMININE = {"h": ("Stunde", "Stunden"), "min": ("Minute", "Minuten"), "s": ("Sekunde", "Sekunden"),
             "ms": ("Millisekunde", "Millisekunden"), "mi": ("Meile", "Meilen"),
             "kWh": ("Kilowattstunde", "Kilowattstunden")}  # fmt: skip
_NEUTER = {"kg": "Kilogramm", "g": "Gramm", "mg": "Milligramm", "%": "Prozent", "°C": "Grad Celsius",
           "°F": "Grad Fahrenheit", "°": "Grad", "W": "Watt", "kW": "Kilowatt", "V": "Volt"}  # fmt: skip
_MASCULINE = {"km": "Kilometer", "m": "Meter", "cm": "Zentimeter", "mm": "Millimeter", "l": "Liter",
              "ml": "Milliliter", "km/h": "Kilometer pro Stunde", "m/s": "Meter pro Sekunde",
              "mph": "Meilen pro Stunde", "ft": "Fuß", "KB": "Kilobyte", "MB": "Megabyte", "GB": "Gigabyte",
              "TB": "Terabyte", "Hz": "Hertz", "kHz": "Kilohertz", "MHz": "Megahertz", "GHz": "Gigahertz"}  # fmt: skip
_UNITS = (
    {key: noun(*forms, gender="f") for key, forms in _FEMININE.items()}
    | {key: noun(word, gender="n") for key, word in _NEUTER.items()}
    | {key: noun(word) for key, word in _MASCULINE.items()}
)


class German(Language):
    name = "german"
    code = "de"
    decimal_mark = ","
    group_marks = ".\u00a0\u202f"
    point = "Komma"
    range_word = "bis"
    money_and = "und"
    hashtag = "Hashtag"
    number_sign = "Nummer {}"
    alternative = "oder"
    digit_words = ("null", "eins", "zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun")
    months = tuple(_MONTHS)
    currencies = by_sign(_CURRENCIES, CURRENCY_SIGNS)
    units = by_sign(_UNITS | {"Std.": _UNITS["h"], "Sek.": _UNITS["s"]}, UNIT_SIGNS)
    symbols = {"&": "und", "+": "plus", "=": "gleich", "×": "mal"}
    web_words = {
        ".": "Punkt", "/": "Slash", ":": "Doppelpunkt", "@": "at", "-": "Bindestrich", "_": "Unterstrich",
        "?": "Fragezeichen", "=": "gleich", "&": "und", "#": "Raute", "%": "Prozent", "+": "plus", "~": "Tilde",
    }  # fmt: skip

    def cardinal(self, n: int, gender: str = "") -> str:
        if n == 1 and gender:
            return "eine" if gender == "f" else "ein"
        return spell(n, "de")

    def year(self, n: int) -> str:
        return spell(n, "de", to="year") if 1100 <= n <= 1999 else self.cardinal(n)

    def inflected_ordinal(self, n: int, before: str) -> str:
        """The ending the word before asks: "der fünfzehnte", "am fünfzehnten", "fünfzehnter Januar"."""
        ending = "n" if before in _WEAK else "" if before in _STRONG else "r"
        return self.ordinal(n) + ending

    def date(self, year: int, month: int, day: int, before: str) -> str:
        return f"{self.inflected_ordinal(day, before)} {self.months[month - 1]} {self.year(year)}"

    def time(self, hour: int, minute: int, second: int | None) -> str:
        words = f"{'ein' if hour == 1 else self.cardinal(hour)} Uhr"
        if minute:
            words += f" {self.cardinal(minute)}"
        return f"{words} und {self.amount(str(second), _UNITS['s'])}" if second is not None else words

    def status_code(self, code: str) -> str:
        return self.digits(code)

    def fraction(self, numerator: int, denominator: int) -> str:
        name = "halb" if denominator == 2 else self.ordinal(denominator)[:-1].capitalize() + "el"
        return f"{self.cardinal(numerator, 'n')} {name}"

    def rules(self) -> tuple[Rule, ...]:
        return (
            abbreviations(_ABBREVIATIONS, frozenset({"Nr."}), frozenset({"usw.", "ca."})),
            Rule(_ORDINAL, self._ordinal),
            Rule(_YEAR, self._year),
        )

    def late_rules(self) -> tuple[Rule, ...]:
        return (Rule(_ONE_BEFORE_NOUN, self._one_before_noun),)

    def _one_before_noun(self, match: re.Match[str]) -> str:
        """ "1 Stunde" is "eine Stunde", "1 Tag" "ein Tag": the noun's gender guessed from its ending."""
        noun = match["noun"].lower()
        return "eine" if noun.endswith(_FEMININE_ENDINGS) or noun in _FEMININE_NOUNS else "ein"

    def _ordinal(self, match: re.Match[str]) -> str:
        before = word_before(match)
        if match["month"] is None and before not in _WEAK | _STRONG:
            return match.group()
        return self.inflected_ordinal(int(match["n"]), before) + (f" {match['month']}" if match["month"] else "")

    def _year(self, match: re.Match[str]) -> str:
        return self.year(int(match.group())) if word_before(match) in _YEAR_CUES else match.group()


_ORDINAL = re.compile(rf"(?<![0-9.,])(?P<n>[0-9]{{1,3}})\.(?:\s(?P<month>{'|'.join(_MONTHS)})\b|(?=\s[^\W\d_]))")
_ONE_BEFORE_NOUN = re.compile(r"(?<![0-9.,\-−])1(?![0-9.,])(?=\s(?P<noun>[A-ZÄÖÜ][a-zäöüß]+))")
_FEMININE_ENDINGS = ("e", "ung", "heit", "keit", "schaft", "ion", "tät", "ik", "ei", "enz", "anz", "son")
_FEMININE_NOUNS = frozenset({"frau", "hand", "stadt", "nacht", "zeit", "welt", "tür", "wahl", "zahl", "kraft"})
_YEAR = re.compile(r"(?<![0-9.,])1[1-9][0-9]{2}(?![0-9]|[.,:/-][0-9])")

LANGUAGE = German()
