"""French: num2words for numbers, "1 234,5" numerals, "10h30" times, 1er/2e ordinals, phone numbers read in
pairs ("zéro un, vingt-trois, ..."), singular nouns below two ("1,5 kilomètre")."""

from __future__ import annotations

import re

from .language import CURRENCY_SIGNS, UNIT_SIGNS, Currency, Noun, Rule, by_sign, noun, spell
from .romance import Romance, units
from .shared_rules import abbreviations

_MONTHS = [
    "janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août", "septembre", "octobre", "novembre",
    "décembre"
]  # fmt: skip
_FRACTIONS = {2: "demi", 3: "tiers", 4: "quart"}
_ABBREVIATIONS = {
    "MM.": "Messieurs", "Mme": "Madame", "Mmes": "Mesdames", "Mlle": "Mademoiselle", "Dr": "Docteur",
    "Dr.": "Docteur", "Pr": "Professeur", "etc.": "et cetera", "p. ex.": "par exemple", "av.": "avenue",
    "bd": "boulevard", "St": "Saint", "Ste": "Sainte", "env.": "environ", "cf.": "confer",
}  # fmt: skip
_CURRENCIES = {
    "USD": Currency(noun("dollar", "dollars"), noun("cent", "cents")),
    "EUR": Currency(noun("euro", "euros"), noun("centime", "centimes")),
    "GBP": Currency(noun("livre sterling", "livres sterling", gender="f"), noun("penny", "pence")),
    "JPY": Currency(noun("yen", "yens")),
    "CNY": Currency(noun("yuan", "yuans")),
    "KRW": Currency(noun("won", "wons")),
    "RUB": Currency(noun("rouble", "roubles"), noun("kopeck", "kopecks")),
    "INR": Currency(noun("roupie", "roupies", gender="f"), noun("paisa", "paisas")),
    "BRL": Currency(noun("réal", "réaux"), noun("centavo", "centavos")),
}
_UNITS = units(
    {
        "km": ("kilomètre", "kilomètres"), "m": ("mètre", "mètres"), "cm": ("centimètre", "centimètres"),
        "mm": ("millimètre", "millimètres"), "kg": ("kilogramme", "kilogrammes"), "g": ("gramme", "grammes"),
        "mg": ("milligramme", "milligrammes"), "l": ("litre", "litres"), "ml": ("millilitre", "millilitres"),
        "km/h": ("kilomètre à l'heure", "kilomètres à l'heure"), "m/s": ("mètre par seconde", "mètres par seconde"),
        "mph": ("mile à l'heure", "miles à l'heure"), "mi": ("mile", "miles"), "ft": ("pied", "pieds"),
        "ko": ("kilooctet", "kilooctets"), "Mo": ("mégaoctet", "mégaoctets"), "Go": ("gigaoctet", "gigaoctets"),
        "To": ("téraoctet", "téraoctets"), "KB": ("kilooctet", "kilooctets"), "MB": ("mégaoctet", "mégaoctets"),
        "GB": ("gigaoctet", "gigaoctets"), "TB": ("téraoctet", "téraoctets"), "Hz": ("hertz", "hertz"),
        "kHz": ("kilohertz", "kilohertz"), "MHz": ("mégahertz", "mégahertz"), "GHz": ("gigahertz", "gigahertz"),
        "W": ("watt", "watts"), "kW": ("kilowatt", "kilowatts"), "kWh": ("kilowattheure", "kilowattheures"),
        "V": ("volt", "volts"), "%": ("pour cent", "pour cent"), "°C": ("degré Celsius", "degrés Celsius"),
        "°F": ("degré Fahrenheit", "degrés Fahrenheit"), "°": ("degré", "degrés"),
    },
    {"h": ("heure", "heures"), "min": ("minute", "minutes"), "s": ("seconde", "secondes"),
     "ms": ("milliseconde", "millisecondes")},
)  # fmt: skip


class French(Romance):
    name = "french"
    code = "fr"
    group_marks = " \u00a0\u202f\u2009."
    point = "virgule"
    minus = "moins"
    range_word = "à"
    money_and = "et"
    mention = "arobase"
    number_sign = "numéro {}"
    alternative = "ou"
    first_day = "premier"
    prepositions = frozenset({
        "pour", "de", "à", "en", "par", "sur", "dans", "avec", "sans", "entre", "vers", "chez", "après", "avant",
        "depuis", "pendant"
    })  # fmt: skip
    feminine_endings = ("tion", "sion", "té", "ette", "ure", "ence", "ance", "ine", "onne", "elle")
    feminine_plural_endings = ("tions", "sions", "tés", "ettes", "ures", "ences", "ances", "ines", "onnes", "elles")
    big_words = ("million", "millions", "milliard", "milliards")
    digit_words = ("zéro", "un", "deux", "trois", "quatre", "cinq", "six", "sept", "huit", "neuf")
    months = tuple(_MONTHS)
    currencies = by_sign(_CURRENCIES, CURRENCY_SIGNS)
    units = by_sign(_UNITS, UNIT_SIGNS)
    symbols = {"&": "et", "+": "plus", "=": "égale", "×": "fois"}
    web_words = {
        ".": "point", "/": "slash", ":": "deux-points", "@": "arobase", "-": "tiret", "_": "tiret bas",
        "?": "point d'interrogation", "=": "égal", "&": "et", "#": "dièse", "%": "pour cent", "+": "plus",
        "~": "tilde",
    }  # fmt: skip

    def agree(self, words: str, gender: str) -> str:
        return re.sub(r"\bun$", "une", words) if gender == "f" else words

    def form(self, plain: str, noun: Noun) -> str:
        return noun.forms[0] if abs(float(plain)) < 2 else noun.forms[-1]

    def of(self, form: str) -> str:
        return f"d'{form}" if form[0] in "aeéiouy" else f"de {form}"

    def ordinal(self, n: int) -> str:
        return spell(n, "fr", to="ordinal")

    def time(self, hour: int, minute: int, second: int | None) -> str:
        words = "une heure" if hour == 1 else f"{self.cardinal(hour, 'f')} heures"
        if minute:
            words += f" {self.cardinal(minute)}"
        return f"{words} et {self.amount(str(second), _UNITS['s'])}" if second is not None else words

    def phone(self, plus: bool, groups: list[str]) -> str:
        spoken = [self.number_after_zeros(group) if len(group) == 2 else self.digits(group) for group in groups]
        if plus:
            spoken[0] = f"plus {self.cardinal(int(groups[0]))}"
        return self.list_separator.join(spoken)

    def fraction_name(self, denominator: int, plural: bool) -> str:
        name = _FRACTIONS.get(denominator) or spell(denominator, "fr", to="ordinal")
        return name + ("s" if plural and not name.endswith("s") else "")

    def rules(self) -> tuple[Rule, ...]:
        return (
            Rule(_MONSIEUR, lambda m: "Monsieur", needs_digit=False),
            Rule(_NUMERO, lambda m: "numéro "),
            abbreviations(_ABBREVIATIONS, sentence_final=frozenset({"etc."})),
            Rule(_CLOCK, lambda m: self.time(int(m[1]), int(m[2] or 0), None)),
            Rule(_ORDINAL, self._ordinal),
            Rule(_FIRST_OF_MONTH, lambda m: "premier"),
        )

    def _ordinal(self, match: re.Match[str]) -> str:
        n, suffix = int(match["n"]), match["suffix"]
        if n == 1:
            return "première" if suffix in ("re", "ère") else "premier"
        if suffix in ("d", "nd", "de", "nde"):
            return "second" if suffix in ("d", "nd") else "seconde"
        return self.ordinal(n) + ("s" if suffix.endswith("s") else "")


_MONSIEUR = re.compile(r"(?<![^\W\d_])(?<!\.)M\.(?=\s[A-ZÀ-Ö])")
_NUMERO = re.compile(r"(?<![^\W\d_])(?<!\.)[nN][°º]\s?(?=[0-9])")
_CLOCK = re.compile(r"(?<![0-9.,])([01]?[0-9]|2[0-4])\s?h(?:\s?([0-5][0-9]))?(?![^\W_])")
_ORDINAL = re.compile(r"(?<![0-9.,])(?P<n>[0-9]{1,4})(?P<suffix>ères?|res?|ers?|èmes?|es?|nde?|de?)(?![^\W\d_])")
_FIRST_OF_MONTH = re.compile(rf"(?<![0-9.,])1(?=\s(?:{'|'.join(_MONTHS)})\b)")

LANGUAGE = French()
