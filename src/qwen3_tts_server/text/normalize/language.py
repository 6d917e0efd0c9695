"""What every language module supplies to the shared rules: how numbers, amounts, dates, times and phone
numbers are said, and the word tables (currencies, units, symbols, how web addresses are read).

The defaults read numbers with num2words (`code`) the way most European languages do; a language overrides
what it says differently. Numerals reach these methods "plain": ASCII digits, an optional leading "-", and
"." before a fraction, whatever the text's own convention was.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar

V = TypeVar("V")


@dataclass(frozen=True)
class Noun:
    """A word counted by a number: its forms by number (singular, plural; Russian one, few, many; one form
    where nouns do not inflect) and the gender the number agrees with. A form containing "{}" is a template
    the number goes into (Chinese 百分之{})."""

    forms: tuple[str, ...]
    gender: str = "m"


def noun(*forms: str, gender: str = "m") -> Noun:
    return Noun(forms, gender)


@dataclass(frozen=True)
class Currency:
    unit: Noun
    cent: Noun | None = None  # None: fractions are read as decimals (yen, yuan, won)


CURRENCY_SIGNS = {
    "USD": ("$", "US$", "USD"),
    "EUR": ("€", "EUR"),
    "GBP": ("£", "GBP"),
    "JPY": ("¥", "￥", "JPY"),
    "CNY": ("CNY", "RMB"),
    "KRW": ("₩", "KRW"),
    "RUB": ("₽", "RUB"),
    "INR": ("₹", "INR"),
    "BRL": ("R$", "BRL"),
}
UNIT_SIGNS = {"l": ("l", "L"), "ml": ("ml", "mL"), "km/h": ("km/h", "kph"), "°C": ("°C", "℃"), "°F": ("°F", "℉")}


def by_sign(table: Mapping[str, V], signs: Mapping[str, tuple[str, ...]]) -> dict[str, V]:
    """A table keyed by ISO code or unit name, keyed instead by every way of writing it."""
    return {sign: value for key, value in table.items() for sign in signs.get(key, (key,))}


@dataclass(frozen=True)
class Rule:
    """A pattern and what a match is said as; `speak` may return the match unchanged to decline it. Most rules
    read numbers: they are skipped once no digit is left."""

    pattern: re.Pattern[str]
    speak: Callable[[re.Match[str]], str]
    needs_digit: bool = True


_num2words_lock = threading.Lock()


@lru_cache(maxsize=8192)
def spell(value: int | str, code: str, **options: str | bool) -> str:
    """num2words, imported on first use (about 50 ms and 4 MB); the same numbers come up again and again.
    Its converters are shared objects, so calls are serialised."""
    from num2words import num2words

    with _num2words_lock:
        return num2words(value, lang=code, **options)


def split_plain(plain: str) -> tuple[str, str, str]:
    """Split a plain numeral: "-1234.50" -> ("-", "1234", "50")."""
    sign = "-" if plain.startswith("-") else ""
    whole, _, fraction = plain.lstrip("-").partition(".")
    return sign, whole, fraction


class Language:
    name = ""
    code = ""  # num2words language
    decimal_mark = "."
    group_marks = ","  # characters written between groups of three digits
    day_first = True  # 15/01/2024 rather than 01/15/2024
    spaced = True  # words are separated by spaces (not so in Chinese and Japanese)
    point = "point"
    minus = "minus"
    range_word = "to"
    money_and = "and"
    list_separator = ", "
    mention = "at"
    hashtag = "hashtag"
    number_sign = "number {}"
    alternative = "or"  # 1st/2nd
    digit_words: tuple[str, ...] = ()
    months: tuple[str, ...] = ()
    currencies: Mapping[str, Currency] = {}
    units: Mapping[str, Noun] = {}
    symbols: Mapping[str, str] = {}  # & + = ... in running text
    web_words: Mapping[str, str] = {}  # . / : @ - _ ? = & # % + ~ in addresses
    big_words: tuple[str, ...] = ()  # words a cardinal can end in that take "de" before a noun (millón)
    scales: tuple[str, ...] = ()  # "$3.5 million"

    def rules(self) -> tuple[Rule, ...]:
        """The language's own rules, tried before the shared ones."""
        return ()

    def late_rules(self) -> tuple[Rule, ...]:
        """The language's own rules for numbers no shared rule has claimed, tried just before plain numbers."""
        return ()

    # Numbers

    def cardinal(self, n: int, gender: str = "") -> str:
        """`gender` is that of the noun counted, "" for a number standing alone."""
        return spell(n, self.code)

    def fraction_digits(self, digits: str) -> str:
        return self.digits(digits)

    def number(self, plain: str, gender: str = "") -> str:
        sign, whole, fraction = split_plain(plain)
        words = self.whole(whole, "" if fraction else gender)
        if fraction:
            words = f"{words} {self.point} {self.fraction_digits(fraction)}"
        return f"{self.minus} {words}" if sign else words

    def whole(self, digits: str, gender: str = "") -> str:
        """An integer as written: "007" keeps its zeros."""
        if len(digits) > 1 and digits.startswith("0") or len(digits) > 18:
            return self.digits(digits)
        return self.cardinal(int(digits), gender)

    def digits(self, digits: str) -> str:
        return " ".join(self.digit_words[int(d)] for d in digits)

    def ordinal(self, n: int) -> str:
        return spell(n, self.code, to="ordinal")

    def year(self, n: int) -> str:
        return self.cardinal(n)

    # Counted things

    def form(self, plain: str, noun: Noun) -> str:
        return noun.forms[0] if plain.lstrip("-") == "1" else noun.forms[-1]

    def amount(self, plain: str, noun: Noun) -> str:
        words, form = self.number(plain, noun.gender), self.form(plain, noun)
        if "{}" in form:
            return form.format(words)
        if self.big_words and words.endswith(self.big_words):
            return f"{words} {self.of(form)}"
        return f"{words} {form}" if self.spaced else words + form

    def of(self, form: str) -> str:
        """A noun after a cardinal ending in a big word: "un millón de dólares"."""
        return f"de {form}"

    def range(self, first: str, last: str, noun: Noun | None, before: str = "") -> str:
        """A range, "3-5"; `before` is the word in front, for languages that say "de 3 a 5" but "por 3 a 5"."""
        tail = self.amount(last, noun) if noun else self.number(last)
        return f"{self.number(first, noun.gender if noun else '')} {self.range_word} {tail}"

    def money(self, plain: str, currency: Currency, scale: str = "") -> str:
        """Whole units and cents ("five dollars and fifty cents"), or a decimal amount where there are no cents
        or more than two decimals; `scale` is a word written after the amount ("$3.5 million")."""
        sign, whole, cents = split_plain(plain)
        if scale:
            return f"{self.number(plain)} {scale} {currency.unit.forms[-1]}"
        if currency.cent is None or len(cents) > 2 or not cents:
            return self.amount(plain.rstrip("0").rstrip(".") if cents else plain, currency.unit)
        cents = str(int(cents.ljust(2, "0")))
        if cents == "0":
            return self.amount(sign + whole, currency.unit)
        if whole == "0":
            return self.amount(sign + cents, currency.cent)
        return f"{self.amount(sign + whole, currency.unit)} {self.money_and} {self.amount(cents, currency.cent)}"

    def fraction(self, numerator: int, denominator: int) -> str:
        """A proper fraction with a denominator up to ten: "1/2"."""
        raise NotImplementedError

    # Dates, times, phone numbers

    def date(self, year: int, month: int, day: int, before: str) -> str:
        """`before` is the word in front of the date, for languages whose day agrees with it."""
        raise NotImplementedError

    def time(self, hour: int, minute: int, second: int | None) -> str:
        """A time of day from "10:30" or "10:30:15"."""
        raise NotImplementedError

    def phone(self, plus: bool, groups: list[str]) -> str:
        spoken = [self.digits(group) for group in groups]
        if plus:
            spoken[0] = f"{self.symbols['+']} {self.cardinal(int(groups[0]))}"
        return self.list_separator.join(spoken)

    def number_after_zeros(self, digits: str) -> str:
        """Leading zeros one by one, then a number: "05" is "zero five", "45" "forty-five" (French and Russian
        phone numbers, Romance decimals)."""
        zeros = len(digits) - len(digits.lstrip("0"))
        rest = digits[zeros:]
        spoken = [self.digit_words[0]] * zeros + ([self.cardinal(int(rest))] if rest else [])
        return " ".join(spoken)

    def status_code(self, code: str) -> str:
        """HTTP 404."""
        return self.cardinal(int(code))
