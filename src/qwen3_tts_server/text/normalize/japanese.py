"""Japanese: numbers in kanji by num2words (the model reads kanji numerals; wetext's Japanese grammar says
"25°C" as "二十五摂氏" and costs about 0.2 ms a character), 年月日 dates, 時分 times, phone numbers read
digit by digit with の between groups."""

from __future__ import annotations

from .language import CURRENCY_SIGNS, UNIT_SIGNS, Currency, Language, Noun, by_sign, noun, spell, split_plain

_DIGITS = ("ゼロ", "一", "二", "三", "四", "五", "六", "七", "八", "九")
_CURRENCIES = {
    "USD": Currency(noun("ドル")), "EUR": Currency(noun("ユーロ")), "GBP": Currency(noun("ポンド")),
    "JPY": Currency(noun("円")), "CNY": Currency(noun("元")), "KRW": Currency(noun("ウォン")),
    "RUB": Currency(noun("ルーブル")), "INR": Currency(noun("ルピー")), "BRL": Currency(noun("レアル")),
}  # fmt: skip
_UNITS = {
    "km": "キロメートル", "m": "メートル", "cm": "センチメートル", "mm": "ミリメートル", "kg": "キログラム",
    "g": "グラム", "mg": "ミリグラム", "l": "リットル", "ml": "ミリリットル", "km/h": "キロメートル毎時",
    "m/s": "メートル毎秒", "mi": "マイル", "ft": "フィート", "h": "時間", "min": "分", "s": "秒", "ms": "ミリ秒",
    "KB": "キロバイト", "MB": "メガバイト", "GB": "ギガバイト", "TB": "テラバイト", "Hz": "ヘルツ",
    "kHz": "キロヘルツ", "MHz": "メガヘルツ", "GHz": "ギガヘルツ", "W": "ワット", "kW": "キロワット",
    "kWh": "キロワット時", "V": "ボルト", "%": "パーセント", "°C": "{}度", "°F": "華氏{}度", "°": "{}度",
}  # fmt: skip


class Japanese(Language):
    name = "japanese"
    code = "ja"
    spaced = False
    point = "点"
    minus = "マイナス"
    range_word = "から"
    list_separator = "、"
    mention = "アット"
    hashtag = "ハッシュタグ"
    number_sign = "{}番"
    alternative = "または"
    digit_words = _DIGITS
    currencies = by_sign(_CURRENCIES, CURRENCY_SIGNS)
    units = by_sign({key: noun(word) for key, word in _UNITS.items()}, UNIT_SIGNS)
    symbols = {"&": "アンド", "+": "プラス", "=": "イコール", "×": "かける"}
    web_words = {
        ".": "ドット", "/": "スラッシュ", ":": "コロン", "@": "アットマーク", "-": "ハイフン", "_": "アンダーバー",
        "?": "クエスチョン", "=": "イコール", "&": "アンド", "#": "シャープ", "%": "パーセント", "+": "プラス",
        "~": "チルダ",
    }  # fmt: skip

    def cardinal(self, n: int, gender: str = "") -> str:
        return spell(n, "ja")

    def number(self, plain: str, gender: str = "") -> str:
        sign, whole, fraction = split_plain(plain)
        words = self.whole(whole)
        return (self.minus if sign else "") + words + (f"点{self.digits(fraction)}" if fraction else "")

    def digits(self, digits: str) -> str:
        return "".join(_DIGITS[int(d)] for d in digits)

    def range(self, first: str, last: str, unit: Noun | None, before: str = "") -> str:
        return f"{self.number(first)}から{self.amount(last, unit) if unit else self.number(last)}"

    def date(self, year: int, month: int, day: int, before: str) -> str:
        return f"{self.cardinal(year)}年{self.cardinal(month)}月{self.cardinal(day)}日"

    def time(self, hour: int, minute: int, second: int | None) -> str:
        words = f"{self.cardinal(hour)}時" + (f"{self.cardinal(minute)}分" if minute else "")
        return words + (f"{self.cardinal(second)}秒" if second is not None else "")

    def phone(self, plus: bool, groups: list[str]) -> str:
        return ("プラス" if plus else "") + "の".join(self.digits(group) for group in groups)

    def fraction(self, numerator: int, denominator: int) -> str:
        return f"{self.cardinal(denominator)}分の{self.cardinal(numerator)}"


LANGUAGE = Japanese()
