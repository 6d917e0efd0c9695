"""Chinese (Mandarin, simplified script): numbers in characters by our own reading (num2words has no Chinese;
wetext reads "1,234" as "一,两百三十四", "12345" as digits and "第2名" as "第两名", and costs about 0.2 ms a
character), years digit by digit (二零二四年), 两 before a measure word, 幺 for 1 in phone numbers."""

from __future__ import annotations

import re

from .language import CURRENCY_SIGNS, UNIT_SIGNS, Currency, Language, Noun, Rule, by_sign, noun, split_plain

_DIGITS = "零一二三四五六七八九"
_SMALL_UNITS = ((1000, "千"), (100, "百"), (10, "十"), (1, ""))
_BIG_UNITS = ("", "万", "亿", "万亿", "亿亿")
_MEASURE_WORDS = "个位只条张本次天年岁件块种人点分钟小时周倍台辆家名杯碗双套层项份段句篇斤元"
_CURRENCIES = {
    "USD": Currency(noun("美元")), "EUR": Currency(noun("欧元")), "GBP": Currency(noun("英镑")),
    "JPY": Currency(noun("日元")), "CNY": Currency(noun("元")), "KRW": Currency(noun("韩元")),
    "RUB": Currency(noun("卢布")), "INR": Currency(noun("卢比")), "BRL": Currency(noun("雷亚尔")),
}  # fmt: skip
_UNITS = {
    "km": "公里", "m": "米", "cm": "厘米", "mm": "毫米", "kg": "公斤", "g": "克", "mg": "毫克", "l": "升",
    "ml": "毫升", "km/h": "公里每小时", "m/s": "米每秒", "mi": "英里", "ft": "英尺", "h": "小时", "min": "分钟",
    "s": "秒", "ms": "毫秒", "KB": "KB", "MB": "MB", "GB": "GB", "TB": "TB", "Hz": "赫兹", "kHz": "千赫",
    "MHz": "兆赫", "GHz": "吉赫", "W": "瓦", "kW": "千瓦", "kWh": "千瓦时", "V": "伏", "°C": "{}摄氏度",
    "°F": "{}华氏度", "°": "{}度",
}  # fmt: skip


def _below_ten_thousand(n: int) -> str:
    words, gap = "", False
    for value, unit in _SMALL_UNITS:
        digit = n // value % 10
        if digit == 0:
            gap = bool(words)
            continue
        words += ("零" if gap else "") + _DIGITS[digit] + unit
        gap = False
    return words


def cardinal(n: int) -> str:
    """一万零一十, 十二, 两千: a leading 2 before 千, 万 or 亿 is 两."""
    if n == 0:
        return "零"
    groups = []
    while n:
        n, group = divmod(n, 10000)
        groups.append(group)
    words, gap = "", False
    for index in range(len(groups) - 1, -1, -1):
        group = groups[index]
        if group == 0:
            gap = bool(words)
            continue
        if words and (gap or group < 1000):
            words += "零"
        words += _below_ten_thousand(group) + _BIG_UNITS[index]
        gap = False
    if words.startswith("一十"):
        words = words[1:]
    return re.sub("^二(?=[千万亿])", "两", words)


class Chinese(Language):
    name = "chinese"
    spaced = False
    point = "点"
    minus = "负"
    range_word = "到"
    list_separator = "，"
    mention = "艾特"
    hashtag = "话题"
    number_sign = "{}号"
    alternative = "或"
    digit_words = tuple(_DIGITS)
    currencies = by_sign(_CURRENCIES, CURRENCY_SIGNS | {"CNY": ("¥", "￥", "CNY", "RMB"), "JPY": ("JPY",)})
    units = by_sign({key: noun(word) for key, word in _UNITS.items()} | {"%": noun("百分之{}", gender="")}, UNIT_SIGNS)
    symbols = {"&": "和", "+": "加", "=": "等于", "×": "乘"}
    web_words = {
        ".": "点", "/": "斜杠", ":": "冒号", "@": "at", "-": "横杠", "_": "下划线", "?": "问号", "=": "等于",
        "&": "和", "#": "井号", "%": "百分号", "+": "加", "~": "波浪号",
    }  # fmt: skip

    def cardinal(self, n: int, gender: str = "") -> str:
        return "两" if n == 2 and gender else cardinal(n)

    def number(self, plain: str, gender: str = "") -> str:
        sign, whole, fraction = split_plain(plain)
        words = self.whole(whole, "" if fraction else gender)
        return ("负" if sign else "") + words + (f"点{self.digits(fraction)}" if fraction else "")

    def digits(self, digits: str) -> str:
        return "".join(_DIGITS[int(d)] for d in digits)

    def year(self, n: int) -> str:
        return self.digits(str(n))

    def range(self, first: str, last: str, unit: Noun | None, before: str = "") -> str:
        if unit and "{}" in unit.forms[0]:
            return f"{self.amount(first, unit)}到{self.amount(last, unit)}"
        return f"{self.number(first)}到{self.amount(last, unit) if unit else self.number(last)}"

    def date(self, year: int, month: int, day: int, before: str) -> str:
        return f"{self.year(year)}年{cardinal(month)}月{cardinal(day)}日"

    def time(self, hour: int, minute: int, second: int | None) -> str:
        words = f"{self.cardinal(hour, 'm')}点"
        if minute or second is not None:
            words += ("零" if minute < 10 else "") + f"{cardinal(minute)}分"
        return words + (f"{cardinal(second)}秒" if second is not None else "")

    def phone(self, plus: bool, groups: list[str]) -> str:
        spoken = [self.digits(group).replace("一", "幺") for group in groups]
        return ("加" if plus else "") + "，".join(spoken)

    def status_code(self, code: str) -> str:
        return self.digits(code)

    def fraction(self, numerator: int, denominator: int) -> str:
        return f"{cardinal(denominator)}分之{cardinal(numerator)}"

    def rules(self) -> tuple[Rule, ...]:
        return (Rule(_YEAR, lambda m: self.year(int(m.group()))),)

    def late_rules(self) -> tuple[Rule, ...]:
        return (Rule(_TWO_BEFORE_MEASURE_WORD, lambda m: "两"),)


_YEAR = re.compile(r"(?<![0-9.,])[0-9]{4}(?=年)")
_TWO_BEFORE_MEASURE_WORD = re.compile(rf"(?<![0-9.,第])2(?![0-9.,])(?=[{_MEASURE_WORDS}])")

LANGUAGE = Chinese()
