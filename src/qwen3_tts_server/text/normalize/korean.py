"""Korean: Sino-Korean numbers by num2words (삼십오), native numbers before native counters (세 개, 열 시,
스무 살), 유월 and 시월, digits read with 공 for zero in phone numbers and codes (사공사)."""

from __future__ import annotations

import re

from .language import CURRENCY_SIGNS, UNIT_SIGNS, Currency, Language, Noun, Rule, by_sign, noun, spell, split_plain

_DIGITS = tuple("공일이삼사오육칠팔구")
_NATIVE_ONES = ("", "한", "두", "세", "네", "다섯", "여섯", "일곱", "여덟", "아홉")
_NATIVE_TENS = ("", "열", "스물", "서른", "마흔", "쉰", "예순", "일흔", "여든", "아흔")
_MONTHS = ("일월", "이월", "삼월", "사월", "오월", "유월", "칠월", "팔월", "구월", "시월", "십일월", "십이월")
_NATIVE_COUNTERS = "개|명|살|시간|시|마리|잔|권|병|장|대|가지|달|사람|그릇|켤레|벌|송이|번째"
_CURRENCIES = {
    "USD": Currency(noun("달러"), noun("센트")), "EUR": Currency(noun("유로"), noun("센트")),
    "GBP": Currency(noun("파운드"), noun("펜스")), "JPY": Currency(noun("엔")), "CNY": Currency(noun("위안")),
    "KRW": Currency(noun("원")), "RUB": Currency(noun("루블")), "INR": Currency(noun("루피")),
    "BRL": Currency(noun("헤알")),
}  # fmt: skip
_UNITS = {
    "km": "킬로미터", "m": "미터", "cm": "센티미터", "mm": "밀리미터", "kg": "킬로그램", "g": "그램",
    "mg": "밀리그램", "l": "리터", "ml": "밀리리터", "km/h": "시속 {} 킬로미터", "m/s": "초속 {} 미터", "mi": "마일",
    "ft": "피트", "h": "시간", "min": "분", "s": "초", "ms": "밀리초", "KB": "킬로바이트", "MB": "메가바이트",
    "GB": "기가바이트", "TB": "테라바이트", "Hz": "헤르츠", "kHz": "킬로헤르츠", "MHz": "메가헤르츠",
    "GHz": "기가헤르츠", "W": "와트", "kW": "킬로와트", "kWh": "킬로와트시", "V": "볼트", "%": "퍼센트",
    "°C": "도", "°F": "화씨 {}도", "°": "도",
}  # fmt: skip


def native(n: int) -> str:
    """1-99 in native Korean as said before a counter: 한, 스무, 스물한."""
    if n == 20:
        return "스무"
    return _NATIVE_TENS[n // 10] + _NATIVE_ONES[n % 10]


class Korean(Language):
    name = "korean"
    code = "ko"
    point = "점"
    minus = "마이너스"
    range_word = "에서"
    money_and = ""
    mention = "앳"
    hashtag = "해시태그"
    number_sign = "{} 번"
    alternative = "또는"
    digit_words = _DIGITS
    currencies = by_sign(_CURRENCIES, CURRENCY_SIGNS)
    units = by_sign({key: noun(word) for key, word in _UNITS.items()}, UNIT_SIGNS)
    symbols = {"&": "앤드", "+": "플러스", "=": "이퀄", "×": "곱하기"}
    web_words = {
        ".": "닷", "/": "슬래시", ":": "콜론", "@": "골뱅이", "-": "하이픈", "_": "언더바", "?": "물음표",
        "=": "이퀄", "&": "앤드", "#": "샵", "%": "퍼센트", "+": "플러스", "~": "물결",
    }  # fmt: skip

    def cardinal(self, n: int, gender: str = "") -> str:
        return native(n) if gender == "native" and 0 < n < 100 else spell(n, "ko")

    def number(self, plain: str, gender: str = "") -> str:
        sign, whole, fraction = split_plain(plain)
        words = self.whole(whole, "" if fraction else gender)
        if fraction:
            words += f" 점 {''.join('영' if d == '0' else _DIGITS[int(d)] for d in fraction)}"
        return f"{self.minus} {words}" if sign else words

    def digits(self, digits: str) -> str:
        return "".join(_DIGITS[int(d)] for d in digits)

    def range(self, first: str, last: str, unit: Noun | None, before: str = "") -> str:
        return f"{self.number(first)}{self.range_word} {self.amount(last, unit) if unit else self.number(last)}"

    def date(self, year: int, month: int, day: int, before: str) -> str:
        return f"{self.cardinal(year)}년 {_MONTHS[month - 1]} {self.cardinal(day)}일"

    def time(self, hour: int, minute: int, second: int | None) -> str:
        words = f"{self.cardinal(hour, 'native')} 시" + (f" {self.cardinal(minute)} 분" if minute else "")
        return words + (f" {self.cardinal(second)} 초" if second is not None else "")

    def phone(self, plus: bool, groups: list[str]) -> str:
        return ("플러스 " if plus else "") + " ".join(self.digits(group) for group in groups)

    def status_code(self, code: str) -> str:
        return self.digits(code)

    def fraction(self, numerator: int, denominator: int) -> str:
        return f"{self.cardinal(denominator)}분의 {self.cardinal(numerator)}"

    def rules(self) -> tuple[Rule, ...]:
        return (Rule(_COUNTED, self._counted), Rule(_SPECIAL_MONTH, lambda m: "유" if m.group() == "6" else "시"))

    def _counted(self, match: re.Match[str]) -> str:
        first, last, counter = int(match["first"]), match["last"], match["counter"]
        if counter == "번째" and not last and first == 1:
            return "첫"
        said = self.cardinal(first, "native")
        return f"{said}에서 {self.cardinal(int(last), 'native')}" if last else said


_COUNTED = re.compile(
    rf"(?<![0-9.,제])(?P<first>[0-9]{{1,2}})(?:\s?[~〜～-]\s?(?P<last>[0-9]{{1,2}}))?(?![0-9.,])(?=\s?(?P<counter>{_NATIVE_COUNTERS}))"
)
_SPECIAL_MONTH = re.compile(r"(?<![0-9.,])(?:6|10)(?=월)")

LANGUAGE = Korean()
