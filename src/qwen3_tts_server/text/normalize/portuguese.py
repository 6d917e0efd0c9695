"""Portuguese, as spoken in Brazil (num2words pt_BR: "dezesseis", "centavos"): "1.234,5" numerals, 1º/1ª
ordinals, numbers agreeing with feminine nouns ("duas horas", "duzentas pessoas")."""

from __future__ import annotations

import re

from .language import CURRENCY_SIGNS, UNIT_SIGNS, Currency, Rule, by_sign, noun
from .romance import Romance, units
from .shared_rules import abbreviations

_MONTHS = [
    "janeiro", "fevereiro", "março", "abril", "maio", "junho", "julho", "agosto", "setembro", "outubro", "novembro",
    "dezembro"
]  # fmt: skip
_FRACTIONS = {2: "meio", 3: "terço", 4: "quarto", 10: "décimo"}
_ABBREVIATIONS = {
    "Sr.": "senhor", "Sra.": "senhora", "Srta.": "senhorita", "Dr.": "doutor", "Dra.": "doutora",
    "Prof.": "professor", "Profa.": "professora", "etc.": "et cetera", "p. ex.": "por exemplo",
    "Av.": "avenida", "aprox.": "aproximadamente", "nº": "número", "n.º": "número", "pág.": "página",
}  # fmt: skip
_CURRENCIES = {
    "USD": Currency(noun("dólar", "dólares"), noun("centavo", "centavos")),
    "EUR": Currency(noun("euro", "euros"), noun("centavo", "centavos")),
    "GBP": Currency(noun("libra", "libras", gender="f"), noun("pêni", "pence")),
    "JPY": Currency(noun("iene", "ienes")),
    "CNY": Currency(noun("yuan", "yuans")),
    "KRW": Currency(noun("won", "wons")),
    "RUB": Currency(noun("rublo", "rublos"), noun("copeque", "copeques")),
    "INR": Currency(noun("rupia", "rupias", gender="f"), noun("paisa", "paisas")),
    "BRL": Currency(noun("real", "reais"), noun("centavo", "centavos")),
}
_UNITS = units(
    {
        "km": ("quilômetro", "quilômetros"), "m": ("metro", "metros"), "cm": ("centímetro", "centímetros"),
        "mm": ("milímetro", "milímetros"), "kg": ("quilograma", "quilogramas"), "g": ("grama", "gramas"),
        "mg": ("miligrama", "miligramas"), "l": ("litro", "litros"), "ml": ("mililitro", "mililitros"),
        "km/h": ("quilômetro por hora", "quilômetros por hora"), "m/s": ("metro por segundo", "metros por segundo"),
        "ft": ("pé", "pés"), "min": ("minuto", "minutos"), "s": ("segundo", "segundos"),
        "ms": ("milissegundo", "milissegundos"), "KB": ("kilobyte", "kilobytes"), "MB": ("megabyte", "megabytes"),
        "GB": ("gigabyte", "gigabytes"), "TB": ("terabyte", "terabytes"), "Hz": ("hertz", "hertz"),
        "kHz": ("quilohertz", "quilohertz"), "MHz": ("megahertz", "megahertz"), "GHz": ("gigahertz", "gigahertz"),
        "W": ("watt", "watts"), "kW": ("quilowatt", "quilowatts"), "kWh": ("quilowatt-hora", "quilowatts-hora"),
        "V": ("volt", "volts"), "%": ("por cento", "por cento"), "°C": ("grau Celsius", "graus Celsius"),
        "°F": ("grau Fahrenheit", "graus Fahrenheit"), "°": ("grau", "graus"),
    },
    {"h": ("hora", "horas"), "mi": ("milha", "milhas"), "mph": ("milha por hora", "milhas por hora")},
)  # fmt: skip


class Portuguese(Romance):
    name = "portuguese"
    code = "pt_BR"
    point = "vírgula"
    minus = "menos"
    range_word = "a"
    money_and = "e"
    mention = "arroba"
    number_sign = "número {}"
    alternative = "ou"
    date_of = "de "
    first_day = "primeiro"
    prepositions = frozenset({
        "por", "para", "de", "a", "em", "com", "sem", "entre", "até", "desde", "durante", "sobre", "do", "da", "no",
        "na", "ao", "pelo", "pela"
    })  # fmt: skip
    feminine_endings = ("a", "ção", "são", "dade", "gem")
    feminine_plural_endings = ("as", "ções", "sões", "dades", "gens")
    big_words = ("milhão", "milhões", "bilhão", "bilhões")
    digit_words = ("zero", "um", "dois", "três", "quatro", "cinco", "seis", "sete", "oito", "nove")
    months = tuple(_MONTHS)
    currencies = by_sign(_CURRENCIES, CURRENCY_SIGNS)
    units = by_sign(_UNITS, UNIT_SIGNS)
    symbols = {"&": "e", "+": "mais", "=": "igual a", "×": "vezes"}
    web_words = {
        ".": "ponto", "/": "barra", ":": "dois pontos", "@": "arroba", "-": "hífen", "_": "underline",
        "?": "ponto de interrogação", "=": "igual", "&": "e", "#": "hashtag", "%": "por cento", "+": "mais",
        "~": "til",
    }  # fmt: skip

    def agree(self, words: str, gender: str) -> str:
        if gender != "f":
            return words
        words = re.sub(r"\bum\b", "uma", re.sub(r"\bdois\b", "duas", words))
        return re.sub(r"entos\b", "entas", words)

    def time(self, hour: int, minute: int, second: int | None) -> str:
        if not minute:
            words = f"{self.amount(str(hour), _UNITS['h'])}"
        else:
            words = f"{self.cardinal(hour, 'f')} e {self.cardinal(minute)}"
        return f"{words} e {self.amount(str(second), _UNITS['s'])}" if second is not None else words

    def fraction_name(self, denominator: int, plural: bool) -> str:
        name = _FRACTIONS.get(denominator) or super().fraction_name(denominator, False)
        return name + ("s" if plural else "")

    def rules(self) -> tuple[Rule, ...]:
        return (
            abbreviations(_ABBREVIATIONS, frozenset({"nº", "n.º"}), frozenset({"etc."})),
            Rule(_ORDINAL, self._ordinal),
            Rule(_FIRST_OF_MONTH, lambda m: "primeiro"),
        )

    def _ordinal(self, match: re.Match[str]) -> str:
        words = self.ordinal(int(match["n"]))
        return re.sub(r"o\b", "a", words) if match["mark"] == "ª" else words


_ORDINAL = re.compile(r"(?<![0-9.,])(?P<n>[0-9]{1,4})\.?(?P<mark>[ºª])")
_FIRST_OF_MONTH = re.compile(rf"(?<![0-9.,])1(?=\sde\s(?:{'|'.join(_MONTHS)})\b)")

LANGUAGE = Portuguese()
