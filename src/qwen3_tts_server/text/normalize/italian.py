"""Italian: num2words for numbers, "1.234,5" numerals, 1º/1ª ordinals, "primo gennaio"."""

from __future__ import annotations

import re

from .language import CURRENCY_SIGNS, UNIT_SIGNS, Currency, Rule, by_sign, noun, spell
from .romance import Romance, units
from .shared_rules import abbreviations

_MONTHS = [
    "gennaio", "febbraio", "marzo", "aprile", "maggio", "giugno", "luglio", "agosto", "settembre", "ottobre",
    "novembre", "dicembre"
]  # fmt: skip
_FRACTIONS = {2: "mezz", 3: "terz", 4: "quart"}
_ABBREVIATIONS = {
    "Sig.": "signor", "Sig.ra": "signora", "Sigg.": "signori", "Dott.": "dottor", "Dott.ssa": "dottoressa",
    "Prof.": "professor", "Prof.ssa": "professoressa", "Avv.": "avvocato", "Ing.": "ingegner", "ecc.": "eccetera",
    "es.": "esempio", "pag.": "pagina", "tel.": "telefono", "n.": "numero", "ca.": "circa",
}  # fmt: skip
_CURRENCIES = {
    "USD": Currency(noun("dollaro", "dollari"), noun("centesimo", "centesimi")),
    "EUR": Currency(noun("euro", "euro"), noun("centesimo", "centesimi")),
    "GBP": Currency(noun("sterlina", "sterline", gender="f"), noun("penny", "pence")),
    "JPY": Currency(noun("yen", "yen")),
    "CNY": Currency(noun("yuan", "yuan")),
    "KRW": Currency(noun("won", "won")),
    "RUB": Currency(noun("rublo", "rubli"), noun("copeco", "copechi")),
    "INR": Currency(noun("rupia", "rupie", gender="f"), noun("paisa", "paisa")),
    "BRL": Currency(noun("real", "reais"), noun("centavo", "centavos")),
}
_UNITS = units(
    {
        "km": ("chilometro", "chilometri"), "m": ("metro", "metri"), "cm": ("centimetro", "centimetri"),
        "mm": ("millimetro", "millimetri"), "kg": ("chilogrammo", "chilogrammi"), "g": ("grammo", "grammi"),
        "mg": ("milligrammo", "milligrammi"), "l": ("litro", "litri"), "ml": ("millilitro", "millilitri"),
        "km/h": ("chilometro orario", "chilometri orari"), "m/s": ("metro al secondo", "metri al secondo"),
        "mi": ("miglio", "miglia"), "ft": ("piede", "piedi"), "min": ("minuto", "minuti"), "s": ("secondo", "secondi"),
        "ms": ("millisecondo", "millisecondi"), "KB": ("kilobyte", "kilobyte"), "MB": ("megabyte", "megabyte"),
        "GB": ("gigabyte", "gigabyte"), "TB": ("terabyte", "terabyte"), "Hz": ("hertz", "hertz"),
        "kHz": ("kilohertz", "kilohertz"), "MHz": ("megahertz", "megahertz"), "GHz": ("gigahertz", "gigahertz"),
        "W": ("watt", "watt"), "kW": ("kilowatt", "kilowatt"), "kWh": ("kilowattora", "kilowattora"),
        "V": ("volt", "volt"), "°C": ("grado Celsius", "gradi Celsius"), "°F": ("grado Fahrenheit", "gradi Fahrenheit"),
        "°": ("grado", "gradi"),
    },
    {"h": ("ora", "ore"), "mph": ("miglio orario", "miglia orarie")},
) | {"%": noun("per cento", gender="")}  # fmt: skip


class Italian(Romance):
    name = "italian"
    code = "it"
    point = "virgola"
    minus = "meno"
    range_from = "da"
    range_word = "a"
    money_and = "e"
    mention = "chiocciola"
    number_sign = "numero {}"
    alternative = "o"
    first_day = "primo"
    prepositions = frozenset({
        "per", "di", "a", "da", "in", "con", "su", "tra", "fra", "verso", "del", "al", "dal", "nel", "sul", "dei", "ai",
        "dai", "nei", "sui"
    })  # fmt: skip
    feminine_endings = ("a", "ione", "tà", "tù")
    feminine_plural_endings = ("e", "ioni", "tà", "tù")
    big_words = ("milione", "milioni", "miliardo", "miliardi")
    digit_words = ("zero", "uno", "due", "tre", "quattro", "cinque", "sei", "sette", "otto", "nove")
    months = tuple(_MONTHS)
    currencies = by_sign(_CURRENCIES, CURRENCY_SIGNS)
    units = by_sign(_UNITS, UNIT_SIGNS)
    symbols = {"&": "e", "+": "più", "=": "uguale", "×": "per"}
    web_words = {
        ".": "punto", "/": "slash", ":": "due punti", "@": "chiocciola", "-": "trattino", "_": "trattino basso",
        "?": "punto interrogativo", "=": "uguale", "&": "e commerciale", "#": "cancelletto", "%": "percento",
        "+": "più", "~": "tilde",
    }  # fmt: skip

    def agree(self, words: str, gender: str) -> str:
        return {"uno": "una" if gender == "f" else "un"}.get(words, words)

    def of(self, form: str) -> str:
        return f"di {form}"

    def time(self, hour: int, minute: int, second: int | None) -> str:
        words = self.cardinal(hour, "f")
        if minute:
            words += f" e {self.cardinal(minute)}"
        return f"{words} e {self.amount(str(second), _UNITS['s'])}" if second is not None else words

    def fraction_name(self, denominator: int, plural: bool) -> str:
        if denominator in _FRACTIONS:
            return _FRACTIONS[denominator] + ("i" if plural else "o")
        name = spell(denominator, "it", to="ordinal")
        return name[:-1] + "i" if plural else name

    def rules(self) -> tuple[Rule, ...]:
        return (
            abbreviations(_ABBREVIATIONS, frozenset({"n."}), frozenset({"ecc."})),
            Rule(_ORDINAL, lambda m: self.ordinal(int(m["n"]))[:-1] + ("a" if m["mark"] == "ª" else "o")),
            Rule(_FIRST_OF_MONTH, lambda m: "primo"),
        )


_ORDINAL = re.compile(r"(?<![0-9.,])(?P<n>[0-9]{1,4})(?P<mark>[ºª])")
_FIRST_OF_MONTH = re.compile(rf"(?<![0-9.,])1(?=\s(?:{'|'.join(_MONTHS)})\b)")

LANGUAGE = Italian()
