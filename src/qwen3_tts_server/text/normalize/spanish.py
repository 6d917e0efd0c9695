"""Spanish: num2words for numbers (with "veintiún mil" where it says "veintiuno mil"), "1.234,5" numerals,
ordinals written 1.º / 1.ª, numbers agreeing with feminine nouns ("doscientas horas")."""

from __future__ import annotations

import re

from .language import CURRENCY_SIGNS, UNIT_SIGNS, Currency, Rule, by_sign, noun
from .romance import Romance, units
from .shared_rules import abbreviations

_MONTHS = [
    "enero", "febrero", "marzo", "abril", "mayo", "junio", "julio", "agosto", "septiembre", "octubre", "noviembre",
    "diciembre"
]  # fmt: skip
_FRACTIONS = {2: "medio", 3: "tercio", 4: "cuarto", 10: "décimo"}
_ABBREVIATIONS = {
    "Sr.": "señor", "Sra.": "señora", "Srta.": "señorita", "Dr.": "doctor", "Dra.": "doctora", "Ud.": "usted",
    "Uds.": "ustedes", "etc.": "etcétera", "p. ej.": "por ejemplo", "aprox.": "aproximadamente",
    "EE. UU.": "Estados Unidos", "EE.UU.": "Estados Unidos", "Avda.": "avenida", "núm.": "número",
    "n.º": "número", "nº": "número", "pág.": "página", "tel.": "teléfono",
}  # fmt: skip
_CURRENCIES = {
    "USD": Currency(noun("dólar", "dólares"), noun("centavo", "centavos")),
    "EUR": Currency(noun("euro", "euros"), noun("céntimo", "céntimos")),
    "GBP": Currency(noun("libra", "libras", gender="f"), noun("penique", "peniques")),
    "JPY": Currency(noun("yen", "yenes")),
    "CNY": Currency(noun("yuan", "yuanes")),
    "KRW": Currency(noun("won", "wones")),
    "RUB": Currency(noun("rublo", "rublos"), noun("kópek", "kópeks")),
    "INR": Currency(noun("rupia", "rupias", gender="f"), noun("paisa", "paisas")),
    "BRL": Currency(noun("real", "reales"), noun("centavo", "centavos")),
}
_UNITS = units(
    {
        "km": ("kilómetro", "kilómetros"), "m": ("metro", "metros"), "cm": ("centímetro", "centímetros"),
        "mm": ("milímetro", "milímetros"), "kg": ("kilogramo", "kilogramos"), "g": ("gramo", "gramos"),
        "mg": ("miligramo", "miligramos"), "l": ("litro", "litros"), "ml": ("mililitro", "mililitros"),
        "km/h": ("kilómetro por hora", "kilómetros por hora"), "m/s": ("metro por segundo", "metros por segundo"),
        "ft": ("pie", "pies"), "min": ("minuto", "minutos"), "s": ("segundo", "segundos"),
        "ms": ("milisegundo", "milisegundos"), "KB": ("kilobyte", "kilobytes"), "MB": ("megabyte", "megabytes"),
        "GB": ("gigabyte", "gigabytes"), "TB": ("terabyte", "terabytes"), "Hz": ("hercio", "hercios"),
        "kHz": ("kilohercio", "kilohercios"), "MHz": ("megahercio", "megahercios"),
        "GHz": ("gigahercio", "gigahercios"), "W": ("vatio", "vatios"), "kW": ("kilovatio", "kilovatios"),
        "kWh": ("kilovatio hora", "kilovatios hora"), "V": ("voltio", "voltios"), "%": ("por ciento", "por ciento"),
        "°C": ("grado Celsius", "grados Celsius"), "°F": ("grado Fahrenheit", "grados Fahrenheit"),
        "°": ("grado", "grados"),
    },
    {"h": ("hora", "horas"), "mi": ("milla", "millas"), "mph": ("milla por hora", "millas por hora")},
)  # fmt: skip


class Spanish(Romance):
    name = "spanish"
    code = "es"
    point = "coma"
    minus = "menos"
    range_word = "a"
    money_and = "con"
    mention = "arroba"
    number_sign = "número {}"
    alternative = "o"
    date_of = "de "
    first_day = "uno"
    prepositions = frozenset(
        ["por", "para", "de", "a", "en", "con", "sin", "entre", "hasta", "desde", "durante", "sobre", "hacia"]
    )
    feminine_endings = ("a", "ión", "dad", "tad", "tud", "umbre")
    feminine_plural_endings = ("as", "iones", "dades", "tades", "tudes", "umbres")
    big_words = ("millón", "millones", "billón", "billones")
    digit_words = ("cero", "uno", "dos", "tres", "cuatro", "cinco", "seis", "siete", "ocho", "nueve")
    months = tuple(_MONTHS)
    currencies = by_sign(_CURRENCIES, CURRENCY_SIGNS)
    units = by_sign(_UNITS, UNIT_SIGNS)
    symbols = {"&": "y", "+": "más", "=": "igual a", "×": "por"}
    web_words = {
        ".": "punto", "/": "barra", ":": "dos puntos", "@": "arroba", "-": "guion", "_": "guion bajo",
        "?": "signo de interrogación", "=": "igual", "&": "y", "#": "almohadilla", "%": "por ciento", "+": "más",
        "~": "virgulilla",
    }  # fmt: skip

    def cardinal(self, n: int, gender: str = "") -> str:
        words = super().cardinal(n, gender)
        return _BEFORE_THOUSANDS.sub(lambda m: ("veintiún " if m[1] else "un ") + m[2], words)

    def agree(self, words: str, gender: str) -> str:
        if gender == "f":
            return _UNO.sub("una", words.replace("ientos", "ientas"))
        return _UNO.sub("ún", words) if words.endswith("veintiuno") else _UNO.sub("un", words)

    def time(self, hour: int, minute: int, second: int | None) -> str:
        words = self.cardinal(hour, "f")
        words += f" y {self.cardinal(minute)}" if minute else " en punto"
        return f"{words} y {self.amount(str(second), _UNITS['s'])}" if second is not None else words

    def fraction_name(self, denominator: int, plural: bool) -> str:
        name = _FRACTIONS.get(denominator) or super().fraction_name(denominator, False)
        return name + ("s" if plural else "")

    def rules(self) -> tuple[Rule, ...]:
        return (
            abbreviations(_ABBREVIATIONS, frozenset({"núm.", "n.º", "nº"}), frozenset({"etc."})),
            Rule(_ORDINAL, self._ordinal),
        )

    def _ordinal(self, match: re.Match[str]) -> str:
        words = self.ordinal(int(match["n"]))
        if match["mark"] == "ª":
            return re.sub(r"o\b", "a", words)
        before_noun = match["mark"] == "er" or _NOUN_NEXT.match(match.string, match.end())
        return re.sub(r"(primer|tercer)o$", r"\1", words) if before_noun else words


_UNO = re.compile(r"uno$")
_NOUN_NEXT = re.compile(r"\s+[a-záéíóúñ]")
_BEFORE_THOUSANDS = re.compile(r"\b(veinti|)uno (mil|millones)\b")
_ORDINAL = re.compile(r"(?<![0-9.,])(?P<n>[0-9]{1,3})\.?(?P<mark>[ºª]|er(?![^\W\d_]))")

LANGUAGE = Spanish()
