"""Russian: num2words for numbers in the gender and case the context asks ("одна минута", "от трёх до пяти"),
nouns in the form the number takes (1 километр, 2 километра, 5 километров), ordinals written "1-й", "5-го",
dates "пятнадцатое января две тысячи двадцать четвёртого года", phone groups read as numbers."""

from __future__ import annotations

import re

from .language import CURRENCY_SIGNS, UNIT_SIGNS, Currency, Language, Noun, Rule, by_sign, spell, split_plain
from .shared_rules import abbreviations, word_before

_MONTHS = [
    "января", "февраля", "марта", "апреля", "мая", "июня", "июля", "августа", "сентября", "октября", "ноября", "декабря"
]  # fmt: skip
# The ending a written suffix asks of an ordinal: hard stem (первый), soft stem (третий).
_ENDINGS = {
    "й": ("ый", "ий"), "ый": ("ый", "ий"), "ой": ("ой", "ьей"), "ий": ("ий", "ий"), "я": ("ая", "ья"),
    "ая": ("ая", "ья"), "е": ("ое", "ье"), "ое": ("ое", "ье"), "го": ("ого", "ьего"), "ого": ("ого", "ьего"),
    "му": ("ому", "ьему"), "ому": ("ому", "ьему"), "м": ("ом", "ьем"), "ом": ("ом", "ьем"), "х": ("ых", "ьих"),
    "ых": ("ых", "ьих"), "ю": ("ую", "ью"), "ую": ("ую", "ью"), "ми": ("ыми", "ьими"), "ые": ("ые", "ьи"),
}  # fmt: skip
_ABBREVIATIONS = {
    "т.е.": "то есть", "т. е.": "то есть", "т.д.": "так далее", "т. д.": "так далее", "т.п.": "тому подобное",
    "т. п.": "тому подобное", "т.к.": "так как", "т. к.": "так как", "ул.": "улица", "им.": "имени",
    "д.": "дом", "стр.": "страница", "см.": "смотри", "др.": "другие",
}  # fmt: skip


def _forms(one: str, few: str, many: str, gender: str = "m") -> Noun:
    return Noun((one, few, many), gender)


_CURRENCIES = {
    "USD": Currency(_forms("доллар", "доллара", "долларов"), _forms("цент", "цента", "центов")),
    "EUR": Currency(_forms("евро", "евро", "евро"), _forms("цент", "цента", "центов")),
    "GBP": Currency(_forms("фунт", "фунта", "фунтов"), _forms("пенс", "пенса", "пенсов")),
    "JPY": Currency(_forms("иена", "иены", "иен", "f")),
    "CNY": Currency(_forms("юань", "юаня", "юаней")),
    "KRW": Currency(_forms("вона", "воны", "вон", "f")),
    "RUB": Currency(_forms("рубль", "рубля", "рублей"), _forms("копейка", "копейки", "копеек", "f")),
    "INR": Currency(_forms("рупия", "рупии", "рупий", "f"), _forms("пайса", "пайсы", "пайс", "f")),
    "BRL": Currency(_forms("реал", "реала", "реалов"), _forms("сентаво", "сентаво", "сентаво")),
}
_UNIT_FORMS = {
    "km": _forms("километр", "километра", "километров"), "m": _forms("метр", "метра", "метров"),
    "cm": _forms("сантиметр", "сантиметра", "сантиметров"), "mm": _forms("миллиметр", "миллиметра", "миллиметров"),
    "kg": _forms("килограмм", "килограмма", "килограммов"), "g": _forms("грамм", "грамма", "граммов"),
    "mg": _forms("миллиграмм", "миллиграмма", "миллиграммов"), "l": _forms("литр", "литра", "литров"),
    "ml": _forms("миллилитр", "миллилитра", "миллилитров"), "t": _forms("тонна", "тонны", "тонн", "f"),
    "km/h": _forms("километр в час", "километра в час", "километров в час"),
    "m/s": _forms("метр в секунду", "метра в секунду", "метров в секунду"),
    "h": _forms("час", "часа", "часов"), "min": _forms("минута", "минуты", "минут", "f"),
    "s": _forms("секунда", "секунды", "секунд", "f"), "ms": _forms("миллисекунда", "миллисекунды", "миллисекунд", "f"),
    "KB": _forms("килобайт", "килобайта", "килобайт"), "MB": _forms("мегабайт", "мегабайта", "мегабайт"),
    "GB": _forms("гигабайт", "гигабайта", "гигабайт"), "TB": _forms("терабайт", "терабайта", "терабайт"),
    "Hz": _forms("герц", "герца", "герц"), "kHz": _forms("килогерц", "килогерца", "килогерц"),
    "MHz": _forms("мегагерц", "мегагерца", "мегагерц"), "GHz": _forms("гигагерц", "гигагерца", "гигагерц"),
    "W": _forms("ватт", "ватта", "ватт"), "kW": _forms("киловатт", "киловатта", "киловатт"),
    "V": _forms("вольт", "вольта", "вольт"), "%": _forms("процент", "процента", "процентов"),
    "°C": _forms("градус Цельсия", "градуса Цельсия", "градусов Цельсия"),
    "°F": _forms("градус Фаренгейта", "градуса Фаренгейта", "градусов Фаренгейта"),
    "°": _forms("градус", "градуса", "градусов"), "млн": _forms("миллион", "миллиона", "миллионов"),
    "млрд": _forms("миллиард", "миллиарда", "миллиардов"), "тыс.": _forms("тысяча", "тысячи", "тысяч", "f"),
}  # fmt: skip
_CYRILLIC_UNITS = {
    "km": ("км",), "m": ("м",), "cm": ("см",), "mm": ("мм",), "kg": ("кг",), "g": ("г",), "mg": ("мг",),
    "l": ("л",), "ml": ("мл",), "t": ("т",), "km/h": ("км/ч",), "m/s": ("м/с",), "h": ("ч",),
    "min": ("мин", "мин."), "s": ("сек", "сек."), "ms": ("мс",), "KB": ("КБ", "Кб"), "MB": ("МБ", "Мб"),
    "GB": ("ГБ", "Гб"), "TB": ("ТБ", "Тб"), "Hz": ("Гц",), "kHz": ("кГц",), "MHz": ("МГц",), "GHz": ("ГГц",),
    "W": ("Вт",), "kW": ("кВт",), "V": ("В",),
}  # fmt: skip


def _with_latin(signs: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    return {key: (*written, *UNIT_SIGNS.get(key, (key,))) for key, written in signs.items()}


class Russian(Language):
    name = "russian"
    code = "ru"
    decimal_mark = ","
    group_marks = " \u00a0\u202f\u2009"
    minus = "минус"
    money_and = ""
    mention = "собака"
    hashtag = "хештег"
    number_sign = "номер {}"
    alternative = "или"
    digit_words = ("ноль", "один", "два", "три", "четыре", "пять", "шесть", "семь", "восемь", "девять")
    months = tuple(_MONTHS)
    currencies = by_sign(_CURRENCIES, CURRENCY_SIGNS | {"RUB": ("₽", "RUB", "руб.", "р.")})
    units = by_sign(_UNIT_FORMS, _with_latin(_CYRILLIC_UNITS))
    symbols = {"&": "и", "+": "плюс", "=": "равно", "×": "умножить на"}
    web_words = {
        ".": "точка", "/": "слэш", ":": "двоеточие", "@": "собака", "-": "дефис", "_": "нижнее подчёркивание",
        "?": "вопросительный знак", "=": "равно", "&": "амперсанд", "#": "решётка", "%": "процент", "+": "плюс",
        "~": "тильда",
    }  # fmt: skip

    def cardinal(self, n: int, gender: str = "", case: str = "n") -> str:
        return spell(n, "ru", gender=gender or "m", case=case)

    def number(self, plain: str, gender: str = "") -> str:
        sign, whole, fraction = split_plain(plain)
        if not fraction:
            return super().number(plain, gender)
        return spell(plain, "ru")  # "три целых четырнадцать сотых"

    def form(self, plain: str, noun: Noun) -> str:
        sign, whole, fraction = split_plain(plain)
        if fraction:
            return noun.forms[1]
        n = int(whole)
        if n % 10 == 1 and n % 100 != 11:
            return noun.forms[0]
        return noun.forms[1] if n % 10 in (2, 3, 4) and n % 100 not in (12, 13, 14) else noun.forms[2]

    def genitive(self, plain: str, gender: str) -> str:
        sign, whole, fraction = split_plain(plain)
        if fraction or len(whole) > 1 and whole.startswith("0"):
            return self.number(plain)
        return ("минус " if sign else "") + self.cardinal(int(whole), gender, "g")

    def range(self, first: str, last: str, unit: Noun | None, before: str = "") -> str:
        gender = unit.gender if unit else ""
        words = f"от {self.genitive(first, gender)} до {self.genitive(last, gender)}"
        return f"{words} {unit.forms[2]}" if unit else words

    def ordinal_in(self, n: int, case: str = "n", gender: str = "m") -> str:
        return spell(n, "ru", to="ordinal", case=case, gender=gender)

    def date(self, year: int, month: int, day: int, before: str) -> str:
        return f"{self.ordinal_in(day, gender='n')} {self.months[month - 1]} {self.ordinal_in(year, 'g')} года"

    def time(self, hour: int, minute: int, second: int | None) -> str:
        minutes = f"ноль {self.cardinal(minute, 'f')}" if minute < 10 else self.cardinal(minute, "f")
        words = f"{self.cardinal(hour)} {minutes}"
        return f"{words} {self.amount(str(second), _UNIT_FORMS['s'])}" if second is not None else words

    def phone(self, plus: bool, groups: list[str]) -> str:
        spoken = [self.number_after_zeros(group) if len(group) <= 3 else self.digits(group) for group in groups]
        if plus:
            spoken[0] = f"плюс {self.cardinal(int(groups[0]))}"
        return self.list_separator.join(spoken)

    def fraction(self, numerator: int, denominator: int) -> str:
        if numerator == 1:
            return f"одна {self.ordinal_in(denominator, gender='f')}"
        plural = spell(denominator, "ru", to="ordinal", case="g", plural=True)
        return f"{self.cardinal(numerator, 'f')} {plural}"

    def rules(self) -> tuple[Rule, ...]:
        return (
            abbreviations({"и т.д.": "и так далее", "и т. д.": "и так далее", "и т.п.": "и тому подобное"}),
            abbreviations(_ABBREVIATIONS, frozenset({"д."})),
            Rule(_ORDINAL, self._ordinal),
            Rule(_YEAR, self._year),
            Rule(_DAY, lambda m: self.ordinal_in(int(m.group()), gender="n")),
        )

    def _ordinal(self, match: re.Match[str]) -> str:
        words = self.ordinal_in(int(match["n"]))
        hard, soft = _ENDINGS[match["suffix"]]
        if words.endswith("третий"):
            return words[:-2] + soft
        return words[:-2] + (hard if not words.endswith("ой") or hard != "ый" else "ой")

    def _year(self, match: re.Match[str]) -> str:
        noun = match["noun"]
        if noun == "г.":
            noun = "году" if word_before(match) in ("в", "во") else "года"
        case = {"году": "p", "года": "g", "год": "n"}[noun]
        return f"{self.ordinal_in(int(match['year']), case)} {noun}"


_ORDINAL = re.compile(
    rf"(?<![0-9.,])(?P<n>[0-9]{{1,4}})-(?P<suffix>{'|'.join(sorted(_ENDINGS, key=len, reverse=True))})(?![а-яё])"
)
_YEAR = re.compile(r"(?<![0-9.,])(?P<year>[0-9]{4})\s(?P<noun>году|года|год|г\.)(?![а-яё])")
_DAY = re.compile(rf"(?<![0-9.,])[0-9]{{1,2}}(?=\s(?:{'|'.join(_MONTHS)})\b)")

LANGUAGE = Russian()
