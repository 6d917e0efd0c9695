"""English: num2words for numbers (wetext's English grammar reads "1,000" as "thousand", "$5.50" as "five
point five dollars" and "1990s" as seconds, and costs about 0.2 ms a character), US-style dates and times."""

from __future__ import annotations

import re

from .language import CURRENCY_SIGNS, UNIT_SIGNS, Currency, Language, Rule, by_sign, noun, spell
from .shared_rules import abbreviations, word_before

_MONTHS = [
    "January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November",
    "December"
]  # fmt: skip
_MONTH_NAMES = {month.lower(): index for index, month in enumerate(_MONTHS)} | {
    month[:3].lower(): index for index, month in enumerate(_MONTHS)
}
_MONTH = "(?P<month>" + "|".join(_MONTHS) + r"|(?:Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept?|Oct|Nov|Dec)\.?)"
_DECADES = {2: "twenties", 3: "thirties", 4: "forties", 5: "fifties", 6: "sixties", 7: "seventies",
            8: "eighties", 9: "nineties", 1: "tens"}  # fmt: skip
_YEAR_CUES = frozenset({
    "in", "since", "from", "until", "till", "by", "of", "year", "before", "after", "during", "around", "circa", "early",
    "late", "mid", "summer", "winter", "spring", "autumn", "fall"
})  # fmt: skip
_ABBREVIATIONS = {
    "Dr.": "Doctor", "Mr.": "Mister", "Mrs.": "Missus", "Ms.": "Miz", "Prof.": "Professor", "Jr.": "Junior",
    "Sr.": "Senior", "Mt.": "Mount", "Ave.": "Avenue", "Blvd.": "Boulevard", "Rd.": "Road", "vs.": "versus",
    "approx.": "approximately", "etc.": "et cetera", "e.g.": "for example", "i.e.": "that is", "No.": "number",
    "St.": "Street",
}  # fmt: skip

_CURRENCIES = {
    "USD": Currency(noun("dollar", "dollars"), noun("cent", "cents")),
    "EUR": Currency(noun("euro", "euros"), noun("cent", "cents")),
    "GBP": Currency(noun("pound", "pounds"), noun("penny", "pence")),
    "JPY": Currency(noun("yen", "yen")),
    "CNY": Currency(noun("yuan", "yuan")),
    "KRW": Currency(noun("won", "won")),
    "RUB": Currency(noun("ruble", "rubles"), noun("kopeck", "kopecks")),
    "INR": Currency(noun("rupee", "rupees"), noun("paisa", "paise")),
    "BRL": Currency(noun("real", "reais"), noun("centavo", "centavos")),
}
_UNITS = {
    "km": ("kilometer", "kilometers"), "m": ("meter", "meters"), "cm": ("centimeter", "centimeters"),
    "mm": ("millimeter", "millimeters"), "kg": ("kilogram", "kilograms"), "g": ("gram", "grams"),
    "mg": ("milligram", "milligrams"), "lb": ("pound", "pounds"), "lbs": ("pound", "pounds"),
    "oz": ("ounce", "ounces"), "l": ("liter", "liters"), "ml": ("milliliter", "milliliters"),
    "km/h": ("kilometer per hour", "kilometers per hour"), "mph": ("mile per hour", "miles per hour"),
    "m/s": ("meter per second", "meters per second"), "mi": ("mile", "miles"), "ft": ("foot", "feet"),
    "h": ("hour", "hours"), "hr": ("hour", "hours"), "hrs": ("hour", "hours"), "min": ("minute", "minutes"),
    "sec": ("second", "seconds"), "ms": ("millisecond", "milliseconds"), "KB": ("kilobyte", "kilobytes"),
    "MB": ("megabyte", "megabytes"), "GB": ("gigabyte", "gigabytes"), "TB": ("terabyte", "terabytes"),
    "Hz": ("hertz", "hertz"), "kHz": ("kilohertz", "kilohertz"), "MHz": ("megahertz", "megahertz"),
    "GHz": ("gigahertz", "gigahertz"), "W": ("watt", "watts"), "kW": ("kilowatt", "kilowatts"),
    "kWh": ("kilowatt hour", "kilowatt hours"), "V": ("volt", "volts"), "%": ("percent", "percent"),
    "°C": ("degree Celsius", "degrees Celsius"), "°F": ("degree Fahrenheit", "degrees Fahrenheit"),
    "°": ("degree", "degrees"),
}  # fmt: skip


class English(Language):
    name = "english"
    code = "en"
    day_first = False
    digit_words = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
    months = tuple(_MONTHS)
    scales = ("thousand", "million", "billion", "trillion")
    currencies = by_sign(_CURRENCIES, CURRENCY_SIGNS)
    units = by_sign({key: noun(*forms) for key, forms in _UNITS.items()}, UNIT_SIGNS)
    symbols = {"&": "and", "+": "plus", "=": "equals", "×": "times"}
    web_words = {
        ".": "dot", "/": "slash", ":": "colon", "@": "at", "-": "dash", "_": "underscore", "?": "question mark",
        "=": "equals", "&": "and", "#": "hash", "%": "percent", "+": "plus", "~": "tilde",
    }  # fmt: skip

    def cardinal(self, n: int, gender: str = "") -> str:
        return spell(n, "en").replace(",", "")

    def ordinal(self, n: int) -> str:
        return spell(n, "en", to="ordinal").replace(",", "")

    def year(self, n: int) -> str:
        return spell(n, "en", to="year") if 1000 <= n <= 2099 else self.cardinal(n)

    def date(self, year: int, month: int, day: int, before: str) -> str:
        return f"{self.months[month - 1]} {self.ordinal(day)}, {self.year(year)}"

    def time(self, hour: int, minute: int, second: int | None) -> str:
        if minute == 0:
            words = f"{self.cardinal(hour)} o'clock"
        else:
            words = f"{self.cardinal(hour)} {'oh ' if minute < 10 else ''}{self.cardinal(minute)}"
        if second is None:
            return words
        return f"{words} and {self.amount(str(second), noun('second', 'seconds'))}"

    def status_code(self, code: str) -> str:
        """404 is "four oh four", 500 "five hundred", 418 "four eighteen"."""
        if code.endswith("00"):
            return self.cardinal(int(code))
        tail = f"oh {self.digit_words[int(code[2])]}" if code[1] == "0" else self.cardinal(int(code[1:]))
        return f"{self.digit_words[int(code[0])]} {tail}"

    def fraction(self, numerator: int, denominator: int) -> str:
        name = {2: "half", 4: "quarter"}.get(denominator) or self.ordinal(denominator)
        plural = ("halves" if denominator == 2 else name + "s") if numerator > 1 else name
        return f"{self.cardinal(numerator)} {plural}"

    def rules(self) -> tuple[Rule, ...]:
        return (
            Rule(_SAINT, lambda m: "Saint", needs_digit=False),
            abbreviations(_ABBREVIATIONS, frozenset({"No."}), frozenset({"etc.", "approx."})),
            Rule(_CLOCK, self._clock),
            Rule(_MONTH_DAY, self._month_day),
            Rule(_DAY_MONTH, self._day_month),
            Rule(_DECADE, self._decade),
            Rule(_ORDINAL, lambda m: self.ordinal(int(m[1]))),
            Rule(_YEAR, self._year),
            Rule(_AROUND_THE_CLOCK, lambda m: "twenty-four seven"),
        )

    def _clock(self, match: re.Match[str]) -> str:
        hour, minute = int(match["hour"]), int(match["minute"] or 0)
        if not 1 <= hour <= 12:
            return match.group()
        words = self.cardinal(hour) if not minute else self.time(hour, minute, None)
        ends = match.group().endswith(".") and match.end() == len(match.string.rstrip())
        return f"{words} {match['half'].upper()}M" + ("." if ends else "")

    def _say_date(self, match: re.Match[str]) -> tuple[str, str, str] | None:
        month, day = _MONTH_NAMES.get(match["month"].rstrip(".").lower()[:3]), int(match["day"])
        if month is None or not 1 <= day <= 31:
            return None
        year = f", {self.year(int(match['year']))}" if match["year"] else ""
        return self.months[month], self.ordinal(day), year

    def _month_day(self, match: re.Match[str]) -> str:
        said = self._say_date(match)
        return f"{said[0]} {said[1]}{said[2]}" if said else match.group()

    def _day_month(self, match: re.Match[str]) -> str:
        said = self._say_date(match)
        if not said:
            return match.group()
        the = "" if word_before(match) == "the" else "the "
        return f"{the}{said[1]} of {said[0]}{said[2]}"

    def _decade(self, match: re.Match[str]) -> str:
        century, tens = match["century"], int(match["tens"])
        if not century and not match["apostrophe"] and word_before(match) != "the":
            return match.group()
        if not century:
            return _DECADES.get(tens, match.group())
        if tens == 0:
            return "two thousands" if century == "20" else f"{self.cardinal(int(century))} hundreds"
        return f"{self.cardinal(int(century))} {_DECADES[tens]}"

    def _year(self, match: re.Match[str]) -> str:
        cued = word_before(match) in _YEAR_CUES or match["era"]
        return self.year(int(match["year"])) + (match["era"] or "") if cued else match.group()


_SAINT = re.compile(r"(?=S)(?<![^\W\d_])(?<!\.)St\.(?=\s+[A-Z])")
_CLOCK = re.compile(
    r"(?=[0-9])(?<![0-9:.,])(?P<hour>[0-9]{1,2})(?::(?P<minute>[0-5][0-9]))?\s?(?P<half>[AaPp])\.?[Mm](?![A-Za-z])\.?"
)
_DAY = r"(?P<day>[0-9]{1,2})(?:st|nd|rd|th)?"
_YEAR_AFTER = r"(?:,?\s(?P<year>[0-9]{4}))?(?![0-9])"
_MONTH_DAY = re.compile(rf"(?=[A-Z])(?<![A-Za-z]){_MONTH}\s{_DAY}(?![0-9A-Za-z]){_YEAR_AFTER}")
_DAY_MONTH = re.compile(rf"(?=[0-9])(?<![0-9.,/]){_DAY}\s(?:of\s)?{_MONTH}(?![A-Za-z]){_YEAR_AFTER}")
_DECADE = re.compile(
    r"(?=[0-9'’])(?<![0-9A-Za-z])(?P<apostrophe>['’])?(?P<century>1[0-9]|20)?(?P<tens>[0-9])0s(?![A-Za-z])"
)
_ORDINAL = re.compile(r"(?=[0-9])(?<![0-9])([0-9]+)(?:st|nd|rd|th)(?![A-Za-z])")
_YEAR = re.compile(
    r"(?=[12])(?<![0-9.,])(?P<year>1[1-9][0-9]{2}|20[0-9]{2})(?![0-9]|[.,:/-][0-9])(?P<era>\s(?:BC|AD|BCE|CE))?"
)
_AROUND_THE_CLOCK = re.compile(r"(?<![0-9/])24/7(?![0-9/])")

LANGUAGE = English()
